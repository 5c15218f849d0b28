// The family table's vLLM cells through vLLM 0.33.0's own code (test/fidelity/vllm_harness.py: its request
// model, message parsing, renderer with continue_final_message, and the reasoning parser it picks), on CPU.
// A separate suite (npm run test:vllm, scripts/test-vllm.sh): its venv is about 3 GB of wheels.
import { familySuite } from '../fidelity/family-suite';

jest.setTimeout(30 * 60 * 1000);

familySuite(['vllm'], true);
