// `helm test` (templates/tests/ready.yaml runs this with node -e in the gateway's own image): every URL in
// READY_URLS answers 200 within READY_TIMEOUT_SECONDS, asked every 2 s (right after an install without --wait the
// pods may still be starting). Prints one line per URL; exit 0 when all answered 200, else 1.
const urls = (process.env.READY_URLS ?? '').split(',').filter(Boolean);
const deadline = Date.now() + Number(process.env.READY_TIMEOUT_SECONDS ?? 60) * 1000;

async function status(url) {
  try {
    const r = await fetch(url, { signal: AbortSignal.timeout(5000) });
    await r.arrayBuffer();
    return String(r.status);
  } catch (e) {
    return e.cause?.code ?? e.name;
  }
}

async function main() {
  if (urls.length === 0) {
    console.log('READY_URLS is empty');
    return 1;
  }
  for (const url of urls) {
    let last = await status(url);
    while (last !== '200' && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 2000));
      last = await status(url);
    }
    console.log(`${url}: ${last}`);
    if (last !== '200') return 1;
  }
  return 0;
}

main().then((code) => process.exit(code));
