"""Tests of the Python SDK and the example strategies, through a fake harness.

The fake harness starts a strategy script as a child process (with this interpreter) and
speaks the protocol to it over pipes, as compactlens does (docs/external-strategies.md):
version 2, with a call id on every request and answer, unless a test asks for version 1.

    python -m pytest sdk/python/tests
"""

import glob
import json
import os
import queue
import subprocess
import sys
import tempfile
import textwrap
import threading

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
SDK = os.path.dirname(HERE)
ROOT = os.path.dirname(os.path.dirname(SDK))
EXAMPLES = os.path.join(ROOT, "examples", "strategies")
SYNTHETIC = os.path.join(ROOT, "datasets", "synthetic")

TIMEOUT = 30


# -- the fake harness ----------------------------------------------------------------------------


class FakeHarness:
    """One strategy process and the harness's side of the protocol."""

    def __init__(self, command, cwd=None, env=None, protocol=2):
        # The versions offered in `init`: [1, 2], or [1] as a harness of version 1 would.
        self.offered = [1, 2] if protocol >= 2 else [1]
        self.protocol = 1
        self.requests = 0
        self.call_id = None
        self.stderr_file = tempfile.TemporaryFile()
        self.proc = subprocess.Popen(
            command,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.stderr_file,
            cwd=cwd,
            env=env,
        )
        self.lines = queue.Queue()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()
        self.context = []

    def _read(self):
        for raw in self.proc.stdout:
            self.lines.put(raw)
        self.lines.put(None)

    def send(self, obj):
        self.proc.stdin.write((json.dumps(obj) + "\n").encode("utf-8"))
        self.proc.stdin.flush()

    def request(self, obj):
        """Send a request; in version 2 with a new call id, which every answer must carry."""
        if self.protocol >= 2:
            self.requests += 1
            self.call_id = "%d-test" % self.requests
            obj = dict(obj, call_id=self.call_id)
        self.send(obj)

    def answer(self):
        """The next message of the answer to the request sent last, without its call id
        (checked in version 2)."""
        message = self.receive()
        if self.protocol >= 2:
            assert message.get("call_id") == self.call_id, (message, self.call_id)
            del message["call_id"]
        return message

    def receive(self, timeout=TIMEOUT):
        try:
            raw = self.lines.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError("no answer within %ss; stderr:\n%s" % (timeout, self.stderr())) from None
        if raw is None:
            raise AssertionError("the strategy closed stdout; stderr:\n%s" % self.stderr())
        assert raw.endswith(b"\n"), raw
        return json.loads(raw)

    def stderr(self):
        self.stderr_file.seek(0)
        return self.stderr_file.read().decode("utf-8", "replace")

    def close(self, timeout=TIMEOUT):
        """Close stdin and wait; returns (exit code, stderr)."""
        try:
            self.proc.stdin.close()
        except BrokenPipeError:
            pass
        code = self.proc.wait(timeout=timeout)
        return code, self.stderr()

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    # The protocol, as the harness drives it.

    def init(self, params=None):
        """The handshake; returns `ready` without the version-2 fields (checked here)."""
        self.call_id = "0-init"
        self.send(
            {"type": "init", "protocol": 1, "protocols": self.offered, "call_id": self.call_id, "params": params or {}}
        )
        ready = self.receive()
        assert ready["type"] == "ready", ready
        self.protocol = ready.pop("protocol", 1)
        assert self.protocol == max(self.offered), (ready, self.offered)
        if self.protocol >= 2:
            assert ready.pop("call_id") == self.call_id, ready
        else:
            assert "call_id" not in ready, ready
        return ready

    def begin(self, conversation="c1", window=32000, tokenizer="o200k_base"):
        self.context = []
        self.request({"type": "begin", "conversation": conversation, "window": window, "tokenizer": tokenizer})
        if self.protocol >= 2:
            assert self.answer() == {"type": "ok"}

    def end(self):
        self.request({"type": "end"})
        if self.protocol >= 2:
            assert self.answer() == {"type": "ok"}

    def summary(self, request, **answer):
        """Answer a `summarize` request (`text=` or `error=`)."""
        reply = dict({"type": "summary", "id": request["id"]}, **answer)
        if self.protocol >= 2:
            reply["call_id"] = self.call_id
        self.send(reply)

    def call(self, append, tokens=100, trigger="proactive", summaries=None):
        """Send a call and return its answer; `summaries(request)` answers summarize requests
        (a string is the text, an exception instance the error). Applies a compact answer to
        the harness's context and returns (answer, summarize requests seen)."""
        self.context.extend(append)
        self.request({"type": "call", "append": append, "tokens": tokens, "trigger": trigger})
        seen = []
        while True:
            answer = self.answer()
            if answer["type"] != "summarize":
                break
            seen.append(answer)
            assert summaries is not None, "unexpected summarize request %r" % answer
            result = summaries(answer)
            if isinstance(result, Exception):
                self.summary(answer, error=str(result))
            else:
                self.summary(answer, text=result)
        assert answer["type"] in ("keep", "compact"), answer
        if answer["type"] == "compact":
            self.context = apply_compact(self.context, answer["context"])
        return answer, seen


def apply_compact(context, items):
    """The new context of a `compact` answer, checking its ranges as the harness does."""
    new = []
    for item in items:
        if "keep" in item:
            i, j = item["keep"]
            assert 0 <= i < j <= len(context), (item, len(context))
            new.extend(context[i:j])
        else:
            assert isinstance(item["message"], dict), item
            new.append(item["message"])
    return new


def problems(context):
    """What a provider would refuse in `context`: orphaned results, unanswered calls (except
    calls in flight at the end), results not right after their call's message, and a first
    message after the system prompt that is not the user's."""
    out = []
    unanswered = {}  # id -> positions
    open_calls = []  # (position, id) not yet answered
    last_assistant = max((k for k, m in enumerate(context) if m.get("role") == "assistant"), default=-1)
    for k, m in enumerate(context):
        role = m.get("role")
        if role == "assistant":
            for tc in m.get("tool_calls") or []:
                unanswered.setdefault(tc["id"], []).append(k)
                open_calls.append((k, tc["id"]))
        elif role == "tool":
            pending = unanswered.get(m.get("tool_call_id"))
            if not pending:
                out.append(("orphan_tool_result", k))
                continue
            call = pending.pop()
            open_calls.remove((call, m.get("tool_call_id")))
            if any(context[j].get("role") != "tool" for j in range(call + 1, k)):
                out.append(("misplaced_tool_result", k))
        if role != "tool" and role != "assistant":
            for call, _ in open_calls:
                out.append(("unanswered_tool_call", call))
            open_calls = []
    for call, _ in open_calls:
        if call != last_assistant:
            out.append(("unanswered_tool_call", call))
    body = [m for m in context if m.get("role") != "system"]
    if body and body[0].get("role") != "user":
        out.append(("first_not_user", 0))
    return out


def approx_tokens(context):
    return sum(len(json.dumps(m)) for m in context) // 4


def replay(harness, conversation, window, summaries=None):
    """Replay a recorded conversation: a call before each assistant message, with the
    messages added since the previous call and a chars/4 token count. Returns the contexts
    right after each compaction."""
    messages = conversation["messages"]
    harness.begin(conversation["id"], window)
    last = 0
    compacted = []
    for i, m in enumerate(messages):
        if m["role"] != "assistant" or i == 0:
            continue
        append = messages[last:i]
        last = i
        tokens = approx_tokens(harness.context + append)
        answer, _ = harness.call(append, tokens=tokens, summaries=summaries)
        attempts = 0
        while approx_tokens(harness.context) > window and attempts < 3:
            attempts += 1
            tokens = approx_tokens(harness.context)
            again, _ = harness.call([], tokens=tokens, trigger="overflow", summaries=summaries)
            if again["type"] == "compact":
                compacted.append(list(harness.context))
        if answer["type"] == "compact":
            compacted.append(list(harness.context))
    harness.end()
    return compacted


def load_synthetic(limit=None):
    conversations = []
    for path in sorted(glob.glob(os.path.join(SYNTHETIC, "*.jsonl"))):
        with open(path, encoding="utf-8") as f:
            for line in f:
                if line.strip():
                    conversations.append(json.loads(line))
    return conversations[:limit] if limit else conversations


# -- strategies written for the tests ------------------------------------------------------------


@pytest.fixture
def strategy(tmp_path):
    """Write a strategy script (the body defines `Test`) and start it under a fake harness."""
    started = []

    def start(body, cls="Test", protocol=2):
        script = tmp_path / ("strategy_%d.py" % len(started))
        script.write_text(
            "import sys, json\n"
            "sys.path.insert(0, %r)\n"
            "from compactlens_strategy import Strategy, SummaryError, run\n\n"
            % SDK
            + textwrap.dedent(body)
            + "\n\nif __name__ == '__main__':\n    run(%s)\n" % cls
        )
        h = FakeHarness([sys.executable, str(script)], protocol=protocol)
        started.append(h)
        return h

    yield start
    for h in started:
        h.kill()


def example(name):
    h = FakeHarness([sys.executable, os.path.join(EXAMPLES, name)])
    return h


def msg(role, content="", **extra):
    m = {"role": role, "content": content}
    m.update(extra)
    return m


def call_msg(content, *ids):
    calls = [{"id": i, "name": "bash", "arguments": '{"command":"ls"}'} for i in ids]
    return msg("assistant", content, tool_calls=calls)


def result(cid, content="ok"):
    return msg("tool", content, tool_call_id=cid, name="bash")


SYS = msg("system", "You are an agent.")
FIRST = [SYS, msg("user", "task one"), msg("assistant", "a1"), msg("user", "u2")]


# -- the SDK -------------------------------------------------------------------------------------


def test_handshake_sends_name_and_version_and_params_reach_the_strategy(strategy):
    h = strategy(
        """
        class Test(Strategy):
            name = "mine"
            version = "1.4.0"
            def compact(self, messages, call):
                text = json.dumps([self.params, call.params])
                return messages + [{"role": "user", "content": text}]
        """
    )
    assert h.init({"keep": 12}) == {"type": "ready", "name": "mine", "version": "1.4.0"}
    h.begin()
    answer, _ = h.call(FIRST[:2])
    assert answer["context"][0] == {"keep": [0, 2]}
    assert json.loads(answer["context"][1]["message"]["content"]) == [{"keep": 12}, {"keep": 12}]
    assert h.close() == (0, "")


def test_handshake_defaults_to_the_class_name(strategy):
    h = strategy(
        """
        class Plain(Strategy):
            def compact(self, messages, call):
                return None
        """,
        cls="Plain",
    )
    assert h.init() == {"type": "ready", "name": "Plain", "version": "0"}
    assert h.close()[0] == 0


def test_none_and_an_unchanged_list_and_copies_answer_keep(strategy):
    h = strategy(
        """
        class Test(Strategy):
            def compact(self, messages, call):
                mode = call.params["modes"][call.index]
                if mode == "none":
                    return None
                if mode == "same":
                    return messages
                if mode == "copies":
                    return [dict(m) for m in messages]
                return json.loads(json.dumps(messages))
        """
    )
    h.init({"modes": ["none", "same", "copies", "roundtrip"]})
    h.begin()
    assert h.call(FIRST[:2])[0] == {"type": "keep"}
    assert h.call(FIRST[2:3])[0] == {"type": "keep"}
    assert h.call(FIRST[3:])[0] == {"type": "keep"}
    assert h.call([msg("assistant", "a3")])[0] == {"type": "keep"}
    assert h.close()[0] == 0


def test_compact_sends_keep_ranges_and_a_summary_message(strategy):
    h = strategy(
        """
        class Test(Strategy):
            def compact(self, messages, call):
                if call.tokens < 1000:
                    return None
                summary = {"role": "user", "content": "Summary: one", "summary": True}
                return messages[:1] + [summary] + messages[4:]
        """
    )
    h.init()
    h.begin()
    assert h.call(FIRST, tokens=10)[0] == {"type": "keep"}
    convo = [call_msg("", "c1"), result("c1"), msg("assistant", "done")]
    answer, _ = h.call(convo, tokens=5000)
    assert answer == {
        "type": "compact",
        "context": [
            {"keep": [0, 1]},
            {"message": {"role": "user", "content": "Summary: one", "summary": True}},
            {"keep": [4, 7]},
        ],
    }
    assert h.context == [SYS, msg("user", "Summary: one", summary=True)] + convo
    assert h.close()[0] == 0


def test_matching_never_reorders_and_sees_edits_in_place(strategy):
    h = strategy(
        """
        class Test(Strategy):
            def compact(self, messages, call):
                mode = call.params["modes"][call.index]
                if mode == "gap":
                    return [messages[0], messages[2], messages[3]]
                if mode == "swap":
                    return [messages[0], messages[2], messages[1]]
                if mode == "edit":
                    messages[1]["content"] = "edited"
                    return messages
                if mode == "duplicate":
                    return messages + [messages[-1]]
        """
    )
    h.init({"modes": ["gap", "swap", "edit", "duplicate", "duplicate"]})
    h.begin()
    answer, _ = h.call(FIRST)
    assert answer["context"] == [{"keep": [0, 1]}, {"keep": [2, 4]}]
    # context: SYS, a1, u2 (+ u3 appended)
    answer, _ = h.call([msg("user", "u3")])
    assert answer["context"] == [{"keep": [0, 1]}, {"keep": [2, 3]}, {"message": msg("assistant", "a1")}]
    # context: SYS, u2, a1 (+ a4)
    answer, _ = h.call([msg("assistant", "a4")])
    assert answer["context"] == [{"keep": [0, 1]}, {"message": msg("user", "edited")}, {"keep": [2, 4]}]
    answer, _ = h.call([msg("user", "u5")])
    assert answer["context"] == [{"keep": [0, 5]}, {"message": msg("user", "u5")}]
    assert h.context[-2:] == [msg("user", "u5"), msg("user", "u5")]
    # the mirror now holds one object twice; returned as it is, both places are kept
    answer, _ = h.call([msg("assistant", "a6")])
    assert answer["context"] == [{"keep": [0, 7]}, {"message": msg("assistant", "a6")}]
    assert h.close()[0] == 0


def test_unknown_fields_are_kept_and_an_equal_rebuilt_message_is_a_keep(strategy):
    h = strategy(
        """
        class Test(Strategy):
            def compact(self, messages, call):
                # rebuild the dicts without the extra field: no longer equal, so sent anew
                return [messages[0]] + [{"role": m["role"], "content": m["content"]} for m in messages[1:]]
        """
    )
    h.init()
    h.begin()
    answer, _ = h.call([SYS, msg("user", "hi", meta={"x": 1}), msg("assistant", "yo")])
    assert answer["context"] == [{"keep": [0, 1]}, {"message": msg("user", "hi")}, {"keep": [2, 3]}]
    assert h.close()[0] == 0


def test_summarize_round_trip_text_and_error(strategy):
    h = strategy(
        """
        class Test(Strategy):
            def compact(self, messages, call):
                out = []
                for n in range(2):
                    try:
                        text = call.summarize(messages[1:], "Summarize it.", 800)
                    except SummaryError as e:
                        text = "error: %s" % e
                    out.append({"role": "user", "content": text, "summary": True})
                return messages[:1] + out
        """
    )
    h.init()
    h.begin()
    answers = iter(["the summary", RuntimeError("the model returned an empty summary")])
    answer, seen = h.call(FIRST, summaries=lambda request: next(answers))
    assert [s["id"] for s in seen] == ["s1", "s2"]
    assert seen[0] == {
        "type": "summarize",
        "id": "s1",
        "messages": FIRST[1:],
        "instructions": "Summarize it.",
        "max_tokens": 800,
    }
    assert answer["context"] == [
        {"keep": [0, 1]},
        {"message": msg("user", "the summary", summary=True)},
        {"message": msg("user", "error: the model returned an empty summary", summary=True)},
    ]
    # ids stay unique across calls and conversations
    h.end()
    h.begin("c2")
    answer, seen = h.call(FIRST, summaries=lambda request: "again")
    assert [s["id"] for s in seen] == ["s3", "s4"]
    assert h.close()[0] == 0


SUMMARIZING = """
class Test(Strategy):
    def compact(self, messages, call):
        return messages[:1] + [{"role": "user", "content": call.summarize(messages[1:], "Sum.", 80), "summary": True}]
"""


def test_every_answer_carries_the_call_id_of_its_request(strategy):
    h = strategy(SUMMARIZING)
    assert h.init() == {"type": "ready", "name": "Test", "version": "0"}
    assert h.protocol == 2
    h.begin()  # answered `ok` with begin's call id
    # h.answer() checks the call id of the `summarize` request and of the `compact` answer
    answer, seen = h.call(FIRST, summaries=lambda request: "so far")
    assert len(seen) == 1 and answer["type"] == "compact"
    h.end()  # answered `ok` with end's call id
    assert h.close()[0] == 0


def test_a_summary_of_another_call_is_a_protocol_error(strategy):
    h = strategy(SUMMARIZING)
    h.init()
    h.begin()
    h.request({"type": "call", "append": FIRST, "tokens": 10, "trigger": "proactive"})
    request = h.answer()
    h.send({"type": "summary", "id": request["id"], "text": "late", "call_id": "1-test"})
    code, err = h.close()
    assert code == 2 and "expected `summary` s1 of call id '2-test', got call id '1-test'" in err


def test_a_harness_of_version_1_is_answered_in_version_1(strategy):
    h = strategy(SUMMARIZING, protocol=1)
    ready = h.init()  # checks: no `protocol`, no `call_id`
    assert ready == {"type": "ready", "name": "Test", "version": "0"} and h.protocol == 1
    h.begin()
    h.request({"type": "call", "append": FIRST, "tokens": 10, "trigger": "proactive"})
    request = h.receive()
    assert request["type"] == "summarize" and "call_id" not in request
    h.summary(request, text="so far")
    answer = h.receive()
    assert answer["type"] == "compact" and "call_id" not in answer
    h.end()  # no answer in version 1
    assert h.close()[0] == 0


def test_multiple_conversations_in_one_process(strategy):
    h = strategy(
        """
        class Test(Strategy):
            def __init__(self):
                self.log = []
            def begin(self, conversation, window, tokenizer):
                self.log.append("begin %s %s %s" % (conversation, window, tokenizer))
            def end(self):
                self.log.append("end")
            def compact(self, messages, call):
                note = {"conversation": call.conversation, "window": call.window,
                        "tokenizer": call.tokenizer, "index": call.index,
                        "seen": [m["content"] for m in messages], "log": self.log}
                return messages + [{"role": "user", "content": json.dumps(note)}]
        """
    )
    h.init()
    h.begin("a", 16000, "cl100k_base")
    answer, _ = h.call(FIRST[:2])
    note = json.loads(answer["context"][-1]["message"]["content"])
    assert note == {
        "conversation": "a",
        "window": 16000,
        "tokenizer": "cl100k_base",
        "index": 0,
        "seen": ["You are an agent.", "task one"],
        "log": ["begin a 16000 cl100k_base"],
    }
    answer, _ = h.call(FIRST[2:3])
    note = json.loads(answer["context"][-1]["message"]["content"])
    assert note["index"] == 1 and len(note["seen"]) == 4
    h.end()
    h.begin("b", 32000, "o200k_base")
    answer, _ = h.call(FIRST[:2])
    note = json.loads(answer["context"][-1]["message"]["content"])
    assert note["conversation"] == "b" and note["index"] == 0
    assert note["seen"] == ["You are an agent.", "task one"]  # the mirror starts empty
    assert note["log"] == ["begin a 16000 cl100k_base", "end", "begin b 32000 o200k_base"]
    assert h.close()[0] == 0


def test_the_mirror_continues_from_the_compacted_context(strategy):
    h = strategy(
        """
        class Test(Strategy):
            def compact(self, messages, call):
                if call.index == 0:
                    return [messages[0], {"role": "user", "content": "S", "summary": True}, messages[3]]
                report = {"seen": [m["content"] for m in messages], "index": call.index,
                          "attempt": call.attempt, "trigger": call.trigger,
                          "summary": [m.get("summary", False) for m in messages]}
                if call.trigger == "overflow":
                    return None
                return messages + [{"role": "user", "content": json.dumps(report)}]
        """
    )
    h.init()
    h.begin()
    answer, _ = h.call(FIRST)
    assert answer["context"] == [{"keep": [0, 1]}, {"message": msg("user", "S", summary=True)}, {"keep": [3, 4]}]
    answer, _ = h.call([msg("assistant", "a5")])
    # the second call's ranges index the compacted context: SYS, S, u2, a5
    assert answer["context"][0] == {"keep": [0, 4]}
    report = json.loads(answer["context"][1]["message"]["content"])
    assert report["seen"] == ["You are an agent.", "S", "u2", "a5"]
    assert report["summary"] == [False, True, False, False]
    assert (report["index"], report["attempt"], report["trigger"]) == (1, 0, "proactive")
    added = answer["context"][1]["message"]["content"]
    # an overflow re-ask keeps the call's index and counts the attempt
    assert h.call([], trigger="overflow")[0] == {"type": "keep"}
    answer, _ = h.call([msg("assistant", "a6")])
    report = json.loads(answer["context"][-1]["message"]["content"])
    assert (report["index"], report["attempt"]) == (2, 0)
    # the mirror holds the message the previous answer added
    assert report["seen"] == ["You are an agent.", "S", "u2", "a5", added, "a6"]
    assert h.context[:4] == [SYS, msg("user", "S", summary=True), msg("user", "u2"), msg("assistant", "a5")]
    assert h.close()[0] == 0


def test_an_exception_in_compact_exits_non_zero_with_a_traceback(strategy):
    h = strategy(
        """
        class Test(Strategy):
            def compact(self, messages, call):
                raise ValueError("boom at call %d" % call.index)
        """
    )
    h.init()
    h.begin()
    h.request({"type": "call", "append": FIRST, "tokens": 10, "trigger": "proactive"})
    code, err = h.close()
    assert code != 0
    assert "Traceback (most recent call last)" in err
    assert "ValueError: boom at call 0" in err
    assert "in compact" in err


def test_an_exception_in_begin_or_a_bad_return_exits_non_zero(strategy):
    h = strategy(
        """
        class Test(Strategy):
            def begin(self, conversation, window, tokenizer):
                raise KeyError("no such param")
            def compact(self, messages, call):
                return None
        """
    )
    h.init()
    h.request({"type": "begin", "conversation": "c1", "window": 1000, "tokenizer": "o200k_base"})
    code, err = h.close()
    assert code != 0 and "KeyError: 'no such param'" in err

    h = strategy(
        """
        class Test(Strategy):
            def compact(self, messages, call):
                return 42
        """
    )
    h.init()
    h.begin()
    h.request({"type": "call", "append": FIRST, "tokens": 10, "trigger": "proactive"})
    code, err = h.close()
    assert code != 0 and "must return a list of messages or None" in err


def test_an_unanswered_summary_error_fails_the_pair(strategy):
    h = strategy(
        """
        class Test(Strategy):
            def compact(self, messages, call):
                call.summarize(messages, "Summarize.", 100)
        """
    )
    h.init()
    h.begin()
    h.request({"type": "call", "append": FIRST, "tokens": 10, "trigger": "proactive"})
    request = h.answer()
    assert request["type"] == "summarize"
    h.summary(request, error="no model")
    code, err = h.close()
    assert code != 0 and "SummaryError: no model" in err


def test_print_goes_to_stderr_not_into_the_protocol(strategy):
    h = strategy(
        """
        import os
        class Test(Strategy):
            def compact(self, messages, call):
                print("hello from print")
                os.write(1, b"raw write to fd 1\\n")
                return None
        """
    )
    h.init()
    h.begin()
    assert h.call(FIRST)[0] == {"type": "keep"}
    code, err = h.close()
    assert code == 0
    assert "hello from print" in err and "raw write to fd 1" in err


def test_the_harness_breaking_the_protocol_exits_2(strategy):
    h = strategy(
        """
        class Test(Strategy):
            def compact(self, messages, call):
                return None
        """
    )
    h.init()
    h.request({"type": "call", "append": FIRST, "tokens": 10, "trigger": "proactive"})
    code, err = h.close()
    assert code == 2 and "outside a conversation" in err

    h = strategy("class Test(Strategy):\n    pass\n")
    h.send({"type": "init", "protocol": 3, "params": {}})
    code, err = h.close()
    assert code == 2 and "protocol 3 is not supported (this SDK speaks 1 and 2)" in err

    h = strategy("class Test(Strategy):\n    pass\n")
    h.send({"type": "init", "protocol": 1, "protocols": [1, 2], "call_id": "0-init", "params": {}})
    assert h.receive()["protocol"] == 2
    h.send({"type": "begin", "conversation": "c1", "window": 1000, "tokenizer": "o200k_base"})
    code, err = h.close()
    assert code == 2 and "`begin` with no `call_id` (protocol 2)" in err


# -- examples/strategies/keep_last_n.py ----------------------------------------------------------

TOOLS = [
    SYS,
    msg("user", "fix the bug"),
    call_msg("look", "a"),
    result("a", "file list"),
    call_msg("read both", "b1", "b2"),
    result("b1", "one"),
    result("b2", "two"),
    msg("assistant", "found it"),
    msg("user", "go on"),
]


def test_keep_last_n_keeps_below_the_threshold():
    h = example("keep_last_n.py")
    try:
        assert h.init({"keep": 3}) == {"type": "ready", "name": "py-keep-last-n", "version": "1.0.0"}
        h.begin(window=1000)
        assert h.call(TOOLS, tokens=800)[0] == {"type": "keep"}  # at 80%: not past it
        assert h.close()[0] == 0
    finally:
        h.kill()


def test_keep_last_n_moves_the_cut_to_keep_tool_pairs():
    h = example("keep_last_n.py")
    try:
        h.init({"keep": 3})
        h.begin(window=1000)
        answer, _ = h.call(TOOLS, tokens=801)
        # the last 3 start at result b2; the cut moves back to its call (index 4), and as the
        # kept part starts with an assistant message a user notice goes first
        assert answer["context"] == [
            {"keep": [0, 1]},
            {"message": msg("user", "[3 earlier messages were removed to fit the context window.]")},
            {"keep": [4, 9]},
        ]
        assert problems(h.context) == []
        assert h.close()[0] == 0
    finally:
        h.kill()


def test_keep_last_n_compacts_on_overflow_and_keeps_calls_in_flight():
    h = example("keep_last_n.py")
    try:
        h.init({"keep": 2, "notice": False})
        h.begin(window=100000)
        convo = TOOLS + [call_msg("again", "c1", "c2"), result("c1")]
        answer, _ = h.call(convo, tokens=10, trigger="overflow")
        # the last 2 are the call c1/c2 and c1's result (c2 still in flight): kept as they are
        assert answer["context"] == [{"keep": [0, 1]}, {"keep": [9, 11]}]
        assert h.close()[0] == 0
    finally:
        h.kill()


def test_keep_last_n_summarizes_what_it_drops():
    h = example("keep_last_n.py")
    try:
        h.init({"keep": 3, "summarize": True, "summary_max_tokens": 500})
        h.begin(window=1000)
        answer, seen = h.call(TOOLS, tokens=900, summaries=lambda r: "S1")
        assert len(seen) == 1 and seen[0]["messages"] == TOOLS[1:4] and seen[0]["max_tokens"] == 500
        summary = msg("user", "Summary of the earlier conversation:\n\nS1", summary=True)
        assert answer["context"] == [{"keep": [0, 1]}, {"message": summary}, {"keep": [4, 9]}]
        # the next compaction summarizes the earlier summary with the rest
        more = [msg("assistant", "a%d" % i) if i % 2 else msg("user", "u%d" % i) for i in range(6)]
        answer, seen = h.call(more, tokens=900, summaries=lambda r: "S2")
        assert seen[0]["messages"][0] == summary
        assert answer["context"][1]["message"]["content"].endswith("S2")
        assert problems(h.context) == []
        assert h.close()[0] == 0
    finally:
        h.kill()


def test_keep_last_n_drops_without_a_summary_when_the_summarizer_fails():
    h = example("keep_last_n.py")
    try:
        h.init({"keep": 3, "summarize": True})
        h.begin(window=1000)
        answer, seen = h.call(TOOLS, tokens=900, summaries=lambda r: RuntimeError("empty"))
        assert len(seen) == 1
        assert answer["context"][1]["message"]["content"].startswith("[3 earlier messages")
        code, err = h.close()
        assert code == 0 and "summary failed (empty)" in err
    finally:
        h.kill()


def test_keep_last_n_over_the_synthetic_conversations_leaves_nothing_a_provider_refuses():
    conversations = load_synthetic()
    assert conversations, "no synthetic conversations under %s" % SYNTHETIC
    for params in ({"keep": 4}, {"keep": 10, "summarize": True}):
        h = example("keep_last_n.py")
        try:
            h.init(params)
            total = 0
            for c in conversations:
                for ctx in replay(h, c, window=6000, summaries=lambda r: "summary"):
                    total += 1
                    assert problems(ctx) == [], (c["id"], params)
            assert total > 0
            assert h.close()[0] == 0
        finally:
            h.kill()


# -- examples/strategies/broken_orphans.py -------------------------------------------------------


def test_broken_orphans_leaves_an_orphaned_tool_result():
    h = example("broken_orphans.py")
    try:
        assert h.init({"keep": 6})["name"] == "broken-orphans"
        h.begin(window=1000)
        assert h.call(TOOLS, tokens=100)[0] == {"type": "keep"}
        answer, _ = h.call([], tokens=900, trigger="overflow")
        # the last 6 start at the call "a" (index 3 is its result): it drops the call b1/b2
        # at index 4 and keeps their results
        assert answer["context"] == [{"keep": [0, 1]}, {"keep": [5, 9]}]
        assert ("orphan_tool_result", 1) in problems(h.context)
        assert h.close()[0] == 0
    finally:
        h.kill()


def test_broken_orphans_breaks_the_synthetic_conversations():
    h = example("broken_orphans.py")
    try:
        h.init({"keep": 10})
        broken = 0
        for c in load_synthetic():
            for ctx in replay(h, c, window=6000):
                broken += any(p[0] == "orphan_tool_result" for p in problems(ctx))
        assert broken > 0
        assert h.close()[0] == 0
    finally:
        h.kill()
