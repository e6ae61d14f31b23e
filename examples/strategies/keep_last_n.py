"""keep_last_n: keep the system prompt and the newest messages, tool pairs intact.

An example external strategy for compactlens, written with the Python SDK
(sdk/python/compactlens_strategy.py). Once the request passes `threshold` x the window
(or when the harness reports an overflow) it keeps the leading system message(s) and the last
`keep` messages and drops the rest. The cut moves earlier until no kept tool result has lost
its call (and so no kept call has lost its results; calls in flight at the very end have no
results yet and are kept as they are). With `summarize = true` the dropped messages are
summarized by the experiment's summarizer, and the summary goes in as a user message flagged
`"summary": true` right after the system prompt; if the summarizer fails, they are dropped
without one. When no summary goes in and the kept messages do not start with a user message
(a long run of tool rounds), a one-line user notice saying how many messages were removed
goes in instead: the Anthropic Messages API refuses a conversation whose first message is not
the user's.

Params (keys of the experiment's `[[strategy]]` table):

    keep = 10                 # messages kept after the system prompt (at least 1)
    threshold = 0.8           # compact when the request is over this fraction of the window
    summarize = false         # summarize what is dropped
    summary_max_tokens = 1000 # cap of the summary
    instructions = "..."      # the summarizer's instructions (a default is given)
    notice = true             # the user notice above; false leaves it out

    [[strategy]]
    name = "external"
    command = ["python3", "../examples/strategies/keep_last_n.py"]
    label = "py-keep-last-n"
    keep = 12
"""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "sdk", "python"))

from compactlens_strategy import Strategy, SummaryError, run  # noqa: E402

DEFAULT_INSTRUCTIONS = (
    "You write the memory of an agent whose older messages are being removed from its "
    "context. Summarize the messages below so the agent can carry on without them: the "
    "task as the user stated it, decisions taken and options rejected, files and other "
    "artifacts created, read or changed, identifiers, errors and how they were resolved, "
    "and what remains to be done. Be factual and brief; write only the summary."
)
SUMMARY_PREFIX = "Summary of the earlier conversation:\n\n"
NOTICE = "[%d earlier messages were removed to fit the context window.]"


def call_positions(messages):
    """For each message, the position of the call its tool result answers, else None.

    A tool result answers the most recent unanswered call with its `tool_call_id` before it
    (ids reused over a recording pair by position), as the dataset format says.
    """
    unanswered = {}  # call id -> positions of unanswered calls with that id, oldest first
    answers = [None] * len(messages)
    for k, m in enumerate(messages):
        role = m.get("role")
        if role == "assistant":
            for tc in m.get("tool_calls") or []:
                unanswered.setdefault(tc.get("id"), []).append(k)
        elif role == "tool":
            pending = unanswered.get(m.get("tool_call_id"))
            if pending:
                answers[k] = pending.pop()
    return answers


def safe_cut(messages, cut, floor):
    """Move `cut` earlier (not below `floor`) until no tool pair straddles it."""
    answers = call_positions(messages)
    moved = True
    while moved and cut > floor:
        moved = False
        for k in range(cut, len(messages)):
            call = answers[k]
            if call is not None and call < cut:
                cut = max(call, floor)
                moved = True
                break
    return cut


def system_head(messages):
    """How many system messages lead the context."""
    n = 0
    while n < len(messages) and messages[n].get("role") == "system":
        n += 1
    return n


class KeepLastN(Strategy):
    name = "py-keep-last-n"
    version = "1.0.0"

    def begin(self, conversation, window, tokenizer):
        self.keep = int(self.params.get("keep", 10))
        self.threshold = float(self.params.get("threshold", 0.8))
        self.summarize = bool(self.params.get("summarize", False))
        self.summary_max_tokens = int(self.params.get("summary_max_tokens", 1000))
        self.instructions = str(self.params.get("instructions", DEFAULT_INSTRUCTIONS))
        self.notice = bool(self.params.get("notice", True))
        if self.keep < 1:
            raise ValueError("keep must be at least 1, got %d" % self.keep)
        if not 0 < self.threshold <= 1:
            raise ValueError("threshold must be in (0, 1], got %r" % self.threshold)

    def compact(self, messages, call):
        if call.trigger != "overflow" and call.tokens <= self.threshold * call.window:
            return None
        head = system_head(messages)
        cut = safe_cut(messages, max(head, len(messages) - self.keep), head)
        if cut <= head:
            return None  # nothing can be dropped without splitting a tool call from its result
        dropped = messages[head:cut]
        new = list(messages[:head])
        if self.summarize:
            try:
                text = call.summarize(dropped, self.instructions, self.summary_max_tokens)
            except SummaryError as e:
                sys.stderr.write("keep_last_n: summary failed (%s); dropping without one\n" % e)
            else:
                new.append({"role": "user", "content": SUMMARY_PREFIX + text, "summary": True})
        if len(new) == head and self.notice and messages[cut].get("role") != "user":
            new.append({"role": "user", "content": NOTICE % len(dropped)})
        return new + messages[cut:]


if __name__ == "__main__":
    run(KeepLastN)
