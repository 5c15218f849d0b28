// The family table's fidelity suite (test/fidelity/family-suite.ts) for SGLang and vLLM; the vLLM cells with
// vLLM's own code run in the vLLM suite (test/vllm/family-fidelity.test.ts, npm run test:vllm).
import { familySuite } from '../../fidelity/family-suite';

jest.setTimeout(15 * 60 * 1000);

familySuite(['sglang', 'vllm']);
