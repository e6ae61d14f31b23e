"""Write a compactlens compaction strategy in Python.

compactlens runs an external strategy as a child process and talks to it in newline-delimited
JSON over stdin and stdout (docs/external-strategies.md). This module speaks that protocol so a
strategy only has to say what the context becomes: version 2 (every request and answer carries
a call id) when the harness offers it, version 1 with a harness that offers only that. One
file, Python 3.9 or later, standard library only: copy it next to your strategy or put its
folder on `sys.path`.

Subclass `Strategy`, write `compact(self, messages, call)` and hand the class to `run`:

    from compactlens_strategy import Strategy, SummaryError, run

    class DropMiddle(Strategy):
        name = "drop-middle"
        version = "0.1.0"

        def compact(self, messages, call):
            if call.trigger == "proactive" and call.tokens < 0.8 * call.window:
                return None                       # no change
            if len(messages) <= 10:
                return None
            head, tail = messages[:2], messages[-8:]
            try:
                text = call.summarize(messages[2:-8], "Summarize the work so far.", 800)
            except SummaryError:
                return None
            # (a real strategy also keeps tool calls and their results together)
            return head + [{"role": "user", "content": text, "summary": True}] + tail

    if __name__ == "__main__":
        run(DropMiddle)

and in the experiment file:

    [[strategy]]
    name = "external"
    command = ["python3", "drop_middle.py"]
    label = "drop-middle"

`messages` is the strategy's mirror of the current context: a list of dicts in the dataset
message format (`role`, `content`, `tool_calls` as `[{"id", "name", "arguments"}]`,
`tool_call_id`, `name`, plus whatever other fields the harness sent). `compact` returns the
new context as a list of such dicts, or `None` to leave it as it is. Messages returned
unchanged, and in their original order, are sent as `keep` ranges (found by identity first,
then by equality with the message as it arrived); anything else is sent as a new message,
including a dict that was edited in place. A new message with `"summary": True` is counted by
the report as a summary. Returning the list unchanged answers `keep`.

`call` carries the request: `tokens` (its exact size), `trigger` (`"proactive"`, or
`"overflow"` when the harness asks again because the request is still over the window),
`window`, `tokenizer`, `conversation`, `params` (the experiment table's extra keys), `index`
(the 0-based model call of the conversation; a re-ask keeps the index, `attempt` counts the
re-asks) and `summarize(messages, instructions, max_tokens)`, which has the experiment's
summarizer write a summary and returns its text, or raises `SummaryError`.

Optional hooks: the class attributes `name` and `version` (sent in the handshake), `begin(self,
conversation, window, tokenizer)` before each conversation and `end(self)` after it. The
experiment's params are also on `self.params` from the handshake on.

Anything the strategy prints goes to stderr: stdout is kept for the protocol. An exception
in the strategy's code writes its traceback to stderr and ends the process with exit code 1;
compactlens reports the pair as failed with the end of stderr.
"""

import bisect
import json
import os
import sys
import traceback

__all__ = ["Call", "ProtocolError", "Strategy", "SummaryError", "run", "PROTOCOL_VERSION", "PROTOCOL_VERSIONS"]

#: The newest protocol version, spoken whenever the harness offers it.
PROTOCOL_VERSION = 2
#: Every version this module speaks.
PROTOCOL_VERSIONS = (1, 2)

# Exit codes: the strategy's own code raised; the harness broke the protocol.
EXIT_STRATEGY_ERROR = 1
EXIT_PROTOCOL_ERROR = 2


class SummaryError(Exception):
    """The harness answered a `summarize` request with an `error` (the summarizer failed)."""


class ProtocolError(Exception):
    """The harness sent something the protocol does not allow at that point."""


class Strategy:
    """Base class of a compaction strategy: override `compact`, and the hooks you need."""

    #: Sent in the handshake; defaults to the class name.
    name = None
    #: Sent in the handshake; recorded in `run.json` and the report's manifest.
    version = "0"
    #: The experiment table's extra keys, set from the handshake before the first `begin`.
    params = {}

    def begin(self, conversation, window, tokenizer):
        """Called when a conversation starts; the context is empty."""

    def compact(self, messages, call):
        """Return the new context (a list of message dicts), or None for no change."""
        raise NotImplementedError("a Strategy must define compact(self, messages, call)")

    def end(self):
        """Called when a conversation ends."""


class Call:
    """One request of the harness to decide on the context before a model call."""

    __slots__ = (
        "tokens",
        "trigger",
        "window",
        "tokenizer",
        "conversation",
        "params",
        "index",
        "attempt",
        "_loop",
        "_open",
    )

    def __init__(self, loop, tokens, trigger, index, attempt):
        self._loop = loop
        self._open = True
        self.tokens = tokens
        self.trigger = trigger
        self.window = loop.window
        self.tokenizer = loop.tokenizer
        self.conversation = loop.conversation
        self.params = loop.params
        self.index = index
        self.attempt = attempt

    def summarize(self, messages, instructions, max_tokens=1000):
        """Have the experiment's summarizer summarize `messages`; returns the text.

        `instructions` become the summarizer's system prompt; `max_tokens` caps the summary.
        Raises `SummaryError` with the harness's reason when the summarizer fails.
        """
        if not self._open:
            raise RuntimeError("call.summarize() used after this call was answered")
        return self._loop.summarize(list(messages), str(instructions), int(max_tokens))

    def __repr__(self):
        return "Call(conversation=%r, index=%d, attempt=%d, trigger=%r, tokens=%d, window=%r)" % (
            self.conversation,
            self.index,
            self.attempt,
            self.trigger,
            self.tokens,
            self.window,
        )


def _snapshot(message):
    """An independent copy of a message, as JSON would carry it."""
    return json.loads(json.dumps(message))


def _key(message):
    """A cheap key that equal messages share."""
    role, content = message.get("role"), message.get("content")
    return (role if isinstance(role, str) else None, content if isinstance(content, str) else None)


class _AuthorError(Exception):
    """Wraps an exception raised by the strategy's own code."""


class _Loop:
    """The protocol loop: one process, one strategy, conversations one after another."""

    def __init__(self, strategy, reader, writer):
        self.strategy = strategy
        self.reader = reader
        self.writer = writer
        self.params = {}
        self.summary_count = 0
        # The protocol version agreed in the handshake, and (version 2) the call id of the
        # request being answered: every message this side writes carries it.
        self.protocol = 1
        self.call_id = None
        self._reset(None, None, None)

    def _reset(self, conversation, window, tokenizer):
        self.conversation = conversation
        self.window = window
        self.tokenizer = tokenizer
        # What the strategy sees (its `messages`) and a snapshot of each message as the
        # harness holds it, to notice messages the strategy edited in place.
        self.context = []
        self.originals = []
        self.calls = 0
        self.attempt = 0

    # -- I/O ---------------------------------------------------------------------------------

    def send(self, obj):
        if self.protocol >= 2:
            obj = dict(obj, call_id=self.call_id)
        line = json.dumps(obj, ensure_ascii=False, separators=(",", ":")) + "\n"
        self.writer.write(line.encode("utf-8"))
        self.writer.flush()

    def receive(self):
        """The next message of the harness, or None at the end of input."""
        while True:
            raw = self.reader.readline()
            if not raw:
                return None
            if not raw.strip():
                continue
            try:
                obj = json.loads(raw)
            except ValueError as e:
                raise ProtocolError("a line that is not JSON: %s" % e) from None
            if not isinstance(obj, dict) or not isinstance(obj.get("type"), str):
                raise ProtocolError("a line that is not a message (no `type`): %.200r" % raw)
            return obj

    # -- the loop ----------------------------------------------------------------------------

    def serve(self):
        first = self.receive()
        if first is None:
            return
        if first["type"] != "init":
            raise ProtocolError("expected `init` first, got `%s`" % first["type"])
        # `protocols` lists the versions the harness speaks; a harness of version 1 only sends
        # `protocol`.
        offered = first.get("protocols")
        if not isinstance(offered, list):
            offered = [first.get("protocol")]
        common = [v for v in PROTOCOL_VERSIONS if v in offered]
        if not common:
            raise ProtocolError(
                "protocol %s is not supported (this SDK speaks %s)"
                % (" or ".join(map(repr, offered)), " and ".join(map(str, PROTOCOL_VERSIONS)))
            )
        self.protocol = max(common)
        self.take_call_id(first)
        params = first.get("params")
        self.params = params if isinstance(params, dict) else {}
        strategy = self.strategy
        try:
            strategy.params = self.params
        except AttributeError:
            pass
        name = getattr(strategy, "name", None) or type(strategy).__name__
        version = getattr(strategy, "version", None)
        ready = {"type": "ready", "name": str(name), "version": str(version or "0")}
        if self.protocol >= 2:
            ready["protocol"] = self.protocol
        self.send(ready)

        in_conversation = False
        while True:
            msg = self.receive()
            if msg is None:
                return
            kind = msg["type"]
            if kind == "begin":
                self.take_call_id(msg)
                if in_conversation:
                    self._author(strategy.end)
                self._reset(msg.get("conversation"), msg.get("window"), msg.get("tokenizer"))
                in_conversation = True
                self._author(strategy.begin, self.conversation, self.window, self.tokenizer)
                if self.protocol >= 2:
                    self.send({"type": "ok"})
            elif kind == "end":
                self.take_call_id(msg)
                if in_conversation:
                    self._author(strategy.end)
                in_conversation = False
                self._reset(None, None, None)
                if self.protocol >= 2:
                    self.send({"type": "ok"})
            elif kind == "call":
                if not in_conversation:
                    raise ProtocolError("`call` outside a conversation (no `begin`)")
                self.take_call_id(msg)
                self.on_call(msg)
            elif kind == "summary":
                raise ProtocolError("`summary` %r when no summary was asked for" % msg.get("id"))
            elif kind == "init":
                raise ProtocolError("a second `init`")
            else:
                sys.stderr.write("compactlens_strategy: ignoring a `%s` message\n" % kind)
                sys.stderr.flush()

    def take_call_id(self, msg):
        """Version 2: the request's call id, which the answer will carry."""
        if self.protocol < 2:
            return
        call_id = msg.get("call_id")
        if not isinstance(call_id, str) or not call_id:
            raise ProtocolError("`%s` with no `call_id` (protocol 2)" % msg["type"])
        self.call_id = call_id

    def _author(self, fn, *args):
        try:
            return fn(*args)
        except (ProtocolError, _AuthorError):
            raise
        except BaseException as e:
            if isinstance(e, (KeyboardInterrupt, SystemExit)):
                raise
            raise _AuthorError() from e

    def on_call(self, msg):
        append = msg.get("append") or []
        if not isinstance(append, list):
            raise ProtocolError("`append` is not a list")
        trigger = msg.get("trigger", "proactive")
        if trigger == "overflow" and not append and self.calls > 0:
            self.attempt += 1  # the harness asks again about the same model call
        else:
            self.calls += 1
            self.attempt = 0
        for m in append:
            if not isinstance(m, dict):
                raise ProtocolError("`append` holds a %s, not a message" % type(m).__name__)
            self.context.append(m)
            self.originals.append(_snapshot(m))
        call = Call(self, int(msg.get("tokens") or 0), trigger, self.calls - 1, self.attempt)
        try:
            result = self._author(self.strategy.compact, list(self.context), call)
        finally:
            call._open = False
        if result is None:
            self.send({"type": "keep"})
            return
        try:
            result = list(result)
        except TypeError:
            raise _AuthorError() from TypeError(
                "compact() must return a list of messages or None, not %s" % type(result).__name__
            )
        items, new_context, new_originals = self.diff(result)
        if len(items) == 1 and "keep" in items[0] and items[0]["keep"] == [0, len(self.context)]:
            self.send({"type": "keep"})
        elif not items and not self.context:
            self.send({"type": "keep"})
        else:
            self.send({"type": "compact", "context": items})
        self.context = new_context
        self.originals = new_originals

    def diff(self, result):
        """The `compact` items for `result`, and the mirror after it.

        A returned message is an unchanged message of the current context when it is the same
        object as one (and still equal to it as it arrived), or else equal to one; the match
        must lie after the previous match (never reorder). Consecutive matches become one
        `keep` range; everything else is sent as a new message.
        """
        originals = self.originals
        position = {}
        for k, m in enumerate(self.context):
            position.setdefault(id(m), k)  # an object held twice: its first place
        by_key = None  # (role, content) -> positions, built when an equality search is needed
        items = []
        new_context = []
        new_originals = []
        cursor = 0  # the next position a match may take
        run_start = None  # start of the keep range being built; it ends at `cursor`
        for r in result:
            if not isinstance(r, dict):
                raise _AuthorError() from TypeError(
                    "compact() returned a %s where a message dict was expected" % type(r).__name__
                )
            k = position.get(id(r))
            if k is None or k < cursor or r != originals[k]:
                k = None
                if by_key is None:
                    by_key = {}
                    for j, m in enumerate(originals):
                        by_key.setdefault(_key(m), []).append(j)
                candidates = by_key.get(_key(r), ())
                for j in candidates[bisect.bisect_left(candidates, cursor) :]:
                    if r == originals[j]:
                        k = j
                        break
            if k is not None:
                if run_start is not None and k != cursor:
                    items.append({"keep": [run_start, cursor]})
                    run_start = None
                if run_start is None:
                    run_start = k
                cursor = k + 1
                new_context.append(r)
                new_originals.append(originals[k])
            else:
                if run_start is not None:
                    items.append({"keep": [run_start, cursor]})
                    run_start = None
                try:
                    snapshot = _snapshot(r)
                except (TypeError, ValueError) as e:
                    raise _AuthorError() from TypeError("compact() returned a message that is not JSON: %s" % e)
                items.append({"message": snapshot})
                new_context.append(r)
                new_originals.append(snapshot)
        if run_start is not None:
            items.append({"keep": [run_start, cursor]})
        return items, new_context, new_originals

    def summarize(self, messages, instructions, max_tokens):
        self.summary_count += 1
        sid = "s%d" % self.summary_count
        self.send(
            {
                "type": "summarize",
                "id": sid,
                "messages": messages,
                "instructions": instructions,
                "max_tokens": max_tokens,
            }
        )
        answer = self.receive()
        if answer is None:
            raise ProtocolError("input ended while waiting for summary %s" % sid)
        if answer["type"] != "summary":
            raise ProtocolError("expected `summary` %s, got `%s`" % (sid, answer["type"]))
        if answer.get("id") != sid:
            raise ProtocolError("expected `summary` %s, got id %r" % (sid, answer.get("id")))
        if self.protocol >= 2 and answer.get("call_id") != self.call_id:
            raise ProtocolError(
                "expected `summary` %s of call id %r, got call id %r" % (sid, self.call_id, answer.get("call_id"))
            )
        if answer.get("error") is not None:
            raise SummaryError(str(answer["error"]))
        text = answer.get("text")
        if not isinstance(text, str):
            raise ProtocolError("`summary` %s has neither `text` nor `error`" % sid)
        return text


def _protocol_streams():
    """Binary streams for the protocol; afterwards fd 1 and sys.stdout write to stderr.

    A stray print() (or a library writing to stdout) would otherwise corrupt the protocol.
    """
    sys.stdout.flush()
    try:
        out = os.fdopen(os.dup(sys.stdout.fileno()), "wb")
        os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    except (AttributeError, OSError, ValueError):
        out = sys.stdout.buffer
    sys.stdout = sys.stderr
    return sys.stdin.buffer, out


def run(strategy):
    """Serve the protocol on stdin/stdout with `strategy` (an instance or a class), then exit.

    Exits 0 when the harness closes stdin, 1 when the strategy's code raised (the traceback is
    on stderr), 2 when the harness broke the protocol.
    """
    try:
        if isinstance(strategy, type):
            strategy = strategy()
        reader, writer = _protocol_streams()
        _Loop(strategy, reader, writer).serve()
    except _AuthorError as e:
        cause = e.__cause__ or e
        traceback.print_exception(type(cause), cause, cause.__traceback__, file=sys.stderr)
        sys.stderr.flush()
        sys.exit(EXIT_STRATEGY_ERROR)
    except ProtocolError as e:
        sys.stderr.write("compactlens_strategy: protocol error: %s\n" % e)
        sys.stderr.flush()
        sys.exit(EXIT_PROTOCOL_ERROR)
    except BrokenPipeError:
        sys.exit(EXIT_PROTOCOL_ERROR)
    except Exception:
        traceback.print_exc(file=sys.stderr)
        sys.stderr.flush()
        sys.exit(EXIT_STRATEGY_ERROR)
    sys.exit(0)
