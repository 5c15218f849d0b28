import { faultMatrix } from './fault-matrix';

faultMatrix('vllm', 'generic');
faultMatrix('vllm', 'kimi-k3');
