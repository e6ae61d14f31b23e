// A fake compactlens harness for the SDK's tests: it starts a strategy file with this Node,
// writes protocol lines to its stdin and reads its answers from stdout. (node --test runs
// every module of this folder; this one declares no test.)

import { spawn } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import * as readline from "node:readline";
import { fileURLToPath } from "node:url";

/** The SDK's file URL, for strategy files written to a temporary folder. */
export const SDK_URL = new URL("../compactlens-strategy.mjs", import.meta.url).href;

/** The example strategies' folder. */
export const EXAMPLES = fileURLToPath(new URL("../../../examples/strategies/", import.meta.url));

let scratch = null;

/**
 * Write a strategy module to a temporary folder; `@SDK@` in `source` becomes the SDK's URL
 * (quoted).
 * @param {string} name
 * @param {string} source
 * @returns {string} the file's path
 */
export function strategyFile(name, source) {
  scratch ??= fs.mkdtempSync(path.join(os.tmpdir(), "compactlens-sdk-test-"));
  const file = path.join(scratch, name);
  fs.writeFileSync(file, source.replaceAll("@SDK@", JSON.stringify(SDK_URL)));
  return file;
}

/** Kill what is still running and remove the temporary folder. */
export function cleanUp() {
  killAll();
  if (scratch) fs.rmSync(scratch, { recursive: true, force: true });
  scratch = null;
}

/** Every strategy process started, so that a failed test leaves none running. */
const started = new Set();

/** Kill the strategy processes still running (a test file's `after` hook). */
export function killAll() {
  for (const h of started) h.kill();
}

export class Harness {
  /**
   * @param {string} file a strategy module
   * @param {{protocol?: number}} [options] the newest version offered in `init` (default 2)
   */
  constructor(file, { protocol = 2 } = {}) {
    this.offered = protocol >= 2 ? [1, 2] : [1];
    /** The version agreed in `init`. */
    this.protocol = 1;
    this.requests = 0;
    /** Version 2: the requests not yet answered, oldest first ({id, type}). */
    this.pending = [];
    /** Version 2: the call id of the last `call` (summary replies carry it). */
    this.callId = null;
    this.child = spawn(process.execPath, [file], { stdio: ["pipe", "pipe", "pipe"] });
    started.add(this);
    this.child.on("exit", () => started.delete(this));
    this.stderr = "";
    this.child.stderr.setEncoding("utf8");
    this.child.stderr.on("data", (d) => (this.stderr += d));
    this.child.stdin.on("error", () => {}); // a strategy that died: the exit code tells
    this.lines = [];
    this.waiters = [];
    this.closed = false;
    const rl = readline.createInterface({ input: this.child.stdout, crlfDelay: Infinity });
    rl.on("line", (line) => {
      const w = this.waiters.shift();
      if (w) w.resolve(line);
      else this.lines.push(line);
    });
    rl.on("close", () => {
      this.closed = true;
      for (const w of this.waiters.splice(0)) w.reject(new Error(`stdout closed; stderr:\n${this.stderr}`));
    });
    /** @type {Promise<{code: number | null, signal: string | null}>} */
    this.exited = new Promise((resolve) => this.child.on("exit", (code, signal) => resolve({ code, signal })));
  }

  /**
   * Write one protocol message. In version 2 a `begin`, `call` or `end` gets a new call id
   * (unless it has one) and a `summary` the id of the last `call`.
   */
  send(msg) {
    if (this.protocol >= 2 && !("call_id" in msg)) {
      if (["begin", "call", "end"].includes(msg.type)) {
        const id = `${++this.requests}-test`;
        msg = { ...msg, call_id: id };
        this.pending.push({ id, type: msg.type });
        if (msg.type === "call") this.callId = id;
      } else if (msg.type === "summary") {
        msg = { ...msg, call_id: this.callId };
      }
    }
    this.child.stdin.write(`${JSON.stringify(msg)}\n`);
  }

  /** Write a raw line. */
  sendLine(line) {
    this.child.stdin.write(`${line}\n`);
  }

  /**
   * The next line the strategy writes, parsed. In version 2 its call id is checked against the
   * oldest unanswered request and removed, and the `ok` answers to `begin` and `end` are
   * checked and skipped.
   */
  async next(timeoutMs = 5000) {
    for (;;) {
      const message = JSON.parse(await this.nextLine(timeoutMs));
      if (this.protocol < 2) return message;
      const request = this.pending[0];
      if (!request) throw new Error(`an answer when nothing was asked: ${JSON.stringify(message)}`);
      if (message.call_id !== request.id) {
        throw new Error(`expected call id ${request.id} (${request.type}), received ${JSON.stringify(message)}`);
      }
      delete message.call_id;
      if (request.type !== "call" || message.type !== "summarize") this.pending.shift();
      if (request.type === "call") return message;
      if (message.type !== "ok") throw new Error(`${request.type} answered with ${JSON.stringify(message)}`);
    }
  }

  nextLine(timeoutMs = 5000) {
    if (this.lines.length) return Promise.resolve(this.lines.shift());
    if (this.closed) return Promise.reject(new Error(`stdout closed; stderr:\n${this.stderr}`));
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.waiters = this.waiters.filter((w) => w.resolve !== done);
        reject(new Error(`no line from the strategy in ${timeoutMs} ms; stderr:\n${this.stderr}`));
      }, timeoutMs);
      const done = (line) => {
        clearTimeout(timer);
        resolve(line);
      };
      this.waiters.push({
        resolve: done,
        reject: (e) => {
          clearTimeout(timer);
          reject(e);
        },
      });
    });
  }

  /** `init` → `ready`, without the version-2 fields (checked here). */
  async init(params = {}) {
    this.send({ type: "init", protocol: 1, protocols: this.offered, call_id: "0-init", params });
    const ready = JSON.parse(await this.nextLine());
    this.protocol = ready.protocol ?? 1;
    if (this.protocol !== Math.max(...this.offered)) {
      throw new Error(`offered ${this.offered}, the strategy chose ${JSON.stringify(ready)}`);
    }
    if (this.protocol >= 2 ? ready.call_id !== "0-init" : "call_id" in ready) {
      throw new Error(`a ready with the wrong call id: ${JSON.stringify(ready)}`);
    }
    delete ready.protocol;
    delete ready.call_id;
    return ready;
  }

  /** Send a `call` and read the answer. */
  async call(append, tokens, trigger = "proactive") {
    this.send({ type: "call", append, tokens, trigger });
    return this.next();
  }

  /** Close stdin and wait for the exit. */
  async close() {
    this.child.stdin.end();
    return this.exited;
  }

  kill() {
    if (this.child.exitCode === null && this.child.signalCode === null) this.child.kill();
  }
}

/** The new context a `compact` answer describes, built from `current` as the harness would. */
export function apply(current, answer) {
  if (answer.type === "keep") return current;
  const out = [];
  for (const item of answer.context) {
    if (item.keep) {
      const [i, j] = item.keep;
      if (!(Number.isInteger(i) && Number.isInteger(j) && 0 <= i && i < j && j <= current.length)) {
        throw new Error(`invalid range ${JSON.stringify(item.keep)} over ${current.length} messages`);
      }
      out.push(...current.slice(i, j));
    } else out.push(item.message);
  }
  return out;
}

/** Message builders. */
export const sys = (content = "You are a coding agent.") => ({ role: "system", content });
export const user = (content) => ({ role: "user", content });
export const assistant = (content) => ({ role: "assistant", content });
export const calls = (...ids) => ({
  role: "assistant",
  content: "",
  tool_calls: ids.map((id) => ({ id, name: "read_file", arguments: `{"path":"${id}.rs"}` })),
});
export const result = (id, content = `contents of ${id}`) => ({ role: "tool", tool_call_id: id, name: "read_file", content });
