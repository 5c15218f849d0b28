import { faultMatrix } from './fault-matrix';

// llama.cpp's /tokenize ({content} -> {tokens}) and /apply-template behind TOKENIZE_URL, detected as such.
faultMatrix('vllm', 'generic', 'llamacpp');
