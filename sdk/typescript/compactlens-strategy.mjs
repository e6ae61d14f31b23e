// compactlens-strategy.mjs: the Node SDK for compactlens's external strategies.
//
// It speaks the protocol of docs/external-strategies.md (newline-delimited JSON on
// stdin/stdout) so that a strategy is one class with one method: version 2 (every request and
// answer carries a call id) when the harness offers it, version 1 with a harness that offers
// only that. One file, Node built-in
// modules only (Node 20 or later); copy it next to your strategy or import it by path.
//
// Usage:
//
//   import { Strategy, SummaryError, run } from "./compactlens-strategy.mjs";
//
//   class SummarizeOld extends Strategy {
//     static name = "summarize-old";          // sent in `ready`
//     static version = "1.0.0";               // goes into run.json and the report's manifest
//
//     async compact(messages, call) {
//       if (call.trigger !== "overflow" && call.tokens < 0.8 * call.window) return null;
//       let head = 0; // the system prompt
//       while (head < messages.length && messages[head].role === "system") head += 1;
//       let cut = Math.max(head, messages.length - 8);
//       while (cut < messages.length && messages[cut].role === "tool") cut += 1; // no orphaned results
//       const old = messages.slice(head, cut);
//       if (old.length === 0) return null;
//       let text;
//       try {
//         text = await call.summarize(old, "Summarize the task and the files changed.", 800);
//       } catch (e) {
//         if (e instanceof SummaryError) return null;   // the summarizer failed: leave the context
//         throw e;
//       }
//       // Return the objects you were given to keep them: they are sent as `keep` ranges.
//       const summary = { role: "user", content: `Summary: ${text}`, summary: true };
//       return [...messages.slice(0, head), summary, ...messages.slice(cut)];
//     }
//   }
//
//   await run(new SummarizeOld());
//
// The experiment names it with `command = ["node", "summarize_old.mjs"]`. See
// examples/strategies/keep_last_n.mjs for a complete strategy.
//
// What `run` does for you:
//
// - the handshake (`init` / `ready`, where the version is agreed), the conversations (`begin` /
//   `end`, each answered `ok` in version 2) and the calls; in version 2 every message it writes
//   carries the `call_id` of the request it answers;
// - the mirror of the context: the messages of each `call`'s `append` are added to it, and a
//   compaction replaces it. `compact` gets a copy of the array; the messages in it are frozen
//   (build new objects instead of editing them), so a message returned as it was given is
//   known to be unchanged;
// - the answer: the array `compact` returns is turned into `compact` items, runs of messages
//   unchanged and in their order becoming `{"keep":[i,j]}` and everything else
//   `{"message":{...}}`; `null`, `undefined` or the context as it is answer `keep`;
//   a message is recognized as unchanged by identity first, then by deep equality (a key
//   holding `undefined` counts as absent), never out of order;
// - summaries: `call.summarize(...)` sends a `summarize` request and resolves with the text of
//   the harness's `summary` answer, or rejects with a `SummaryError`;
// - `console.log` and the rest of `console` write to stderr while `run` is in charge, as stdout
//   carries the protocol (do not write to `process.stdout` yourself);
// - an exception thrown by the strategy prints its stack to stderr and ends the process with
//   exit code 1; a line of the harness that breaks the protocol prints what was wrong and ends
//   it with exit code 2 (the harness fails the pair and shows the end of stderr). At the end of
//   stdin the promise `run` returned resolves, and the process ends with exit code 0 unless
//   something of the strategy's keeps it alive. A message type this SDK does not know is
//   ignored (noted on stderr).
//
// The Python SDK (sdk/python/compactlens_strategy.py) makes the same choices.

import process from "node:process";
import * as readline from "node:readline";

/** The newest protocol version, spoken whenever the harness offers it. */
export const PROTOCOL = 2;

/** Every protocol version this SDK speaks. */
export const PROTOCOLS = Object.freeze([1, 2]);

/** Exit codes: the strategy's own code threw; the harness broke the protocol. */
export const EXIT_STRATEGY_ERROR = 1;
export const EXIT_PROTOCOL_ERROR = 2;

/** The summary cap when `summarize` is given none (the harness's default too). */
export const DEFAULT_SUMMARY_MAX_TOKENS = 1000;

/**
 * A tool call of an assistant message.
 * @typedef {object} ToolCall
 * @property {string} id
 * @property {string} name
 * @property {string} arguments The arguments, as the JSON text the model wrote.
 */

/**
 * A message in the dataset format (datasets/README.md); unknown fields are kept as they are.
 * @typedef {object} Message
 * @property {"system" | "user" | "assistant" | "tool"} role
 * @property {string} [content]
 * @property {ToolCall[]} [tool_calls] On an assistant message.
 * @property {string | null} [tool_call_id] On a tool result: the id of the call it answers.
 * @property {string | null} [name] On a tool result: the tool's name.
 * @property {boolean} [summary] On a message a strategy wrote: it is a summary.
 */

/**
 * What `begin` is told about a conversation.
 * @typedef {object} BeginInfo
 * @property {string} conversation The conversation's id.
 * @property {number} window The context window, in tokens.
 * @property {string} tokenizer The experiment's tokenizer (`o200k_base`, ...).
 * @property {Record<string, unknown>} params The `init` params.
 */

/**
 * One call: the harness asks whether to compact before a model call.
 * @typedef {object} Call
 * @property {number} tokens The exact size of the request as it stands.
 * @property {"proactive" | "overflow"} trigger `overflow`: the request is still over the window
 *   after the previous answer, and the harness asks again.
 * @property {number} window The context window, in tokens.
 * @property {string} tokenizer The experiment's tokenizer.
 * @property {string} conversation The conversation's id.
 * @property {Record<string, unknown>} params The `init` params (the experiment table's keys).
 * @property {number} index The model call this is about, from 0 in the conversation. An
 *   `overflow` ask with nothing appended repeats the index of the call it follows.
 * @property {number} attempt 0 for the first ask about a model call, 1 to 3 for the `overflow`
 *   asks that follow it.
 * @property {(messages: Message[], instructions: string, maxTokens?: number) => Promise<string>} summarize
 *   Ask the experiment's summarizer for a summary of `messages`, with `instructions` as its
 *   system prompt and `maxTokens` (default 1000) as the cap; resolves with the text, rejects
 *   with a `SummaryError` when the summarizer failed. Only while `compact` is running.
 */

/**
 * The summarizer failed (the harness answered `summarize` with an `error`). The strategy decides
 * what to do: leave the context unchanged, fall back to dropping messages, ...
 */
export class SummaryError extends Error {
  /**
   * @param {string} message The harness's error.
   * @param {string} id The id of the `summarize` request.
   */
  constructor(message, id) {
    super(message);
    this.name = "SummaryError";
    /** @type {string} */
    this.id = id;
  }
}

/**
 * The base class of a strategy. A subclass implements `compact`; `begin` and `end` are
 * optional. `name` and `version` (static, or on the instance) are sent in `ready`; the name
 * defaults to the class's name, the version to "0". `run` sets `params` (the `init` params)
 * on the instance before the first `begin`.
 */
export class Strategy {
  /** @type {Record<string, unknown>} */
  params = {};

  /**
   * A conversation starts; the context is empty.
   * @param {BeginInfo} _info
   * @returns {Promise<void> | void}
   */
  begin(_info) {}

  /**
   * Called before each model call (and again on `overflow`). Return the new context, or `null`
   * (or `undefined`) to leave it unchanged.
   * @param {Message[]} _messages The current context (a copy of the array; frozen messages).
   * @param {Call} _call
   * @returns {Promise<Message[] | null | undefined> | Message[] | null | undefined}
   */
  compact(_messages, _call) {
    throw new Error(`${this.constructor.name} does not implement compact(messages, call)`);
  }

  /**
   * The conversation ended.
   * @returns {Promise<void> | void}
   */
  end() {}
}

/** The harness sent something the protocol does not allow there (exit code 2, no stack). */
export class ProtocolError extends Error {
  constructor(message) {
    super(message);
    this.name = "ProtocolError";
  }
}

/**
 * @typedef {{keep: [number, number]} | {message: Message}} ContextItem
 */

/**
 * The `compact` items that turn `current` into `next`: runs of messages of `current` found
 * unchanged and in order in `next` become `{keep: [i, j]}`, every other message
 * `{message: ...}` (a JSON copy). A message matches by identity first (the earliest position
 * after the previous match); the ones that do not are matched by deep equality to a message
 * between the neighbouring matches, the nearest first. Nothing is reordered.
 * @param {Message[]} current
 * @param {Message[]} next
 * @returns {ContextItem[]}
 */
export function toContextItems(current, next) {
  if (!Array.isArray(next)) {
    throw new TypeError(`compact() returns an array of messages, or null for no change; it returned ${describe(next)}`);
  }
  next.forEach((m, k) => {
    if (m === null || typeof m !== "object" || Array.isArray(m)) {
      throw new TypeError(`compact() returned ${describe(m)} at position ${k}, not a message object`);
    }
  });
  /** @type {Map<object, number[]>} */
  const positions = new Map();
  current.forEach((m, i) => {
    const list = positions.get(m);
    if (list) list.push(i);
    else positions.set(m, [i]);
  });
  const match = new Array(next.length).fill(-1);
  let last = -1;
  for (let k = 0; k < next.length; k++) {
    const i = positions.get(next[k])?.find((p) => p > last);
    if (i !== undefined) {
      match[k] = i;
      last = i;
    }
  }
  // The next identity match after each position, as an upper bound for deep equality.
  const bound = new Array(next.length + 1).fill(current.length);
  for (let k = next.length - 1; k >= 0; k--) bound[k] = match[k] >= 0 ? match[k] : bound[k + 1];
  last = -1;
  for (let k = 0; k < next.length; k++) {
    if (match[k] >= 0) {
      last = match[k];
      continue;
    }
    for (let i = last + 1; i < bound[k + 1]; i++) {
      if (deepEqual(current[i], next[k])) {
        match[k] = i;
        last = i;
        break;
      }
    }
  }
  /** @type {ContextItem[]} */
  const items = [];
  for (let k = 0; k < next.length; k++) {
    const i = match[k];
    const prev = items[items.length - 1];
    if (i < 0) items.push({ message: jsonCopy(next[k], k) });
    else if (prev && "keep" in prev && prev.keep[1] === i) prev.keep[1] = i + 1;
    else items.push({ keep: [i, i + 1] });
  }
  return items;
}

/** Whether `items` leave a context of `length` messages as it is. */
function unchanged(items, length) {
  if (length === 0) return items.length === 0;
  return items.length === 1 && "keep" in items[0] && items[0].keep[0] === 0 && items[0].keep[1] === length;
}

/** Deep equality of JSON values; a key holding `undefined` counts as absent. */
function deepEqual(a, b) {
  if (a === b) return true;
  if (a === null || b === null || typeof a !== "object" || typeof b !== "object") return false;
  if (Array.isArray(a) !== Array.isArray(b)) return false;
  if (Array.isArray(a)) return a.length === b.length && a.every((x, i) => deepEqual(x, b[i]));
  const ka = Object.keys(a).filter((k) => a[k] !== undefined);
  const kb = Object.keys(b).filter((k) => b[k] !== undefined);
  return ka.length === kb.length && ka.every((k) => Object.hasOwn(b, k) && deepEqual(a[k], b[k]));
}

function jsonCopy(message, k) {
  let text;
  try {
    text = JSON.stringify(message);
  } catch (e) {
    throw new TypeError(`the message compact() returned at position ${k} cannot be written as JSON: ${e.message}`);
  }
  return JSON.parse(text);
}

function deepFreeze(value) {
  if (value !== null && typeof value === "object" && !Object.isFrozen(value)) {
    Object.freeze(value);
    for (const v of Object.values(value)) deepFreeze(v);
  }
  return value;
}

function describe(value) {
  if (value === null) return "null";
  if (Array.isArray(value)) return "an array";
  return typeof value === "object" ? "an object" : `${typeof value} ${String(value).slice(0, 40)}`;
}

function clip(line) {
  return line.length > 200 ? `${line.slice(0, 200)}...` : line;
}

function nameOf(strategy, key, fallback) {
  if (typeof strategy[key] === "string" && strategy[key]) return strategy[key];
  const ctor = strategy.constructor;
  if (ctor && ctor !== Object && typeof ctor[key] === "string" && ctor[key]) return ctor[key];
  return fallback;
}

let running = false;

/**
 * Serve the protocol on stdin/stdout with `strategy` (an instance, or a class to instantiate)
 * until stdin ends. Resolves then; a failure ends the process instead (exit code 1 when the
 * strategy threw, 2 when the harness broke the protocol).
 * @param {Strategy | (new () => Strategy)} strategy
 * @returns {Promise<void>}
 */
export function run(strategy) {
  const impl = typeof strategy === "function" ? new strategy() : strategy;
  if (!impl || typeof impl.compact !== "function") {
    throw new TypeError("run(strategy): a strategy is an object (or a class) with a compact(messages, call) method");
  }
  if (running) throw new Error("run() serves stdin/stdout and is called once per process");
  running = true;

  // stdout carries the protocol: everything `console` writes goes to stderr.
  const toStderr = new console.Console({ stdout: process.stderr, stderr: process.stderr });
  for (const key of Object.keys(console)) {
    if (typeof console[key] === "function" && typeof toStderr[key] === "function" && key !== "Console") {
      console[key] = toStderr[key].bind(toStderr);
    }
  }

  const out = process.stdout;
  /** The version agreed in `init`. */
  let protocol = 1;
  /** Version 2: the call id of the request being answered; everything written carries it. */
  let callId = null;
  const write = (obj) => out.write(`${JSON.stringify(protocol >= 2 ? { ...obj, call_id: callId } : obj)}\n`);
  /** Version 2: take the request's call id, which its answer will carry. */
  const takeCallId = (msg) => {
    if (protocol < 2) return;
    if (typeof msg.call_id !== "string" || msg.call_id === "") {
      throw new ProtocolError(`\`${msg.type}\` with no \`call_id\` (protocol 2)`);
    }
    callId = msg.call_id;
  };

  /** @type {Record<string, unknown> | null} */
  let params = null;
  /** @type {{id: string, window: number, tokenizer: string, mirror: Message[], calls: number, index: number, attempt: number} | null} */
  let conv = null;
  /** @type {Map<string, {resolve: (text: string) => void, reject: (e: Error) => void}>} */
  const pending = new Map();
  let nextId = 1;
  /** The call being answered (its summarize requests are accepted while it is). */
  let active = null;
  let dead = false;
  let chain = Promise.resolve();

  const fatal = (err) => {
    if (dead) return;
    dead = true;
    const protocol = err instanceof ProtocolError;
    const text = protocol
      ? `compactlens-strategy: protocol error: ${err.message}`
      : (err && err.stack) || `compactlens-strategy: ${String(err)}`;
    process.stderr.write(`${text}\n`, () => process.exit(protocol ? EXIT_PROTOCOL_ERROR : EXIT_STRATEGY_ERROR));
  };

  out.on("error", (err) => {
    // The harness went away: nothing to answer.
    if (err && err.code === "EPIPE") process.exit(EXIT_PROTOCOL_ERROR);
    fatal(err);
  });

  const summarize = async (token, messages, instructions, maxTokens = DEFAULT_SUMMARY_MAX_TOKENS) => {
    if (active !== token) {
      throw new Error("call.summarize() is only allowed while compact() is running, before its answer");
    }
    if (!Array.isArray(messages)) throw new TypeError("summarize(messages, instructions, maxTokens): messages is an array");
    if (typeof instructions !== "string") throw new TypeError("summarize(messages, instructions, maxTokens): instructions is a string");
    if (!Number.isInteger(maxTokens) || maxTokens <= 0) {
      throw new TypeError("summarize(messages, instructions, maxTokens): maxTokens is a whole number above 0");
    }
    const id = `s${nextId++}`;
    const answer = new Promise((resolve, reject) => pending.set(id, { resolve, reject }));
    write({ type: "summarize", id, messages, instructions, max_tokens: maxTokens });
    return answer;
  };

  const endConversation = async () => {
    conv = null;
    if (typeof impl.end === "function") await impl.end();
  };

  const handle = async (msg) => {
    switch (msg.type) {
      case "init": {
        if (params !== null) throw new ProtocolError("a second `init`");
        // `protocols` lists the versions the harness speaks; a harness of version 1 sends
        // only `protocol`.
        const offered = Array.isArray(msg.protocols) ? msg.protocols : [msg.protocol];
        const common = PROTOCOLS.filter((v) => offered.includes(v));
        if (common.length === 0) {
          throw new ProtocolError(
            `this SDK speaks protocol ${PROTOCOLS.join(" or ")}; the harness asked for ${offered.map((v) => JSON.stringify(v)).join(" or ")}`,
          );
        }
        protocol = Math.max(...common);
        takeCallId(msg);
        const p = msg.params;
        params = p !== null && typeof p === "object" && !Array.isArray(p) ? p : {};
        try {
          impl.params = params;
        } catch {
          // A frozen strategy object: `call.params` still has them.
        }
        const name = nameOf(impl, "name", "external");
        const ready = { type: "ready", name, version: nameOf(impl, "version", "0") };
        write(protocol >= 2 ? { ...ready, protocol } : ready);
        return;
      }
      case "begin": {
        if (params === null) throw new ProtocolError("`begin` before `init`");
        takeCallId(msg);
        // A `begin` without the previous conversation's `end` ends it.
        if (conv) await endConversation();
        conv = {
          id: msg.conversation,
          window: msg.window,
          tokenizer: msg.tokenizer,
          mirror: [],
          calls: 0,
          index: -1,
          attempt: 0,
        };
        if (typeof impl.begin === "function") {
          await impl.begin({ conversation: msg.conversation, window: msg.window, tokenizer: msg.tokenizer, params });
        }
        if (protocol >= 2) write({ type: "ok" });
        return;
      }
      case "call": {
        if (!conv) throw new ProtocolError("`call` outside a conversation (no `begin`)");
        takeCallId(msg);
        const append = msg.append ?? [];
        if (!Array.isArray(append)) throw new ProtocolError("`call` with an `append` that is not an array");
        for (const m of append) conv.mirror.push(deepFreeze(m));
        const reask = msg.trigger === "overflow" && append.length === 0 && conv.calls > 0;
        if (reask) conv.attempt += 1;
        else {
          conv.index = conv.calls++;
          conv.attempt = 0;
        }
        const current = conv.mirror;
        const token = {};
        /** @type {Call} */
        const call = Object.freeze({
          tokens: msg.tokens,
          trigger: msg.trigger,
          window: conv.window,
          tokenizer: conv.tokenizer,
          conversation: conv.id,
          params,
          index: conv.index,
          attempt: conv.attempt,
          summarize: (messages, instructions, maxTokens) => summarize(token, messages, instructions, maxTokens),
        });
        active = token;
        let result;
        try {
          result = await impl.compact(current.slice(), call);
        } finally {
          active = null;
        }
        if (dead) return;
        if (result === null || result === undefined) {
          write({ type: "keep" });
          return;
        }
        const items = toContextItems(current, result);
        if (unchanged(items, current.length)) {
          write({ type: "keep" });
          return;
        }
        write({ type: "compact", context: items });
        const mirror = [];
        for (const item of items) {
          if ("keep" in item) mirror.push(...current.slice(item.keep[0], item.keep[1]));
          else mirror.push(deepFreeze(item.message));
        }
        conv.mirror = mirror;
        return;
      }
      case "end": {
        takeCallId(msg);
        if (conv) await endConversation();
        if (protocol >= 2) write({ type: "ok" });
        return;
      }
      default:
        process.stderr.write(`compactlens-strategy: ignoring a ${JSON.stringify(msg.type)} message\n`);
    }
  };

  const answerSummary = (msg) => {
    const waiting = pending.get(msg.id);
    if (!waiting) throw new ProtocolError(`a \`summary\` for no pending request (id ${JSON.stringify(msg.id)})`);
    if (protocol >= 2 && msg.call_id !== callId) {
      throw new ProtocolError(
        `a \`summary\` (id ${JSON.stringify(msg.id)}) of call id ${JSON.stringify(msg.call_id)}, expected ${JSON.stringify(callId)}`,
      );
    }
    pending.delete(msg.id);
    if (msg.error !== undefined && msg.error !== null) waiting.reject(new SummaryError(String(msg.error), msg.id));
    else if (typeof msg.text === "string") waiting.resolve(msg.text);
    else throw new ProtocolError(`a \`summary\` with neither \`text\` nor \`error\` (id ${JSON.stringify(msg.id)})`);
  };

  const rl = readline.createInterface({ input: process.stdin, crlfDelay: Infinity, terminal: false });

  rl.on("line", (line) => {
    if (dead || line.trim() === "") return;
    let msg;
    try {
      msg = JSON.parse(line);
    } catch {
      fatal(new ProtocolError(`a line that is not JSON: ${clip(line)}`));
      return;
    }
    if (msg === null || typeof msg !== "object" || Array.isArray(msg) || typeof msg.type !== "string") {
      fatal(new ProtocolError(`a line that is not a protocol message: ${clip(line)}`));
      return;
    }
    // Summaries answer the call being handled, which awaits them: they cannot wait in line.
    if (msg.type === "summary") {
      try {
        answerSummary(msg);
      } catch (e) {
        fatal(e);
      }
      return;
    }
    chain = chain.then(() => (dead ? undefined : handle(msg))).catch(fatal);
  });

  return new Promise((resolve) => {
    rl.on("close", () => {
      // No answer will come to a pending summary.
      for (const [id, waiting] of pending) {
        waiting.reject(new Error(`stdin closed before the summary of request ${id} arrived`));
      }
      pending.clear();
      chain.then(resolve);
    });
  });
}
