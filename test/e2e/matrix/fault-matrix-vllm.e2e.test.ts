import { faultMatrix } from './fault-matrix';

faultMatrix('vllm', 'generic');
// Qwen3 on vLLM: content cuts continue byte-identically; a cut inside the reasoning ends explicitly
// (continuation-unsupported): the template closes the final turn's think block.
faultMatrix('vllm', 'qwen3');
