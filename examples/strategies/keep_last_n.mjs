// keep_last_n.mjs: keep the system prompt and the newest messages, tool pairs intact.
//
// An example external strategy for compactlens, written with the Node SDK
// (sdk/typescript/compactlens-strategy.mjs). Once the request passes `threshold` x the window
// (or when the harness reports an overflow) it keeps the leading system message(s) and the last
// `keep` messages and drops the rest, summarizing nothing. The cut is pair-safe: it moves
// earlier until no kept tool result has lost its call, so no kept assistant message loses its
// results either (they come after it); calls in flight at the very end have no results yet and
// are kept as they are. When the kept messages do not start with a user message (a long run of
// tool rounds), a one-line user notice saying how many messages were removed goes first: the
// Anthropic Messages API refuses a conversation whose first message is not the user's.
//
// Params (keys of the experiment's `[[strategy]]` table):
//
//   keep = 10        # messages kept after the system prompt (at least 1)
//   threshold = 0.8  # compact when the request is over this fraction of the window, in (0, 1]
//   notice = true    # the user notice above; false leaves it out
//
//   [[strategy]]
//   name = "external"
//   command = ["node", "../examples/strategies/keep_last_n.mjs"]
//   label = "node-keep-last-n"
//   keep = 12

import { Strategy, run } from "../../sdk/typescript/compactlens-strategy.mjs";

/**
 * @typedef {import("../../sdk/typescript/compactlens-strategy.mjs").Message} Message
 * @typedef {import("../../sdk/typescript/compactlens-strategy.mjs").Call} Call
 */

const NOTICE = (n) => `[${n} earlier messages were removed to fit the context window.]`;

class KeepLastN extends Strategy {
  static name = "node-keep-last-n";
  static version = "1.0.0";

  begin() {
    this.keep = param(this.params, "keep", 10, (n) => Number.isInteger(n) && n >= 1, "a whole number, at least 1");
    this.threshold = param(this.params, "threshold", 0.8, (x) => typeof x === "number" && x > 0 && x <= 1, "in (0, 1]");
    this.notice = param(this.params, "notice", true, (b) => typeof b === "boolean", "true or false");
  }

  /**
   * @param {Message[]} messages
   * @param {Call} call
   */
  compact(messages, call) {
    if (call.trigger !== "overflow" && call.tokens <= this.threshold * call.window) return null;
    const head = systemHead(messages);
    const cut = safeCut(messages, Math.max(head, messages.length - this.keep), head);
    if (cut <= head) return null; // nothing can go without parting a tool call from its result
    const kept = [...messages.slice(0, head)];
    if (this.notice && messages[cut].role !== "user") kept.push({ role: "user", content: NOTICE(cut - head) });
    return [...kept, ...messages.slice(cut)];
  }
}

/** How many system messages lead the context (the system prompt). */
function systemHead(messages) {
  let n = 0;
  while (n < messages.length && messages[n].role === "system") n += 1;
  return n;
}

/**
 * For each message, the position of the message holding the call its tool result answers, or
 * -1. A result answers the most recent unanswered call with its `tool_call_id` before it (ids
 * reused over a recording pair by position), as datasets/README.md says.
 * @param {Message[]} messages
 * @returns {number[]}
 */
function callPositions(messages) {
  /** @type {Map<string, number[]>} */
  const unanswered = new Map();
  return messages.map((m, k) => {
    for (const c of m.tool_calls ?? []) {
      const list = unanswered.get(c.id);
      if (list) list.push(k);
      else unanswered.set(c.id, [k]);
    }
    if (m.role !== "tool") return -1;
    return unanswered.get(m.tool_call_id ?? "")?.pop() ?? -1;
  });
}

/**
 * Move `cut` earlier (not below `floor`) until every tool result from `cut` on answers a call
 * from `cut` on.
 * @param {Message[]} messages
 * @param {number} cut
 * @param {number} floor
 */
function safeCut(messages, cut, floor) {
  const calls = callPositions(messages);
  for (let k = cut; k < messages.length; k++) {
    if (calls[k] >= 0 && calls[k] < cut) {
      cut = Math.max(calls[k], floor);
      k = cut - 1; // check again from the new cut
    }
  }
  return cut;
}

function param(params, key, fallback, ok, what) {
  const value = params?.[key];
  if (value === undefined) return fallback;
  if (!ok(value)) throw new Error(`keep_last_n: ${key} must be ${what}, got ${JSON.stringify(value)}`);
  return value;
}

await run(new KeepLastN());
