"""The Python side of the peer comparison: tiktoken and LangChain's trim_messages.

    python peer.py count DIR               count DIR/corpus.json with tiktoken o200k_base
    python peer.py trim DIR approximate    the agent loop, trim_messages + count_tokens_approximately
    python peer.py trim DIR tiktoken       the agent loop, trim_messages + an exact tiktoken counter

Each task prints one JSON object, shaped like the Rust side's (`peer` binary). Reading the
inputs, building the LangChain messages and loading the vocabulary happen before the timer; the
outputs are checked after it. Single-threaded throughout.
"""

import hashlib
import json
import os
import shutil
import sys
import time

MAX_TOKENS = 32_000
VOCAB_URL = "https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken"


def encoding(inputs):
    """tiktoken's o200k_base. The vocabulary file written beside the inputs is placed in
    tiktoken's cache under the key tiktoken looks up; tiktoken checks its SHA-256 against the
    published hash before using it (and downloads the file itself if it does not match)."""
    cache = os.environ.get("TIKTOKEN_CACHE_DIR")
    if cache:
        os.makedirs(cache, exist_ok=True)
        path = os.path.join(cache, hashlib.sha1(VOCAB_URL.encode()).hexdigest())
        if not os.path.exists(path):
            shutil.copyfile(os.path.join(inputs, "o200k_base.tiktoken"), path)
    import tiktoken

    enc = tiktoken.get_encoding("o200k_base")
    enc.encode_ordinary("warm up")
    return enc


def count(inputs):
    with open(os.path.join(inputs, "corpus.json"), encoding="utf-8") as f:
        docs = json.load(f)
    enc = encoding(inputs)
    start = time.perf_counter()
    tokens = sum(len(enc.encode_ordinary(d)) for d in docs)
    seconds = time.perf_counter() - start
    return {
        "side": "python",
        "task": "count",
        "seconds": seconds,
        "tokens": tokens,
        "docs": len(docs),
        "bytes": sum(len(d.encode("utf-8")) for d in docs),
    }


def args_text(args):
    """The arguments as the recording wrote them (compact JSON, keys in recorded order)."""
    return json.dumps(args, separators=(",", ":"), ensure_ascii=False)


def to_langchain(messages):
    from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

    out = []
    for m in messages:
        role, content = m["role"], m.get("content", "")
        if role == "system":
            out.append(SystemMessage(content))
        elif role == "user":
            out.append(HumanMessage(content))
        elif role == "assistant":
            calls = []
            for c in m.get("tool_calls", []):
                args = json.loads(c["arguments"]) if c.get("arguments") else {}
                if c.get("arguments") and args_text(args) != c["arguments"]:
                    raise ValueError(f"arguments of {c['id']} do not round-trip")
                calls.append({"name": c["name"], "args": args, "id": c["id"], "type": "tool_call"})
            out.append(AIMessage(content, tool_calls=calls))
        elif role == "tool":
            out.append(ToolMessage(content, tool_call_id=m["tool_call_id"], name=m.get("name")))
        else:
            raise ValueError(f"unknown role {role}")
    return out


def tiktoken_counter(enc):
    """An exact counter in the shape of LangChain's documented tiktoken counter, with the same
    chat-template overhead as compactlens's exact meter: 3 tokens per message plus its content,
    and per tool call 1 token plus its name and JSON arguments."""

    def counter(messages):
        n = 0
        for m in messages:
            n += 3 + len(enc.encode_ordinary(m.content))
            for c in getattr(m, "tool_calls", None) or ():
                n += 1 + len(enc.encode_ordinary(c["name"])) + len(enc.encode_ordinary(args_text(c["args"])))
        return n

    return counter


def trim(inputs, which):
    from langchain_core.messages import AIMessage, ToolMessage
    from langchain_core.messages.utils import count_tokens_approximately, trim_messages

    with open(os.path.join(inputs, "conversation.json"), encoding="utf-8") as f:
        messages = to_langchain(json.load(f))
    if which == "approximate":
        base = count_tokens_approximately
    elif which == "tiktoken":
        base = tiktoken_counter(encoding(inputs))
    else:
        raise ValueError(f"unknown counter {which}: approximate or tiktoken")
    counted = [0]

    def counter(msgs):
        counted[0] += len(msgs)
        return base(msgs)

    history, calls, trimmed = [], [], []
    start = time.perf_counter()
    for i, m in enumerate(messages):
        if isinstance(m, AIMessage) and history:
            trimmed.append(
                trim_messages(
                    history,
                    max_tokens=MAX_TOKENS,
                    token_counter=counter,
                    strategy="last",
                    start_on="human",
                    include_system=True,
                )
            )
            calls.append(i)
        history.append(m)
    seconds = time.perf_counter() - start

    # Checks, after the timer: within budget, no orphaned tool result, a suffix of the history.
    over_budget = orphans = empty = not_suffix = 0
    max_tokens = kept = 0
    starts = []
    for call, t in zip(calls, trimmed):
        tokens = base(t)
        max_tokens = max(max_tokens, tokens)
        over_budget += tokens > MAX_TOKENS
        empty += len(t) <= 1
        kept += len(t)
        begin = call - (len(t) - 1)
        starts.append(begin)
        not_suffix += t[0] is not messages[0] or any(a is not b for a, b in zip(t[1:], messages[begin:call]))
        ids = set()
        for m in t:
            if isinstance(m, AIMessage):
                ids.update(c["id"] for c in m.tool_calls)
            elif isinstance(m, ToolMessage) and m.tool_call_id not in ids:
                orphans += 1
    return {
        "side": "python",
        "task": "trim",
        "counter": which,
        "seconds": seconds,
        "messages": len(messages),
        "calls": len(calls),
        "messages_counted": counted[0],
        "starts": starts,
        "check": {
            "over_budget": over_budget,
            "orphans": orphans,
            "empty": empty,
            "not_suffix": not_suffix,
            "max_tokens": max_tokens,
            "mean_kept": kept / max(1, len(calls)),
        },
    }


def main(argv):
    if len(argv) >= 2 and argv[0] == "count":
        report = count(argv[1])
    elif len(argv) >= 3 and argv[0] == "trim":
        report = trim(argv[1], argv[2])
    else:
        sys.exit(__doc__)
    print(json.dumps(report))


if __name__ == "__main__":
    main(sys.argv[1:])
