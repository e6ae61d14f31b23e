// examples/strategies/keep_last_n.mjs through protocol 2, with the fake harness.

import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as path from "node:path";
import { after, describe, test } from "node:test";
import { fileURLToPath } from "node:url";

import { EXAMPLES, Harness, apply, assistant, calls, killAll, result, sys, user } from "./harness.mjs";

const FILE = path.join(EXAMPLES, "keep_last_n.mjs");

after(killAll);

/** Start the example, begin a conversation with a 1,000-token window. */
async function start(params) {
  const h = new Harness(FILE);
  const ready = await h.init(params);
  h.send({ type: "begin", conversation: "c1", window: 1000, tokenizer: "o200k_base" });
  return { h, ready };
}

/** The answer to one call carrying the whole context at once. */
async function once(params, context, tokens, trigger = "proactive") {
  const { h } = await start(params);
  const answer = await h.call(context, tokens, trigger);
  h.send({ type: "end" });
  assert.deepEqual(await h.close(), { code: 0, signal: null }, h.stderr);
  return answer;
}

/**
 * What a provider would refuse in `context` (the rules of compactlens's request check, less
 * those no compaction here can break): an orphaned result, a result not right after its
 * call's message (only results between), a call without a result other than those of the last
 * assistant message when only results follow it, and a first message after the system prompt
 * that is not the user's.
 */
function problems(context) {
  const open = new Map();
  const out = [];
  let last = -1;
  let onlyResults = false;
  context.forEach((m, i) => {
    for (const c of m.tool_calls ?? []) open.set(c.id, [...(open.get(c.id) ?? []), i]);
    if (m.role === "tool") {
      const call = open.get(m.tool_call_id)?.pop();
      if (call === undefined) out.push(`orphan_tool_result at ${i}`);
      else if (context.slice(call + 1, i).some((x) => x.role !== "tool")) out.push(`misplaced_tool_result at ${i}`);
    }
    if (m.role === "assistant") {
      last = i;
      onlyResults = true;
    } else if (m.role !== "tool") onlyResults = false;
  });
  for (const [id, at] of open) {
    for (const i of at) if (!(i === last && onlyResults)) out.push(`unanswered_tool_call ${id} at ${i}`);
  }
  const first = context.find((m) => m.role !== "system");
  if (first && first.role !== "user") out.push(`first_not_user (${first.role})`);
  return out;
}

/** The synthetic conversations of datasets/synthetic. */
function synthetic() {
  const folder = fileURLToPath(new URL("../../../datasets/synthetic/", import.meta.url));
  return fs
    .readdirSync(folder)
    .filter((f) => f.endsWith(".jsonl"))
    .sort()
    .flatMap((f) =>
      fs
        .readFileSync(path.join(folder, f), "utf8")
        .split("\n")
        .filter((l) => l.trim())
        .map((l) => JSON.parse(l)),
    );
}

/** chars/4 of a message's JSON, cached per object. */
const sizes = new WeakMap();
function approx(messages) {
  let n = 0;
  for (const m of messages) {
    if (!sizes.has(m)) sizes.set(m, Math.ceil(JSON.stringify(m).length / 4));
    n += sizes.get(m);
  }
  return n;
}

/**
 * Replay a recorded conversation as compactlens does: a call before each assistant message
 * with what was added since the previous one, asked again on `overflow` (at most three times)
 * while the request is over the window. Returns the contexts right after each compaction.
 */
async function replay(h, conversation, window) {
  const messages = conversation.messages;
  h.send({ type: "begin", conversation: conversation.id, window, tokenizer: "o200k_base" });
  let context = [];
  let last = 0;
  const compacted = [];
  for (let i = 1; i < messages.length; i++) {
    if (messages[i].role !== "assistant") continue;
    const append = messages.slice(last, i);
    last = i;
    context = context.concat(append);
    let answer = await h.call(append, approx(context));
    for (let attempt = 0; ; attempt++) {
      context = apply(context, answer);
      if (answer.type === "compact") compacted.push(context);
      if (attempt === 3 || approx(context) <= window) break;
      answer = await h.call([], approx(context), "overflow");
    }
  }
  h.send({ type: "end" });
  return compacted;
}

const notice = (n) => ({ message: user(`[${n} earlier messages were removed to fit the context window.]`) });

describe("keep_last_n.mjs", () => {
  test("ready names it", async () => {
    const h = new Harness(FILE);
    assert.deepEqual(await h.init({}), { type: "ready", name: "node-keep-last-n", version: "1.0.0" });
    await h.close();
  });

  const chat = [sys(), user("u1"), assistant("a1"), user("u2"), assistant("a2"), user("u3")];

  test("under the threshold: keep; over it: the system prompt and the last messages", async () => {
    const params = { keep: 3, threshold: 0.5 };
    assert.deepEqual(await once(params, chat, 500), { type: "keep" });
    assert.deepEqual(await once(params, chat, 501), { type: "compact", context: [{ keep: [0, 1] }, { keep: [3, 6] }] });
  });

  test("an overflow compacts whatever the tokens", async () => {
    const answer = await once({ keep: 2, notice: false }, chat, 10, "overflow");
    assert.deepEqual(answer, { type: "compact", context: [{ keep: [0, 1] }, { keep: [4, 6] }] });
  });

  test("defaults: keep 10 once past 80% of the window; every leading system message stays", async () => {
    const long = [sys("a"), sys("b")];
    for (let i = 0; i < 7; i++) long.push(user(`u${i}`), assistant(`a${i}`));
    assert.deepEqual(await once({}, long, 800), { type: "keep" });
    assert.deepEqual(await once({}, long, 801), { type: "compact", context: [{ keep: [0, 2] }, { keep: [6, 16] }] });
  });

  test("nothing to drop: keep", async () => {
    assert.deepEqual(await once({ keep: 5 }, chat, 999), { type: "keep" });
  });

  test("a notice goes first when the kept part does not start with the user's message", async () => {
    assert.deepEqual(await once({ keep: 2 }, chat, 999), {
      type: "compact",
      context: [{ keep: [0, 1] }, notice(3), { keep: [4, 6] }],
    });
  });

  const tools = [sys(), user("read"), calls("a", "b"), result("a"), result("b"), assistant("done"), user("next")];

  test("the cut moves back to the call of a kept tool result", async () => {
    // The last 3 start at the result of `b`: the cut moves to its call, at 2.
    assert.deepEqual(await once({ keep: 3 }, tools, 999), {
      type: "compact",
      context: [{ keep: [0, 1] }, notice(1), { keep: [2, 7] }],
    });
    assert.deepEqual(await once({ keep: 4, notice: false }, tools, 999), {
      type: "compact",
      context: [{ keep: [0, 1] }, { keep: [2, 7] }],
    });
    assert.deepEqual(await once({ keep: 2 }, tools, 999), {
      type: "compact",
      context: [{ keep: [0, 1] }, notice(4), { keep: [5, 7] }],
    });
  });

  test("reused call ids pair by position", async () => {
    const ctx = [sys(), user("go"), calls("a"), result("a", "first"), calls("a"), result("a", "second")];
    // The result at 3 answers the call at 2, not the later call with the same id.
    assert.deepEqual(await once({ keep: 3, notice: false }, ctx, 999), {
      type: "compact",
      context: [{ keep: [0, 1] }, { keep: [2, 6] }],
    });
  });

  test("nothing can go without parting a call from its result: keep", async () => {
    const ctx = [sys(), calls("a", "b", "c"), result("a"), result("b"), result("c")];
    assert.deepEqual(await once({ keep: 2 }, ctx, 999), { type: "keep" });
  });

  test("calls in flight at the end are kept", async () => {
    const ctx = [sys(), user("u1"), assistant("a1"), user("u2"), calls("x", "y")];
    assert.deepEqual(await once({ keep: 1, notice: false }, ctx, 999), {
      type: "compact",
      context: [{ keep: [0, 1] }, { keep: [4, 5] }],
    });
    // `y` is still in flight; the result of `x` brings its call along.
    const partly = [...ctx, result("x")];
    assert.deepEqual(await once({ keep: 1, notice: false }, partly, 999), {
      type: "compact",
      context: [{ keep: [0, 1] }, { keep: [4, 6] }],
    });
  });

  test("a bad parameter fails the process at `begin`, with the reason on stderr", async () => {
    const h = new Harness(FILE);
    await h.init({ keep: 0 });
    h.send({ type: "begin", conversation: "c1", window: 1000, tokenizer: "o200k_base" });
    assert.equal((await h.exited).code, 1);
    assert.match(h.stderr, /keep must be a whole number, at least 1, got 0/);
  });

  test("a generated agent run: every compaction is pair-safe and keeps calls in flight", async () => {
    // Tool rounds with parallel calls and reused ids, user turns, and calls left in flight.
    let seed = 7;
    const rand = (n) => {
      seed = (seed * 1103515245 + 12345) % 2147483648;
      return seed % n;
    };
    const { h } = await start({ keep: 5, threshold: 0.5 });
    let context = [];
    let compactions = 0;
    const step = async (append) => {
      context = context.concat(append);
      const answer = await h.call(append, 40 * context.length);
      context = apply(context, answer);
      if (answer.type === "compact") {
        compactions += 1;
        assert.deepEqual(problems(context), [], JSON.stringify(context));
      }
      return answer;
    };
    await step([sys(), user("fix the build")]);
    for (let turn = 0; turn < 60; turn++) {
      const kind = rand(3);
      if (kind === 0) {
        const ids = Array.from({ length: 1 + rand(3) }, (_, i) => `c${rand(4)}-${i}`);
        await step([calls(...ids), ...ids.map((id) => result(id))]);
      } else if (kind === 1) {
        await step([assistant(`step ${turn}`), user(`and then ${turn}`)]);
      } else {
        const id = `f${turn}`;
        if ((await step([calls(id)])).type === "compact") {
          assert.equal(context.at(-1).tool_calls?.[0]?.id, id, "the call in flight is kept");
        }
        await step([result(id)]);
      }
    }
    h.send({ type: "end" });
    assert.deepEqual(await h.close(), { code: 0, signal: null }, h.stderr);
    assert.ok(compactions > 5, `only ${compactions} compactions`);
  });

  test("over the synthetic conversations it leaves nothing a provider refuses", async () => {
    const conversations = synthetic();
    assert.ok(conversations.length > 0, "no synthetic conversations");
    for (const params of [{ keep: 4 }, { keep: 10, threshold: 0.5 }]) {
      const h = new Harness(FILE);
      await h.init(params);
      let total = 0;
      for (const c of conversations) {
        for (const ctx of await replay(h, c, 6000)) {
          total += 1;
          assert.deepEqual(problems(ctx), [], `${c.id} ${JSON.stringify(params)}`);
        }
      }
      assert.ok(total > 0);
      assert.deepEqual(await h.close(), { code: 0, signal: null }, h.stderr);
    }
  });
});
