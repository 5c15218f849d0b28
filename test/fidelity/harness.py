"""The fidelity suite's Python side: renders chat requests the way SGLang 0.5.23 and vLLM 0.33.0 render them,
through the real chat template and transformers' real Jinja renderer, and runs SGLang's own reasoning parsers.

Driven by test/unit/families/fidelity.test.ts over stdin/stdout, one JSON object per line in each direction:
  {"id": 1, "op": "render", ...}  ->  {"id": 1, "ok": true, "text": "..."}  or  {"id": 1, "ok": false, "error": "..."}

What runs here is the engines' own code wherever it runs without a GPU:
- transformers' `render_jinja_template`, which `tokenizer.apply_chat_template` calls in both engines
  (vLLM: vllm/renderers/hf.py L913-920; SGLang: srt/entrypoints/openai/serving_chat.py L2322-2329);
- SGLang's request model (`ChatCompletionRequest`, its validators included), its `_handle_last_assistant_message`,
  `_get_reasoning_from_request` and `_thinking_requested` (lifted out of serving_chat.py by source, because
  importing that module imports torch), its template detection (`detect_reasoning_pattern`), its DeepSeek-V3.2
  encoder and its `ReasoningParser`.
What is re-stated here, with the lines it follows, is only the glue between those calls: vLLM's message
conversion and kwargs merge (vLLM cannot be imported without torch: vllm/env_override.py L150), and the few
lines of SGLang's `_apply_jinja_template` that call the template and append the prefix.
"""

import ast
import copy
import importlib.util
import json
import logging
import os
import sys
import types
from datetime import datetime

# sglang/__init__.py imports torch and triton (srt/utils/common.py); the parser modules do not. A bare package
# object with the right __path__ lets them import on their own.
_spec = importlib.util.find_spec("sglang")
if _spec is None:
    raise SystemExit("sglang is not installed in this interpreter (scripts/fidelity-deps.sh)")
SGLANG_DIR = os.path.dirname(_spec.origin)
_pkg = types.ModuleType("sglang")
_pkg.__path__ = [SGLANG_DIR]
_pkg.__file__ = _spec.origin
sys.modules["sglang"] = _pkg


def _stub(name, **attrs):
    mod = types.ModuleType(name)
    mod.__dict__.update(attrs)
    sys.modules[name] = mod


# template_detection.py imports these for its server-argument resolution only (L811-957), which is never
# called here; their real modules import torch (srt/platforms/__init__.py).
_stub("sglang.srt.arg_groups.muse_spark_hook", muse_spark_chat_template_default=None)
_stub("sglang.srt.arg_groups.overrides", declare_resolution=None, resolving_view=None)

from sglang.srt.entrypoints.openai import encoding_dsv32  # noqa: E402
from sglang.srt.entrypoints.openai.protocol import ChatCompletionRequest  # noqa: E402
from sglang.srt.parser.reasoning_parser import ReasoningParser  # noqa: E402
from sglang.srt.parser.template_detection import detect_reasoning_pattern  # noqa: E402
from transformers.utils.chat_template_utils import render_jinja_template  # noqa: E402

assert "torch" not in sys.modules, "the harness must not import torch"


def _lift_methods(path, names, extra_globals=None):
    """Compiles the named functions (or methods: self is their first argument) of a source file on their own."""
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read(), filename=path)
    found = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name in names and node.name not in found:
            found[node.name] = node
    missing = set(names) - set(found)
    if missing:
        raise SystemExit(f"serving_chat.py has no {sorted(missing)}: another SGLang version?")
    module = ast.Module(body=list(found.values()), type_ignores=[])
    ns = {
        "Any": object,
        "ChatCompletionRequest": ChatCompletionRequest,
        "logger": logging.getLogger("sglang-lifted"),
        # _thinking_requested's default: srt/environ.py SGLANG_DEFAULT_THINKING (False).
        "envs": types.SimpleNamespace(SGLANG_DEFAULT_THINKING=types.SimpleNamespace(get=lambda: False)),
        "IQuestQ1ReasoningDetector": None,
        **(extra_globals or {}),
    }
    exec(compile(ast.fix_missing_locations(module), path, "exec"), ns)
    return {n: ns[n] for n in names}


SGLANG = _lift_methods(
    os.path.join(SGLANG_DIR, "srt", "entrypoints", "openai", "serving_chat.py"),
    ["_handle_last_assistant_message", "_get_reasoning_from_request", "_thinking_requested", "normalize_tool_content"],
)
# parser/jinja_template_utils.py imports sglang.srt.utils (torch); its string-content path needs none of it.
SGLANG.update(
    _lift_methods(
        os.path.join(SGLANG_DIR, "srt", "parser", "jinja_template_utils.py"),
        ["process_content_for_template_format", "detect_jinja_template_content_format", "_try_extract_ast",
         "_is_var_access", "_is_attr_access", "_is_var_or_elems_access"],
        {"jinja2": __import__("jinja2"), "hf_chat_utils": __import__("transformers.utils.chat_template_utils").utils.chat_template_utils,
         "ImageData": None, "VideoData": None, "GLM_MEDIA_CONFIG_KEYS": ()},
    )
)


# The instant strftime_now reads, when a job names one (ms since the epoch, read in this process's time zone as
# transformers' datetime.now() is): a render argument shadows the environment's global of the same name.
_NOW = {"ms": None}


def render(template, messages, kwargs, special, tools=None, add_generation_prompt=False, continue_final_message=False):
    """tokenizer.apply_chat_template(tokenize=False) of transformers 5.19: the special tokens map under kwargs."""
    template_kwargs = {**special, **kwargs}
    if _NOW["ms"] is not None:
        instant = datetime.fromtimestamp(_NOW["ms"] / 1000)
        template_kwargs["strftime_now"] = lambda fmt: instant.strftime(fmt)
    rendered, _ = render_jinja_template(
        conversations=[messages],
        tools=tools,
        chat_template=template,
        continue_final_message=continue_final_message,
        add_generation_prompt=add_generation_prompt,
        **template_kwargs,
    )
    return rendered[0]


class _SglangServing:
    """The attributes of OpenAIServingChat that the lifted methods read."""

    def __init__(self, template, parser):
        force, config = detect_reasoning_pattern(template)
        self.reasoning_parser = parser
        self.template_manager = types.SimpleNamespace(force_reasoning=force, reasoning_config=config)
        # SC:399-413: the detector of a ReasoningParser built without a request.
        self._reasoning_detector = ReasoningParser(model_type=parser, stream_reasoning=True).detector if parser else None


def sglang_prompt(job):
    """The prompt text SGLang 0.5.23 builds for a chat request (serving_chat.py _apply_jinja_template)."""
    req = ChatCompletionRequest(**job["body"])
    serving = _SglangServing(job.get("template"), job.get("parser"))
    messages = [m.model_dump() for m in req.messages]  # SC:2035
    if job.get("encoder") == "dsv32":
        # SC:2075-2124: the DeepSeek-V3.2 text encoder; thinking from chat_template_kwargs.thinking (SC:3513).
        thinking = SGLANG["_thinking_requested"](serving, req)
        for m in messages:
            if m.get("content") is None:
                m["content"] = ""
        messages, prefix = SGLANG["_handle_last_assistant_message"](serving, messages, req)
        if messages[0]["role"] != "system":
            messages.insert(0, {"role": "system", "content": ""})
        text = encoding_dsv32.encode_messages(messages, thinking_mode="thinking" if thinking else "chat")
        return text + (prefix or "")
    fmt = SGLANG["detect_jinja_template_content_format"](job["template"])
    processed = []
    for m in messages:  # SC:2129-2151: content None -> "", per-format processing (None fields dropped)
        m = copy.deepcopy(m)
        if m.get("content") is None:
            m["content"] = ""
        out = SGLANG["process_content_for_template_format"](m, fmt, [], [], [], [])
        out["content"] = SGLANG["normalize_tool_content"](out["role"], out.get("content"))
        processed.append(out)
    messages = processed
    prefix = None
    if req._format_add_generation_prompt is None or req.continue_final_message:  # SC:2153-2160
        messages, prefix = SGLANG["_handle_last_assistant_message"](serving, messages, req)
    kwargs = {}
    if req.reasoning_effort is not None:  # SC:2163-2167
        kwargs["reasoning_effort"] = req.reasoning_effort
    if req.chat_template_kwargs:
        kwargs.update(req.chat_template_kwargs)
    agp = req._format_add_generation_prompt is not False  # SC:2198-2205
    text = render(job["template"], messages, kwargs, job["special"], add_generation_prompt=agp)
    # SC:2229-2235 appends encode(prefix) to the prompt ids; as text, the prefix verbatim.
    return text + (prefix or "")


def vllm_prompt(job):
    """The prompt text vLLM 0.33.0 renders for a chat request (HfRenderer: transformers' apply_chat_template)."""
    body = copy.deepcopy(job["body"])
    conversation = []
    for msg in body["messages"]:
        # chat_completion/protocol.py L576-601: reasoning_content is renamed to reasoning on the request.
        rc = msg.pop("reasoning_content", None)
        if rc is not None and msg.get("reasoning") is None:
            msg["reasoning"] = rc
        out = {"role": msg["role"], "content": msg.get("content") or ""}
        # renderers/chat_utils/chat_message.py L619, L646-660: both names reach the template, assistant only.
        if msg["role"] == "assistant" and msg.get("reasoning") is not None:
            out["reasoning"] = msg["reasoning"]
            out["reasoning_content"] = msg["reasoning"]
        for key in ("tool_calls", "tool_call_id", "name"):
            if msg.get(key) is not None:
                out[key] = msg[key]
        conversation.append(out)
    agp = body.get("add_generation_prompt", True)  # protocol L332: default True
    cfm = bool(body.get("continue_final_message", False))
    if agp and cfm:  # protocol L1058-1068
        raise ValueError("Cannot set both continue_final_message and add_generation_prompt to True.")
    # protocol L643-682: the request's own fields over chat_template_kwargs; enable_thinking from reasoning_effort.
    user_kwargs = dict(body.get("chat_template_kwargs") or {})
    kwargs = dict(user_kwargs)
    effort = body.get("reasoning_effort")
    if effort is not None:
        kwargs["reasoning_effort"] = effort
        if "enable_thinking" not in user_kwargs:
            kwargs["enable_thinking"] = effort != "none"
    return render(
        job["template"],
        conversation,
        kwargs,
        job["special"],
        add_generation_prompt=agp,
        continue_final_message=cfm,
    )


def sglang_split(job):
    """SGLang's ReasoningParser over text chunks, as _process_reasoning_stream feeds it (SC:3302-3333)."""
    req = ChatCompletionRequest(**job["body"])
    serving = _SglangServing(job.get("template"), job["parser"])
    force = bool(serving.template_manager.force_reasoning or SGLANG["_get_reasoning_from_request"](serving, req))
    parser = ReasoningParser(job["parser"], True, force, req)
    out = []
    chunks = job["chunks"]
    for i, chunk in enumerate(chunks):
        reasoning, normal = parser.parse_stream_chunk(chunk)
        if job.get("finish") and i == len(chunks) - 1:
            end_r, end_n = parser.parse_stream_end()
            reasoning = (reasoning or "") + (end_r or "")
            normal = (normal or "") + (end_n or "")
        out.append([reasoning or "", normal or ""])
    return {"deltas": out, "force_reasoning": force}


OPS = {
    "render": lambda j: {
        "text": render(
            j["template"],
            j["messages"],
            j.get("kwargs", {}),
            j.get("special", {}),
            tools=j.get("tools"),
            add_generation_prompt=j.get("add_generation_prompt", False),
            continue_final_message=j.get("continue_final_message", False),
        )
    },
    "sglang_prompt": lambda j: {"text": sglang_prompt(j)},
    "vllm_prompt": lambda j: {"text": vllm_prompt(j)},
    "sglang_split": sglang_split,
}


def main():
    if sys.argv[1:] == ["--self-check"]:
        print("harness ok: sglang", SGLANG_DIR, file=sys.stderr)
        return
    templates = {}
    for line in sys.stdin:
        if not line.strip():
            continue
        job = json.loads(line)
        reply = {"id": job.get("id")}
        _NOW["ms"] = job.get("nowMs")
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
        sys.stdout.write(json.dumps(reply) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
