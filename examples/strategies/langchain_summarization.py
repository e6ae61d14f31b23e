"""langchain_summarization: LangChain's SummarizationMiddleware, run through LangChain's own code.

A peer for compactlens's built-in `langchain-summarization` (a Rust port of the same
middleware): here the middleware itself decides, from the pinned `langchain` package
(sdk/python/requirements-peers.txt), and compactlens's summarizer writes the summary.

What of LangChain's code runs. One `SummarizationMiddleware` per conversation, built with
`model=` a minimal chat model (below) whose profile gives the window as `max_input_tokens`,
`trigger=("fraction", trigger_fraction)` and `keep=("messages", keep_messages)`; everything
else at LangChain's defaults (`count_tokens_approximately`, `DEFAULT_SUMMARY_PROMPT`,
`trim_tokens_to_summarize=4000`, the summary model wrapped in `with_retry`). Before each model
call the strategy calls the middleware's `before_model(state, runtime)` hook, the one
`create_agent` runs before each model call, with `state = {"messages": <the conversation>}`
(`runtime` is not read by this hook), so LangChain's own code counts the tokens, checks the
trigger, picks the pair-safe cutoff, trims what it summarizes, renders the summary prompt,
calls the model and builds its "Here is a summary of the conversation to date:" message. No
agent loop runs. The only subclassing: `_trim_messages_for_summary` is wrapped to note which
messages LangChain put into the prompt (it still runs LangChain's code and returns its result).

The chat model. Its generation receives LangChain's rendered summary prompt and sends it to
compactlens as a `summarize` request: the prompt's text before its `<messages>` block as the
`instructions`, and the messages LangChain rendered into that block as the `messages` (the
very dataset messages, so the summarizer sees the tool calls and results as they are; when
the prompt does not match those messages, the whole prompt is sent as one user message). The
summary comes back as the model's answer; LangChain strips it and builds its message.

Mapping. As in a LangChain agent, the system prompt is not part of the state (create_agent
passes it separately): leading system messages are held out of the middleware and kept in
front. The middleware's result (a RemoveMessage of everything, the summary, the kept
messages) becomes the new context: kept messages go back as `keep` ranges and the summary as
a user message flagged `"summary": true`. The middleware has no reactive path: on an overflow
re-ask it decides by its own count, as it would before the next model call.

When the summarizer fails, the failure is raised in the chat model as a non-retryable
`langchain_core.exceptions.ModelError`, so LangChain does not retry it (compactlens's
summarizer already retried an LLM endpoint) and it leaves the middleware, as LangChain's
does. In an agent that ends the run; here `on_summary_error = "keep"` (the default) leaves
the context unchanged for that call and `"fail"` fails the pair.

    [[strategy]]
    name = "external"
    command = ["../.venv-peers/bin/python", "../examples/strategies/langchain_summarization.py"]
    label = "langchain-summarization-py"

Params: `trigger_fraction` (0.8), `keep_messages` (20), `trigger_tokens` and `trigger_messages`
(further triggers, off unless given), `trim_tokens_to_summarize` (4000),
`summary_max_tokens` (4096, the cap of the summary request: the middleware sets none),
`on_summary_error` ("keep" or "fail").
"""

import os
import sys
from typing import Any, List, Optional

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "sdk", "python"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from compactlens_strategy import Strategy, SummaryError, run  # noqa: E402
from langchain_trim import Converter  # noqa: E402  (the message conversion, shared)

import langchain  # noqa: E402
from langchain.agents.middleware.summarization import SummarizationMiddleware  # noqa: E402
from langchain_core.exceptions import ModelError  # noqa: E402
from langchain_core.language_models.chat_models import BaseChatModel  # noqa: E402
from langchain_core.messages import AIMessage, BaseMessage, RemoveMessage  # noqa: E402
from langchain_core.outputs import ChatGeneration, ChatResult  # noqa: E402
from langgraph.graph.message import REMOVE_ALL_MESSAGES  # noqa: E402

# Where LangChain's DEFAULT_SUMMARY_PROMPT puts the messages (a documented marker).
MESSAGES_MARKER = "<messages>"


class SummarizerFailed(ModelError):
    """compactlens's summarizer answered with an error; not worth retrying."""

    is_retryable = False


class CompactlensChatModel(BaseChatModel):
    """A chat model whose every generation is a `summarize` request to compactlens."""

    summary_max_tokens: int = 4096
    #: Set while a call is being answered: the SDK's `call` and the strategy's middleware.
    call: Any = None
    strategy: Any = None

    @property
    def _llm_type(self) -> str:
        return "compactlens-summarizer"

    def _generate(
        self,
        messages: List[BaseMessage],
        stop: Optional[List[str]] = None,
        run_manager: Any = None,
        **kwargs: Any,
    ) -> ChatResult:
        prompt = "\n\n".join(Converter.to_dataset(m)["content"] for m in messages)
        instructions, to_summarize = self.strategy.request_for(prompt)
        try:
            text = self.call.summarize(to_summarize, instructions, self.summary_max_tokens)
        except SummaryError as e:
            raise SummarizerFailed(str(e)) from e
        return ChatResult(generations=[ChatGeneration(message=AIMessage(content=text))])


class RecordingMiddleware(SummarizationMiddleware):
    """LangChain's middleware, noting the messages it renders into the summary prompt."""

    rendered = None

    def _trim_messages_for_summary(self, messages):
        trimmed = super()._trim_messages_for_summary(messages)
        self.rendered = trimmed
        return trimmed


class LangchainSummarization(Strategy):
    name = "langchain-summarization-py"
    version = "1.0.0+langchain-%s" % langchain.__version__

    def begin(self, conversation, window, tokenizer):
        p = self.params
        trigger = [("fraction", float(p.get("trigger_fraction", 0.8)))]
        if p.get("trigger_tokens") is not None:
            trigger.append(("tokens", int(p["trigger_tokens"])))
        if p.get("trigger_messages") is not None:
            trigger.append(("messages", int(p["trigger_messages"])))
        self.on_summary_error = p.get("on_summary_error", "keep")
        if self.on_summary_error not in ("keep", "fail"):
            raise ValueError('on_summary_error must be "keep" or "fail", got %r' % self.on_summary_error)
        self.model = CompactlensChatModel(
            profile={"max_input_tokens": int(window)},
            summary_max_tokens=int(p.get("summary_max_tokens", 4096)),
            strategy=self,
        )
        kwargs = {}
        if "trim_tokens_to_summarize" in p:
            kwargs["trim_tokens_to_summarize"] = int(p["trim_tokens_to_summarize"])
        if "keep_messages" in p:
            kwargs["keep"] = ("messages", int(p["keep_messages"]))
        self.middleware = RecordingMiddleware(self.model, trigger=trigger, **kwargs)
        self.converter = Converter()

    def request_for(self, prompt):
        """The `summarize` request for the prompt LangChain rendered: (instructions, messages)."""
        rendered = self.middleware.rendered
        marker = prompt.find(MESSAGES_MARKER)
        if rendered is not None and marker >= 0 and prompt == self.middleware._format_summary_prompt(rendered):
            return prompt[:marker].rstrip(), self.converter.from_langchain(rendered)
        return "Follow the instructions in the message.", [{"role": "user", "content": prompt}]

    def compact(self, messages, call):
        head = 0
        while head < len(messages) and messages[head].get("role") == "system":
            head += 1
        state = {"messages": self.converter.to_langchain(messages[head:])}
        self.model.call = call
        self.middleware.rendered = None
        try:
            update = self.middleware.before_model(state, None)
        except SummarizerFailed as e:
            if self.on_summary_error == "fail":
                raise
            sys.stderr.write("langchain_summarization: summary failed (%s); context unchanged\n" % e)
            return None
        finally:
            self.model.call = None
        if update is None:
            return None
        new = list(update["messages"])
        if not (new and isinstance(new[0], RemoveMessage) and new[0].id == REMOVE_ALL_MESSAGES):
            raise RuntimeError("unexpected update from SummarizationMiddleware: %r" % (new[:1],))
        return messages[:head] + self.converter.from_langchain(new[1:])


if __name__ == "__main__":
    run(LangchainSummarization)
