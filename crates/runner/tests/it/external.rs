//! External strategies through the session interface, without a run: the handshake agrees on a
//! protocol version; in version 2 the call ids decide which answer belongs to which request, so
//! a program answering out of turn faults whatever its timing, with both ids named; version 1
//! is still spoken; a closed version-2 session's process serves the next conversation.

use std::path::PathBuf;

use compaction::{Budget, Context, Encoding, Message, Plan, Slot, SummaryOutcome, SummaryRequest, Trigger};
use runlog::external::ExternalSpec;
use runner::external::ExternalStrategy;
use runner::session::{Session, Sessions};

/// A program in Python (standard library only) whose first argument picks how it behaves.
const PROGRAM: &str = r#"
import json, sys, time

mode = sys.argv[1]
v2 = mode != "v1"

def send(obj, call_id):
    if v2 and call_id is not None:
        obj = dict(obj, call_id=call_id)
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()

def read():
    line = sys.stdin.readline()
    if not line:
        sys.exit(0)
    return json.loads(line)

init = read()
assert init["protocol"] == 1 and init["protocols"] == [1, 2], init
ready = {"type": "ready", "name": "scripted", "version": "0.2"}
if mode == "v3":
    ready["protocol"] = 3
elif v2:
    ready["protocol"] = 2
send(ready, init["call_id"])
conversations, calls = 0, 0
while True:
    msg = read()
    call_id = msg.get("call_id")
    if not v2:
        assert call_id is None, msg  # version 1: no ids after init
    if msg["type"] in ("begin", "end"):
        if msg["type"] == "begin":
            conversations, calls = conversations + 1, 0
        if v2:
            send({"type": "ok"}, call_id)
        if msg["type"] == "begin" and mode == "late":
            time.sleep(0.05)
            send({"type": "compact", "context": [{"keep": [0, 1]}]}, call_id)
        continue
    calls += 1
    if mode == "late":
        time.sleep(0.05)
        send({"type": "keep"}, call_id)
    elif mode == "after-last" and calls == 2:
        send({"type": "keep"}, call_id)
        send({"type": "keep"}, call_id)
    elif mode == "summary-id":
        # A summary through the harness: the reply carries this call's id too.
        request = {"type": "summarize", "id": "s%d" % calls, "messages": msg["append"], "instructions": "x"}
        send(request, call_id)
        summary = read()
        assert summary["type"] == "summary" and summary["call_id"] == call_id, (summary, call_id)
        written = {"role": "user", "content": summary["text"], "summary": True}
        send({"type": "compact", "context": [{"message": written}]}, call_id)
    else:
        # The conversation's number, as a new message: which process answered.
        text = "conversation %d, call %d" % (conversations, calls)
        send({"type": "compact", "context": [{"message": {"role": "user", "content": text}}]}, call_id)
"#;

struct Scratch(PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn strategy(name: &str, mode: &str) -> (ExternalStrategy, Scratch) {
    let dir = std::env::temp_dir().join(format!("compactlens-runner-external-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("temp dir");
    std::fs::write(dir.join("program.py"), PROGRAM).expect("program");
    let spec = ExternalSpec {
        command: vec!["python3".into(), "program.py".into(), mode.into()],
        label: format!("scripted-{name}"),
        timeout_s: 5,
        params: serde_json::Map::new(),
    };
    (ExternalStrategy::new(spec, &dir, Encoding::O200kBase), Scratch(dir))
}

/// Ask `session` about a call over `ctx`, summaries answered "so far".
fn ask(session: &dyn Session, ctx: &Context) -> Option<Plan> {
    let mut summarize = |_: &Context, _: &SummaryRequest| -> SummaryOutcome { Ok("so far".into()) };
    session.plan_with(ctx, &Budget::new(32_000), Trigger::Proactive, &mut summarize)
}

fn inserted(plan: &Plan) -> Vec<String> {
    plan.layout
        .iter()
        .filter_map(|s| match s {
            Slot::Insert { message, .. } => Some(message.content.clone()),
            _ => None,
        })
        .collect()
}

fn context() -> Context {
    Context::from_messages([Message::system("You are a coding agent."), Message::user("fix the bug")])
}

#[test]
fn version_2_is_agreed_and_a_closed_session_s_process_serves_the_next_conversation() {
    let (s, _dir) = strategy("v2", "v2");
    let budget = Budget::new(32_000);
    for conversation in 1..=2 {
        let session = s.begin(&format!("c{conversation}"), &budget).expect("begins");
        let plan = ask(session.as_ref(), &context()).expect("a compact answer");
        // The same process: its second conversation is numbered 2.
        assert_eq!(inserted(&plan), [format!("conversation {conversation}, call 1")]);
        assert_eq!(session.fault(), None);
        session.close().expect("`end` answered `ok`");
    }
    let identity = s.identity().expect("started");
    assert_eq!((identity.name.as_str(), identity.version.as_str(), identity.protocol), ("scripted", "0.2", 2));
}

#[test]
fn a_summary_reply_carries_the_call_id_of_its_call() {
    let (s, _dir) = strategy("summary", "summary-id");
    let session = s.begin("c1", &Budget::new(32_000)).expect("begins");
    let plan = ask(session.as_ref(), &context()).expect("a compact answer");
    assert_eq!(inserted(&plan), ["so far"], "{:?}", session.fault());
    session.close().expect("closes");
}

#[test]
fn version_1_is_still_spoken_without_ids_or_ok() {
    let (s, _dir) = strategy("v1", "v1");
    let budget = Budget::new(32_000);
    for conversation in 1..=2 {
        let session = s.begin(&format!("c{conversation}"), &budget).expect("begins");
        let plan = ask(session.as_ref(), &context()).expect("a compact answer");
        assert_eq!(inserted(&plan), [format!("conversation {conversation}, call 1")], "{:?}", session.fault());
        session.close().expect("nothing to close in version 1");
    }
    assert_eq!(s.identity().expect("started").protocol, 1);
}

#[test]
fn late_answers_after_an_unasked_one_fault_at_the_first_call_by_their_ids() {
    let (s, _dir) = strategy("late", "late");
    let session = s.begin("c1", &Budget::new(32_000)).expect("begins");
    assert!(ask(session.as_ref(), &context()).is_none(), "the unasked compact is not applied");
    let fault = session.fault().expect("a fault");
    assert!(fault.contains("conversation c1, call 0: expected call id \"3-"), "{fault}");
    assert!(fault.contains("(call 0), received a `compact` message with call id \"2-"), "{fault}");
    assert!(fault.contains("(the id of `begin` of conversation c1, already answered)"), "{fault}");
    // Whatever else comes is not asked for: the program is gone.
    assert!(ask(session.as_ref(), &context()).is_none());
}

#[test]
fn a_second_answer_to_the_last_call_faults_at_the_end() {
    let (s, _dir) = strategy("after-last", "after-last");
    let session = s.begin("c1", &Budget::new(32_000)).expect("begins");
    let mut ctx = context();
    assert!(ask(session.as_ref(), &ctx).is_some());
    ctx.push(compaction::Entry::recorded(2, Message::assistant("done")));
    assert!(ask(session.as_ref(), &ctx).is_none(), "the second call's answer is `keep`");
    assert_eq!(session.fault(), None, "nothing is read after an answer until the next request");
    let fault = session.close().expect_err("the second answer is read at `end`");
    assert!(fault.contains("conversation c1, at its end: expected call id \"5-"), "{fault}");
    assert!(fault.contains("(`end` of conversation c1), received a `keep` message with call id \"4-"), "{fault}");
    assert!(fault.contains("(the id of call 1, already answered)"), "{fault}");
}

#[test]
fn a_protocol_version_not_offered_fails_the_start() {
    let (s, _dir) = strategy("v3", "v3");
    let error = s.begin("c1", &Budget::new(32_000)).err().expect("refused");
    assert!(error.contains("answered init with protocol 3; this harness speaks 1 and 2"), "{error}");
}
