// The template sweep's vLLM cells (every template of llama.cpp's copy and the published forms, the engine's parser
// and none, both thinking settings, every cut) through vLLM 0.33.0's own renderer and reasoning parsers, compared
// cell by cell with the npm sweep's pinned verdicts (test/fidelity/vllm-sweep.ts).
import { vllmSweep } from '../fidelity/vllm-sweep';

jest.setTimeout(30 * 60 * 1000);

vllmSweep();
