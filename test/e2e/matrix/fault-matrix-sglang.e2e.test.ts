import { faultMatrix } from './fault-matrix';

faultMatrix('sglang', 'generic');
faultMatrix('sglang', 'kimi-k3');
