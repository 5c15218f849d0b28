import { faultMatrix } from './fault-matrix';

faultMatrix('sglang', 'generic');
faultMatrix('sglang', 'kimi-k3');
// Qwen3-style (<think> written by the model, newlines at the markers) and gpt-oss-style (harmony channels; leg 2
// streamed raw and split by the gateway): every cut continues byte-identically on SGLang.
faultMatrix('sglang', 'qwen3');
faultMatrix('sglang', 'gpt-oss');
