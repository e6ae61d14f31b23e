"""The LangChain peers (examples/strategies/langchain_*.py) driven through the fake harness.

They need the pinned LangChain packages (sdk/python/requirements-peers.txt). The strategies run
under COMPACTLENS_PEERS_PYTHON when it is set (the python that scripts/setup-peers.sh prints),
else under the interpreter running the tests; without LangChain there, the tests are skipped.

    python -m pytest sdk/python/tests/test_peers.py
    COMPACTLENS_PEERS_PYTHON=.venv-peers/bin/python python -m pytest sdk/python/tests/test_peers.py
"""

import os
import subprocess
import sys

import pytest

from test_sdk import EXAMPLES, FakeHarness, call_msg, load_synthetic, msg, problems, replay, result

PYTHON = os.environ.get("COMPACTLENS_PEERS_PYTHON") or sys.executable


def _langchain_missing():
    probe = subprocess.run(
        [PYTHON, "-c", "import langchain.agents.middleware.summarization, langchain_core.messages.utils"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    if probe.returncode == 0:
        return None
    return (
        "LangChain is not importable by %s: run scripts/setup-peers.sh and set "
        "COMPACTLENS_PEERS_PYTHON to the python it prints (or run the tests with it)" % PYTHON
    )


MISSING = _langchain_missing()
pytestmark = pytest.mark.skipif(MISSING is not None, reason=MISSING or "")


@pytest.fixture
def peer():
    started = []

    def start(name):
        h = FakeHarness([PYTHON, os.path.join(EXAMPLES, name)])
        started.append(h)
        return h

    yield start
    for h in started:
        h.kill()


SYS = msg("system", "You are a coding agent in the repository shop-api.")


def conversation(rounds, size=400):
    """A system prompt, a task, then `rounds` tool rounds of about `size` characters each."""
    out = [SYS, msg("user", "The checkout test fails with TypeError: total is undefined. Fix it.")]
    for r in range(rounds):
        out.append(call_msg("Reading file %d." % r, "call_%d" % r))
        out.append(result("call_%d" % r, ("line %d of lib/cart.js\n" % r) * (size // 24)))
        if r % 3 == 2:
            out.append(msg("assistant", "Progress after round %d." % r))
            out.append(msg("user", "Go on with round %d." % (r + 1)))
    return out


# -- langchain_trim.py ---------------------------------------------------------------------------


def test_langchain_trim_keeps_a_history_that_fits(peer):
    h = peer("langchain_trim.py")
    ready = h.init()
    assert ready["name"] == "langchain-trim" and "langchain-core" in ready["version"]
    h.begin(window=32000)
    answer, _ = h.call(conversation(3), tokens=1000)
    assert answer == {"type": "keep"}
    assert h.close()[0] == 0


def test_langchain_trim_drops_the_oldest_and_starts_on_a_human_message(peer):
    h = peer("langchain_trim.py")
    h.init({"fraction": 0.5})
    h.begin(window=2000)
    convo = conversation(12)
    answer, _ = h.call(convo, tokens=5000)
    assert answer["type"] == "compact"
    items = answer["context"]
    assert items[0] == {"keep": [0, 1]}  # the system message
    assert all("keep" in item for item in items)  # only whole, unchanged messages
    assert len(items) == 2 and items[1]["keep"][1] == len(convo)
    start = items[1]["keep"][0]
    assert convo[start]["role"] == "user"
    assert problems(h.context) == []
    # the trimmed history fits LangChain's estimate: calling again changes nothing
    answer, _ = h.call([], tokens=900, trigger="overflow")
    assert answer == {"type": "keep"}
    assert h.close()[0] == 0


def test_langchain_trim_counting_messages(peer):
    h = peer("langchain_trim.py")
    h.init({"counter": "messages", "max_tokens": 5})
    h.begin(window=32000)
    convo = conversation(3)  # 10 messages: ... assistant, user (index 9)
    answer, _ = h.call(convo, tokens=100)
    # system + the last 4 would start on a tool result: start_on="human" leaves system + user
    assert answer["context"] == [{"keep": [0, 1]}, {"keep": [9, 10]}]
    assert h.close()[0] == 0


def test_langchain_trim_over_synthetic_conversations(peer):
    h = peer("langchain_trim.py")
    h.init()
    total = 0
    for c in load_synthetic(limit=4):
        for ctx in replay(h, c, window=8000):
            total += 1
            assert problems(ctx) == [], c["id"]
    assert total > 0
    assert h.close()[0] == 0


# -- langchain_summarization.py ------------------------------------------------------------------


def test_langchain_summarization_below_the_trigger_keeps(peer):
    h = peer("langchain_summarization.py")
    ready = h.init()
    assert ready["name"] == "langchain-summarization-py" and "langchain-" in ready["version"]
    h.begin(window=32000)
    assert h.call(conversation(3), tokens=1000)[0] == {"type": "keep"}
    assert h.close()[0] == 0


def test_langchain_summarization_summarizes_through_compactlens(peer):
    h = peer("langchain_summarization.py")
    h.init({"keep_messages": 6})
    h.begin(window=4000)
    convo = conversation(12, size=1200)  # about 3,900 tokens by LangChain's estimate
    answer, seen = h.call(convo, tokens=5000, summaries=lambda r: "  The cart total is computed in lib/cart.js.  ")
    assert len(seen) == 1
    request = seen[0]
    # LangChain's own prompt, without its <messages> block, and the messages it rendered
    assert request["instructions"].startswith("<role>\nContext Extraction Assistant\n</role>")
    assert "<messages>" not in request["instructions"]
    assert request["max_tokens"] == 4096
    assert request["messages"] and all(m in convo for m in request["messages"])
    assert request["messages"][0]["role"] == "user"  # trimmed to start on a human message
    items = answer["context"]
    assert items[0] == {"keep": [0, 1]}
    assert items[1] == {
        "message": {
            "role": "user",
            "content": "Here is a summary of the conversation to date:\n\nThe cart total is computed in lib/cart.js.",
            "summary": True,
        }
    }
    assert items[2]["keep"][1] == len(convo) and len(items) == 3
    kept = len(convo) - items[2]["keep"][0]
    assert kept >= 6  # its 6 messages, the cut moved back to keep tool pairs
    assert problems(h.context) == []
    assert h.close()[0] == 0


def test_langchain_summarization_summary_error(peer):
    h = peer("langchain_summarization.py")
    h.init({"keep_messages": 6})
    h.begin(window=4000)
    answer, seen = h.call(conversation(12, size=1200), tokens=5000, summaries=lambda r: RuntimeError("empty summary"))
    assert len(seen) == 1  # a non-retryable error: LangChain does not ask again
    assert answer == {"type": "keep"}
    code, err = h.close()
    assert code == 0 and "summary failed (empty summary)" in err

    h = peer("langchain_summarization.py")
    h.init({"keep_messages": 6, "on_summary_error": "fail"})
    h.begin(window=4000)
    h.request({"type": "call", "append": conversation(12, size=1200), "tokens": 5000, "trigger": "proactive"})
    request = h.answer()
    h.summary(request, error="empty summary")
    code, err = h.close()
    assert code != 0 and "SummarizerFailed: empty summary" in err


def test_langchain_summarization_over_synthetic_conversations(peer):
    h = peer("langchain_summarization.py")
    h.init()
    total = 0
    requests = []

    def summaries(request):
        requests.append(request)
        return "summary %d" % len(requests)

    for c in load_synthetic(limit=4):
        for ctx in replay(h, c, window=8000, summaries=summaries):
            total += 1
            assert problems(ctx) == [], c["id"]
            assert sum(1 for m in ctx if m.get("summary")) == 1
    assert total > 0 and requests
    assert h.close()[0] == 0
