//! Waits for a person through the driver: approvals, questions, hand-offs, and what else an
//! agent may do on this host, against the spec (tanstack-harness-wire-protocol.md, "Waits
//! for a person", l. 425-433) and the interrupt shape `@tanstack/ai-client` resolves
//! (research/tanstack-ai-client.md §5). Each test quotes what it checks.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use futures::executor::LocalPool;
use futures::task::LocalSpawnExt;
use harness_core::SinkError;
use harness_core::agent::ToolLoopAgent;
use harness_core::interaction::{Command, Feature, Handoff, Question, StateUpdate, Step};
use harness_core::message::{Message, ModelRequest, Part, Role, ToolCall, ToolResult};
use harness_core::model::ScriptedModel;
use harness_core::tool::{Tool, Tools};
use harness_tanstack::agui::AguiEvent;
use harness_tanstack::driver::{Service, run_turns};
use harness_tanstack::host::HostConfig;
use harness_tanstack::log::{EventLog, FileLog, MemoryLog};
use serde_json::{Value, json};

mod support;
use support::driver::{
    FnHarness, control, harness, names, read_all, send, serve, service, service_over,
};
use support::temp_dir;

/// `refund(order_id)`, gated; counts the times its code ran.
fn refund_tool(runs: &Arc<AtomicUsize>) -> Tool {
    let runs = Arc::clone(runs);
    Tool::json("refund", "Refund an order", move |args| {
        runs.fetch_add(1, Ordering::SeqCst);
        Ok(json!({"refunded": format!("refunded order {}", args["order_id"])}))
    })
    .requires_approval()
}

/// The model of a refund turn: calls `refund` for order 42 (`call_1`) when asked for a
/// refund, then says what its result says; says hi otherwise. A function of the request only
/// (a new one after a restart answers the same).
fn refund_model() -> ScriptedModel {
    ScriptedModel::new().otherwise(|req| {
        let Some(r) = last_tool_result(req) else {
            let asked = req.last_user_text().unwrap_or_default();
            if !asked.contains("Refund") {
                return Ok(Message::assistant("Hi."));
            }
            let args = json!({"order_id": 42})
                .as_object()
                .cloned()
                .unwrap_or_default();
            return Ok(Message {
                role: Role::Assistant,
                parts: vec![Part::ToolCall(ToolCall::new("call_1", "refund", args))],
            });
        };
        Ok(Message::assistant(if r.is_denied() {
            format!("Not refunded: {}.", r.error)
        } else {
            "Refunded.".to_owned()
        }))
    })
}

/// A service whose turns run a tool loop over `refund` (gated by the registry; the agent
/// offers it as registered, or, `ungated`, as a plain tool).
fn refund_service<L: EventLog + 'static>(
    svc: &Service<L>,
    pool: &LocalPool,
    runs: &Arc<AtomicUsize>,
    ungated: bool,
) {
    let tools = Tools::new().with(refund_tool(runs));
    let agent = if ungated {
        ToolLoopAgent::new("shop").with_tool(tools.get("refund").unwrap().definition().clone())
    } else {
        ToolLoopAgent::new("shop").with_tools(&tools)
    };
    pool.spawner()
        .spawn_local(run_turns(svc.clone(), agent, refund_model(), tools))
        .unwrap();
}

/// The result of the last message, when it is a tool's.
fn last_tool_result(req: &ModelRequest) -> Option<ToolResult> {
    req.messages.last()?.parts.iter().find_map(|p| match p {
        Part::ToolResult(r) => Some(r.clone()),
        _ => None,
    })
}

fn prompt(text: &str) -> Value {
    json!({"op": "prompt", "message": text})
}

fn approve(wait_id: &str, approved: bool) -> Value {
    json!({"op": "resolve", "resume": [
        {"interruptId": wait_id, "status": "resolved", "payload": {"approved": approved}}
    ]})
}

fn frames_of<'a>(frames: &'a [Value], name: &str) -> Vec<&'a Value> {
    frames
        .iter()
        .filter(|f| f["event"]["name"] == name || f["event"]["type"] == name)
        .collect()
}

/// The default host configuration, changed by `f`.
fn cfg_with(f: impl FnOnce(&mut HostConfig)) -> HostConfig {
    let mut cfg = HostConfig::default();
    f(&mut cfg);
    cfg
}

/// How many times the refund's code ran.
fn ran(runs: &AtomicUsize) -> usize {
    runs.load(Ordering::SeqCst)
}

/// "Refund order 42" on `thread-1`, as far as it goes.
fn ask_refund<L: EventLog + 'static>(svc: &Service<L>, pool: &mut LocalPool) -> Value {
    send(svc, pool, "thread-1", prompt("Refund order 42"))
}

/// The refund of `thread-1` approved, and the turn driven as far as it goes.
fn approve_refund<L: EventLog + 'static>(svc: &Service<L>, pool: &mut LocalPool) -> Value {
    send(svc, pool, "thread-1", approve("approval-call_1", true))
}

/// Every event valid AG-UI 1.0, read strictly.
fn all_valid(frames: &[Value]) {
    for f in frames.iter().filter(|f| f["type"] == "harness.event") {
        AguiEvent::from_json_strict(&f["event"].to_string())
            .unwrap_or_else(|e| panic!("not AG-UI: {} ({e})", f["event"]));
    }
}

/// A host over a memory log serving the refund turn: the service, the pool and the runs of
/// the tool's code.
fn refund_host(
    cfg: HostConfig,
    ungated: bool,
) -> (Service<MemoryLog>, LocalPool, Arc<AtomicUsize>) {
    let (svc, _) = service_over(cfg, MemoryLog::default());
    let pool = LocalPool::new();
    let runs = Arc::new(AtomicUsize::new(0));
    refund_service(&svc, &pool, &runs, ungated);
    (svc, pool, runs)
}

/// "harness.wait.opened { waitId, kind, runId, message? }. … The interrupts of a turn come in
/// its RUN_FINISHED" (l. 429), and §5: "Stream: TOOL_CALL_START/ARGS/END for the tool, then
/// RUN_FINISHED with this interrupt: {id: approval-…, reason: approval_required, message,
/// toolCallId, metadata: {kind: approval, toolName, input}}". No tool result, the tool never
/// ran.
#[test]
fn a_gated_call_opens_an_approval_wait_and_the_run_ends_with_its_interrupt() {
    let (svc, mut pool, runs) = refund_host(HostConfig::default(), false);
    let (status, r) = control(&svc, "thread-1", prompt("Refund order 42"));
    assert_eq!((status, &r["status"]), (200, &json!("accepted")));
    pool.run_until_stalled();
    let frames = read_all(&mut pool, &svc);
    all_valid(&frames);
    let n = names(&frames);
    let i = n.iter().position(|x| x == "TOOL_CALL_START").unwrap();
    assert_eq!(
        n[i..],
        [
            "TOOL_CALL_START",
            "TOOL_CALL_ARGS",
            "TOOL_CALL_END",
            "harness.wait.opened",
            "RUN_FINISHED",
            "harness.operation.finished",
            "harness.input.settled"
        ]
    );
    assert!(frames_of(&frames, "TOOL_CALL_RESULT").is_empty());
    assert_eq!(ran(&runs), 0);
    let call_id = frames_of(&frames, "TOOL_CALL_START")[0]["event"]["toolCallId"]
        .as_str()
        .unwrap()
        .to_owned();
    let wait = &frames_of(&frames, "harness.wait.opened")[0]["event"]["value"];
    assert_eq!(
        *wait,
        json!({"waitId": format!("approval-{call_id}"), "kind": "approval", "runId": "op-1",
               "message": "Approve refund?"})
    );
    let fin = &frames_of(&frames, "RUN_FINISHED")[0]["event"];
    assert_eq!(
        fin["outcome"],
        json!({"type": "interrupt", "interrupts": [{
            "id": format!("approval-{call_id}"),
            "reason": "approval_required",
            "message": "Approve refund?",
            "toolCallId": call_id,
            "metadata": {"kind": "approval", "toolName": "refund", "input": {"order_id": 42}}
        }]})
    );
}

/// §5: "The client answers with a new POST … resume:[{interruptId, status: resolved,
/// payload: {approved: true}}] … The reply streams a normal run with parentRunId in
/// RUN_STARTED". Here through the `resolve` input: the wait settles ("harness.wait.settled
/// { waitId, outcome }. outcome is answered", l. 430), the turn runs again as `op-2` with
/// `parentRunId` `op-1`, what it did before is not shown again (no second TOOL_CALL_START,
/// its first completion served, not asked of the model again), and the tool runs exactly
/// once. The same resolve again is `not_waiting` and runs nothing.
#[test]
fn an_approved_call_runs_exactly_once_in_a_run_driven_again() {
    let (svc, mut pool, runs) = refund_host(HostConfig::default(), false);
    ask_refund(&svc, &mut pool);
    let before = read_all(&mut pool, &svc).len();
    let r = approve_refund(&svc, &mut pool);
    assert_eq!(
        r,
        json!({"inputId": "in-2", "status": "accepted", "operationId": "op-2"})
    );
    let frames = read_all(&mut pool, &svc);
    all_valid(&frames);
    let after = &frames[before..];
    assert_eq!(
        names(after),
        [
            "harness.input.accepted",
            "harness.wait.settled",
            "RUN_STARTED",
            "harness.operation.started",
            "harness.input.applied",
            "TOOL_CALL_RESULT",
            "TEXT_MESSAGE_START",
            "TEXT_MESSAGE_CONTENT",
            "TEXT_MESSAGE_END",
            "harness.usage",
            "RUN_FINISHED",
            "harness.operation.finished",
            "harness.input.settled"
        ]
    );
    assert_eq!(
        after[1]["event"]["value"],
        json!({"waitId": "approval-call_1", "outcome": "answered"})
    );
    assert_eq!(after[2]["event"]["parentRunId"], "op-1");
    assert_eq!(after[2]["event"]["runId"], "op-2");
    assert_eq!(after[5]["event"]["toolCallId"], "call_1");
    assert!(
        after[5]["event"]["content"]
            .as_str()
            .unwrap()
            .contains("refunded order 42")
    );
    assert_eq!(after[7]["event"]["delta"], "Refunded.");
    assert!(after[10]["event"].get("outcome").is_none(), "a success");
    assert_eq!(ran(&runs), 1);
    // Resolved already: "not_waiting", and nothing runs.
    assert_eq!(approve_refund(&svc, &mut pool)["reason"], "not_waiting");
    assert_eq!(ran(&runs), 1);
}

/// `approved: false` and `status: "cancelled"` (§5: "A denial gives approved:false";
/// "cancelInterrupts() sends status:cancelled") never run the tool: the agent gets the
/// denial as the call's result (`ToolResult::denied`), which says so and carries no output
/// of the tool; the wait settles `answered` and `cancelled`.
#[test]
fn a_denied_or_cancelled_approval_never_runs_the_tool() {
    for (entry, outcome, why) in [
        (
            json!({"interruptId": "approval-call_1", "status": "resolved", "payload": {"approved": false}}),
            "answered",
            "the user denied it",
        ),
        (
            json!({"interruptId": "approval-call_1", "status": "cancelled"}),
            "cancelled",
            "the approval was cancelled",
        ),
    ] {
        let (svc, mut pool, runs) = refund_host(HostConfig::default(), false);
        ask_refund(&svc, &mut pool);
        let r = send(
            &svc,
            &mut pool,
            "thread-1",
            json!({"op": "resolve", "resume": [entry]}),
        );
        assert_eq!(r["status"], "accepted");
        let frames = read_all(&mut pool, &svc);
        all_valid(&frames);
        assert_eq!(ran(&runs), 0, "the tool's code never ran");
        let settled = &frames_of(&frames, "harness.wait.settled")[0]["event"]["value"];
        assert_eq!(settled["outcome"], outcome);
        let results = frames_of(&frames, "TOOL_CALL_RESULT");
        assert_eq!(results.len(), 1);
        let content = results[0]["event"]["content"].as_str().unwrap();
        assert_eq!(content, format!("error: approval denied: {why}"));
        let text: String = frames_of(&frames, "TEXT_MESSAGE_CONTENT")
            .iter()
            .map(|f| f["event"]["delta"].as_str().unwrap())
            .collect();
        assert_eq!(text, format!("Not refunded: approval denied: {why}."));
    }
}

/// harness-core's rules: "a call is gated when the call or the tool requires approval. A
/// tool registered with requires_approval is gated even when the agent's call says only
/// ControllerMediated". The agent here offers `refund` as a plain tool; the registry gates
/// it all the same.
#[test]
fn a_tool_the_registry_gates_is_gated_even_when_the_call_is_not() {
    let (svc, mut pool, runs) = refund_host(HostConfig::default(), true);
    ask_refund(&svc, &mut pool);
    let frames = read_all(&mut pool, &svc);
    assert_eq!(frames_of(&frames, "harness.wait.opened").len(), 1);
    assert_eq!(ran(&runs), 0);
    approve_refund(&svc, &mut pool);
    assert_eq!(ran(&runs), 1);
}

/// "A rejected receipt is still 200. Its reason says why": an `answer` or a `resolve` that
/// names no open wait is `not_waiting` (a thread with no wait, a wrong id, an answer to an
/// approval), and changes nothing: the right one still drives the turn. A `resolve` entry
/// that is not a `ResumeEntry` is a bad input: 400.
#[test]
fn an_answer_or_resolve_for_no_open_wait_is_rejected_not_waiting() {
    let (svc, mut pool, runs) = refund_host(HostConfig::default(), false);
    assert_eq!(
        approve_refund(&svc, &mut pool)["reason"],
        "not_waiting",
        "no thread yet"
    );
    ask_refund(&svc, &mut pool);
    for input in [
        approve("approval-nope", true),
        json!({"op": "answer", "questionId": "approval-call_1", "value": "yes"}),
        json!({"op": "resolve", "resume": []}),
        json!({"op": "resolve", "resume": [
            {"interruptId": "approval-call_1", "status": "resolved", "payload": {"approved": true}},
            {"interruptId": "approval-nope", "status": "resolved"}
        ]}),
    ] {
        let (status, r) = control(&svc, "thread-1", input.clone());
        assert_eq!(status, 200);
        assert_eq!(r["status"], "rejected", "{input}");
        assert_eq!(r["reason"], "not_waiting", "{input}");
    }
    let (status, r) = control(
        &svc,
        "thread-1",
        json!({"op": "resolve", "resume": [{"interruptId": "approval-call_1", "status": "maybe"}]}),
    );
    assert_eq!(status, 400, "{r}");
    pool.run_until_stalled();
    assert_eq!(ran(&runs), 0);
    assert_eq!(approve_refund(&svc, &mut pool)["status"], "accepted");
    assert_eq!(ran(&runs), 1);
}

/// While a turn waits for a person, a new prompt waits behind it ("harness.input.queued …
/// it waits behind the running turn or the turns before it", l. 419) and runs after the
/// driven turn; a `cancel` of the interrupted run settles its waits `cancelled`, runs the
/// tool never, and lets the next input run.
#[test]
fn inputs_wait_behind_a_parked_turn_and_a_cancel_of_it_drops_it() {
    let (svc, mut pool, runs) = refund_host(HostConfig::default(), false);
    ask_refund(&svc, &mut pool);
    let q = send(&svc, &mut pool, "thread-1", prompt("Hello"));
    assert_eq!(q["status"], "queued");
    let c = send(
        &svc,
        &mut pool,
        "thread-1",
        json!({"op": "cancel", "operationId": "op-1"}),
    );
    assert_eq!(
        c,
        json!({"inputId": "in-3", "status": "accepted", "operationId": "op-1"})
    );
    let frames = read_all(&mut pool, &svc);
    let settled = &frames_of(&frames, "harness.wait.settled")[0]["event"]["value"];
    assert_eq!(
        *settled,
        json!({"waitId": "approval-call_1", "outcome": "cancelled"})
    );
    let runs_started = frames_of(&frames, "RUN_STARTED");
    assert_eq!(runs_started.len(), 2, "the queued prompt ran");
    assert!(runs_started[1]["event"].get("parentRunId").is_none());
    assert_eq!(approve_refund(&svc, &mut pool)["reason"], "not_waiting");
    assert_eq!(ran(&runs), 0);
}

/// Asks which day, then says it; hands off to a person when asked to, or to an agent.
fn asker() -> FnHarness {
    harness(|start, sink| {
        Box::pin(async move {
            let said = start.inputs.iter().map(Message::text).collect::<String>();
            if said.contains("person") {
                sink.output("Putting you through.").await?;
                let to_person = Handoff::to_human().with_note("wants a person");
                return Ok(sink.handoff(to_person).await?);
            }
            if said.contains("billing") {
                return Ok(sink.handoff(Handoff::to_agent("billing")).await?);
            }
            sink.output("Let me check. ").await?;
            let schema = json!({"type": "string"}).as_object().cloned();
            let answer = sink
                .ask(Question::new("Which day?").with_schema(schema.unwrap_or_default()))
                .await?;
            let day = answer.text().unwrap_or("?").to_owned();
            Ok(sink.output(&format!("Open on {day}.")).await?)
        })
    })
}

/// The asker served, after `text` on `thread-1`: the service, the pool and the thread's
/// frames (every event valid AG-UI).
fn asked(text: &str) -> (Service<MemoryLog>, LocalPool, Vec<Value>) {
    let (svc, _) = service();
    let mut pool = LocalPool::new();
    serve(&svc, &pool, asker());
    send(&svc, &mut pool, "thread-1", prompt(text));
    let frames = read_all(&mut pool, &svc);
    all_valid(&frames);
    (svc, pool, frames)
}

/// "harness.question { questionId, message, schema?, secret?, url? }. Answer it with the
/// answer input" and "harness.question.answered { questionId }" (l. 431-432): `sink.ask`
/// shows the question and a wait of kind `question` (its id the `questionId`), the run
/// ends with its interrupt; the `answer` input settles it and drives the turn again, where
/// the same `ask` returns the answer; what the turn said before is not said again.
#[test]
fn a_question_parks_the_turn_and_the_answer_drives_it_again() {
    let (svc, mut pool, frames) = asked("When are you open?");
    let q = &frames_of(&frames, "harness.question")[0]["event"]["value"];
    assert_eq!(
        *q,
        json!({"questionId": "op-1-q1", "message": "Which day?", "schema": {"type": "string"}})
    );
    let w = &frames_of(&frames, "harness.wait.opened")[0]["event"]["value"];
    assert_eq!(
        *w,
        json!({"waitId": "op-1-q1", "kind": "question", "runId": "op-1", "message": "Which day?"})
    );
    let fin = &frames_of(&frames, "RUN_FINISHED")[0]["event"]["outcome"];
    assert_eq!(fin["type"], "interrupt");
    assert_eq!(fin["interrupts"][0]["id"], "op-1-q1");
    assert_eq!(
        fin["interrupts"][0]["responseSchema"],
        json!({"type": "string"})
    );
    let before = frames.len();
    let answer = |day: &str| json!({"op": "answer", "questionId": "op-1-q1", "value": day});
    let r = send(&svc, &mut pool, "thread-1", answer("Saturday"));
    assert_eq!(r["operationId"], "op-2");
    let frames = read_all(&mut pool, &svc);
    all_valid(&frames);
    let after = &frames[before..];
    assert_eq!(
        names(after)[..3],
        [
            "harness.input.accepted",
            "harness.question.answered",
            "harness.wait.settled"
        ]
    );
    assert_eq!(after[1]["event"]["value"], json!({"questionId": "op-1-q1"}));
    // The answer is not in the log: only the question it answers.
    assert!(!after.iter().any(
        |f| f.to_string().contains("Saturday") && f["event"]["type"] != "TEXT_MESSAGE_CONTENT"
    ));
    let text: Vec<&str> = frames_of(&frames, "TEXT_MESSAGE_CONTENT")
        .iter()
        .map(|f| f["event"]["delta"].as_str().unwrap())
        .collect();
    assert_eq!(text, ["Let me check. ", "Open on Saturday."]);
    let r = send(&svc, &mut pool, "thread-1", answer("Sunday"));
    assert_eq!(r["reason"], "not_waiting", "answered already");
}

/// "harness.handoff { from, to, note?, runId, by, waitId? } … by is tool, code, router, or
/// operator. A handoff to a person has the waitId of its wait" (l. 411), and a wait "a
/// handoff to a person" of kind `human` (l. 429) that the run ends with. A `resolve` of it
/// settles it and drives nothing; a hand-off to an agent opens no wait.
#[test]
fn a_handoff_to_a_person_opens_a_human_wait_and_ends_the_run_with_it() {
    let (svc, mut pool, frames) = asked("A person, please");
    let h = &frames_of(&frames, "harness.handoff")[0]["event"]["value"];
    let wait_id = h["waitId"].as_str().unwrap().to_owned();
    assert_eq!(
        *h,
        json!({"from": null, "to": {"human": true}, "note": "wants a person", "runId": "op-1",
               "by": "code", "waitId": wait_id})
    );
    let w = &frames_of(&frames, "harness.wait.opened")[0]["event"]["value"];
    assert_eq!(w["kind"], "human");
    assert_eq!(w["waitId"], wait_id.as_str());
    let fin = &frames_of(&frames, "RUN_FINISHED")[0]["event"]["outcome"];
    assert_eq!(fin["interrupts"][0]["id"], wait_id.as_str());
    assert_eq!(fin["interrupts"][0]["metadata"]["kind"], "human");
    // A resolve of it settles it, and drives nothing (no run).
    let done = json!({"op": "resolve", "resume": [{"interruptId": wait_id, "status": "resolved"}]});
    let r = send(&svc, &mut pool, "thread-1", done);
    assert_eq!(r["status"], "accepted");
    assert!(r.get("operationId").is_none(), "{r}");
    let frames = read_all(&mut pool, &svc);
    let s = &frames_of(&frames, "harness.wait.settled")[0]["event"]["value"];
    assert_eq!(*s, json!({"waitId": wait_id, "outcome": "answered"}));
    assert_eq!(frames_of(&frames, "RUN_STARTED").len(), 1);
    // Nothing waits behind a person: a prompt runs at once, and takes the conversation
    // back: the person's wait settles cancelled.
    send(&svc, &mut pool, "thread-1", prompt("A person again"));
    let r = send(&svc, &mut pool, "thread-1", prompt("billing, please"));
    assert_eq!(r["status"], "accepted");
    let frames = read_all(&mut pool, &svc);
    let second = frames_of(&frames, "harness.wait.opened")[1]["event"]["value"]["waitId"].clone();
    let s = &frames_of(&frames, "harness.wait.settled")[1]["event"]["value"];
    assert_eq!(*s, json!({"waitId": second, "outcome": "cancelled"}));
    let to_agent = &frames_of(&frames, "harness.handoff")[2]["event"]["value"];
    assert_eq!(to_agent["to"], "billing");
    assert!(to_agent.get("waitId").is_none());
    assert_eq!(frames_of(&frames, "harness.wait.opened").len(), 2);
}

/// Reasons, publishes state, marks steps, and tries a platform command.
fn showy() -> FnHarness {
    harness(|_start, sink| {
        Box::pin(async move {
            let offered = [
                Feature::Approvals,
                Feature::Questions,
                Feature::Handoff,
                Feature::Reasoning,
                Feature::State,
                Feature::Steps,
            ];
            assert!(offered.into_iter().all(|f| sink.supports(f)));
            assert!(!sink.supports(Feature::Commands));
            sink.step(Step::Started("lookup".into())).await?;
            sink.reasoning("They want ").await?;
            sink.reasoning("the hours.").await?;
            sink.output("Open 8 to 6.").await?;
            sink.reasoning("Done.").await?;
            let day = json!({"day": "monday"});
            sink.state(StateUpdate::Snapshot(day)).await?;
            let patch = vec![
                json!({"op": "replace", "path": "/day", "value": "tuesday"}),
                json!({"op": "add", "path": "/a~1b", "value": null}),
            ];
            sink.state(StateUpdate::Delta(patch)).await?;
            let not_a_pointer = vec![json!({"op": "add", "path": "day"})];
            let bad = sink.state(StateUpdate::Delta(not_a_pointer)).await;
            assert!(matches!(bad, Err(SinkError::Rejected(_))), "{bad:?}");
            sink.step(Step::Finished("lookup".into())).await?;
            let hangup = sink.command(Command::hangup("done")).await;
            assert_eq!(hangup, Err(SinkError::Unsupported(Feature::Commands)));
            Ok(())
        })
    })
}

/// What else an agent does on this host (harness-core `interaction`): `sink.reasoning`
/// becomes AG-UI `REASONING_START` / `REASONING_MESSAGE_START` / `_CONTENT` / `_END` /
/// `REASONING_END` around contiguous deltas, as text messages are; `sink.state` a
/// `STATE_SNAPSHOT` or a `STATE_DELTA` (a patch that is not valid JSON Patch is `Rejected`
/// and nothing is sent); `sink.step` `STEP_STARTED` / `STEP_FINISHED`; `sink.command` is
/// `Unsupported`. Every event validates.
#[test]
fn reasoning_state_and_steps_become_agui_events_and_commands_are_unsupported() {
    let (svc, _) = service();
    let mut pool = LocalPool::new();
    serve(&svc, &pool, showy());
    send(&svc, &mut pool, "thread-1", prompt("hours?"));
    let frames = read_all(&mut pool, &svc);
    all_valid(&frames);
    let n = names(&frames);
    let i = n.iter().position(|x| x == "STEP_STARTED").unwrap();
    assert_eq!(
        n[i..i + 19],
        [
            "STEP_STARTED",
            "REASONING_START",
            "REASONING_MESSAGE_START",
            "REASONING_MESSAGE_CONTENT",
            "REASONING_MESSAGE_CONTENT",
            "REASONING_MESSAGE_END",
            "REASONING_END",
            "TEXT_MESSAGE_START",
            "TEXT_MESSAGE_CONTENT",
            "TEXT_MESSAGE_END",
            "REASONING_START",
            "REASONING_MESSAGE_START",
            "REASONING_MESSAGE_CONTENT",
            "REASONING_MESSAGE_END",
            "REASONING_END",
            "STATE_SNAPSHOT",
            "STATE_DELTA",
            "STEP_FINISHED",
            "RUN_FINISHED"
        ]
    );
    let ev = |name: &str| frames_of(&frames, name)[0]["event"].clone();
    assert_eq!(ev("REASONING_MESSAGE_START")["role"], "reasoning");
    assert_eq!(
        ev("REASONING_START")["messageId"],
        ev("REASONING_MESSAGE_START")["messageId"]
    );
    assert_eq!(ev("STATE_SNAPSHOT")["snapshot"], json!({"day": "monday"}));
    assert_eq!(
        ev("STATE_DELTA")["delta"],
        json!([{"op": "replace", "path": "/day", "value": "tuesday"},
               {"op": "add", "path": "/a~1b", "value": null}])
    );
    assert_eq!(ev("STEP_FINISHED")["stepName"], "lookup");
    assert!(
        frames_of(&frames, "RUN_ERROR").is_empty(),
        "the turn completed"
    );
}

/// "Waits … survive a durable host's restart": a turn parked on a durable host (`FileLog`)
/// is driven again after the host restarts on the same folder, with the same `resolve`, and
/// the tool runs exactly once; the waits record is beside the log, not in it, so the
/// cursors after the restart go on with no gap ("A cursor works … after a restart only on a
/// durable host", l. 256), and once the wait settled no record is left.
#[test]
fn a_parked_turn_survives_a_durable_restart_and_the_tool_runs_once() {
    let dir = temp_dir("waits-restart");
    let runs = Arc::new(AtomicUsize::new(0));
    let head;
    {
        let (svc, _) = service_over(HostConfig::default(), FileLog::open(&dir).unwrap());
        let mut pool = LocalPool::new();
        refund_service(&svc, &pool, &runs, false);
        ask_refund(&svc, &mut pool);
        let frames = read_all(&mut pool, &svc);
        assert_eq!(frames_of(&frames, "harness.wait.opened").len(), 1);
        head = frames.last().unwrap()["cursor"]
            .as_str()
            .unwrap()
            .to_owned();
        // The host stops here.
    }
    let waits_files = || {
        std::fs::read_dir(&dir)
            .unwrap()
            .filter(|e| {
                e.as_ref()
                    .unwrap()
                    .file_name()
                    .to_string_lossy()
                    .ends_with(".harness-waits")
            })
            .count()
    };
    assert_eq!(waits_files(), 1, "the waits record is kept beside the log");
    let (svc, _) = service_over(HostConfig::default(), FileLog::open(&dir).unwrap());
    let mut pool = LocalPool::new();
    refund_service(&svc, &pool, &runs, false);
    assert_eq!(approve_refund(&svc, &mut pool)["status"], "accepted");
    assert_eq!(ran(&runs), 1);
    let frames = read_all(&mut pool, &svc);
    all_valid(&frames);
    let cursors: Vec<u64> = frames[1..]
        .iter()
        .map(|f| f["cursor"].as_str().unwrap().parse().unwrap())
        .collect();
    assert_eq!(cursors, (1..=cursors.len() as u64).collect::<Vec<_>>());
    let head: u64 = head.parse().unwrap();
    assert!(
        frames[head as usize + 1..]
            .iter()
            .any(|f| f["event"]["type"] == "TOOL_CALL_RESULT")
    );
    assert!(
        frames[head as usize + 1..]
            .iter()
            .any(|f| f["event"]["parentRunId"] == "op-1")
    );
    assert_eq!(waits_files(), 0, "settled: no record is left");
    // After yet another restart, the wait stays settled.
    drop(pool);
    drop(svc);
    let (svc, _) = service_over(HostConfig::default(), FileLog::open(&dir).unwrap());
    let mut pool = LocalPool::new();
    assert_eq!(approve_refund(&svc, &mut pool)["reason"], "not_waiting");
    assert_eq!(ran(&runs), 1);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A host that stopped after a wait opened in the log but before it kept the waits record
/// settles the wait `cancelled` when it reads the thread back (the turn cannot be driven
/// again: nothing of it was kept), and the tool never runs.
#[test]
fn a_wait_the_log_opened_without_its_record_settles_cancelled_after_a_restart() {
    let dir = temp_dir("waits-orphan");
    let runs = Arc::new(AtomicUsize::new(0));
    {
        let (svc, _) = service_over(HostConfig::default(), FileLog::open(&dir).unwrap());
        let mut pool = LocalPool::new();
        refund_service(&svc, &pool, &runs, false);
        ask_refund(&svc, &mut pool);
    }
    // The record is lost (as if the host stopped before writing it).
    for e in std::fs::read_dir(&dir).unwrap() {
        let p = e.unwrap().path();
        if p.to_string_lossy().ends_with(".harness-waits") {
            std::fs::remove_file(p).unwrap();
        }
    }
    let mut log = FileLog::open(&dir).unwrap();
    assert!(log.waits("thread-1").unwrap().is_none());
    drop(log);
    let (svc, _) = service_over(HostConfig::default(), FileLog::open(&dir).unwrap());
    let mut pool = LocalPool::new();
    refund_service(&svc, &pool, &runs, false);
    assert_eq!(approve_refund(&svc, &mut pool)["reason"], "not_waiting");
    let frames = read_all(&mut pool, &svc);
    let s = &frames_of(&frames, "harness.wait.settled")[0]["event"]["value"];
    assert_eq!(
        *s,
        json!({"waitId": "approval-call_1", "outcome": "cancelled"})
    );
    assert_eq!(ran(&runs), 0);
    let _ = std::fs::remove_dir_all(&dir);
}

/// The waits record is bounded like the rest of a thread (issue 11): a turn whose record
/// would be larger than `max_parked_bytes` cannot wait: it fails (`RUN_ERROR` code
/// `too_large`), opens no wait, keeps nothing, and its tool never runs.
#[test]
fn a_turn_whose_waits_record_is_too_large_fails_and_keeps_nothing() {
    let (svc, mut pool, runs) = refund_host(cfg_with(|c| c.max_parked_bytes = 200), false);
    ask_refund(&svc, &mut pool);
    let frames = read_all(&mut pool, &svc);
    all_valid(&frames);
    let err = &frames_of(&frames, "RUN_ERROR")[0]["event"];
    assert_eq!(err["code"], "too_large");
    assert!(frames_of(&frames, "harness.wait.opened").is_empty());
    assert_eq!(approve_refund(&svc, &mut pool)["reason"], "not_waiting");
    let r = send(&svc, &mut pool, "thread-1", prompt("Hello"));
    assert_eq!(r["status"], "accepted", "nothing waits: the thread is idle");
    assert_eq!(ran(&runs), 0);
}

/// A parked thread with nothing else going on may leave the host's memory (issue 11's
/// `max_resident_threads`); its waits record stays with the log, so a `resolve` after it
/// was read back drives the turn as before.
#[test]
fn a_parked_thread_that_left_memory_is_driven_again_from_its_record() {
    let (svc, mut pool, runs) = refund_host(cfg_with(|c| c.max_resident_threads = 1), false);
    ask_refund(&svc, &mut pool);
    for i in 0..3 {
        send(&svc, &mut pool, &format!("other-{i}"), prompt("Hello"));
    }
    assert!(svc.with_host(|h, _| h.stats().resident_threads) <= 2);
    assert_eq!(approve_refund(&svc, &mut pool)["status"], "accepted");
    assert_eq!(ran(&runs), 1);
}

/// §5, over `POST run` as `@tanstack/ai-client` does it: the run streams the tool call and
/// ends with `RUN_FINISHED` whose interrupt is the approval; "The client answers with a new
/// POST: a fresh runId; parentRunId set to the interrupted run; … resume:[{interruptId,
/// status, payload?}]", and "The reply streams a normal run with parentRunId in
/// RUN_STARTED" — under the client's runId, the tool's result in it. A resume of no open
/// wait is 409.
#[test]
fn post_run_ends_with_the_interrupt_and_a_resume_post_drives_the_turn() {
    use harness_tanstack::agui::RunAgentInput;
    let (svc, mut pool, runs) = refund_host(HostConfig::default(), false);
    let body = |v: Value| -> RunAgentInput { serde_json::from_value(v).unwrap() };
    let run = |pool: &mut LocalPool, input: &RunAgentInput| -> Vec<Value> {
        let mut s = svc.run_agui(input, None, "r", None).unwrap();
        pool.run_until_stalled();
        // "These routes send plain AG-UI events": `data: <event>`, no frame around it.
        support::driver::drain(pool, &mut s)
            .iter()
            .filter_map(|t| t.strip_prefix("data: "))
            .map(|d| serde_json::from_str(d.trim_end()).unwrap())
            .collect()
    };
    let events = run(
        &mut pool,
        &body(json!({"threadId": "t-run", "runId": "run-1",
            "messages": [{"id": "u1", "role": "user", "content": "Refund order 42"}]})),
    );
    let last = events.last().unwrap();
    assert_eq!(last["type"], "RUN_FINISHED");
    assert_eq!(last["runId"], "run-1");
    assert_eq!(
        last["outcome"]["interrupts"][0]["reason"],
        "approval_required"
    );
    let interrupt_id = last["outcome"]["interrupts"][0]["id"].as_str().unwrap();
    let bad = body(
        json!({"threadId": "t-run", "runId": "run-x", "parentRunId": "run-1",
        "messages": [], "resume": [{"interruptId": "nope", "status": "resolved"}]}),
    );
    assert_eq!(svc.run_agui(&bad, None, "r", None).unwrap_err().status, 409);
    let resume = body(
        json!({"threadId": "t-run", "runId": "run-2", "parentRunId": "run-1",
        "messages": [{"id": "u1", "role": "user", "content": "Refund order 42"}],
        "resume": [{"interruptId": interrupt_id, "status": "resolved", "payload": {"approved": true}}]}),
    );
    let events = run(&mut pool, &resume);
    assert_eq!(events[0]["type"], "RUN_STARTED");
    assert_eq!(events[0]["runId"], "run-2");
    assert_eq!(events[0]["parentRunId"], "run-1");
    assert!(events.iter().any(|e| e["type"] == "TOOL_CALL_RESULT"));
    assert_eq!(events.last().unwrap()["type"], "RUN_FINISHED");
    assert_eq!(ran(&runs), 1);
}

/// A model call in the first run, the gated call, and a model call after: the model is
/// asked twice in all (the first completion is served from the tape when the turn is
/// driven again), and the second request carries the tool's result.
#[test]
fn a_turn_driven_again_asks_the_model_only_for_what_is_new() {
    let (svc, _) = service();
    let mut pool = LocalPool::new();
    let runs = Arc::new(AtomicUsize::new(0));
    let tools = Tools::new().with(refund_tool(&runs));
    let seen: Arc<Mutex<Vec<usize>>> = Arc::default();
    let s2 = Arc::clone(&seen);
    let model = ScriptedModel::new().otherwise(move |req: &ModelRequest| {
        s2.lock().unwrap().push(req.messages.len());
        Ok(if req.messages.len() == 1 {
            let args = json!({"order_id": 42})
                .as_object()
                .cloned()
                .unwrap_or_default();
            Message {
                role: Role::Assistant,
                parts: vec![Part::ToolCall(ToolCall::new("call_a", "refund", args))],
            }
        } else {
            Message::assistant("Done.")
        })
    });
    let agent = ToolLoopAgent::new("shop").with_tools(&tools);
    pool.spawner()
        .spawn_local(run_turns(svc.clone(), agent, model, tools))
        .unwrap();
    ask_refund(&svc, &mut pool);
    send(
        &svc,
        &mut pool,
        "thread-1",
        approve("approval-call_a", true),
    );
    assert_eq!(*seen.lock().unwrap(), [1, 3]);
    assert_eq!(ran(&runs), 1);
}

/// A question's interrupt cancelled (§5: "cancelInterrupts() sends status:cancelled for
/// every item"): the wait settles `cancelled` and the turn, driven again, finds its `ask`
/// cancelled: it ends `RUN_FINISHED` with `outcome: {type: "cancelled"}` ("harness.operation.
/// finished … cancelled", l. 408) and says nothing more.
#[test]
fn a_cancelled_question_cancels_the_turn() {
    let (svc, mut pool, frames) = asked("When are you open?");
    let before = frames.len();
    let cancel =
        json!({"op": "resolve", "resume": [{"interruptId": "op-1-q1", "status": "cancelled"}]});
    let r = send(&svc, &mut pool, "thread-1", cancel);
    assert_eq!(r["operationId"], "op-2");
    let frames = read_all(&mut pool, &svc);
    all_valid(&frames);
    let after = &frames[before..];
    let settled = &frames_of(after, "harness.wait.settled")[0]["event"]["value"];
    assert_eq!(
        *settled,
        json!({"waitId": "op-1-q1", "outcome": "cancelled"})
    );
    assert!(frames_of(after, "harness.question.answered").is_empty());
    let fin = &frames_of(after, "RUN_FINISHED")[0]["event"];
    assert_eq!(fin["outcome"], json!({"type": "cancelled"}));
    assert!(frames_of(after, "TEXT_MESSAGE_CONTENT").is_empty());
}

/// A decision is kept with the thread until the turn runs again, so what it carries is
/// bounded like a message (`max_input_bytes`, issue 11): a `resolve` whose `resume` is
/// larger gets "a rejected receipt … Its reason says why" (`too_large`), and the wait stays
/// open for a decision that fits.
#[test]
fn a_decision_larger_than_max_input_bytes_is_rejected_too_large() {
    let (svc, mut pool, runs) = refund_host(cfg_with(|c| c.max_input_bytes = 200), false);
    ask_refund(&svc, &mut pool);
    let note = "x".repeat(300);
    let big = json!({"op": "resolve", "resume": [{"interruptId": "approval-call_1",
        "status": "resolved", "payload": {"approved": true, "note": note}}]});
    let r = send(&svc, &mut pool, "thread-1", big);
    assert_eq!(r["reason"], "too_large");
    assert_eq!(ran(&runs), 0);
    assert_eq!(approve_refund(&svc, &mut pool)["status"], "accepted");
    assert_eq!(ran(&runs), 1);
}
