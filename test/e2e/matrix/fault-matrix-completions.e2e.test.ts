import { completionsFaultMatrix } from './completions-matrix';

// POST /v1/completions on both engine dialects (tools/fake-engine/text-completion.ts reads their serving code).
completionsFaultMatrix('sglang');
completionsFaultMatrix('vllm');
