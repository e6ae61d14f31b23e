//! External strategies: any program, speaking the JSON-lines protocol of
//! `docs/external-strategies.md` on stdin/stdout, compacts like a built-in strategy.
//!
//! [`ExternalStrategy`] is built once per configuration and keeps a pool of idle processes;
//! [`Sessions::begin`] takes one (or starts one: `init`, then `ready` with the program's name,
//! version and protocol version) for a conversation and returns an [`ExternalSession`]. The
//! session is the strategy the replay uses for that conversation. At every model call the replay asks it
//! ([`Strategy::should_compact`] always holds while it is healthy); its
//! [`Strategy::plan_with`] sends `call` with the messages appended since the previous one,
//! serves the program's `summarize` requests through the replay's summarizer (so they are
//! cached and billed like a built-in strategy's), and turns a `compact` answer into a plan of
//! kept entries and new messages. The replay applies, checks and records it as any other.
//!
//! Failures are values: a program that exits, hangs past `timeout_s`, writes a line that is
//! not a protocol message, answers out of turn or with an invalid range sets the session's
//! [`Session::fault`] (naming the conversation, the call and the last lines of its stderr),
//! is killed, and the replay fails that pair.
//!
//! Two protocol versions are spoken; the program picks one in `ready`. In version 2 every
//! request (`init`, `begin`, `call`, `end`) carries a `call_id` made of the request's number
//! and 32 unpredictable bits, and every message of the program's answer must carry it: an
//! answer with a missing, wrong or repeated id, a line nobody asked for (read as the next
//! request's answer) or a second answer is a fault by construction, whatever its timing, and
//! no answer can be written before its request was read. Version 1 has no ids; there a line
//! already waiting when the harness has asked nothing is the fault (a check of timing: a
//! program that answers every call late is not caught). [`Session::close`] ends a version-2
//! conversation (`end`, answered `ok`) and a closed session's process goes back in the pool;
//! dropping a healthy version-1 session sends `end` and pools its process.

use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use compaction::{
    apply_layout, Budget, Compacted, Context, Encoding, Entry, Exact, Inserted, Message, Origin, Plan, Promises, Slot,
    Strategy, SummaryFailure, SummaryOutcome, SummaryRequest, TokenCounter, Trigger,
};
use runlog::external::ExternalSpec;
use serde_json::{json, Value};

use crate::session::{Session, Sessions};
use crate::summarize::prompts::external_prompt;

/// The protocol versions this harness speaks. `init` names version 1 in `protocol` (the field a
/// version-1 program checks) and all of them in `protocols`; the program names the one it
/// speaks in `ready` (no `protocol` there is version 1).
pub const PROTOCOLS: [u32; 2] = [1, 2];

/// The newest protocol version: call ids on every request and answer.
pub const PROTOCOL: u32 = 2;

/// The call ids remembered per process, to name an answer that repeats an earlier request's.
const REMEMBERED_IDS: usize = 256;

/// How long a line known to be waiting behind another is waited for.
const OUT_OF_TURN_WAIT: Duration = Duration::from_millis(200);

/// Stderr lines kept for an error message.
const STDERR_TAIL: usize = 12;

/// What a started program said about itself in `ready`.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Identity {
    /// Its `name`.
    pub name: String,
    /// Its `version`.
    pub version: String,
    /// The protocol version it speaks.
    #[serde(default)]
    pub protocol: u32,
}

/// A request of protocol version 2 waiting for its answer.
struct Request {
    /// Its `call_id`.
    id: String,
    /// What it asked, for a message (`call 3`, `` `begin` of conversation c1 ``).
    what: String,
}

/// One running program.
struct Process {
    child: Child,
    /// `None` once closed.
    stdin: Option<ChildStdin>,
    /// Lines, each with whether more output was already waiting behind it (written in the
    /// same burst: after an answer, that is a line out of turn).
    lines: Receiver<std::io::Result<(String, bool)>>,
    stderr: Arc<Mutex<VecDeque<String>>>,
    /// The protocol version it speaks (1 until its `ready` says otherwise).
    protocol: u32,
    /// Requests sent so far: the number in the next call id.
    requests: u64,
    /// The latest requests' call ids and what each asked, oldest first.
    asked: VecDeque<(String, String)>,
}

impl Process {
    fn stderr_tail(&self) -> String {
        let tail = self.stderr.lock().map(|t| t.iter().cloned().collect::<Vec<_>>().join("\n")).unwrap_or_default();
        if tail.trim().is_empty() {
            "(its stderr is empty)".to_string()
        } else {
            format!("its stderr ends:\n{tail}")
        }
    }

    fn send(&mut self, message: &Value) -> Result<(), String> {
        let mut line = message.to_string();
        line.push('\n');
        let Some(stdin) = self.stdin.as_mut() else { return Err("its input is closed".into()) };
        stdin.write_all(line.as_bytes()).and_then(|()| stdin.flush()).map_err(|e| match self.exited() {
            Some(status) => format!("the program exited ({status})"),
            None => format!("cannot write to the program: {e}"),
        })
    }

    /// The next line as JSON, within `timeout`, and whether more output was already waiting behind it.
    fn receive_turn(&mut self, timeout: Duration) -> Result<(Value, bool), String> {
        match self.lines.recv_timeout(timeout) {
            Ok(Ok((line, more))) => serde_json::from_str(&line).map(|v| (v, more)).map_err(|e| {
                let shown: String = line.chars().take(200).collect();
                format!("wrote a line that is not JSON ({e}): {shown:?}")
            }),
            Ok(Err(e)) => Err(format!("cannot read the program's output: {e}")),
            Err(RecvTimeoutError::Timeout) => Err(format!("no answer within {} s", timeout.as_secs())),
            Err(RecvTimeoutError::Disconnected) => {
                // Give the exit status a moment to be known.
                std::thread::sleep(Duration::from_millis(50));
                match self.exited() {
                    Some(status) => Err(format!("the program exited ({status})")),
                    None => Err("the program closed its output".to_string()),
                }
            }
        }
    }

    fn exited(&mut self) -> Option<std::process::ExitStatus> {
        self.child.try_wait().ok().flatten()
    }

    /// Send `message` as a request of protocol version 2 about `what`, with a new call id.
    fn request(&mut self, mut message: Value, what: String) -> Result<Request, String> {
        self.requests += 1;
        let id = format!("{}-{:08x}", self.requests, unpredictable());
        if self.asked.len() == REMEMBERED_IDS {
            self.asked.pop_front();
        }
        self.asked.push_back((id.clone(), what.clone()));
        if let Some(fields) = message.as_object_mut() {
            fields.insert("call_id".into(), json!(id));
        }
        self.send(&message)?;
        Ok(Request { id, what })
    }

    /// The next message of the answer to `request` (protocol version 2), within `timeout`.
    fn answer(&mut self, request: &Request, timeout: Duration) -> Result<Value, String> {
        let (message, _) = self.receive_turn(timeout)?;
        self.check_id(request, &message)?;
        Ok(message)
    }

    /// `message` carries `request`'s call id; otherwise the fault names the id expected and the
    /// one received (and which request that one was, when it was an earlier request's).
    fn check_id(&self, request: &Request, message: &Value) -> Result<(), String> {
        let received = match message.get("call_id") {
            Some(Value::String(id)) if *id == request.id => return Ok(()),
            None | Some(Value::Null) => "no call id".to_string(),
            Some(Value::String(id)) => match self.asked.iter().find(|(asked, _)| asked == id) {
                Some((_, what)) => format!("call id {id:?} (the id of {what}, already answered)"),
                None => format!("call id {:?} (no request carried it)", clip(id)),
            },
            Some(other) => format!("call id {} (no request carried it)", clip(&other.to_string())),
        };
        Err(format!(
            "expected call id {:?} ({}), received {} with {received}",
            request.id,
            request.what,
            kind_of(message)
        ))
    }

    /// A line the program wrote when it had nothing to answer (a `compact` before any `call`,
    /// a `summarize` after its answer, a second answer): named, for the fault.
    fn stray(&mut self) -> Option<String> {
        self.stray_within(Duration::ZERO)
    }

    /// [`Process::stray`], waiting up to `wait` for it (a line known to be on its way).
    fn stray_within(&mut self, wait: Duration) -> Option<String> {
        match self.lines.recv_timeout(wait) {
            Ok(Ok((line, _))) => Some(match serde_json::from_str::<Value>(&line) {
                Ok(v) => kind_of(&v),
                Err(_) => "a line that is not JSON".to_string(),
            }),
            Ok(Err(e)) => Some(format!("unreadable output ({e})")),
            Err(_) => None,
        }
    }

    /// Kill the program and everything it started (it leads its own process group).
    fn kill(mut self) {
        forget_group(self.child.id());
        #[cfg(unix)]
        {
            let group = format!("-{}", self.child.id());
            let _ = Command::new("kill")
                .args(["-KILL", "--", &group])
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status();
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The process groups of the external strategies' programs started by this process and not
/// yet killed: what [`stop_all`] stops.
static LIVE_GROUPS: Mutex<Vec<u32>> = Mutex::new(Vec::new());

fn forget_group(id: u32) {
    if let Ok(mut groups) = LIVE_GROUPS.lock() {
        groups.retain(|g| *g != id);
    }
}

/// Kill the process group of every external strategy's program still running (each program
/// runs in its own group, so the programs it started go too). For the binary to call when it
/// is interrupted (SIGINT) or told to stop (SIGTERM), before it exits.
pub fn stop_all() {
    let groups: Vec<u32> = match LIVE_GROUPS.lock() {
        Ok(mut groups) => groups.drain(..).collect(),
        Err(poisoned) => poisoned.into_inner().drain(..).collect(),
    };
    for id in groups {
        #[cfg(unix)]
        {
            let _ = Command::new("kill")
                .args(["-KILL", "--", &format!("-{id}")])
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status();
        }
        #[cfg(not(unix))]
        let _ = id;
    }
}

/// An external strategy, built once per configuration (see the module docs).
pub struct ExternalStrategy {
    spec: ExternalSpec,
    /// The folder the command runs in (the experiment file's).
    base: PathBuf,
    label: &'static str,
    encoding: Encoding,
    exact: Exact,
    idle: Mutex<Vec<Process>>,
    identity: Mutex<Option<Identity>>,
}

impl std::fmt::Debug for ExternalStrategy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ExternalStrategy").field("label", &self.label).field("command", &self.spec.command).finish()
    }
}

impl ExternalStrategy {
    /// The strategy `spec` names, run in `base` (the experiment file's folder), metering
    /// requests with `encoding`.
    pub fn new(spec: ExternalSpec, base: &Path, encoding: Encoding) -> ExternalStrategy {
        // A configuration's label lives as long as the run; strategies name themselves with a
        // `&'static str`.
        let label: &'static str = Box::leak(spec.label.clone().into_boxed_str());
        ExternalStrategy {
            spec,
            // Absolute: the program starts in `base`, and a relative program path would be
            // resolved there again.
            base: std::path::absolute(base).unwrap_or_else(|_| base.to_path_buf()),
            label,
            encoding,
            exact: Exact::new(encoding),
            idle: Mutex::new(Vec::new()),
            identity: Mutex::new(None),
        }
    }

    /// The program's `name` and `version`, once a process has started.
    pub fn identity(&self) -> Option<Identity> {
        self.identity.lock().ok().and_then(|i| i.clone())
    }

    fn timeout(&self) -> Duration {
        Duration::from_secs(self.spec.timeout_s)
    }

    fn start(&self) -> Result<Process, String> {
        let program = &self.spec.command[0];
        let program: PathBuf = if program.contains('/') { self.base.join(program) } else { PathBuf::from(program) };
        let mut command = Command::new(&program);
        command
            .args(&self.spec.command[1..])
            .current_dir(&self.base)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        // Its own process group, so a kill reaches the programs it started too.
        #[cfg(unix)]
        std::os::unix::process::CommandExt::process_group(&mut command, 0);
        let mut child = command.spawn().map_err(|e| format!("cannot start {}: {e}", self.spec.command.join(" ")))?;
        if let Ok(mut groups) = LIVE_GROUPS.lock() {
            groups.push(child.id());
        }
        let (stdin, stdout, stderr) = match (child.stdin.take(), child.stdout.take(), child.stderr.take()) {
            (Some(i), Some(o), Some(e)) => (i, o, e),
            _ => return Err("the program's pipes could not be opened".into()),
        };
        let (tx, lines) = mpsc::channel();
        let cap = inputs::Kind::StrategyLine.cap();
        std::thread::spawn(move || {
            let mut reader = BufReader::new(stdout);
            loop {
                let line = read_line_bounded(&mut reader, cap);
                let stop = !matches!(line, Ok(Some(_)));
                let line = match line {
                    Ok(Some(line)) => Ok((line, !reader.buffer().is_empty())),
                    Ok(None) => break,
                    Err(e) => Err(e),
                };
                if tx.send(line).is_err() || stop {
                    break;
                }
            }
        });
        let tail = Arc::new(Mutex::new(VecDeque::new()));
        let keep = tail.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if let Ok(mut t) = keep.lock() {
                    if t.len() == STDERR_TAIL {
                        t.pop_front();
                    }
                    t.push_back(line);
                }
            }
        });
        let mut process = Process {
            child,
            stdin: Some(stdin),
            lines,
            stderr: tail,
            protocol: 1,
            requests: 0,
            asked: VecDeque::new(),
        };
        let handshake = (|| {
            // `protocol` stays 1 for version-1 programs, which check it; `call_id` is unknown
            // to them and ignored.
            let init = json!({"type": "init", "protocol": 1, "protocols": PROTOCOLS, "params": self.spec.params});
            let request = process.request(init, "`init`".into())?;
            let (ready, more) = process.receive_turn(self.timeout())?;
            let protocol = match ready.get("protocol") {
                None | Some(Value::Null) => 1,
                Some(v) => {
                    v.as_u64().and_then(|n| u32::try_from(n).ok()).filter(|n| PROTOCOLS.contains(n)).ok_or_else(
                        || format!("answered init with protocol {}; this harness speaks 1 and 2", clip(&v.to_string())),
                    )?
                }
            };
            if protocol >= 2 {
                process.check_id(&request, &ready)?;
            }
            if ready["type"] != "ready" {
                return Err(format!("answered init with {} instead of `ready`", kind_of(&ready)));
            }
            if protocol == 1 && more {
                if let Some(stray) = process.stray_within(OUT_OF_TURN_WAIT) {
                    return Err(format!("wrote {stray} out of turn (before the conversation began)"));
                }
            }
            process.protocol = protocol;
            let text = |k: &str| ready[k].as_str().unwrap_or("").to_string();
            Ok(Identity { name: text("name"), version: text("version"), protocol })
        })();
        match handshake {
            Ok(identity) => {
                if let Ok(mut slot) = self.identity.lock() {
                    slot.get_or_insert(identity);
                }
                Ok(process)
            }
            Err(e) => {
                std::thread::sleep(Duration::from_millis(50));
                let message = format!("{e}; {}", process.stderr_tail());
                process.kill();
                Err(message)
            }
        }
    }
}

impl Strategy for ExternalStrategy {
    fn name(&self) -> &'static str {
        self.label
    }
    fn estimator(&self) -> &dyn TokenCounter {
        &self.exact
    }
    fn threshold(&self, _ctx: &Context, _budget: &Budget) -> Option<u64> {
        None
    }
    fn should_compact(&self, _ctx: &Context, _budget: &Budget) -> bool {
        false
    }
    fn plan(&self, _ctx: &Context, _budget: &Budget, _trigger: Trigger) -> Option<Plan> {
        None
    }
    fn promises(&self, _ctx: &Context, _budget: &Budget) -> Promises {
        Promises::default()
    }
}

impl Sessions for ExternalStrategy {
    fn begin(&self, conversation: &str, budget: &Budget) -> Result<Box<dyn Session + '_>, String> {
        let reused = self.idle.lock().ok().and_then(|mut idle| idle.pop());
        let mut process = match reused {
            Some(p) => p,
            None => self.start().map_err(|e| format!("external strategy {}: {e}", self.label))?,
        };
        let begin = json!({
            "type": "begin",
            "conversation": conversation,
            "window": budget.context_window,
            "tokenizer": self.encoding,
        });
        let sent = if process.protocol >= 2 {
            // Answered `ok`: a line written before it, or after the previous conversation's
            // end, is read here and carries another id.
            process.request(begin, format!("`begin` of conversation {conversation}")).and_then(|request| {
                let ok = process.answer(&request, self.timeout())?;
                match ok["type"].as_str() {
                    Some("ok") => Ok(()),
                    _ => Err(format!("answered `begin` with {} instead of `ok`", kind_of(&ok))),
                }
            })
        } else {
            match process.stray() {
                Some(stray) => Err(format!("wrote {stray} out of turn (before the conversation began)")),
                None => process.send(&begin),
            }
        };
        if let Err(e) = sent {
            let message = format!(
                "external strategy {}, conversation {conversation}: {e}; {}",
                self.label,
                process.stderr_tail()
            );
            process.kill();
            return Err(message);
        }
        let state =
            State { process: Some(process), mirror: 0, call: 0, fault: None, pending: Vec::new(), closed: false };
        Ok(Box::new(ExternalSession { owner: self, conversation: conversation.to_string(), state: Mutex::new(state) }))
    }
}

/// One conversation's session with a process.
pub struct ExternalSession<'a> {
    owner: &'a ExternalStrategy,
    conversation: String,
    state: Mutex<State>,
}

struct State {
    process: Option<Process>,
    /// Entries of the current context the program knows.
    mirror: usize,
    /// Calls asked so far.
    call: u32,
    fault: Option<String>,
    /// The summary flags of the last `compact` answer's layout, slot by slot.
    pending: Vec<bool>,
    /// `end` was answered (protocol version 2): the process can serve another conversation.
    closed: bool,
}

impl ExternalSession<'_> {
    /// Record the fault `what`, found at `place` (`call 3`), and kill the program.
    fn fail(&self, state: &mut State, place: &str, what: String) {
        let tail = state.process.as_ref().map(|p| p.stderr_tail()).unwrap_or_default();
        state.fault = Some(format!(
            "external strategy {}, conversation {}, {place}: {what}; {tail}",
            self.owner.label, self.conversation
        ));
        if let Some(p) = state.process.take() {
            p.kill();
        }
    }

    /// Ask the program about the current call; `Ok(None)` is `keep`.
    fn ask(
        &self,
        state: &mut State,
        ctx: &Context,
        trigger: Trigger,
        summarize: &mut dyn FnMut(&Context, &SummaryRequest) -> SummaryOutcome,
    ) -> Result<Option<Plan>, String> {
        let timeout = self.owner.timeout();
        let Some(process) = state.process.as_mut() else { return Err("the program is not running".into()) };
        if state.mirror > ctx.len() {
            return Err(format!("the context has {} messages, fewer than the program's {}", ctx.len(), state.mirror));
        }
        let append: Vec<&Message> = ctx.entries()[state.mirror..].iter().map(Entry::message).collect();
        let call = json!({
            "type": "call",
            "append": append,
            "tokens": ctx.tokens(&self.owner.exact),
            "trigger": trigger.as_str(),
        });
        state.call += 1;
        state.mirror = ctx.len();
        // Version 2: every message of the answer carries the call's id. Version 1: a line
        // waiting before the call is sent is out of turn.
        let request = if process.protocol >= 2 {
            Some(process.request(call, format!("call {}", state.call - 1))?)
        } else {
            if let Some(stray) = process.stray() {
                return Err(format!(
                    "wrote {stray} out of turn (before this call was sent, or after its previous answer)"
                ));
            }
            process.send(&call)?;
            None
        };
        loop {
            let answer = match &request {
                Some(request) => process.answer(request, timeout)?,
                None => {
                    let (answer, more) = process.receive_turn(timeout)?;
                    // Every message of a turn waits for the harness (a `summarize` for its
                    // summary): a line already written behind it is out of turn.
                    if more {
                        if let Some(stray) = process.stray_within(OUT_OF_TURN_WAIT) {
                            return Err(format!("wrote {stray} out of turn (after {})", kind_of(&answer)));
                        }
                    }
                    answer
                }
            };
            match answer["type"].as_str() {
                Some("summarize") => {
                    let id = answer["id"].clone();
                    let (span_ctx, summary) = summary_request(&answer)?;
                    let mut reply = match summarize(&span_ctx, &summary) {
                        Ok(text) => json!({"type": "summary", "id": id, "text": text}),
                        Err(e) => json!({"type": "summary", "id": id, "error": e.reason}),
                    };
                    if let (Some(request), Some(fields)) = (&request, reply.as_object_mut()) {
                        fields.insert("call_id".into(), json!(request.id));
                    }
                    process.send(&reply)?;
                }
                Some("keep") => return Ok(None),
                Some("compact") => {
                    let (layout, summary_flags) = layout_of(&answer, ctx.len())?;
                    state.mirror = layout.len();
                    state.pending = summary_flags;
                    let mut plan = Plan::deterministic(trigger, "external", layout);
                    plan.notes.insert("program".into(), json!(self.owner.identity()));
                    return Ok(Some(plan));
                }
                _ => return Err(format!("answered a call with {}", kind_of(&answer))),
            }
        }
    }
}

impl Strategy for ExternalSession<'_> {
    fn name(&self) -> &'static str {
        self.owner.label
    }
    fn estimator(&self) -> &dyn TokenCounter {
        &self.owner.exact
    }
    fn threshold(&self, _ctx: &Context, _budget: &Budget) -> Option<u64> {
        None
    }
    /// Every call is the program's to decide, while it is healthy.
    fn should_compact(&self, _ctx: &Context, _budget: &Budget) -> bool {
        self.fault().is_none()
    }
    fn reacts_to(&self, trigger: Trigger) -> bool {
        trigger == Trigger::Overflow && self.fault().is_none()
    }
    fn plan(&self, ctx: &Context, budget: &Budget, trigger: Trigger) -> Option<Plan> {
        let mut none = |_: &Context, _: &SummaryRequest| -> SummaryOutcome {
            Err(SummaryFailure { reason: "no summarizer was given to this plan".into() })
        };
        self.plan_with(ctx, budget, trigger, &mut none)
    }
    fn plan_with(
        &self,
        ctx: &Context,
        _budget: &Budget,
        trigger: Trigger,
        summarize: &mut dyn FnMut(&Context, &SummaryRequest) -> SummaryOutcome,
    ) -> Option<Plan> {
        let mut state = self.state.lock().ok()?;
        if state.fault.is_some() {
            return None;
        }
        match self.ask(&mut state, ctx, trigger, summarize) {
            Ok(plan) => plan,
            Err(what) => {
                let place = format!("call {}", state.call.saturating_sub(1));
                self.fail(&mut state, &place, what);
                None
            }
        }
    }
    fn apply(&self, ctx: &Context, budget: &Budget, plan: &Plan, summaries: &[SummaryOutcome]) -> Compacted {
        let mut out = apply_layout(self, ctx, budget, plan, summaries);
        let flags = self.state.lock().map(|s| s.pending.clone()).unwrap_or_default();
        if !flags.iter().any(|f| *f) {
            return out;
        }
        // The program's summaries become summary entries: they stand for the recorded
        // messages the compaction removed, one round past the last.
        let kept: std::collections::HashSet<usize> = plan
            .layout
            .iter()
            .filter_map(|s| match s {
                Slot::Keep { index } => Some(*index),
                _ => None,
            })
            .collect();
        let mut covers: Vec<usize> = Vec::new();
        let mut round = 0;
        for (i, e) in ctx.entries().iter().enumerate() {
            match e.origin() {
                Origin::Summary { round: r, covers: c } => {
                    round = round.max(*r);
                    if !kept.contains(&i) {
                        covers.extend_from_slice(c);
                    }
                }
                Origin::Recorded { index } | Origin::Masked { index } if !kept.contains(&i) => covers.push(*index),
                _ => {}
            }
        }
        covers.sort_unstable();
        covers.dedup();
        let entries: Vec<Entry> = out
            .context
            .entries()
            .iter()
            .zip(flags.iter().copied().chain(std::iter::repeat(false)))
            .map(|(e, summary)| {
                if summary {
                    out.event.summaries.push(e.message().content.clone());
                    Entry::new(e.message().clone(), Origin::Summary { round: round + 1, covers: covers.clone() })
                } else {
                    e.clone()
                }
            })
            .collect();
        out.event.round = Some(round + 1);
        out.context = Context::from_entries(entries);
        out
    }
    fn promises(&self, _ctx: &Context, _budget: &Budget) -> Promises {
        Promises::default()
    }
}

impl Session for ExternalSession<'_> {
    fn fault(&self) -> Option<String> {
        self.state.lock().ok().and_then(|s| s.fault.clone())
    }

    /// Version 2: `end`, answered `ok` (a second answer to the last call, or any line written
    /// after it, is read here and carries another id). Version 1: nothing (the drop sends
    /// `end`, which has no answer).
    fn close(&self) -> Result<(), String> {
        let Ok(mut state) = self.state.lock() else { return Ok(()) };
        if let Some(fault) = &state.fault {
            return Err(fault.clone());
        }
        let timeout = self.owner.timeout();
        let closed = state.closed;
        let Some(process) = state.process.as_mut() else { return Ok(()) };
        if process.protocol < 2 || closed {
            return Ok(());
        }
        let ended = process
            .request(json!({"type": "end"}), format!("`end` of conversation {}", self.conversation))
            .and_then(|request| {
                let ok = process.answer(&request, timeout)?;
                match ok["type"].as_str() {
                    Some("ok") => Ok(()),
                    _ => Err(format!("answered `end` with {} instead of `ok`", kind_of(&ok))),
                }
            });
        match ended {
            Ok(()) => {
                state.closed = true;
                Ok(())
            }
            Err(what) => {
                self.fail(&mut state, "at its end", what);
                Err(state.fault.clone().unwrap_or_default())
            }
        }
    }
}

impl Drop for ExternalSession<'_> {
    fn drop(&mut self) {
        let Ok(mut state) = self.state.lock() else { return };
        let Some(mut process) = state.process.take() else { return };
        let reusable = state.fault.is_none()
            && if process.protocol >= 2 {
                // Only a conversation closed in turn; one left midway would leave its
                // answers behind.
                state.closed
            } else {
                // A program that wrote something after its last answer is not reused.
                process.stray().is_none() && process.send(&json!({"type": "end"})).is_ok()
            };
        if reusable {
            if let Ok(mut idle) = self.owner.idle.lock() {
                idle.push(process);
                return;
            }
        }
        process.kill();
    }
}

impl Drop for ExternalStrategy {
    fn drop(&mut self) {
        if let Ok(mut idle) = self.idle.lock() {
            for mut p in idle.drain(..) {
                // Closing stdin ends a well-behaved program; the rest are killed.
                drop(p.stdin.take());
                let deadline = std::time::Instant::now() + Duration::from_secs(2);
                while p.exited().is_none() && std::time::Instant::now() < deadline {
                    std::thread::sleep(Duration::from_millis(10));
                }
                p.kill();
            }
        }
    }
}

/// The next line of `reader` (without its newline), `None` at the end; an error for a line
/// over `cap` bytes, found while reading (at most `cap` bytes are held), or not UTF-8.
fn read_line_bounded(reader: &mut impl BufRead, cap: u64) -> std::io::Result<Option<String>> {
    let mut line: Vec<u8> = Vec::new();
    loop {
        let (done, used) = {
            let buf = reader.fill_buf()?;
            if buf.is_empty() {
                if line.is_empty() {
                    return Ok(None);
                }
                (true, 0)
            } else {
                match buf.iter().position(|&b| b == b'\n') {
                    Some(i) => {
                        line.extend_from_slice(&buf[..i]);
                        (true, i + 1)
                    }
                    None => {
                        line.extend_from_slice(buf);
                        (false, buf.len())
                    }
                }
            }
        };
        reader.consume(used);
        if line.len() as u64 > cap {
            return Err(std::io::Error::other(format!(
                "wrote a line over {cap} bytes (the cap of an external strategy's line; raise it with {})",
                inputs::FLAG
            )));
        }
        if done {
            if line.last() == Some(&b'\r') {
                line.pop();
            }
            return String::from_utf8(line)
                .map(Some)
                .map_err(|_| std::io::Error::new(std::io::ErrorKind::InvalidData, "wrote a line that is not UTF-8"));
        }
    }
}

/// 32 bits no program can predict: the second half of a call id.
fn unpredictable() -> u32 {
    use std::hash::{BuildHasher, Hasher};
    use std::sync::atomic::{AtomicU64, Ordering};
    static DRAWN: AtomicU64 = AtomicU64::new(0);
    // `RandomState` keys SipHash with random bits drawn for the thread.
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u64(DRAWN.fetch_add(1, Ordering::Relaxed));
    hasher.finish() as u32
}

/// At most 80 characters of `text`, for a message.
fn clip(text: &str) -> String {
    let mut out: String = text.chars().take(80).collect();
    if out.len() < text.len() {
        out.push_str("...");
    }
    out
}

fn kind_of(v: &Value) -> String {
    match v["type"].as_str() {
        Some(t) => format!("a `{t}` message"),
        None => "a message with no `type`".to_string(),
    }
}

/// The context and request of a `summarize` message.
fn summary_request(v: &Value) -> Result<(Context, SummaryRequest), String> {
    if v["id"].is_null() {
        return Err("sent `summarize` with no `id`".into());
    }
    let messages: Vec<Message> = serde_json::from_value(v["messages"].clone())
        .map_err(|e| format!("sent `summarize` whose `messages` are not messages: {e}"))?;
    let instructions = v["instructions"].as_str().unwrap_or("").to_string();
    let max_tokens = v["max_tokens"].as_u64().map_or(1_000, |n| n.clamp(1, u64::from(u32::MAX)) as u32);
    let ctx = Context::from_messages(messages);
    let request = SummaryRequest::new((0..ctx.len()).collect(), external_prompt(instructions), max_tokens, 1);
    Ok((ctx, request))
}

/// The layout of a `compact` answer over a context of `len` entries, and which slots are
/// summaries.
fn layout_of(v: &Value, len: usize) -> Result<(Vec<Slot>, Vec<bool>), String> {
    let items = v["context"].as_array().ok_or("sent `compact` with no `context` list")?;
    let mut layout = Vec::new();
    let mut summary = Vec::new();
    for (k, item) in items.iter().enumerate() {
        if let Some(range) = item.get("keep") {
            let pair = range.as_array().filter(|a| a.len() == 2);
            let bounds = pair.and_then(|a| Some((a[0].as_u64()? as usize, a[1].as_u64()? as usize)));
            match bounds {
                Some((i, j)) if i < j && j <= len => {
                    for index in i..j {
                        layout.push(Slot::Keep { index });
                        summary.push(false);
                    }
                }
                _ => {
                    return Err(format!(
                        "sent an invalid range {range} in context item {k} (a keep is [i, j] with 0 <= i < j <= {len})"
                    ))
                }
            }
        } else if let Some(m) = item.get("message") {
            let mut m = m.clone();
            let is_summary = m.get("summary").and_then(Value::as_bool).unwrap_or(false);
            if let Some(o) = m.as_object_mut() {
                o.remove("summary");
            }
            let message: Message = serde_json::from_value(m)
                .map_err(|e| format!("sent context item {k} whose `message` is not a message: {e}"))?;
            layout.push(Slot::insert(message, Inserted::Other));
            summary.push(is_summary);
        } else {
            return Err(format!("sent context item {k} with neither `keep` nor `message`"));
        }
    }
    Ok((layout, summary))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_compact_answer_becomes_kept_entries_and_new_messages() {
        let v = json!({"type": "compact", "context": [
            {"keep": [0, 1]},
            {"message": {"role": "user", "content": "so far", "summary": true}},
            {"keep": [3, 5]},
        ]});
        let (layout, flags) = layout_of(&v, 5).unwrap();
        assert_eq!(layout.len(), 4);
        assert_eq!(flags, [false, true, false, false]);
        assert!(matches!(layout[2], Slot::Keep { index: 3 }));
        for bad in [json!([2, 2]), json!([0, 6]), json!([3]), json!("0-1")] {
            let e = layout_of(&json!({"context": [{"keep": bad}]}), 5).unwrap_err();
            assert!(e.contains("invalid range"), "{e}");
        }
        assert!(layout_of(&json!({"context": [{"drop": [0, 1]}]}), 5).is_err());
    }
}
