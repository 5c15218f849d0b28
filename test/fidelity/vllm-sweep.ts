// The template sweep's vLLM cells through vLLM 0.33.0's own code (test/fidelity/vllm_harness.py: its request model,
// renderer with continue_final_message, and the --reasoning-parser for the template's markers), compared cell by
// cell with the npm sweep's verdicts (test/fidelity/template-sweep-expected.json, made with harness.py's
// restatement of vLLM's rendering and our marker split). They must agree, or the difference is listed in
// vllm-sweep-differences.ts with its reason (docs/vllm-fidelity-notes.md); a listed difference that no longer
// occurs fails too. No cut may drift, and the MUST_CONTINUE forms keep exact reasoning and content cuts.
import { Harness, provisionAssets } from './harness-client';
import { templateMarkers } from './model-output';
import { type CellVerdict, cellKey, describeCell, readExpectations, sameCell } from './sweep-expectations';
import { floorMisses, MODES, PARSERS, runCell, sweepAddedTokens, sweepTemplates, VLLM_NOT_RUN, VLLM_PARSER_FOR } from './template-sweep';
import { NO_SPLIT_REASONS, VLLM_OWN_DIFFERENCES } from './vllm-sweep-differences';

export function vllmSweep(): void {
  const templates = sweepTemplates(provisionAssets());
  const addedTokens = sweepAddedTokens(templates);
  const pinned = readExpectations();
  let harness: Harness;
  let vllm: Harness;
  const summary: string[] = [];
  const seen = new Set<string>();
  const total = { exact: 0, refused: 0, cells: 0, agree: 0 };
  beforeAll(() => {
    harness = Harness.start();
    vllm = Harness.start('vllm');
  });
  afterAll(async () => {
    await harness?.stop();
    await vllm?.stop();
    const t = `${total.exact} exact, ${total.refused} refused; ${total.agree} of ${total.cells} cells as the npm sweep's, ${seen.size} listed differences`;
    console.log(
      `template sweep, vLLM's own code (exact / refused cuts; differences from the npm sweep):\n${summary.join('\n')}\n  all: ${t}`,
    );
  });

  describe.each(templates.map((t) => [t.name, t] as const))('%s', (_name, t) => {
    it("on vLLM's own code: every cut exact or refused, as the npm sweep's verdicts (or a listed difference)", async () => {
      const markers = templateMarkers(t.text);
      const parser = markers ? VLLM_PARSER_FOR[markers[0]] : undefined;
      if (markers && !parser && !VLLM_NOT_RUN[markers[0]]) throw new Error(`${t.name}: no vLLM parser named for ${markers[0]}`);
      const own = { harness: vllm, parser, tokenizer: 'qwen3', addedTokens, markerSplit: !!markers && !parser };
      const drift: string[] = [];
      const unexplained: string[] = [];
      const cells: Record<string, CellVerdict> = {};
      let parserName: string | undefined;
      for (const p of PARSERS)
        for (const [mode, kwargs] of MODES) {
          const key = cellKey('vllm', p, mode);
          const r = await runCell(harness, t, 'vllm', p, kwargs, own);
          if (p === 'engine') parserName = r.parserName;
          drift.push(...r.drift);
          cells[key] = r.verdict;
          const npm = pinned.templates[t.name]?.[key];
          const listed = VLLM_OWN_DIFFERENCES[t.name]?.[key];
          if (listed) seen.add(`${t.name} | ${key}`);
          total.cells++;
          if (sameCell(r.verdict, npm)) total.agree++;
          if (sameCell(r.verdict, npm) && !listed) continue;
          if (listed && sameCell(r.verdict, listed.own) && !sameCell(r.verdict, npm)) continue;
          unexplained.push(
            listed && sameCell(r.verdict, npm)
              ? `${t.name} | ${key}: listed as a difference, but vLLM's own code now agrees with the npm sweep (${describeCell(npm)}): remove it from vllm-sweep-differences.ts`
              : `${t.name} | ${key}: npm sweep ${describeCell(npm)}; vLLM's own code ${describeCell(r.verdict)} (own: ${JSON.stringify(r.verdict)})${listed ? `; listed: ${describeCell(listed.own)}` : ''}`,
          );
        }
      // Where the listed reason is that vLLM's parser did not split, the cell is the no-parser cell (the reason checked).
      for (const [key, d] of Object.entries(VLLM_OWN_DIFFERENCES[t.name] ?? {}))
        if (NO_SPLIT_REASONS.includes(d.why) && !sameCell(cells[key], cells[key.replace(' parser ', ' no-parser ')]))
          unexplained.push(`${t.name} | ${key}: listed as not split, but differs from the no-parser cell`);
      const n = (l: string) => Object.values(cells).reduce((a, v) => a + (v.reasoning + v.content).split(l).length - 1, 0);
      const differs = Object.keys(VLLM_OWN_DIFFERENCES[t.name] ?? {}).length;
      total.exact += n('E');
      total.refused += n('R');
      summary.push(
        `  ${t.name} (${parserName ?? 'refuses both conversations'}): ${n('E')} exact, ${n('R')} refused${differs ? `; ${differs} listed difference(s)` : ''}`,
      );
      expect(drift).toEqual([]);
      expect(floorMisses(t, cells, ['vllm'])).toEqual([]);
      expect(unexplained).toEqual([]);
    });
  });

  it('every listed difference names a cell of the sweep', () => {
    const cells = Object.entries(VLLM_OWN_DIFFERENCES).flatMap(([name, byKey]) => Object.keys(byKey).map((k) => `${name} | ${k}`));
    const known = new Set(templates.flatMap((t) => PARSERS.flatMap((p) => MODES.map(([m]) => `${t.name} | ${cellKey('vllm', p, m)}`))));
    expect(cells.filter((c) => !known.has(c))).toEqual([]);
    // Run after the templates' tests (jest runs a describe's tests in order): each listed cell was compared.
    expect(cells.filter((c) => !seen.has(c))).toEqual([]);
  });
}
