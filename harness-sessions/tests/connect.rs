//! `Harness.Connect` without a network: both sides of the exchange as the Go bridge defines it
//! (research/agentsessions-wire.md), driven against the in-process controller. Each test
//! quotes the spec line (spec/agentsessions-writing-a-harness.txt) or the bridge rule it
//! checks.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::sync::Arc;

use common::faq::{FaqAgent, Payments, faq_model, faq_tools};
use common::wire::{Canned, Loopback};
use common::{Crashing, Op, ScriptHarness, block, counting_model, hashes, host};
use harness_core::event::{Event, EventBody, EventKind, HarnessEnd, ModelCall};
use harness_core::message::{Mediation, Message, ModelRequest, ToolCall, ToolResult};
use harness_core::{Descriptor, HarnessError, Resumability, SinkError, Start};
use harness_sessions::connect::{
    ApprovalRef, ControllerFrame, Ending, Frame, HarnessConnect, HarnessConnectEvent, HarnessFrame,
    HostConnect, ModelResult, SinkReply,
};
use harness_sessions::controller::{Controller, ExecRequest, TurnStatus};
use harness_sessions::journal::{Journal, MemoryJournal};
use harness_sessions::tools::MemoryReceipts;
use harness_sessions::{Code, Error};

const ALL: [Op; 6] = [
    Op::Model,
    Op::Output(String::new()),
    Op::Tool,
    Op::Report,
    Op::Usage(7),
    Op::Model,
];

fn ops() -> Vec<Op> {
    let mut ops = ALL.to_vec();
    ops[1] = Op::Output("thinking…".into());
    ops
}

/// A controller with `harness` registered as a remote one under "script".
/// (`receipts` are the durable ones a restarted host keeps.)
fn remote_host(
    journal: impl Journal + 'static,
    h: &common::Host,
    wire: &Loopback,
    receipts: &Arc<MemoryReceipts>,
) -> Controller {
    Controller::builder(journal)
        .model(Arc::clone(&h.model))
        .tools(h.effects.tools())
        .receipts(Arc::clone(receipts))
        .remote_harness("script", wire.remote())
        .build()
}

/// "The EventSink you code against is identical whether you are in-process or across the
/// wire, so model mediation and record-before-effect hold across the process boundary
/// unchanged" (line 338): the same agent writes the same journal, hash for hash, over the
/// wire as in process; replay over the wire calls no provider; the harness sent exactly one
/// END, last.
#[test]
fn a_turn_over_the_wire_journals_as_in_process() {
    let local = host(ops());
    block(local.host.exec(ExecRequest::text("s", "hello"))).unwrap();

    let h = host(ops());
    let wire = Loopback::new(h.harness.clone());
    let remote = remote_host(Arc::clone(&h.journal), &h, &wire, &Arc::default());
    let turn = block(remote.exec(ExecRequest::text("s", "hello"))).unwrap();
    assert_eq!(turn.status, TurnStatus::Completed);
    assert_eq!(hashes(&*h.journal, "s"), hashes(&*local.journal, "s"));
    let report = block(remote.replay("s")).unwrap();
    assert_eq!((report.executions, report.provider_calls), (1, 0));

    let sent = wire.sent();
    let kinds: Vec<String> = sent
        .iter()
        .map(|f| match f {
            HarnessFrame::Event(e) => e.kind().as_str().to_owned(),
            _ => "PARKED".into(),
        })
        .collect();
    assert_eq!(
        kinds.iter().filter(|k| *k == "END").count(),
        2,
        "one END per stream (exec and replay)"
    );
    assert_eq!(kinds.last().unwrap(), "END");
    // The harness never computes the input hash: the host does (research §3).
    assert!(sent.iter().all(|f| !matches!(f,
        HarnessFrame::Event(Event { body: EventBody::ModelCall(mc), .. }) if !mc.input_hash.is_empty())));
}

/// "If your harness goes away after admission, in the middle of a turn, the call fails with
/// INTERNAL and the session is left with an interrupted turn: call Resume once the harness
/// is back to re-drive it from the journal" (line 372). A crash after each record of the
/// turn, with the harness served over the wire: resume over the wire completes it with at
/// most one extra provider call and no tool effect repeated.
#[test]
fn resume_over_the_wire_at_every_cut() {
    let uncut = host(ops());
    let wire = Loopback::new(uncut.harness.clone());
    let receipts = Arc::default();
    block(
        remote_host(Arc::clone(&uncut.journal), &uncut, &wire, &receipts)
            .exec(ExecRequest::text("s", "x")),
    )
    .unwrap();
    let records = uncut.journal.read("s", 1, None).unwrap().len();
    for cut in 2..records {
        let h = host(ops());
        let wire = Loopback::new(h.harness.clone());
        let receipts = Arc::default();
        let crashing = remote_host(
            Crashing::new(Arc::clone(&h.journal), Some(cut)),
            &h,
            &wire,
            &receipts,
        );
        assert!(block(crashing.exec(ExecRequest::text("s", "x"))).is_err());
        let turn = block(remote_host(Arc::clone(&h.journal), &h, &wire, &receipts).resume("s"))
            .unwrap()
            .unwrap();
        assert_eq!(turn.status, TurnStatus::Completed, "cut {cut}");
        assert!(h.model.calls() <= uncut.model.calls() + 1, "cut {cut}");
        assert_eq!(h.effects.count(), 1, "cut {cut}: the tool ran once");
        assert_eq!(hashes(&*h.journal, "s").len(), records, "cut {cut}");
    }
}

/// Approvals over the wire: "The Go bridge validates the host’s session/execution/call/
/// request control tuple, sends exactly one correlated EVENT_PARKED acknowledgement, and
/// closes without END" (line 168); "The bridge delivers the committed decision before the
/// correlated receipt" (line 170). Park, approve, resume: the effect runs once, after the
/// decision; the frames are park → PARKED (no END), then approval → tool.
#[test]
fn approval_park_approve_resume_over_the_wire() {
    let h = host(vec![Op::Model, Op::Gated, Op::Model]);
    let wire = Loopback::new(h.harness.clone());
    let remote = remote_host(Arc::clone(&h.journal), &h, &wire, &Arc::default());
    let turn = block(remote.exec(ExecRequest::text("s", "publish"))).unwrap();
    let TurnStatus::Parked { request_seq, .. } = turn.status else {
        panic!("{turn:?}")
    };
    let sent = wire.sent();
    assert!(
        matches!(sent.last(), Some(HarnessFrame::Parked { parked, .. })
        if parked.request_seq == i64::try_from(request_seq).unwrap())
    );
    assert!(
        sent.iter()
            .all(|f| !matches!(f, HarnessFrame::Event(e) if e.kind() == EventKind::End)),
        "no END after a park"
    );
    assert!(matches!(
        wire.received.lock().unwrap().last().unwrap().frame,
        Some(Frame::Park(_))
    ));
    assert_eq!(wire.statuses_after(1).last(), Some(&Ok(())));
    assert_eq!(h.effects.count(), 0);
    let p = remote.pending_approval("s").unwrap().unwrap();
    remote.approve("s", &p.call.id, true, "ok").unwrap();
    let turn = block(remote.resume("s")).unwrap().unwrap();
    assert_eq!(turn.status, TurnStatus::Completed);
    assert_eq!(h.effects.count(), 1);
    let received = wire.received.lock().unwrap().clone();
    let approval = received
        .iter()
        .position(|f| matches!(f.frame, Some(Frame::Approval(_))))
        .unwrap();
    assert!(
        matches!(received[approval + 1].frame, Some(Frame::Tool(ref r)) if r.approval_decision_seq > 0)
    );
    assert_eq!(block(remote.replay("s")).unwrap().provider_calls, 0);
}

/// The crash rig of the approval path, over the wire: "The host requires actual ACK/EOF and
/// connection closure before an external snapshot and durable SUSPEND make the live pause
/// successful" (line 168): cut after every record, recover, the gated effect runs exactly
/// once, after its decision.
#[test]
fn the_approval_path_over_the_wire_at_every_cut() {
    use common::approval_rig::{GatedRig, recover_at_every_cut_on_the_approval_path};
    let rig = || {
        let effects = Arc::new(common::Effects::default());
        let model = counting_model();
        let receipts = Arc::new(MemoryReceipts::default());
        let wire = Loopback::new(ScriptHarness::new(vec![Op::Model, Op::Gated, Op::Model]));
        let (e, m) = (Arc::clone(&effects), Arc::clone(&model));
        GatedRig {
            build: Box::new(move |journal| {
                Controller::builder(journal)
                    .model(Arc::clone(&model))
                    .tools(effects.tools())
                    .receipts(Arc::clone(&receipts))
                    .remote_harness("script", wire.remote())
                    .build()
            }),
            effects: Box::new(move || e.count()),
            provider_calls: Box::new(move || m.calls()),
        }
    };
    recover_at_every_cut_on_the_approval_path(&rig, "publish");
}

/// The FAQ agent over the wire: its `refund` call, gated by the host's registry, parks and
/// runs once when approved; "Questions/handoff ... Unsupported as on the in-process host":
/// the agent gives the week's hours and says it cannot hand off.
#[test]
fn the_faq_agent_over_the_wire() {
    let payments = Payments::default();
    let tools = faq_tools(&payments);
    let wire = Loopback::new(FaqAgent::ungated());
    let model = Arc::new(faq_model());
    let host = Controller::builder(MemoryJournal::new())
        .model(Arc::clone(&model))
        .tools(tools)
        .receipts(MemoryReceipts::default())
        .remote_harness("faq", wire.remote())
        .build();
    host.create_session("s", None).unwrap();
    let turn = block(host.exec(ExecRequest::text("s", "When are you open?"))).unwrap();
    assert_eq!(turn.output, "We're open 8am to 6pm on weekdays.");
    let turn = block(host.exec(ExecRequest::text("s", "Can I talk to a person?"))).unwrap();
    assert_eq!(turn.output, common::faq::NO_PERSON);
    let turn = block(host.exec(ExecRequest::text("s", "Please refund order 42"))).unwrap();
    assert!(matches!(turn.status, TurnStatus::Parked { .. }), "{turn:?}");
    assert!(payments.paid().is_empty());
    let p = host.pending_approval("s").unwrap().unwrap();
    host.approve("s", &p.call.id, true, "").unwrap();
    let turn = block(host.resume("s")).unwrap().unwrap();
    assert_eq!(turn.output, "Done: refunded order 42.");
    assert_eq!(payments.count(), 1);
    assert_eq!(block(host.replay("s")).unwrap().executions, 3);
    assert_eq!(payments.count(), 1, "replay runs nothing");
}

fn descriptor(version: &str, resumability: Resumability) -> Descriptor {
    let mut d = Descriptor::new("peer", version);
    d.capabilities.resumability = resumability;
    d
}

/// A host over a canned peer, with an empty session "s".
/// A peer that describes itself so and answers nothing.
fn silent_peer(version: &str, r: Resumability) -> harness_sessions::connect::RemoteHarness<Canned> {
    harness_sessions::connect::RemoteHarness::new(Canned {
        descriptor: Some(descriptor(version, r)),
        script: Arc::new(|_: &ControllerFrame| Vec::new()),
    })
}

fn canned_host(
    d: Option<Descriptor>,
    script: impl Fn(&ControllerFrame) -> Vec<HarnessFrame> + Send + Sync + 'static,
) -> (
    Controller,
    Arc<MemoryJournal>,
    Arc<harness_core::model::ScriptedModel>,
) {
    let journal = Arc::new(MemoryJournal::new());
    let model = counting_model();
    let host = Controller::builder(Arc::clone(&journal))
        .model(Arc::clone(&model))
        .remote_harness(
            "peer",
            harness_sessions::connect::RemoteHarness::new(Canned {
                descriptor: d,
                script: Arc::new(script),
            }),
        )
        .build();
    host.create_session("s", None).unwrap();
    (host, journal, model)
}

fn ev(x: &str, body: EventBody) -> HarnessFrame {
    HarnessFrame::Event(Event::new(x, body))
}

fn model_call(x: &str) -> HarnessFrame {
    ev(
        x,
        EventBody::ModelCall(ModelCall {
            model: "m".into(),
            id: "w1".into(),
            messages: vec![Message::user("hi")],
            ..ModelCall::default()
        }),
    )
}

fn end(x: &str) -> HarnessFrame {
    ev(x, EventBody::End(HarnessEnd::completed()))
}

/// Bad peers: "If your harness goes away after admission, in the middle of a turn, the call
/// fails with INTERNAL and the session is left with an interrupted turn" (line 372). A peer
/// that closes before END, sends two ENDs, or answers with another execution id: INTERNAL,
/// what was journaled stays (the MODEL_CALL and its OUTPUT), no END, and resume once a good
/// harness answers re-drives the turn from the journal without calling the provider again.
#[test]
fn bad_peers_give_internal_and_lose_nothing() {
    type Script = fn(&ControllerFrame) -> Vec<HarnessFrame>;
    let cases: [(&str, Script); 3] = [
        ("closes early", |f| vec![model_call(&f.execution_id)]),
        ("two ENDs", |f| {
            vec![
                model_call(&f.execution_id),
                end(&f.execution_id),
                end(&f.execution_id),
            ]
        }),
        ("wrong execution id", |f| {
            vec![model_call(&f.execution_id), end("someone-else")]
        }),
    ];
    for (what, script) in cases {
        let (host, journal, model) =
            canned_host(Some(descriptor("1", Resumability::StatelessReplay)), script);
        let err = block(host.exec(ExecRequest::text("s", "hi"))).unwrap_err();
        assert_eq!(err.code(), Code::Internal, "{what}: {err}");
        assert_eq!(
            common::kinds(&host, "s"),
            [
                EventKind::ExecutionStart,
                EventKind::Input,
                EventKind::ModelCall,
                EventKind::Output,
                EventKind::Error
            ],
            "{what}"
        );
        assert_eq!(model.calls(), 1);
        // The harness is back (one that sends the same model call, then END).
        let good = Controller::builder(Arc::clone(&journal))
            .model(Arc::clone(&model))
            .remote_harness(
                "peer",
                harness_sessions::connect::RemoteHarness::new(Canned {
                    descriptor: Some(descriptor("1", Resumability::StatelessReplay)),
                    script: Arc::new(|f: &ControllerFrame| {
                        vec![model_call(&f.execution_id), end(&f.execution_id)]
                    }),
                }),
            )
            .build();
        let turn = block(good.resume("s")).unwrap().unwrap();
        assert_eq!(turn.status, TurnStatus::Completed, "{what}");
        assert_eq!(
            model.calls(),
            1,
            "{what}: the recorded completion is served"
        );
    }
}

/// "If nothing answers at the address when an exec, resume, or fork is admitted (the
/// connection is refused, or the harness has not answered Describe within 10 seconds), the
/// call fails with UNAVAILABLE and nothing is journaled, so it is safe to retry" (line 372).
#[test]
fn a_peer_that_never_answers_describe_is_unavailable_and_nothing_is_journaled() {
    let (host, journal, _) = canned_host(None, |_| Vec::new());
    let err = block(host.exec(ExecRequest::text("s", "hi"))).unwrap_err();
    assert_eq!(err.code(), Code::Unavailable);
    assert_eq!(journal.head("s").unwrap().seq, 0);
    assert!(block(host.exec_new_session(ExecRequest::text("t", "hi"))).is_err());
    assert!(
        journal.meta("t").is_err(),
        "no session created for a refused request"
    );
}

/// "a harness registered this way must be STATELESS_REPLAY ... refuses a
/// REQUIRES_MEMORY_SNAPSHOT harness with FAILED_PRECONDITION before anything is journaled"
/// (line 371), even on a runtime that takes memory snapshots; and "Interrupted Resume
/// requires ... the exact recorded version: ... repointing it to a different advertised
/// version returns FAILED_PRECONDITION" (line 373).
#[test]
fn a_remote_memory_snapshot_harness_and_a_changed_version_are_refused() {
    let journal = Arc::new(MemoryJournal::new());
    let host = Controller::builder(Arc::clone(&journal))
        .model(counting_model())
        .runtime(harness_sessions::capabilities::RuntimeCapabilities {
            memory_snapshot: true,
            ..Default::default()
        })
        .remote_harness(
            "peer",
            silent_peer("1", Resumability::RequiresMemorySnapshot),
        )
        .build();
    host.create_session("s", None).unwrap();
    let err = block(host.exec(ExecRequest::text("s", "hi"))).unwrap_err();
    assert!(matches!(err, Error::CannotPlace { .. }), "{err}");
    assert_eq!(err.code(), Code::FailedPrecondition);
    assert_eq!(journal.head("s").unwrap().seq, 0);

    // Version 1 records a turn that is cut (closes early); version 2 answers the resume.
    let (host, journal, model) =
        canned_host(Some(descriptor("1", Resumability::StatelessReplay)), |f| {
            vec![model_call(&f.execution_id)]
        });
    assert!(block(host.exec(ExecRequest::text("s", "hi"))).is_err());
    let head = journal.head("s").unwrap();
    let v2 = Controller::builder(Arc::clone(&journal))
        .model(model)
        .remote_harness("peer", silent_peer("2", Resumability::StatelessReplay))
        .build();
    let err = block(v2.resume("s")).unwrap_err();
    assert!(matches!(err, Error::HarnessVersionMismatch { .. }), "{err}");
    assert_eq!(err.code(), Code::FailedPrecondition);
    assert_eq!(journal.head("s").unwrap(), head);
}

// ---------------------------------------------------------------------------------------
// The harness side alone (research/agentsessions-wire.md §2–§5).

fn frame(x: &str, f: Frame) -> ControllerFrame {
    ControllerFrame {
        session: "s".into(),
        execution_id: x.into(),
        frame: Some(f),
    }
}

fn started() -> HarnessConnect {
    let mut h = HarnessConnect::new();
    h.handle_frame(frame("x1", Frame::Start(Box::default())))
        .unwrap();
    assert!(
        matches!(h.poll_event(), Some(HarnessConnectEvent::Start(s)) if s.execution_id == "x1" && s.session_uid == "s")
    );
    h
}

fn ends(h: &mut HarnessConnect) -> Vec<HarnessEnd> {
    std::iter::from_fn(|| h.poll_transmit())
        .filter_map(|f| match f {
            HarnessFrame::Event(Event {
                body: EventBody::End(e),
                ..
            }) => Some(e),
            _ => None,
        })
        .collect()
}

/// §2: "the first Recv must carry start, otherwise it fails with "harnesswire: first
/// ControllerFrame must be Start". execution_id must be non-empty".
#[test]
fn the_first_frame_must_be_a_start_with_an_execution_id() {
    let mut h = HarnessConnect::new();
    assert!(
        h.handle_frame(frame(
            "x1",
            Frame::Cancel {
                reason: "USER".into()
            }
        ))
        .is_err()
    );
    let mut h = HarnessConnect::new();
    assert!(
        h.handle_frame(frame("", Frame::Start(Box::default())))
            .is_err()
    );
    assert!(
        h.model(ModelRequest::default()).is_err(),
        "no sink call before the start"
    );
}

/// §3: the model reply must carry the call's wire id and the execution id ("model result
/// correlation mismatch", "result execution_id mismatch"); one operation at a time.
#[test]
fn model_replies_are_correlated() {
    let mut h = started();
    h.model(ModelRequest::default()).unwrap();
    assert!(h.output("x").is_err(), "one sink operation at a time");
    let reply = |id: &str| {
        Frame::Model(ModelResult {
            message: Message::assistant("a"),
            usage: None,
            model_call_id: id.into(),
        })
    };
    h.handle_frame(frame("x1", reply("nope"))).unwrap();
    assert!(matches!(
        h.poll_event(),
        Some(HarnessConnectEvent::Reply(SinkReply::Failed(_)))
    ));
    h.model(ModelRequest::default()).unwrap();
    h.handle_frame(frame("x2", reply("whatever"))).unwrap();
    assert!(matches!(
        h.poll_event(),
        Some(HarnessConnectEvent::Reply(SinkReply::Failed(_)))
    ));
    // That one is sticky: the END says FAILED even if the agent swallowed it.
    assert!(h.finish(&Ok(())).is_err());
    let e = ends(&mut h);
    assert_eq!(e.len(), 1);
    assert_eq!(e[0].state, "FAILED");
}

/// §5: a park must name this execution, the call and a request seq > 0 ("park correlation
/// mismatch"); a correct one fails every later sink call with the park, and the turn ends
/// with exactly one EVENT_PARKED, no END.
#[test]
fn a_park_is_validated_acknowledged_once_and_ends_without_end() {
    let call = ToolCall::new("c1", "publish", Default::default())
        .with_mediation(Mediation::RequiresApproval)
        .with_idempotency_key("k");
    let park = |x: &str, c: &str, seq| {
        Frame::Park(ApprovalRef {
            execution_id: x.into(),
            tool_call_id: c.into(),
            request_seq: seq,
        })
    };
    for bad in [
        park("x2", "c1", 3),
        park("x1", "c2", 3),
        park("x1", "c1", 0),
    ] {
        let mut h = started();
        h.tool_call(call.clone()).unwrap();
        h.handle_frame(frame("x1", bad)).unwrap();
        assert!(matches!(
            h.poll_event(),
            Some(HarnessConnectEvent::Reply(SinkReply::Failed(
                SinkError::Transport(_)
            )))
        ));
    }
    let mut h = started();
    h.tool_call(call.clone()).unwrap();
    h.handle_frame(frame("x1", park("x1", "c1", 3))).unwrap();
    let Some(HarnessConnectEvent::Reply(SinkReply::Failed(parked))) = h.poll_event() else {
        panic!()
    };
    assert!(matches!(
        parked,
        SinkError::ApprovalParked { request_seq: 3, .. }
    ));
    assert!(
        matches!(h.output("more"), Err(SinkError::ApprovalParked { .. })),
        "no sink call after a park"
    );
    let _ = std::iter::from_fn(|| h.poll_transmit()).count();
    assert_eq!(h.finish(&Err(HarnessError::Sink(parked))), Ok(()));
    let out: Vec<HarnessFrame> = std::iter::from_fn(|| h.poll_transmit()).collect();
    assert_eq!(out.len(), 1);
    assert!(matches!(&out[0], HarnessFrame::Parked { parked, .. } if parked.request_seq == 3));
    // A harness that returns something else than the park: no PARKED, no END.
    let mut h = started();
    h.tool_call(call).unwrap();
    h.handle_frame(frame("x1", park("x1", "c1", 3))).unwrap();
    let _ = std::iter::from_fn(|| h.poll_transmit()).count();
    assert!(h.finish(&Err(HarnessError::failed("boom"))).is_err());
    assert!(h.poll_transmit().is_none());
}

/// §5 case B: the decision first, then a receipt that matches it; a receipt without its
/// decision, or one whose seqs do not match, fails stickily. §3: no approval fields outside
/// the gate, in a reply or a report.
#[test]
fn decided_gated_calls_and_approval_fields_outside_the_gate() {
    let gated = ToolCall::new("c1", "publish", Default::default())
        .with_mediation(Mediation::RequiresApproval)
        .with_idempotency_key("k");
    let decision = harness_core::event::ApprovalResult {
        tool_call_id: "c1".into(),
        approved: true,
        reason: String::new(),
        request_seq: 4,
    };
    let mut receipt = ToolResult::ok("c1", Default::default());
    receipt.approval_request_seq = 4;
    receipt.approval_decision_seq = 6;
    let mut h = started();
    h.tool_call(gated.clone()).unwrap();
    h.handle_frame(frame("x1", Frame::Approval(decision.clone())))
        .unwrap();
    assert!(h.poll_event().is_none(), "waits for the receipt");
    h.handle_frame(frame("x1", Frame::Tool(receipt.clone())))
        .unwrap();
    assert!(matches!(
        h.poll_event(),
        Some(HarnessConnectEvent::Reply(SinkReply::Tool(_)))
    ));

    // The receipt alone fails the call: without its decision, or outside the gate.
    let fails = |call: ToolCall| {
        let mut h = started();
        h.tool_call(call).unwrap();
        h.handle_frame(frame("x1", Frame::Tool(receipt.clone())))
            .unwrap();
        matches!(
            h.poll_event(),
            Some(HarnessConnectEvent::Reply(SinkReply::Failed(_)))
        )
    };
    assert!(fails(gated), "a receipt before its decision");
    let ordinary = ToolCall::new("c1", "t", Default::default()).controller_mediated("x1");
    assert!(fails(ordinary), "approval fields outside the gate");

    let mut h = started();
    assert!(h.report(receipt).is_err());
    assert!(h.finish(&Ok(())).is_err(), "sticky: the END reports it");
    assert_eq!(ends(&mut h)[0].state, "FAILED");
}

/// "Cancel stops the turn": a cancel frame is the driver's signal to drop the turn, which
/// then ends CANCELED; nothing after the one END.
#[test]
fn cancel_and_exactly_one_end() {
    let mut h = started();
    h.handle_frame(frame(
        "x1",
        Frame::Cancel {
            reason: "USER".into(),
        },
    ))
    .unwrap();
    assert!(matches!(h.poll_event(), Some(HarnessConnectEvent::Cancel(r)) if r == "USER"));
    assert!(
        h.finish(&Err(HarnessError::Sink(SinkError::Cancelled)))
            .is_err()
    );
    assert_eq!(ends(&mut h)[0].state, "CANCELED");
    assert!(h.finish(&Ok(())).is_err(), "no second END");
    assert!(h.poll_transmit().is_none());
}

// ---------------------------------------------------------------------------------------
// The host side alone.

fn host_side() -> HostConnect {
    let start = Start {
        execution_id: "x1".into(),
        session_uid: "s".into(),
        ..Start::default()
    };
    let mut h = HostConnect::new(&start).unwrap();
    assert!(matches!(
        h.poll_transmit(),
        Some(ControllerFrame {
            frame: Some(Frame::Start(_)),
            ..
        })
    ));
    h
}

/// §2, §3: "Run fails locally with "harnesswire: Start requires execution_id""; the host
/// rejects an event of another execution, a host-owned control event, an unsolicited
/// EVENT_PARKED, approval fields in a report, pipelined requests; after END only the
/// stream's end.
#[test]
fn the_host_side_refuses_what_the_bridge_refuses() {
    assert!(HostConnect::new(&Start::default()).is_err());
    let refused = [
        end("x2"),
        ev("x1", EventBody::ApprovalRequest(Default::default())),
        ev("x1", EventBody::ExecutionStart(Default::default())),
        HarnessFrame::Parked {
            execution_id: "x1".into(),
            parked: ApprovalRef::default(),
        },
        ev("x1", EventBody::ToolResult(ToolResult::denied("c", "no"))),
    ];
    for f in refused {
        assert!(host_side().handle_event(f.clone()).is_err(), "{f:?}");
    }
    let mut h = host_side();
    h.handle_event(model_call("x1")).unwrap();
    assert!(
        h.handle_event(ev("x1", EventBody::Output(Message::assistant("a"))))
            .is_err(),
        "pipelined"
    );
    // Ignored kinds.
    let mut h = host_side();
    h.handle_event(ev("x1", EventBody::Input(Message::user("x"))))
        .unwrap();
    assert!(h.poll_event().is_none());
    // After END: the end of the stream completes the turn; an END before it does not.
    h.handle_event(end("x1")).unwrap();
    assert_eq!(h.handle_close(), Ok(Ending::Completed));
    assert!(host_side().handle_close().is_err(), "closed before END");
}

/// §5 case A: the host sends the park, then requires one correlated EVENT_PARKED and then
/// EOF ("park acknowledgement correlation mismatch", "expected stream closure after park
/// acknowledgement").
#[test]
fn the_host_side_park_exchange() {
    let call = ToolCall::new("c1", "publish", Default::default())
        .with_mediation(Mediation::RequiresApproval)
        .with_idempotency_key("k");
    let open = || {
        let mut h = host_side();
        h.handle_event(ev("x1", EventBody::ToolCall(call.clone())))
            .unwrap();
        assert!(h.park("c2", 3).is_err(), "invalid host park correlation");
        h.park("c1", 3).unwrap();
        assert!(matches!(
            h.poll_transmit(),
            Some(ControllerFrame {
                frame: Some(Frame::Park(_)),
                ..
            })
        ));
        h
    };
    let ack = |seq| HarnessFrame::Parked {
        execution_id: "x1".into(),
        parked: ApprovalRef {
            execution_id: "x1".into(),
            tool_call_id: "c1".into(),
            request_seq: seq,
        },
    };
    assert!(open().handle_event(ack(4)).is_err());
    assert!(
        open().handle_close().is_err(),
        "closed before the acknowledgement"
    );
    let mut h = open();
    h.handle_event(ack(3)).unwrap();
    assert!(matches!(h.handle_close(), Ok(Ending::Parked(p)) if p.request_seq == 3));
    let mut h = open();
    h.handle_event(ack(3)).unwrap();
    assert!(
        h.handle_event(end("x1")).is_err(),
        "expected stream closure after park acknowledgement"
    );
}

/// An answer out of turn is refused and changes nothing: the turn that ended still ends
/// (found by the `sessions_connect` fuzz target: it used to reset the exchange to running).
#[test]
fn the_host_side_refuses_answers_out_of_turn_and_keeps_its_state() {
    let mut h = host_side();
    h.handle_event(end("x1")).unwrap();
    assert!(h.model_result(Default::default()).is_err());
    assert!(h.tool_result(ToolResult::error("c1", "e")).is_err());
    assert!(h.poll_transmit().is_none(), "nothing sent");
    assert_eq!(h.handle_close(), Ok(Ending::Completed));
    // A gated call answered without its decision: refused, still outstanding.
    let call = ToolCall::new("c1", "publish", Default::default())
        .with_mediation(Mediation::RequiresApproval)
        .with_idempotency_key("k");
    let mut h = host_side();
    h.handle_event(ev("x1", EventBody::ToolCall(call))).unwrap();
    assert!(h.tool_result(ToolResult::error("c1", "e")).is_err());
    assert!(h.poll_transmit().is_none(), "nothing sent");
    h.park("c1", 3).unwrap();
}
