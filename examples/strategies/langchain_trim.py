"""langchain_trim: LangChain's `trim_messages`, run through LangChain's own code.

A peer for compactlens's built-in `truncate` baseline: before every model call the context
goes through `langchain_core.messages.trim_messages` exactly as LangChain's documentation
configures it for a chat history:

    trim_messages(messages, max_tokens=<fraction x window>, token_counter=count_tokens_approximately,
                  strategy="last", start_on="human", include_system=True, allow_partial=False)

The dataset messages become LangChain messages (SystemMessage, HumanMessage, AIMessage with
its tool_calls, ToolMessage) and the messages LangChain keeps are mapped back to the very
dicts they came from, so what it keeps goes back to compactlens as `keep` ranges; when it
keeps everything the answer is `keep`. There is no threshold of its own: LangChain trims on
every call, and keeps everything while the history fits. An overflow re-ask gets the same
trim again (LangChain has no reactive path).

Requires the pinned LangChain packages (sdk/python/requirements-peers.txt); run it with the
venv that scripts/setup-peers.sh makes:

    [[strategy]]
    name = "external"
    command = ["../.venv-peers/bin/python", "../examples/strategies/langchain_trim.py"]
    label = "langchain-trim"

Params:

    fraction = 0.8           # max_tokens = fraction x the window
    max_tokens = 24000       # an absolute max_tokens instead (optional)
    counter = "approximate"  # LangChain's count_tokens_approximately, or "messages" (len:
                             # max_tokens then counts messages and must be given)

Conversion notes: a tool call's `arguments` (a JSON string) becomes the call's `args` dict; a
string that is not a JSON object is passed as `{"input": <string>}`. A tool result with
`is_error` gets `status="error"`. Leading system messages: `include_system` keeps the first
message only when it is a system message, as LangChain does; further system messages are
trimmed like any other message.
"""

import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "sdk", "python"))

from compactlens_strategy import Strategy, run  # noqa: E402

import langchain_core  # noqa: E402
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage  # noqa: E402
from langchain_core.messages.utils import count_tokens_approximately, trim_messages  # noqa: E402

# The `additional_kwargs` LangChain's SummarizationMiddleware puts on its summary message.
SUMMARY_KWARGS = {"lc_source": "summarization"}


def _args(arguments):
    if isinstance(arguments, dict):
        return arguments
    try:
        value = json.loads(arguments) if arguments else {}
    except (TypeError, ValueError):
        value = None
    return value if isinstance(value, dict) else {"input": arguments}


def _text(content):
    """A LangChain content (a string or a list of blocks) as plain text."""
    if isinstance(content, str):
        return content
    parts = []
    for block in content or []:
        if isinstance(block, str):
            parts.append(block)
        elif isinstance(block, dict) and isinstance(block.get("text"), str):
            parts.append(block["text"])
    return "".join(parts)


class Converter:
    """Dataset message dicts to LangChain messages and back, remembering where each came from.

    A LangChain message converted from a dict maps back to that same dict (by identity, or by
    its id when LangChain copied it unchanged), so unchanged messages stay `keep` ranges.
    """

    def __init__(self):
        self._lc = {}  # id(dict) -> (dict, LangChain message)
        self._by_lc_id = {}  # LangChain message id -> (dict, LangChain message)
        self._count = 0

    def to_langchain(self, messages):
        out = []
        for m in messages:
            hit = self._lc.get(id(m))
            if hit is None or hit[0] is not m:
                self._count += 1
                lc = self._convert(m, "cb-%d" % self._count)
                hit = (m, lc)
                self._lc[id(m)] = hit
                self._by_lc_id[lc.id] = hit
            out.append(hit[1])
        return out

    @staticmethod
    def _convert(m, mid):
        role = m.get("role")
        content = m.get("content") or ""
        if role == "system":
            return SystemMessage(content=content, id=mid)
        if role == "assistant":
            calls = [
                {
                    "name": tc.get("name") or "",
                    "args": _args(tc.get("arguments")),
                    "id": tc.get("id"),
                    "type": "tool_call",
                }
                for tc in m.get("tool_calls") or []
            ]
            return AIMessage(content=content, tool_calls=calls, id=mid)
        if role == "tool":
            return ToolMessage(
                content=content,
                tool_call_id=m.get("tool_call_id") or "",
                name=m.get("name"),
                status="error" if m.get("is_error") else "success",
                id=mid,
            )
        kwargs = dict(SUMMARY_KWARGS) if m.get("summary") else {}
        return HumanMessage(content=content, additional_kwargs=kwargs, id=mid)

    def from_langchain(self, messages):
        """LangChain messages as dataset dicts: the original dict of an unchanged message,
        else a new dict (a new summary message is flagged `"summary": true`)."""
        out = []
        for lc in messages:
            hit = self._by_lc_id.get(lc.id)
            if hit is not None and (hit[1] is lc or hit[1] == lc):
                out.append(hit[0])
            else:
                out.append(self.to_dataset(lc))
        return out

    @staticmethod
    def to_dataset(lc):
        content = _text(lc.content)
        if isinstance(lc, SystemMessage):
            return {"role": "system", "content": content}
        if isinstance(lc, AIMessage):
            m = {"role": "assistant", "content": content}
            if lc.tool_calls:
                m["tool_calls"] = [
                    {"id": tc.get("id") or "", "name": tc["name"], "arguments": json.dumps(tc.get("args") or {})}
                    for tc in lc.tool_calls
                ]
            return m
        if isinstance(lc, ToolMessage):
            m = {"role": "tool", "content": content, "tool_call_id": lc.tool_call_id}
            if lc.name:
                m["name"] = lc.name
            if lc.status == "error":
                m["is_error"] = True
            return m
        m = {"role": "user", "content": content}
        if lc.additional_kwargs.get("lc_source") == SUMMARY_KWARGS["lc_source"]:
            m["summary"] = True
        return m


class LangchainTrim(Strategy):
    name = "langchain-trim"
    version = "1.0.0+langchain-core-%s" % langchain_core.__version__

    def begin(self, conversation, window, tokenizer):
        params = self.params
        counter = params.get("counter", "approximate")
        if counter == "approximate":
            self.token_counter = count_tokens_approximately
        elif counter == "messages":
            self.token_counter = len
            if params.get("max_tokens") is None:
                raise ValueError('counter = "messages" needs max_tokens (a number of messages)')
        else:
            raise ValueError('counter must be "approximate" or "messages", got %r' % counter)
        if params.get("max_tokens") is not None:
            self.max_tokens = int(params["max_tokens"])
        else:
            fraction = float(params.get("fraction", 0.8))
            if not 0 < fraction <= 1:
                raise ValueError("fraction must be in (0, 1], got %r" % fraction)
            self.max_tokens = int(fraction * window)
        self.converter = Converter()

    def compact(self, messages, call):
        lc = self.converter.to_langchain(messages)
        kept = trim_messages(
            lc,
            max_tokens=self.max_tokens,
            token_counter=self.token_counter,
            strategy="last",
            start_on="human",
            include_system=True,
            allow_partial=False,
        )
        return self.converter.from_langchain(kept)


if __name__ == "__main__":
    run(LangchainTrim)
