// Compares two V8 heap snapshots (the soak's `--heap-snapshots` files): live objects grouped by kind and
// constructor, count and self size, the groups that grew most first. A leak across soak rounds shows here as a
// group that grows by about the same amount every round.
//   node dist/test/soak/heap-diff.js before.heapsnapshot after-round-1.heapsnapshot [rows]
import fs from 'node:fs';

interface Group {
  count: number;
  bytes: number;
}

/** Live objects of one snapshot by "type name" (e.g. "object Socket", "string", "closure onData"). */
export function groupSnapshot(file: string): Map<string, Group> {
  const snap = JSON.parse(fs.readFileSync(file, 'utf8'));
  const fields: string[] = snap.snapshot.meta.node_fields;
  const types: string[] = snap.snapshot.meta.node_types[0];
  const width = fields.length;
  const [typeAt, nameAt, sizeAt] = ['type', 'name', 'self_size'].map((f) => fields.indexOf(f));
  const nodes: number[] = snap.nodes;
  const strings: string[] = snap.strings;
  const groups = new Map<string, Group>();
  for (let i = 0; i < nodes.length; i += width) {
    const type = types[nodes[i + typeAt]];
    // Strings and numbers by kind only (their "name" is their value); objects and closures by constructor.
    const byName = type === 'object' || type === 'closure' || type === 'native' || type === 'hidden';
    const key = byName ? `${type} ${strings[nodes[i + nameAt]].slice(0, 60)}` : type;
    const g = groups.get(key) ?? { count: 0, bytes: 0 };
    g.count++;
    g.bytes += nodes[i + sizeAt];
    groups.set(key, g);
  }
  return groups;
}

function main(): void {
  const [a, b, rowsArg] = process.argv.slice(2);
  const before = groupSnapshot(a);
  const after = groupSnapshot(b);
  const total = (m: Map<string, Group>) => [...m.values()].reduce((s, g) => s + g.bytes, 0);
  const keys = new Set([...before.keys(), ...after.keys()]);
  const rows = [...keys]
    .map((k) => {
      const x = before.get(k) ?? { count: 0, bytes: 0 };
      const y = after.get(k) ?? { count: 0, bytes: 0 };
      return { k, dCount: y.count - x.count, dBytes: y.bytes - x.bytes, bytes: y.bytes };
    })
    .sort((p, q) => Math.abs(q.dBytes) - Math.abs(p.dBytes))
    .slice(0, Number(rowsArg ?? 25));
  const kb = (n: number) => (n / 1024).toFixed(1);
  process.stdout.write(`live heap ${kb(total(before))} KiB -> ${kb(total(after))} KiB\n`);
  for (const r of rows)
    process.stdout.write(`${kb(r.dBytes).padStart(10)} KiB ${String(r.dCount).padStart(8)} objects  ${r.k} (now ${kb(r.bytes)} KiB)\n`);
}

if (require.main === module) main();
