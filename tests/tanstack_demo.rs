//! The FAQ agent of the `tanstack_host` example (`examples/tanstack_shared`) on the TanStack
//! host and driver, without a network: the flow `scripts/interop/tanstack/faq.mjs` runs over
//! HTTP against the running example, here through the same `POST control` bodies. Against
//! the spec (tanstack-harness-wire-protocol.md, "Waits for a person", l. 425-433) and the
//! interrupt shape of research/tanstack-ai-client.md §5.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

#[path = "../examples/tanstack_shared/mod.rs"]
mod tanstack_shared;

#[path = "../harness-tanstack/tests/support/driver.rs"]
#[allow(dead_code)]
mod driver_support;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use futures::executor::LocalPool;
use futures::task::LocalSpawnExt;
use harness_tanstack::agui::AguiEvent;
use harness_tanstack::driver::{Service, run_turns};
use harness_tanstack::host::HostConfig;
use harness_tanstack::log::{EventLog, FileLog, MemoryLog};
use serde_json::{Value, json};

use driver_support::{names, read_thread, send, service, service_over};
use tanstack_shared::{GOODBYE, faq_agent, faq_model, faq_tools};

/// The FAQ agent served on `svc`; the counter of the refund's runs.
fn serve_faq<L: EventLog + 'static>(svc: &Service<L>, pool: &LocalPool, runs: &Arc<AtomicUsize>) {
    let tools = faq_tools(Arc::clone(runs));
    let agent = faq_agent(&tools);
    pool.spawner()
        .spawn_local(run_turns(svc.clone(), agent, faq_model(), tools))
        .unwrap();
}

/// A host serving the FAQ agent over a memory log.
fn faq_host() -> (Service<MemoryLog>, LocalPool, Arc<AtomicUsize>) {
    let (svc, _) = service();
    let pool = LocalPool::new();
    let runs = Arc::new(AtomicUsize::new(0));
    serve_faq(&svc, &pool, &runs);
    (svc, pool, runs)
}

/// The thread's events (every one valid AG-UI 1.0, read strictly).
fn events<L: EventLog + 'static>(
    svc: &Service<L>,
    pool: &mut LocalPool,
    thread: &str,
) -> Vec<Value> {
    let frames = read_thread(pool, svc, thread);
    for f in frames.iter().filter(|f| f["type"] == "harness.event") {
        AguiEvent::from_json_strict(&f["event"].to_string())
            .unwrap_or_else(|e| panic!("not AG-UI: {} ({e})", f["event"]));
    }
    frames
        .into_iter()
        .filter(|f| f["type"] == "harness.event")
        .map(|f| f["event"].clone())
        .collect()
}

fn of<'a>(events: &'a [Value], name: &str) -> Vec<&'a Value> {
    events
        .iter()
        .filter(|e| e["name"] == name || e["type"] == name)
        .collect()
}

fn text(events: &[Value]) -> String {
    of(events, "TEXT_MESSAGE_CONTENT")
        .iter()
        .map(|e| e["delta"].as_str().unwrap())
        .collect()
}

fn prompt(message: &str) -> Value {
    json!({"op": "prompt", "message": message})
}

fn resolve(interrupt_id: &str, approved: bool) -> Value {
    json!({"op": "resolve", "resume": [{"interruptId": interrupt_id, "status": "resolved",
        "payload": {"approved": approved}}]})
}

/// "Please refund order 42": the run ends waiting for an approval, with no tool result, and
/// the refund's code has not run. The interrupt's id, from `harness.wait.opened` kind
/// `approval` ("A wait opened in the log", l. 429).
fn parked_refund<L: EventLog + 'static>(
    svc: &Service<L>,
    pool: &mut LocalPool,
    runs: &Arc<AtomicUsize>,
) -> String {
    send(svc, pool, "faq", prompt("Please refund order 42"));
    let ev = events(svc, pool, "faq");
    let opened = of(&ev, "harness.wait.opened");
    assert_eq!(opened.len(), 1);
    assert_eq!(opened[0]["value"]["kind"], "approval");
    let fin = of(&ev, "RUN_FINISHED")[0];
    assert_eq!(fin["outcome"]["type"], "interrupt");
    assert_eq!(
        fin["outcome"]["interrupts"][0]["metadata"],
        json!({"kind": "approval", "toolName": "refund", "input": {"order_id": 42}})
    );
    assert!(of(&ev, "TOOL_CALL_RESULT").is_empty(), "no tool result");
    assert_eq!(
        runs.load(Ordering::SeqCst),
        0,
        "the gated tool never runs unapproved"
    );
    opened[0]["value"]["waitId"].as_str().unwrap().to_owned()
}

/// The refund's results among the thread's tool results.
fn refund_results(ev: &[Value]) -> Vec<String> {
    of(ev, "TOOL_CALL_RESULT")
        .iter()
        .map(|e| e["content"].as_str().unwrap().to_owned())
        .filter(|c| c.contains("refund"))
        .collect()
}

/// Approve → "exactly one TOOL_CALL_RESULT from the refund tool, whose result reads
/// refunded order 42", in a run driven again (`parentRunId`), and the agent says it.
#[test]
fn the_faq_refund_waits_for_its_approval_and_runs_once_when_approved() {
    let (svc, mut pool, runs) = faq_host();
    let wait_id = parked_refund(&svc, &mut pool, &runs);
    let r = send(&svc, &mut pool, "faq", resolve(&wait_id, true));
    assert_eq!(r["status"], "accepted");
    let ev = events(&svc, &mut pool, "faq");
    assert_eq!(runs.load(Ordering::SeqCst), 1);
    let results = refund_results(&ev);
    assert_eq!(results.len(), 1);
    assert!(results[0].contains("refunded order 42"), "{results:?}");
    assert_eq!(of(&ev, "RUN_STARTED")[1]["parentRunId"], "op-1");
    assert_eq!(text(&ev), "Done: refunded order 42.");
    // Approved once: the same decision again drives nothing.
    let again = send(&svc, &mut pool, "faq", resolve(&wait_id, true));
    assert_eq!(again["reason"], "not_waiting");
    assert_eq!(runs.load(Ordering::SeqCst), 1);
}

/// `approved: false`: "the tool's code never runs and no result of it appears"; the agent
/// is told it was denied, and says so.
#[test]
fn a_denied_faq_refund_never_runs() {
    let (svc, mut pool, runs) = faq_host();
    let wait_id = parked_refund(&svc, &mut pool, &runs);
    send(&svc, &mut pool, "faq", resolve(&wait_id, false));
    let ev = events(&svc, &mut pool, "faq");
    assert_eq!(runs.load(Ordering::SeqCst), 0);
    assert!(!ev.iter().any(|e| e.to_string().contains("refunded order")));
    assert_eq!(
        text(&ev),
        "I can't refund that: approval denied: the user denied it."
    );
}

/// "What are your hours?" names no day: the agent asks "Which day?" (`harness.question`,
/// "Answer it with the answer input", l. 431), and `{op: answer, questionId, value:
/// Saturday}` continues the turn: `get_hours` for Saturday, the answer, and the step,
/// reasoning and state around the look-up.
#[test]
fn hours_without_a_day_ask_which_day_and_the_answer_continues_the_turn() {
    let (svc, mut pool, _) = faq_host();
    send(&svc, &mut pool, "faq", prompt("What are your hours?"));
    let ev = events(&svc, &mut pool, "faq");
    let q = of(&ev, "harness.question");
    assert_eq!(q.len(), 1);
    assert_eq!(q[0]["value"]["message"], "Which day?");
    assert_eq!(
        of(&ev, "harness.wait.opened")[0]["value"]["kind"],
        "question"
    );
    let question_id = q[0]["value"]["questionId"].as_str().unwrap().to_owned();
    let r = send(
        &svc,
        &mut pool,
        "faq",
        json!({"op": "answer", "questionId": question_id, "value": "Saturday"}),
    );
    assert_eq!(r["status"], "accepted");
    let ev = events(&svc, &mut pool, "faq");
    assert_eq!(
        of(&ev, "harness.question.answered")[0]["value"],
        json!({"questionId": question_id})
    );
    let hours = of(&ev, "TOOL_CALL_RESULT");
    assert_eq!(hours.len(), 1);
    assert!(hours[0]["content"].as_str().unwrap().contains("Saturday"));
    assert_eq!(text(&ev), "On Saturday we're open 9am to 1pm.");
    let n = names_of(&ev);
    for t in [
        "STEP_STARTED",
        "REASONING_START",
        "REASONING_MESSAGE_CONTENT",
        "REASONING_END",
        "STATE_SNAPSHOT",
        "STATE_DELTA",
        "STEP_FINISHED",
    ] {
        assert!(n.iter().any(|x| x == t), "no {t} in {n:?}");
    }
}

fn names_of(ev: &[Value]) -> Vec<String> {
    let frames: Vec<Value> = ev
        .iter()
        .map(|e| json!({"type": "harness.event", "event": e}))
        .collect();
    names(&frames)
}

/// "What are your hours on Saturday?" answers at once through `get_hours`: no question.
#[test]
fn hours_on_a_named_day_answer_at_once() {
    let (svc, mut pool, _) = faq_host();
    send(
        &svc,
        &mut pool,
        "faq",
        prompt("What are your hours on Saturday?"),
    );
    let ev = events(&svc, &mut pool, "faq");
    assert!(of(&ev, "harness.question").is_empty());
    assert!(of(&ev, "harness.wait.opened").is_empty());
    assert_eq!(of(&ev, "TOOL_CALL_START")[0]["toolCallName"], "get_hours");
    assert_eq!(text(&ev), "On Saturday we're open 9am to 1pm.");
    assert!(of(&ev, "RUN_FINISHED")[0].get("outcome").is_none());
}

/// A person asked for: `harness.handoff` to `{human: true}` by code, with the `waitId` of a
/// wait of kind `human` (l. 411, 429). "bye" tries the `hangup` command: `Unsupported` here
/// (TanStack has no platform commands), so the agent says goodbye instead.
#[test]
fn the_faq_hands_off_to_a_person_and_cannot_hang_up() {
    let (svc, mut pool, _) = faq_host();
    send(&svc, &mut pool, "faq", prompt("I'd like a person, please"));
    let ev = events(&svc, &mut pool, "faq");
    let h = &of(&ev, "harness.handoff")[0]["value"];
    assert_eq!(h["to"], json!({"human": true}));
    assert_eq!(h["by"], "code");
    let w = &of(&ev, "harness.wait.opened")[0]["value"];
    assert_eq!(w["kind"], "human");
    assert_eq!(w["waitId"], h["waitId"]);
    send(&svc, &mut pool, "faq", prompt("bye"));
    let ev = events(&svc, &mut pool, "faq");
    assert_eq!(text(&ev), GOODBYE);
}

/// The refund parked on a durable host (`FileLog`) waits across a restart of the host on the
/// same folder: approved after it, it runs exactly once.
#[test]
fn an_approved_faq_refund_runs_once_across_a_durable_restart() {
    let dir = std::env::temp_dir().join(format!("harness-faq-restart-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let runs = Arc::new(AtomicUsize::new(0));
    let wait_id = {
        let (svc, _) = service_over(HostConfig::default(), FileLog::open(&dir).unwrap());
        let mut pool = LocalPool::new();
        serve_faq(&svc, &pool, &runs);
        parked_refund(&svc, &mut pool, &runs)
    };
    let (svc, _) = service_over(HostConfig::default(), FileLog::open(&dir).unwrap());
    let mut pool = LocalPool::new();
    serve_faq(&svc, &pool, &runs);
    let r = send(&svc, &mut pool, "faq", resolve(&wait_id, true));
    assert_eq!(r["status"], "accepted", "{r}");
    let ev = events(&svc, &mut pool, "faq");
    assert_eq!(runs.load(Ordering::SeqCst), 1);
    assert_eq!(refund_results(&ev).len(), 1);
    assert_eq!(text(&ev), "Done: refunded order 42.");
    let _ = std::fs::remove_dir_all(&dir);
}
