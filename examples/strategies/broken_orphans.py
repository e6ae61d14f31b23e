"""broken_orphans: a deliberately BROKEN strategy, to show what `compactlens conform` catches.

Do not use it to compact anything. Once the request passes `threshold` x the window (or on an
overflow) it keeps the system prompt and the last `keep` messages like keep_last_n.py, but it
moves the cut the wrong way: past the first assistant message of the kept part that holds
answered tool calls, so that message is dropped and its tool results are kept without it.
Every compaction with a tool call in reach leaves an orphaned tool result, which both the
OpenAI and the Anthropic APIs refuse; `compactlens conform` must fail on it (exit code 1),
printing the rule broken and the smallest conversation that shows it:

    [[strategy]]
    name = "external"
    command = ["python3", "../examples/strategies/broken_orphans.py"]
    label = "broken-orphans"

Params: `keep` (10) and `threshold` (0.8), as in keep_last_n.py.
"""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "sdk", "python"))

from compactlens_strategy import Strategy, run  # noqa: E402


class BrokenOrphans(Strategy):
    name = "broken-orphans"
    version = "1.0.0"

    def compact(self, messages, call):
        keep = int(self.params.get("keep", 10))
        threshold = float(self.params.get("threshold", 0.8))
        if call.trigger != "overflow" and call.tokens <= threshold * call.window:
            return None
        head = 0
        while head < len(messages) and messages[head].get("role") == "system":
            head += 1
        cut = max(head, len(messages) - keep)
        answered = {m.get("tool_call_id") for m in messages if m.get("role") == "tool"}
        # The bug, on purpose: drop the first assistant message with answered calls at or
        # after the cut, and keep the results that answer it.
        for k in range(cut, len(messages)):
            m = messages[k]
            calls = [tc.get("id") for tc in m.get("tool_calls") or []]
            if m.get("role") == "assistant" and calls and any(c in answered for c in calls):
                cut = k + 1
                break
        if cut <= head or cut >= len(messages):
            return None
        return messages[:head] + messages[cut:]


if __name__ == "__main__":
    run(BrokenOrphans)
