#!/usr/bin/env python3
"""Consumes one streaming chat completion (or, with --endpoint completions, one streamed text completion; with
--endpoint responses, one streamed Responses API response) with the official OpenAI Python client and prints what
the client saw as one JSON line on stdout:

  {"content": str, "reasoning": str (only when any), "finish_reasons": [str], "ids": [str],
   "error": null | {"type", "code", "message", "exception", "status", "body"}}

With --endpoint responses: "content" and "reasoning" are the output_text and reasoning_text deltas, "ids" the
response ids seen, and also "types" (every event's type, in order), "sequence_numbers", "status" (the last
response object's status) and "failure" (response.failed's error object, or null).

`error` is filled from the exception the client raised (openai.APIError and subclasses; type/code/message
come from the exception's body, the error object the server sent). Exit code 0 whenever the line was
printed, including when the stream raised: the caller asserts on the JSON.

Used by test/e2e/python-client.e2e.test.ts, with the interpreter of the project's .venv
(scripts/python-deps.sh installs test/python/requirements.txt there).
"""
import argparse
import json
import sys

import openai


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--base-url", required=True, help="OpenAI base URL, e.g. http://127.0.0.1:8080/v1")
    p.add_argument("--fault", default=None, help="x-fake-fault header value (fake engine fault script)")
    p.add_argument("--header", action="append", default=[], metavar="NAME=VALUE", help="extra request header (repeatable)")
    p.add_argument("--model", default="test-model")
    p.add_argument("--prompt", default="Tell me about continuation.")
    p.add_argument("--timeout", type=float, default=30.0, help="client timeout in seconds")
    p.add_argument("--endpoint", choices=["chat", "completions", "responses"], default="chat",
                   help="chat: client.chat.completions (delta); completions: client.completions (choice.text); "
                   "responses: client.responses (events)")
    p.add_argument("--max-tokens", type=int, default=None)
    p.add_argument("--previous-response-id", default=None, help="responses: previous_response_id to send")
    return p.parse_args(argv)


def field(obj, name):
    """A delta field the SDK's model may not declare (reasoning_content): pydantic keeps extras."""
    value = getattr(obj, name, None)
    if value is None:
        extra = getattr(obj, "model_extra", None) or {}
        value = extra.get(name)
    return value


def describe_error(e):
    body = getattr(e, "body", None)
    b = body if isinstance(body, dict) else {}
    # Stream errors carry the server's error object as the body; status errors the body's "error" member.
    if isinstance(b.get("error"), dict):
        b = b["error"]
    return {
        "type": b.get("type", getattr(e, "type", None)),
        "code": b.get("code", getattr(e, "code", None)),
        "message": b.get("message", getattr(e, "message", str(e))),
        "exception": type(e).__name__,
        "status": getattr(e, "status_code", None),
        "body": body if isinstance(body, (dict, list, str, int, float, bool)) or body is None else str(body),
    }


def read_responses(client, args, headers):
    """One streamed Responses API response, read event by event as the SDK types them."""
    content, reasoning, types, seqs, ids = [], [], [], [], []
    status, failure, error = None, None, None
    extra = {"previous_response_id": args.previous_response_id} if args.previous_response_id else {}
    try:
        stream = client.responses.create(
            model=args.model, input=args.prompt, stream=True, extra_headers=headers, **extra
        )
        for event in stream:
            types.append(event.type)
            seqs.append(event.sequence_number)
            if event.type == "response.output_text.delta":
                content.append(event.delta)
            elif event.type == "response.reasoning_text.delta":
                reasoning.append(event.delta)
            response = getattr(event, "response", None)
            if response is not None:
                if response.id not in ids:
                    ids.append(response.id)
                status = response.status
                if event.type == "response.failed" and response.error is not None:
                    failure = response.error.model_dump()
    except openai.APIError as e:
        error = describe_error(e)
    out = {"content": "".join(content), "types": types, "sequence_numbers": seqs, "ids": ids, "status": status}
    out.update({"failure": failure, "error": error})
    if reasoning:
        out["reasoning"] = "".join(reasoning)
    return out


def main(argv):
    args = parse_args(argv)
    headers = {}
    for h in args.header:
        name, sep, value = h.partition("=")
        if not sep:
            raise SystemExit(f"--header must be NAME=VALUE, got {h!r}")
        headers[name.strip()] = value
    if args.fault is not None:
        headers["x-fake-fault"] = args.fault

    client = openai.OpenAI(base_url=args.base_url, api_key="x", max_retries=0, timeout=args.timeout)
    if args.endpoint == "responses":
        print(json.dumps(read_responses(client, args, headers)), flush=True)
        return 0
    content, reasoning, finish_reasons, ids = [], [], [], []
    error = None
    extra = {} if args.max_tokens is None else {"max_tokens": args.max_tokens}
    try:
        if args.endpoint == "completions":
            stream = client.completions.create(model=args.model, prompt=args.prompt, stream=True, extra_headers=headers, **extra)
        else:
            stream = client.chat.completions.create(
                model=args.model,
                messages=[{"role": "user", "content": args.prompt}],
                stream=True,
                extra_headers=headers,
                **extra,
            )
        for chunk in stream:
            if chunk.id and chunk.id not in ids:
                ids.append(chunk.id)
            for choice in chunk.choices or []:
                if args.endpoint == "completions":
                    content.append(choice.text or "")
                    if choice.finish_reason:
                        finish_reasons.append(choice.finish_reason)
                    continue
                delta = choice.delta
                if delta is not None:
                    content.append(delta.content or "")
                    reasoning.append(field(delta, "reasoning_content") or field(delta, "reasoning") or "")
                if choice.finish_reason:
                    finish_reasons.append(choice.finish_reason)
    except openai.APIError as e:
        error = describe_error(e)

    out = {"content": "".join(content), "finish_reasons": finish_reasons, "ids": ids, "error": error}
    if "".join(reasoning):
        out["reasoning"] = "".join(reasoning)
    print(json.dumps(out), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
