"""Token counts as an engine's tokenizer gives them, the reference for TOKENIZER's counts
(test/unit/templates/model-tokenizer.test.ts). Loads a model directory with transformers' AutoTokenizer, as SGLang and vLLM
do, and counts each text as their /tokenize does with add_special_tokens false.

Usage: count_tokens.py MODEL_DIR TEXTS_JSON   (a JSON list of strings) -> a JSON list of counts on stdout
"""
import json
import sys

from transformers import AutoTokenizer

tok = AutoTokenizer.from_pretrained(sys.argv[1])
with open(sys.argv[2], encoding="utf-8") as f:
    texts = json.load(f)
print(json.dumps([len(tok.encode(t, add_special_tokens=False)) for t in texts]))
