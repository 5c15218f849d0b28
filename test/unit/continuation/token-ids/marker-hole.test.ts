// The closing marker's ids that llama-server's chat stream leaves out (src/continuation/token-ids/marker-hole.ts):
// the ledger places the hole by the engine's predicted_n, and its text is worked out from the tokens around it.
// The chunks below are the shape the real llama-server sent for SmolLM2 under the R1-distill template
// (test/real-engine/token-ids.test.ts): `.`, `\n`, then `</` `think` `>` with no frame, then `\n` as content.
import { Leg1IdLedger } from '../../../../src/continuation/token-ids/leg1-ledger';
import { fillMarkerHole, type MarkerHole, markerHoleText } from '../../../../src/continuation/token-ids/marker-hole';

const llamaAsk = { engine: 'llamacpp' as const, fields: {}, clientAsked: { tokenIds: false, logprobs: false, timings: false } };

const chunk = (delta: Record<string, unknown>, tokens: Array<[number, string]>, predicted: number) => ({
  choices: [{ finish_reason: null, index: 0, delta, logprobs: { content: tokens.map(([id, token]) => ({ id, token })) } }],
  timings: { predicted_n: predicted },
});

describe('the ledger places the hole where the reasoning closed', () => {
  test('ids missing just before the first content: a marker hole, the rest complete', () => {
    const l = new Leg1IdLedger(llamaAsk);
    l.observe(chunk({ role: 'assistant', content: null }, [[198, '\n']], 1));
    l.observe(chunk({ reasoning_content: '\n\nA' }, [[49, 'A']], 2));
    l.observe(chunk({ reasoning_content: '.' }, [[30, '.']], 3));
    l.observe(chunk({ reasoning_content: '\n' }, [[198, '\n']], 4));
    l.observe(chunk({ content: '\n' }, [[198, '\n']], 8));
    l.observe(chunk({ content: 'A' }, [[49, 'A']], 9));
    const s = l.state();
    expect(s).toMatchObject({ kind: 'complete', generatedIds: [198, 49, 30, 198, 198, 49] });
    const hole = (s as { markerHole: MarkerHole }).markerHole;
    expect(hole).toEqual({ at: 4, missing: 3, piecesBefore: '\nA.\n', pieceAfter: '\n', contentAfter: '\n' });
    expect(markerHoleText(hole, '\n\nA.\n', '</think>')).toEqual({ text: '</think>' });
    l.fillMarkerHole([9617, 17400, 46]);
    expect(l.state()).toMatchObject({ kind: 'complete', generatedIds: [198, 49, 30, 198, 9617, 17400, 46, 198, 49], markerHole: null });
  });

  test('ids missing anywhere else stay a gap: inside the reasoning, inside the content, with no reasoning before', () => {
    const inReasoning = new Leg1IdLedger(llamaAsk);
    inReasoning.observe(chunk({ reasoning_content: 'a' }, [[1, 'a']], 1));
    inReasoning.observe(chunk({ reasoning_content: '<b' }, [[2, 'b']], 3));
    expect(inReasoning.state()).toEqual({ kind: 'gap', reason: 'ids-missing' });

    const inContent = new Leg1IdLedger(llamaAsk);
    inContent.observe(chunk({ content: 'a' }, [[1, 'a']], 1));
    inContent.observe(chunk({ content: 'é' }, [[2, '\xa9']], 3));
    expect(inContent.state()).toEqual({ kind: 'gap', reason: 'ids-missing' });

    const noReasoning = new Leg1IdLedger(llamaAsk);
    noReasoning.observe(chunk({ content: 'a' }, [[1, 'a']], 2));
    expect(noReasoning.state()).toEqual({ kind: 'gap', reason: 'ids-missing' });

    // A second hole after the marker's is a gap too.
    const twice = new Leg1IdLedger(llamaAsk);
    twice.observe(chunk({ reasoning_content: 'r' }, [[1, 'r']], 1));
    twice.observe(chunk({ content: 'c' }, [[2, 'c']], 3));
    expect(twice.state()).toMatchObject({ kind: 'complete', markerHole: { at: 1, missing: 1 } });
    twice.observe(chunk({ content: 'd' }, [[3, 'd']], 5));
    expect(twice.state()).toEqual({ kind: 'gap', reason: 'ids-missing' });
  });
});

describe("the hole's text", () => {
  const hole = (piecesBefore: string, pieceAfter: string, contentAfter: string, missing = 2): MarkerHole => ({
    at: 0,
    missing,
    piecesBefore,
    pieceAfter,
    contentAfter,
  });

  test('the marker less what the tokens on either side carried of it', () => {
    // `.</` showed `.` and held `</`; `>\n\n` showed `\n\n`: the hole is `think`.
    expect(markerHoleText(hole('x.</', '>\n\n', '\n\n'), 'x.', '</think>')).toEqual({ text: 'think' });
    // The reasoning shown opens with the generation prompt's newline, which no generated token carried.
    expect(markerHoleText(hole('r', '\n', '\n'), '\nr', '</think>')).toEqual({ text: '</think>' });
  });

  test('anything the assumption does not explain is not filled', () => {
    // The parser trimmed the content's leading whitespace: the token after carries text that is no marker's.
    expect(markerHoleText(hole('r', '\n\nA', 'A'), 'r', '</think>')).toEqual({ fallback: 'marker-hole-not-marker' });
    // The tokens before carried text the client was not shown as reasoning.
    expect(markerHoleText(hole('rq', '\n', '\n'), 'r', '</think>')).toEqual({ fallback: 'marker-hole-reasoning-differs' });
    expect(markerHoleText(hole('r', 'x\n', '\n'), 'r', '</think>')).toEqual({ fallback: 'marker-hole-not-marker' });
    expect(markerHoleText(hole('r', 'A', 'B'), 'r', '</think>')).toEqual({ fallback: 'marker-hole-content-differs' });
    // Nothing of the marker left for the hole.
    expect(markerHoleText(hole('r</think', '>', ''), 'r', '</think>')).toEqual({ fallback: 'marker-hole-not-marker' });
    // Two readings: `<` shown as reasoning (the reasoning ends `<<`), or held as the marker's start.
    expect(markerHoleText(hole('<<', '>', ''), '<<', '<<x>')).toEqual({ fallback: 'marker-hole-ambiguous' });
  });

  test("the engine's ids are taken only when exactly as many as missing", () => {
    const h = hole('r', '\n', '\n', 3);
    expect(fillMarkerHole([1, 2], { ...h, at: 1 }, [7, 8, 9])).toEqual({ ids: [1, 7, 8, 9, 2] });
    expect(fillMarkerHole([1, 2], { ...h, at: 1 }, [7, 8])).toEqual({ fallback: 'marker-hole-count-differs' });
  });
});
