// Python's datetime.strftime for the directives chat templates use (`strftime_now("%Y-%m-%d")` in gpt-oss,
// `"%d %b %Y"` in Llama 3.2, `"%B %d, %Y"` in Granite), in the C locale Python's engines run with. The time is
// read in the sidecar's local time zone, as transformers' `datetime.now()` reads the engine's: give both
// processes the same TZ (containers default to UTC). Pure: the caller passes the instant.

const MONTHS = ['January', 'February', 'March', 'April', 'May', 'June', 'July', 'August', 'September', 'October', 'November', 'December'];
const DAYS = ['Sunday', 'Monday', 'Tuesday', 'Wednesday', 'Thursday', 'Friday', 'Saturday'];

const pad = (n: number, width = 2) => String(n).padStart(width, '0');

function dayOfYear(d: Date): number {
  const start = new Date(d.getFullYear(), 0, 1);
  return Math.floor((d.getTime() - start.getTime() + (start.getTimezoneOffset() - d.getTimezoneOffset()) * 60_000) / 86_400_000) + 1;
}

/** One directive; undefined = not one Python's C-locale strftime knows here (kept as written, as Python does). */
function directive(d: Date, c: string): string | undefined {
  switch (c) {
    case 'Y':
      return String(d.getFullYear());
    case 'y':
      return pad(d.getFullYear() % 100);
    case 'm':
      return pad(d.getMonth() + 1);
    case 'd':
      return pad(d.getDate());
    case 'e':
      return String(d.getDate()).padStart(2, ' ');
    case 'j':
      return pad(dayOfYear(d), 3);
    case 'b':
    case 'h':
      return MONTHS[d.getMonth()].slice(0, 3);
    case 'B':
      return MONTHS[d.getMonth()];
    case 'a':
      return DAYS[d.getDay()].slice(0, 3);
    case 'A':
      return DAYS[d.getDay()];
    case 'w':
      return String(d.getDay());
    case 'u':
      return String(d.getDay() === 0 ? 7 : d.getDay());
    case 'H':
      return pad(d.getHours());
    case 'I':
      return pad(d.getHours() % 12 === 0 ? 12 : d.getHours() % 12);
    case 'p':
      return d.getHours() < 12 ? 'AM' : 'PM';
    case 'M':
      return pad(d.getMinutes());
    case 'S':
      return pad(d.getSeconds());
    case 'F':
      return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())}`;
    case '%':
      return '%';
    default:
      return undefined;
  }
}

export function strftime(d: Date, format: string): string {
  return String(format).replace(/%(.)/gs, (whole, c: string) => directive(d, c) ?? whole);
}

/** The calendar day a template reading the clock sees (the sidecar's local zone): two instants render alike iff equal. */
export function localDay(d: Date): string {
  return strftime(d, '%Y-%m-%d');
}
