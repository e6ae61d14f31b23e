// The Node SDK (compactlens-strategy.mjs) driven by a fake harness: protocol 2 (the harness
// checks the call id of every answer), and protocol 1 where a test asks for it.
// Run with `node --test sdk/typescript/test/`.

import assert from "node:assert/strict";
import { after, describe, test } from "node:test";

import { Strategy, SummaryError, toContextItems } from "../compactlens-strategy.mjs";
import { Harness, apply, assistant, calls, cleanUp, result, strategyFile, sys, user } from "./harness.mjs";

after(cleanUp);

/** Start `source` as a strategy file and do the handshake. */
async function start(name, source, params = {}) {
  const h = new Harness(strategyFile(name, source));
  const ready = await h.init(params);
  return { h, ready };
}

/** Logs what it sees to stderr (through console.log) and never compacts. */
const REPORTER = `
import { Strategy, run } from @SDK@;
class Reporter extends Strategy {
  static name = "reporter";
  static version = "0.1.0";
  begin(info) { console.log(JSON.stringify({ event: "begin", ...info })); }
  async compact(messages, call) {
    const { summarize, ...rest } = call;
    console.log(JSON.stringify({ event: "compact", ...rest, messages, summarizeIs: typeof summarize }));
    return null;
  }
  end() { console.log(JSON.stringify({ event: "end" })); }
}
await run(new Reporter());
`;

function events(stderr) {
  return stderr
    .split("\n")
    .filter((l) => l.startsWith("{"))
    .map((l) => JSON.parse(l));
}

describe("handshake", () => {
  test("ready carries the static name and version", async () => {
    const { h, ready } = await start("reporter.mjs", REPORTER);
    assert.deepEqual(ready, { type: "ready", name: "reporter", version: "0.1.0" });
    assert.deepEqual(await h.close(), { code: 0, signal: null });
  });

  test("an instance's name and version win; the class name is the default name", async () => {
    const { h, ready } = await start(
      "named.mjs",
      `import { Strategy, run } from @SDK@;
       class Named extends Strategy { static version = "1"; constructor() { super(); this.name = "mine"; this.version = "2.0.0"; } compact() { return null; } }
       await run(new Named());`,
    );
    assert.deepEqual(ready, { type: "ready", name: "mine", version: "2.0.0" });
    await h.close();
    const { h: h2, ready: ready2 } = await start(
      "plain.mjs",
      `import { Strategy, run } from @SDK@;
       class PlainStrategy extends Strategy { compact() { return null; } }
       await run(PlainStrategy);`,
    );
    assert.deepEqual(ready2, { type: "ready", name: "PlainStrategy", version: "0" });
    await h2.close();
  });

  test("another protocol version is refused with exit code 2", async () => {
    const h = new Harness(strategyFile("reporter.mjs", REPORTER));
    h.send({ type: "init", protocol: 3, params: {} });
    const { code } = await h.exited;
    assert.equal(code, 2);
    assert.match(h.stderr, /protocol 1 or 2; the harness asked for 3/);
  });

  test("version 2 when the harness offers it: ready, begin and end carry the request's call id", async () => {
    const h = new Harness(strategyFile("reporter.mjs", REPORTER));
    h.send({ type: "init", protocol: 1, protocols: [1, 2], call_id: "0-x", params: {} });
    assert.deepEqual(await h.next(), { type: "ready", name: "reporter", version: "0.1.0", protocol: 2, call_id: "0-x" });
    h.send({ type: "begin", conversation: "c1", window: 1000, tokenizer: "o200k_base", call_id: "1-y" });
    assert.deepEqual(await h.next(), { type: "ok", call_id: "1-y" });
    h.send({ type: "call", append: [sys(), user("hi")], tokens: 10, trigger: "proactive", call_id: "2-z" });
    assert.deepEqual(await h.next(), { type: "keep", call_id: "2-z" });
    h.send({ type: "end", call_id: "3-w" });
    assert.deepEqual(await h.next(), { type: "ok", call_id: "3-w" });
    // A request without its call id is the harness's fault.
    h.send({ type: "begin", conversation: "c2", window: 1000, tokenizer: "o200k_base" });
    assert.equal((await h.exited).code, 2);
    assert.match(h.stderr, /`begin` with no `call_id` \(protocol 2\)/);
  });

  test("version 1 with a harness that offers only version 1: no call ids, no `ok`", async () => {
    const h = new Harness(strategyFile("reporter.mjs", REPORTER), { protocol: 1 });
    assert.deepEqual(await h.init(), { type: "ready", name: "reporter", version: "0.1.0" });
    assert.equal(h.protocol, 1);
    h.send({ type: "begin", conversation: "c1", window: 1000, tokenizer: "o200k_base" });
    assert.deepEqual(await h.call([sys(), user("hi")], 10), { type: "keep" });
    h.send({ type: "end" });
    assert.equal((await h.close()).code, 0);
    assert.equal(h.lines.length, 0, "nothing answers `begin` or `end` in version 1");
  });
});

describe("calls", () => {
  test("keep: null, the context itself, or a deep copy of it", async () => {
    const { h } = await start(
      "keeper.mjs",
      `import { Strategy, run } from @SDK@;
       class Keeper extends Strategy {
         compact(messages, call) {
           if (call.index === 0) return null;
           if (call.index === 1) return messages;
           return JSON.parse(JSON.stringify(messages));
         }
       }
       await run(new Keeper());`,
    );
    h.send({ type: "begin", conversation: "c1", window: 1000, tokenizer: "o200k_base" });
    assert.deepEqual(await h.call([sys(), user("hi")], 20), { type: "keep" });
    assert.deepEqual(await h.call([assistant("hello"), user("more")], 40), { type: "keep" });
    assert.deepEqual(await h.call([calls("a"), result("a")], 60), { type: "keep" });
    h.send({ type: "end" });
    assert.deepEqual(await h.close(), { code: 0, signal: null });
  });

  test("compact: keep ranges around a summary message, then the mirror is the new context", async () => {
    const { h } = await start(
      "trim.mjs",
      `import { Strategy, run } from @SDK@;
       class Trim extends Strategy {
         compact(messages, call) {
           console.log(JSON.stringify({ index: call.index, messages }));
           if (messages.length < 6) return null;
           return [messages[0], { role: "user", content: \`Summary \${call.index}\`, summary: true }, ...messages.slice(-2)];
         }
       }
       await run(new Trim());`,
    );
    h.send({ type: "begin", conversation: "c1", window: 1000, tokenizer: "o200k_base" });
    let harness = [];
    const step = async (append, tokens) => {
      harness = harness.concat(append);
      const answer = await h.call(append, tokens);
      harness = apply(harness, answer);
      return answer;
    };
    assert.deepEqual(await step([sys(), user("hi")], 10), { type: "keep" });
    const first = [assistant("hello"), user("read a"), calls("a"), result("a")];
    const answer = await step(first, 100);
    assert.deepEqual(answer, {
      type: "compact",
      context: [
        { keep: [0, 1] },
        { message: { role: "user", content: "Summary 1", summary: true } },
        { keep: [4, 6] },
      ],
    });
    assert.deepEqual(harness, [sys(), { role: "user", content: "Summary 1", summary: true }, calls("a"), result("a")]);
    // The next call appends to the compacted context; ranges index the new one.
    const second = await step([assistant("done"), user("thanks")], 120);
    assert.deepEqual(second.context, [
      { keep: [0, 1] },
      { message: { role: "user", content: "Summary 2", summary: true } },
      { keep: [4, 6] },
    ]);
    assert.deepEqual(harness, [sys(), { role: "user", content: "Summary 2", summary: true }, assistant("done"), user("thanks")]);
    h.send({ type: "end" });
    assert.equal((await h.close()).code, 0);
    const seen = events(h.stderr);
    assert.equal(seen.length, 3);
    // The strategy's mirror: the summary it wrote (flag included), then what was appended.
    assert.deepEqual(seen[2].messages, [
      sys(),
      { role: "user", content: "Summary 1", summary: true },
      calls("a"),
      result("a"),
      assistant("done"),
      user("thanks"),
    ]);
  });

  test("copies of unchanged messages are found by deep equality", async () => {
    const { h } = await start(
      "trim-clone.mjs",
      `import { Strategy, run } from @SDK@;
       class Trim extends Strategy {
         compact(messages) {
           if (messages.length < 6) return null;
           const copy = (m) => JSON.parse(JSON.stringify(m));
           return [copy(messages[0]), { role: "user", content: "Summary", summary: true, note: undefined }, ...messages.slice(-2).map(copy)];
         }
       }
       await run(new Trim());`,
    );
    h.send({ type: "begin", conversation: "c1", window: 1000, tokenizer: "o200k_base" });
    await h.call([sys(), user("hi")], 10);
    const answer = await h.call([assistant("hello"), user("read a"), calls("a"), result("a")], 100);
    assert.deepEqual(answer.context, [
      { keep: [0, 1] },
      { message: { role: "user", content: "Summary", summary: true } },
      { keep: [4, 6] },
    ]);
    await h.close();
  });

  test("call fields, overflow re-asks, console output on stderr and two conversations in one process", async () => {
    const { h } = await start("reporter.mjs", REPORTER, { keep: 12, mode: "fast" });
    h.send({ type: "begin", conversation: "one", window: 32000, tokenizer: "o200k_base" });
    assert.deepEqual(await h.call([sys(), user("hi")], 100), { type: "keep" });
    assert.deepEqual(await h.call([], 40000, "overflow"), { type: "keep" });
    assert.deepEqual(await h.call([assistant("hello"), user("bye")], 200), { type: "keep" });
    h.send({ type: "end" });
    h.send({ type: "begin", conversation: "two", window: 8000, tokenizer: "cl100k_base" });
    assert.deepEqual(await h.call([sys("other"), user("again")], 50), { type: "keep" });
    h.send({ type: "end" });
    assert.deepEqual(await h.close(), { code: 0, signal: null });
    const params = { keep: 12, mode: "fast" };
    const common = { event: "compact", params, summarizeIs: "function" };
    assert.deepEqual(events(h.stderr), [
      { event: "begin", conversation: "one", window: 32000, tokenizer: "o200k_base", params },
      { ...common, tokens: 100, trigger: "proactive", window: 32000, tokenizer: "o200k_base", conversation: "one", index: 0, attempt: 0, messages: [sys(), user("hi")] },
      { ...common, tokens: 40000, trigger: "overflow", window: 32000, tokenizer: "o200k_base", conversation: "one", index: 0, attempt: 1, messages: [sys(), user("hi")] },
      { ...common, tokens: 200, trigger: "proactive", window: 32000, tokenizer: "o200k_base", conversation: "one", index: 1, attempt: 0, messages: [sys(), user("hi"), assistant("hello"), user("bye")] },
      { event: "end" },
      { event: "begin", conversation: "two", window: 8000, tokenizer: "cl100k_base", params },
      { ...common, tokens: 50, trigger: "proactive", window: 8000, tokenizer: "cl100k_base", conversation: "two", index: 0, attempt: 0, messages: [sys("other"), user("again")] },
      { event: "end" },
    ]);
  });
});

describe("summaries", () => {
  const SUMMARIZER = `
import { Strategy, SummaryError, run } from @SDK@;
class Summarizer extends Strategy {
  async compact(messages, call) {
    if (messages.length < 4) return null;
    const old = messages.slice(1, -1);
    let content;
    try {
      if (call.params.parallel) {
        const [a, b] = await Promise.all([
          call.summarize(old.slice(0, 1), "first", 100),
          call.summarize(old.slice(1), "second"),
        ]);
        content = a + " | " + b;
      } else {
        content = await call.summarize(old, "Summarize the task.", 800);
      }
    } catch (e) {
      if (!(e instanceof SummaryError)) throw e;
      content = "failed: " + e.name + ": " + e.message + " (" + e.id + ")";
    }
    if (this.params !== call.params) throw new Error("params are not on the instance");
    return [messages[0], { role: "user", content, summary: true }, messages.at(-1)];
  }
}
await run(new Summarizer());
`;

  async function compactAfterSummary(params, answer) {
    const { h } = await start("summarizer.mjs", SUMMARIZER, params);
    h.send({ type: "begin", conversation: "c1", window: 1000, tokenizer: "o200k_base" });
    assert.deepEqual(await h.call([sys(), user("hi")], 10), { type: "keep" });
    h.send({ type: "call", append: [assistant("hello"), user("go on")], tokens: 900, trigger: "proactive" });
    const request = await h.next();
    assert.deepEqual(request, {
      type: "summarize",
      id: request.id,
      messages: [user("hi"), assistant("hello")],
      instructions: "Summarize the task.",
      max_tokens: 800,
    });
    assert.equal(typeof request.id, "string");
    h.send({ type: "summary", id: request.id, ...answer });
    const compact = await h.next();
    h.send({ type: "end" });
    assert.equal((await h.close()).code, 0, h.stderr);
    return { compact, id: request.id };
  }

  test("a summary's text comes back to the strategy", async () => {
    const { compact } = await compactAfterSummary({}, { text: "The user greeted; the agent answered." });
    assert.deepEqual(compact, {
      type: "compact",
      context: [
        { keep: [0, 1] },
        { message: { role: "user", content: "The user greeted; the agent answered.", summary: true } },
        { keep: [3, 4] },
      ],
    });
  });

  test("a summary's error rejects with a SummaryError", async () => {
    const { compact, id } = await compactAfterSummary({}, { error: "the model returned an empty summary" });
    assert.deepEqual(compact.context[1], {
      message: { role: "user", content: `failed: SummaryError: the model returned an empty summary (${id})`, summary: true },
    });
  });

  test("parallel requests are answered by id, in any order", async () => {
    const { h } = await start("summarizer.mjs", SUMMARIZER, { parallel: true });
    h.send({ type: "begin", conversation: "c1", window: 1000, tokenizer: "o200k_base" });
    await h.call([sys(), user("hi")], 10);
    h.send({ type: "call", append: [assistant("hello"), user("go on")], tokens: 900, trigger: "proactive" });
    const first = await h.next();
    const second = await h.next();
    assert.deepEqual([first.type, first.instructions, first.max_tokens], ["summarize", "first", 100]);
    assert.deepEqual([second.type, second.instructions, second.max_tokens], ["summarize", "second", 1000]);
    assert.notEqual(first.id, second.id);
    h.send({ type: "summary", id: second.id, text: "B" });
    h.send({ type: "summary", id: first.id, text: "A" });
    const compact = await h.next();
    assert.equal(compact.context[1].message.content, "A | B");
    await h.close();
  });

  test("summarize after the answer is refused, and nothing is sent", async () => {
    const { h } = await start(
      "stale.mjs",
      `import { Strategy, run } from @SDK@;
       class Stale extends Strategy {
         async compact(messages, call) {
           if (!this.first) { this.first = call; return null; }
           await this.first.summarize(messages, "late", 100);
           return null;
         }
       }
       await run(new Stale());`,
    );
    h.send({ type: "begin", conversation: "c1", window: 1000, tokenizer: "o200k_base" });
    assert.deepEqual(await h.call([sys(), user("hi")], 10), { type: "keep" });
    h.send({ type: "call", append: [assistant("hello")], tokens: 20, trigger: "proactive" });
    assert.equal((await h.exited).code, 1);
    assert.match(h.stderr, /only allowed while compact\(\) is running/);
    assert.equal(h.lines.length, 0);
  });

  test("a summary carrying another call's id is a protocol failure", async () => {
    const { h } = await start("summarizer.mjs", SUMMARIZER);
    h.send({ type: "begin", conversation: "c1", window: 1000, tokenizer: "o200k_base" });
    await h.call([sys(), user("hi")], 10);
    const stale = h.callId;
    h.send({ type: "call", append: [assistant("hello"), user("go on")], tokens: 900, trigger: "proactive" });
    const request = await h.next();
    h.send({ type: "summary", id: request.id, text: "late", call_id: stale });
    assert.equal((await h.exited).code, 2);
    assert.match(h.stderr, /a `summary` \(id "s1"\) of call id "2-test", expected "3-test"/);
  });

  test("a summary for no pending request is a protocol failure", async () => {
    const { h } = await start("summarizer.mjs", SUMMARIZER);
    h.send({ type: "summary", id: "s9", text: "?" });
    const { code } = await h.exited;
    assert.equal(code, 2);
    assert.match(h.stderr, /summary.*no pending request/);
  });
});

describe("failures", () => {
  test("an exception in compact: the stack on stderr and exit code 1", async () => {
    const { h } = await start(
      "boom.mjs",
      `import { Strategy, run } from @SDK@;
       class Boom extends Strategy {
         compact(messages) { if (messages.length > 2) explode(); return null; }
       }
       function explode() { throw new Error("boom in the strategy"); }
       await run(new Boom());`,
    );
    h.send({ type: "begin", conversation: "c1", window: 1000, tokenizer: "o200k_base" });
    assert.deepEqual(await h.call([sys(), user("hi")], 10), { type: "keep" });
    h.send({ type: "call", append: [assistant("hello")], tokens: 20, trigger: "proactive" });
    const { code } = await h.exited;
    assert.equal(code, 1);
    assert.match(h.stderr, /Error: boom in the strategy\n\s+at explode \(.*boom\.mjs/);
    assert.match(h.stderr, /at Boom\.compact/);
  });

  test("editing a message in place throws (messages are frozen)", async () => {
    const { h } = await start(
      "mutate.mjs",
      `import { Strategy, run } from @SDK@;
       class Mutate extends Strategy { compact(messages) { messages[0].content = "changed"; return messages; } }
       await run(new Mutate());`,
    );
    h.send({ type: "begin", conversation: "c1", window: 1000, tokenizer: "o200k_base" });
    h.send({ type: "call", append: [sys(), user("hi")], tokens: 10, trigger: "proactive" });
    assert.equal((await h.exited).code, 1);
    assert.match(h.stderr, /TypeError: Cannot assign to read only property 'content'/);
  });

  test("returning something that is not an array of messages", async () => {
    const { h } = await start(
      "bad-return.mjs",
      `import { Strategy, run } from @SDK@;
       class Bad extends Strategy { compact(messages) { return [messages[0], "summary"]; } }
       await run(new Bad());`,
    );
    h.send({ type: "begin", conversation: "c1", window: 1000, tokenizer: "o200k_base" });
    h.send({ type: "call", append: [sys(), user("hi")], tokens: 10, trigger: "proactive" });
    assert.equal((await h.exited).code, 1);
    assert.match(h.stderr, /TypeError: compact\(\) returned string summary at position 1/);
  });

  test("a line that is not JSON", async () => {
    const { h } = await start("reporter.mjs", REPORTER);
    h.sendLine("{not json");
    assert.equal((await h.exited).code, 2);
    assert.match(h.stderr, /not JSON: \{not json/);
  });

  test("a call outside a conversation", async () => {
    const { h } = await start("reporter.mjs", REPORTER);
    h.send({ type: "call", append: [], tokens: 1, trigger: "proactive" });
    assert.equal((await h.exited).code, 2);
    assert.match(h.stderr, /protocol error: `call` outside a conversation/);
  });

  test("a message type this SDK does not know is ignored", async () => {
    const { h } = await start("reporter.mjs", REPORTER);
    h.send({ type: "ping" });
    h.send({ type: "begin", conversation: "c1", window: 1000, tokenizer: "o200k_base" });
    assert.deepEqual(await h.call([sys(), user("hi")], 10), { type: "keep" });
    assert.equal((await h.close()).code, 0);
    assert.match(h.stderr, /ignoring a "ping" message/);
  });
});

describe("toContextItems", () => {
  const ctx = [sys(), user("a"), assistant("b"), user("c"), assistant("d")];

  test("identity, then deep equality, never reordered", () => {
    assert.deepEqual(toContextItems(ctx, ctx.slice()), [{ keep: [0, 5] }]);
    assert.deepEqual(toContextItems(ctx, []), []);
    assert.deepEqual(toContextItems(ctx, [ctx[0], { ...ctx[3] }, ctx[4]]), [{ keep: [0, 1] }, { keep: [3, 5] }]);
    // Out of order: the later one stays a kept message, the earlier one becomes a new message.
    assert.deepEqual(toContextItems(ctx, [ctx[3], ctx[1]]), [{ keep: [3, 4] }, { message: user("a") }]);
    // A message given twice is kept once.
    assert.deepEqual(toContextItems(ctx, [ctx[1], ctx[1]]), [{ keep: [1, 2] }, { message: user("a") }]);
    // Deep equality does not jump over a message kept by identity.
    assert.deepEqual(toContextItems(ctx, [user("c"), ctx[2]]), [{ message: user("c") }, { keep: [2, 3] }]);
  });

  test("equal messages pair up in order", () => {
    const same = [user("x"), user("x"), user("x")];
    assert.deepEqual(toContextItems(same, [user("x"), user("x")]), [{ keep: [0, 2] }]);
  });

  test("a non-array is a TypeError", () => {
    assert.throws(() => toContextItems(ctx, { messages: [] }), TypeError);
  });

  test("the exports", () => {
    assert.equal(new SummaryError("x", "s1").name, "SummaryError");
    assert.throws(() => new Strategy().compact([], {}), /does not implement compact/);
  });
});
