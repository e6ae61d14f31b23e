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
  /** @param {string} file a strategy module */
  constructor(file) {
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

  /** Write one protocol message. */
  send(msg) {
    this.child.stdin.write(`${JSON.stringify(msg)}\n`);
  }

  /** Write a raw line. */
  sendLine(line) {
    this.child.stdin.write(`${line}\n`);
  }

  /** The next line the strategy writes, parsed. */
  async next(timeoutMs = 5000) {
    const line = await this.nextLine(timeoutMs);
    return JSON.parse(line);
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

  /** `init` → `ready`. */
  async init(params = {}) {
    this.send({ type: "init", protocol: 1, params });
    return this.next();
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
