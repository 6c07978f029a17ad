//! One agent, every host: the tour's FAQ agent (`harness_core::agent::faq`), unchanged, on
//! `RecordingSink` (every feature, and as a phone: a policy decides), the jambonz driver and
//! simulator, the TanStack host and driver, the agentsessions controller and the UHP server,
//! each held to the same expectations ([`expect`]), as far as the host's protocol reaches
//! ([`FaqHost::OFFERS`]):
//!
//! - a gated tool never runs without an approval; approved, it runs exactly once (also
//!   across a crash and resume on sessions, and a restart of a durable TanStack host); denied,
//!   it never runs, and the denial recorded as the call's result says so and carries none of
//!   the tool's output;
//! - "What are your hours?" asks "Which day?" where a person can answer, and goes on with the
//!   answer; "What are your hours on Saturday?" answers at once through `get_hours`;
//! - hand-off and hang-up where the host offers them; elsewhere the host answers
//!   `Unsupported` and the agent says it cannot.
//!
//! The rules: agentsessions-writing-a-harness.txt ("Approval-gated calls ... Never run the
//! gated effect inside the harness"; "A denial supplies APPROVAL_DENIED with IsError=true and
//! never invokes the executor"), tanstack-harness-wire-protocol.md ("Waits for a person",
//! l. 425-433), jambonz-harness-protocol (no approval message: the host's policy decides),
//! and issue 12's "A gated tool never runs silently on any host".
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

#[path = "../../harness-tanstack/tests/support/driver.rs"]
#[allow(dead_code)]
mod driver_support;
mod hosts;

use hosts::*;

use std::sync::Arc;
use std::time::Instant;

use futures::executor::LocalPool;
use futures::task::LocalSpawnExt;
use harness_core::agent::faq::{
    FaqAgent, GOODBYE, NO_PERSON, Refunds, WHICH_DAY, faq_model, faq_tools,
};
use harness_core::event::EventBody;
use harness_core::interaction::Feature;
use harness_core::message::Message;
use harness_core::testing::{RecordingSink, SinkCall};
use harness_core::tool::rules::ApprovalPolicy;
use harness_core::{Start, Tools};
use serde_json::{Value, json};

const REFUND: &str = "Please refund order 42";
const HOURS: &str = "What are your hours?";
const SATURDAY: &str = "What are your hours on Saturday?";
const ON_SATURDAY: &str = "On Saturday we're open 9am to 1pm.";
const THE_WEEK: &str = "We're open 8am to 6pm on weekdays.";
const REFUNDED: &str = "Done: refunded order 42.";
const NOT_DONE: &str = "The refund was not done: approval denied";

/// Who the host is waiting for at the end of a turn.
#[derive(Clone, Debug, PartialEq)]
enum Waiting {
    /// A person's decision on a gated call.
    Approval,
    /// A person's answer to this question.
    Question(String),
}

/// What one turn did, as the host recorded it.
#[derive(Clone, Debug, Default)]
struct Turn {
    /// What the agent said (its text, as the host streamed or recorded it).
    said: String,
    /// What the host waits for, if anything.
    waiting: Option<Waiting>,
    /// The conversation was handed off.
    handed_off: bool,
    /// The call was hung up.
    hung_up: bool,
    /// Every result the host recorded for a `refund` call: `(is_error, what it carries)`.
    refund_results: Vec<(bool, String)>,
}

/// A host serving the FAQ agent, driven by the same expectations.
trait FaqHost {
    /// Its protocol's features (what `sink.supports` answers there).
    const OFFERS: &'static [Feature];
    /// A host whose gated calls, where no person can be asked, `policy` decides.
    fn new(policy: ApprovalPolicy) -> Self;
    /// A turn with the customer's `text`.
    fn prompt(&mut self, text: &str) -> Turn;
    /// A person's decision on the gated call the host waits on; the turn goes on.
    fn decide(&mut self, approved: bool) -> Turn;
    /// A person's answer to the question the host waits on; the turn goes on.
    fn answer(&mut self, value: &str) -> Turn;
    /// The payment service behind `refund`.
    fn refunds(&self) -> &Refunds;
}

fn offers<H: FaqHost>(f: Feature) -> bool {
    H::OFFERS.contains(&f)
}

/// The expectations, the same on every host.
mod expect {
    use super::*;

    /// Approval-gated: the refund parks (a person decides) or the host's default policy
    /// denies it; either way its code has not run.
    pub fn gated_never_runs_unapproved<H: FaqHost>() {
        let mut h = H::new(ApprovalPolicy::Deny);
        let t = h.prompt(REFUND);
        assert_eq!(h.refunds().count(), 0, "the gated refund ran unapproved");
        if offers::<H>(Feature::Approvals) {
            assert_eq!(t.waiting, Some(Waiting::Approval), "{t:?}");
            assert!(t.refund_results.is_empty(), "{t:?}");
        } else {
            assert_eq!(t.waiting, None);
            assert!(t.said.starts_with(NOT_DONE), "{t:?}");
        }
    }

    /// Approved (by a person, or by a policy that approves): the refund runs exactly once,
    /// with the call's idempotency key, and its result reads `refunded order 42`.
    pub fn approved_runs_exactly_once<H: FaqHost>() {
        let mut h = H::new(ApprovalPolicy::Approve);
        let mut t = h.prompt(REFUND);
        if offers::<H>(Feature::Approvals) {
            assert_eq!(h.refunds().count(), 0);
            t = h.decide(true);
        }
        let paid = h.refunds().paid();
        assert_eq!(paid.len(), 1, "{t:?}");
        assert_eq!(paid[0].order_id, 42);
        assert!(!paid[0].idempotency_key.is_empty(), "the effect got no key");
        assert_eq!(t.said, REFUNDED, "{t:?}");
        assert_eq!(t.refund_results.len(), 1, "{t:?}");
        assert!(!t.refund_results[0].0, "{t:?}");
        // Nothing more runs it: a turn after it does not re-drive the call.
        h.prompt(SATURDAY);
        assert_eq!(h.refunds().count(), 1);
    }

    /// Denied: the refund never runs; the recorded result is the denial (an error that says
    /// so, none of the tool's output) and the agent says the refund was not done.
    pub fn denied_never_runs<H: FaqHost>() {
        let mut h = H::new(ApprovalPolicy::Deny);
        let mut t = h.prompt(REFUND);
        if offers::<H>(Feature::Approvals) {
            t = h.decide(false);
        }
        assert_eq!(h.refunds().count(), 0, "a denied refund ran");
        assert!(t.said.starts_with(NOT_DONE), "{t:?}");
        for (is_error, carried) in &t.refund_results {
            assert!(is_error, "{t:?}");
            assert!(carried.contains("denied"), "{t:?}");
            assert!(!carried.contains("refunded order"), "{t:?}");
        }
    }

    /// "What are your hours?" names no day: where a person can answer, "Which day?" and the
    /// answer continues the turn; elsewhere the week's hours.
    pub fn hours_without_a_day<H: FaqHost>() {
        let mut h = H::new(ApprovalPolicy::Deny);
        let t = h.prompt(HOURS);
        if offers::<H>(Feature::Questions) {
            assert_eq!(
                t.waiting,
                Some(Waiting::Question(WHICH_DAY.into())),
                "{t:?}"
            );
            assert_eq!(t.said, "");
            let t = h.answer("Saturday");
            assert_eq!(t.said, ON_SATURDAY, "{t:?}");
            assert_eq!(t.waiting, None);
        } else {
            assert_eq!(t.waiting, None, "{t:?}");
            assert_eq!(t.said, THE_WEEK, "{t:?}");
        }
    }

    /// "What are your hours on Saturday?" answers at once through `get_hours`.
    pub fn hours_on_a_named_day<H: FaqHost>() {
        let mut h = H::new(ApprovalPolicy::Deny);
        let t = h.prompt(SATURDAY);
        assert_eq!(t.waiting, None, "{t:?}");
        assert_eq!(t.said, ON_SATURDAY, "{t:?}");
    }

    /// A person asked for: handed off where the host can; elsewhere the agent says it
    /// cannot.
    pub fn hand_off<H: FaqHost>() {
        let mut h = H::new(ApprovalPolicy::Deny);
        let t = h.prompt("I'd like a person, please");
        if offers::<H>(Feature::Handoff) {
            assert!(t.handed_off, "{t:?}");
            assert_eq!(t.said, "");
        } else {
            assert!(!t.handed_off);
            assert_eq!(t.said, NO_PERSON, "{t:?}");
        }
    }

    /// "bye": hung up where the host has platform commands; elsewhere the agent says goodbye.
    pub fn hang_up<H: FaqHost>() {
        let mut h = H::new(ApprovalPolicy::Deny);
        let t = h.prompt("Thanks, bye");
        if offers::<H>(Feature::Commands) {
            assert!(t.hung_up, "{t:?}");
        } else {
            assert!(!t.hung_up);
            assert_eq!(t.said, GOODBYE, "{t:?}");
        }
    }
}

/// Every expectation, as tests of one host.
macro_rules! every_expectation {
    ($($module:ident: $host:ty),* $(,)?) => {$(
        mod $module {
            use super::*;
            #[test]
            fn the_gated_refund_never_runs_unapproved() {
                expect::gated_never_runs_unapproved::<$host>();
            }
            #[test]
            fn an_approved_refund_runs_exactly_once() {
                expect::approved_runs_exactly_once::<$host>();
            }
            #[test]
            fn a_denied_refund_never_runs() {
                expect::denied_never_runs::<$host>();
            }
            #[test]
            fn hours_without_a_day_ask_which_day_where_a_person_can_answer() {
                expect::hours_without_a_day::<$host>();
            }
            #[test]
            fn hours_on_a_named_day_answer_at_once() {
                expect::hours_on_a_named_day::<$host>();
            }
            #[test]
            fn a_person_is_handed_off_to_where_the_host_can() {
                expect::hand_off::<$host>();
            }
            #[test]
            fn bye_hangs_up_where_the_host_can() {
                expect::hang_up::<$host>();
            }
        }
    )*};
}

every_expectation!(
    recording_sink: RecordingHost,
    recording_sink_as_a_phone: RecordingPhone,
    jambonz: JambonzHost,
    tanstack: TanstackHost,
    sessions: SessionsHost,
    uhp: UhpHost,
);

// ---------------------------------------------------------------------------------------
// Durable hosts: a crash, a restart

/// I3: "A crash between an effect's intent and its result is re-driven at most once.
/// Host-executed tools carry an idempotency key so the re-drive dedups": approved, the
/// resumed turn is cut after each record; recovered on the same journal, the refund ran
/// exactly once, and the one refund has the journaled call's key.
#[test]
fn sessions_an_approved_refund_runs_exactly_once_across_a_crash_and_resume() {
    use harness_sessions::journal::Journal;
    use harness_sessions::testing::CrashAfter;
    for cut in 0.. {
        let journal: Arc<dyn Journal> = Arc::new(harness_sessions::MemoryJournal::new());
        let refunds = Refunds::default();
        let receipts = Arc::default();
        let host = sessions_controller(journal.clone(), &refunds, &receipts);
        host.create_session("s", Some("faq")).unwrap();
        futures::executor::block_on(host.exec(harness_sessions::ExecRequest::text("s", REFUND)))
            .unwrap();
        let p = host.pending_approval("s").unwrap().unwrap();
        host.approve("s", &p.call.id, true, "").unwrap();
        let crashing = sessions_controller(
            Arc::new(CrashAfter::new(journal.clone(), cut)),
            &refunds,
            &receipts,
        );
        let crashed = futures::executor::block_on(crashing.resume("s")).is_err();
        drop(crashing);
        let host = sessions_controller(journal.clone(), &refunds, &receipts);
        if crashed {
            match futures::executor::block_on(host.resume("s")).unwrap() {
                Some(turn) => assert_eq!(turn.output, REFUNDED, "cut {cut}"),
                // Cut after the turn's END: nothing is left to resume.
                None => {
                    let records = host.records("s").unwrap();
                    assert_eq!(records.last().unwrap().event.kind().as_str(), "END");
                }
            }
        }
        assert_eq!(
            refunds.count(),
            1,
            "cut {cut}: the refund ran {} times",
            refunds.count()
        );
        assert_eq!(
            refunds.paid()[0].idempotency_key,
            p.call.idempotency_key,
            "cut {cut}"
        );
        let replay = futures::executor::block_on(host.replay("s")).unwrap();
        assert_eq!(replay.executor_calls, 0);
        assert_eq!(refunds.count(), 1, "replay ran the refund");
        if !crashed {
            assert!(cut > 2, "the resume never crashed");
            break;
        }
    }
}

/// The sessions README's guarantee, as it states it: receipts (`DedupExecutor`) make a
/// re-driven call run at most once *once its receipt is stored*; a process killed between
/// the effect and its receipt leaves none, and resume runs the tool again, handing it the
/// same idempotency key, so that a payment service idempotent on the key pays once. Here the
/// process dies right after the refund ran: its receipt never written, its TOOL_RESULT never
/// journaled. The refund's code runs twice, with one key (the ledger does not deduplicate;
/// a real payment service would, on that key).
#[test]
fn sessions_receipts_do_not_cover_a_kill_between_the_effect_and_its_receipt() {
    use harness_core::message::ToolResult;
    use harness_sessions::JournalError;
    use harness_sessions::journal::Journal;
    use harness_sessions::testing::CrashAfter;
    use harness_sessions::tools::{MemoryReceipts, ReceiptStore};
    use std::sync::atomic::{AtomicBool, Ordering};

    /// Durable receipts whose first write is lost: the process died before it.
    #[derive(Default)]
    struct FirstWriteLost(MemoryReceipts, AtomicBool);
    impl ReceiptStore for FirstWriteLost {
        fn get(&self, s: &str, k: &str) -> Result<Option<ToolResult>, JournalError> {
            self.0.get(s, k)
        }
        fn put(&self, s: &str, k: &str, r: &ToolResult) -> Result<(), JournalError> {
            if self.1.swap(true, Ordering::SeqCst) {
                self.0.put(s, k, r)
            } else {
                Ok(())
            }
        }
    }

    let refunds = Refunds::default();
    let receipts = Arc::new(FirstWriteLost::default());
    let host_on = |journal: Arc<dyn Journal>| {
        harness_sessions::Controller::builder(journal)
            .model(faq_model())
            .tools(faq_tools(&refunds))
            .receipts(Arc::clone(&receipts))
            .harness("faq", FaqAgent::new())
            .build()
    };
    let journal: Arc<dyn Journal> = Arc::new(harness_sessions::MemoryJournal::new());
    let host = host_on(journal.clone());
    host.create_session("s", Some("faq")).unwrap();
    futures::executor::block_on(host.exec(harness_sessions::ExecRequest::text("s", REFUND)))
        .unwrap();
    let p = host.pending_approval("s").unwrap().unwrap();
    host.approve("s", &p.call.id, true, "").unwrap();
    // The resume's LIFECYCLE is written, then the process dies: after the refund ran,
    // before its TOOL_RESULT.
    let dying = host_on(Arc::new(CrashAfter::new(journal.clone(), 1)));
    assert!(futures::executor::block_on(dying.resume("s")).is_err());
    assert_eq!(refunds.count(), 1);
    let turn = futures::executor::block_on(host_on(journal).resume("s"))
        .unwrap()
        .unwrap();
    assert_eq!(turn.output, REFUNDED);
    let paid = refunds.paid();
    assert_eq!(paid.len(), 2, "the re-drive ran the effect again");
    assert_eq!(paid[0].idempotency_key, p.call.idempotency_key);
    assert_eq!(
        paid[1].idempotency_key, paid[0].idempotency_key,
        "the same key both times"
    );
    assert_eq!(
        (paid[0].session_uid.as_str(), paid[1].session_uid.as_str()),
        ("s", "s")
    );
}

/// The refund parked on a durable TanStack host (`FileLog`) waits across a restart of the
/// host on the same folder ("Waits survive a durable host's restart"): approved after it, it
/// runs exactly once.
#[test]
fn tanstack_an_approved_refund_runs_once_across_a_durable_restart() {
    use harness_tanstack::host::HostConfig;
    use harness_tanstack::log::FileLog;
    let dir = std::env::temp_dir().join(format!("harness-faq-every-host-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let refunds = Refunds::default();
    let serve = |refunds: &Refunds| {
        let (svc, _) =
            driver_support::service_over(HostConfig::default(), FileLog::open(&dir).unwrap());
        let mut pool = LocalPool::new();
        pool.spawner()
            .spawn_local(harness_tanstack::driver::run_turns(
                svc.clone(),
                FaqAgent::new(),
                faq_model(),
                faq_tools(refunds),
            ))
            .unwrap();
        pool.run_until_stalled();
        (svc, pool)
    };
    let wait_id = {
        let (svc, mut pool) = serve(&refunds);
        driver_support::send(
            &svc,
            &mut pool,
            "faq",
            json!({"op": "prompt", "message": REFUND}),
        );
        let ev = tanstack_events(&svc, &mut pool);
        let w = ev
            .iter()
            .find(|e| e["name"] == "harness.wait.opened")
            .unwrap();
        w["value"]["waitId"].as_str().unwrap().to_owned()
    };
    assert_eq!(refunds.count(), 0);
    let (svc, mut pool) = serve(&refunds);
    let r = driver_support::send(&svc, &mut pool, "faq", resolve(&wait_id, true));
    assert_eq!(r["status"], "accepted", "{r}");
    let ev = tanstack_events(&svc, &mut pool);
    assert_eq!(refunds.count(), 1);
    let results: Vec<_> = ev
        .iter()
        .filter(|e| e["type"] == "TOOL_CALL_RESULT")
        .filter(|e| e["content"].as_str().unwrap().contains("refunded order 42"))
        .collect();
    assert_eq!(results.len(), 1);
    let _ = std::fs::remove_dir_all(&dir);
}

// ---------------------------------------------------------------------------------------
// What only one protocol carries

/// The events of `h`'s last input named `name` (a CUSTOM event's name or a type).
fn named<'a>(h: &'a TanstackHost, name: &str) -> Vec<&'a Value> {
    h.last
        .iter()
        .filter(|e| e["name"] == name || e["type"] == name)
        .collect()
}

/// TanStack: the gated call's wait and the run's interrupt have the shape
/// `@tanstack/ai-client` acts on (research/tanstack-ai-client.md §5: `reason:
/// "approval_required"`, the `toolCallId`, `metadata: {kind, toolName, input}`); the
/// approved turn is a run driven again (`parentRunId`), and the same decision again is
/// `not_waiting`.
#[test]
fn tanstack_the_approval_wait_has_the_clients_shape() {
    let mut h = TanstackHost::new(ApprovalPolicy::Deny);
    h.prompt(REFUND);
    let opened = named(&h, "harness.wait.opened");
    assert_eq!(opened.len(), 1);
    let wait = opened[0]["value"].clone();
    assert_eq!(wait["kind"], "approval");
    let fin = named(&h, "RUN_FINISHED")[0].clone();
    assert_eq!(fin["outcome"]["type"], "interrupt");
    let interrupt = &fin["outcome"]["interrupts"][0];
    assert_eq!(interrupt["id"], wait["waitId"]);
    assert_eq!(interrupt["reason"], "approval_required");
    let call = named(&h, "TOOL_CALL_START")[0]["toolCallId"].clone();
    assert_eq!(interrupt["toolCallId"], call);
    assert_eq!(
        interrupt["metadata"],
        json!({"kind": "approval", "toolName": "refund", "input": {"order_id": 42}})
    );
    h.decide(true);
    assert_eq!(named(&h, "RUN_STARTED")[0]["parentRunId"], fin["runId"]);
    assert!(!named(&h, "harness.wait.settled").is_empty());
    let again = driver_support::send(
        &h.svc,
        &mut h.pool,
        "faq",
        resolve(wait["waitId"].as_str().unwrap(), true),
    );
    assert_eq!(again["reason"], "not_waiting");
    assert_eq!(h.refunds.count(), 1);
}

/// TanStack: around the look-up the agent marks a step, streams reasoning and publishes the
/// day as state (AG-UI `STEP_*`, `REASONING_*`, `STATE_SNAPSHOT` / `STATE_DELTA`); the
/// answered question is settled (`harness.question.answered`).
#[test]
fn tanstack_a_look_up_marks_a_step_reasons_and_publishes_state() {
    let mut h = TanstackHost::new(ApprovalPolicy::Deny);
    h.prompt(HOURS);
    assert_eq!(
        named(&h, "harness.wait.opened")[0]["value"]["kind"],
        "question"
    );
    let id = h.question_id.clone().unwrap();
    h.answer("Saturday");
    assert_eq!(
        named(&h, "harness.question.answered")[0]["value"],
        json!({"questionId": id})
    );
    for t in [
        "STEP_STARTED",
        "REASONING_START",
        "REASONING_MESSAGE_CONTENT",
        "REASONING_END",
        "STATE_SNAPSHOT",
        "STATE_DELTA",
        "STEP_FINISHED",
    ] {
        assert!(!named(&h, t).is_empty(), "no {t}");
    }
    assert_eq!(
        named(&h, "STATE_SNAPSHOT")[0]["snapshot"],
        json!({"day": "Saturday"})
    );
}

/// TanStack: the hand-off is `harness.handoff` to `{human: true}` by code, with the `waitId`
/// of a wait of kind `human` (l. 411, 429).
#[test]
fn tanstack_a_hand_off_opens_a_human_wait() {
    let mut h = TanstackHost::new(ApprovalPolicy::Deny);
    h.prompt("I'd like a person, please");
    let handoff = named(&h, "harness.handoff")[0]["value"].clone();
    assert_eq!(handoff["to"], json!({"human": true}));
    assert_eq!(handoff["by"], "code");
    let wait = named(&h, "harness.wait.opened")[0]["value"].clone();
    assert_eq!(wait["kind"], "human");
    assert_eq!(wait["waitId"], handoff["waitId"]);
}

#[path = "../../examples/jambonz_shared/mod.rs"]
mod jambonz_shared;

/// jambonz: the examples' whole call (`jambonz_call`, the tour): greeting, a refund refused
/// by the policy (the refund is the harness's own tool: never sent to jambonz, its turn
/// record says `denied`), the hours through the platform's `get_hours` (`tool:call`), a
/// barge-in, and the hang-up command (`session:end` `harness_hangup`).
#[test]
fn jambonz_the_examples_whole_call() {
    use harness_jambonz::driver::ServeConfig;
    use harness_jambonz::testing::{Direction, simulate_call};
    let refunds = Refunds::default();
    let start = Instant::now();
    let (agent, model, _) = jambonz_shared::faq();
    let call = simulate_call(
        agent,
        model,
        jambonz_shared::own_tools(&refunds),
        jambonz_shared::whole_call_simulator(start),
        start,
        ServeConfig::default(),
    );
    let t = &call.transcript;
    assert!(t.problems().is_empty(), "{:?}", t.problems());
    assert_eq!(refunds.count(), 0);
    let heard = t.heard();
    assert_eq!(heard[0], "Thanks for calling Acme.");
    assert!(heard[1].starts_with(NOT_DONE), "{heard:?}");
    assert!(THE_WEEK.starts_with(heard[2]), "{heard:?}"); // cut by the barge-in
    let sent: Vec<Value> = call
        .texts(Direction::ToJambonz)
        .into_iter()
        .map(|t| serde_json::from_str(t).unwrap())
        .collect();
    let tool_calls: Vec<_> = sent.iter().filter(|v| v["type"] == "tool:call").collect();
    assert_eq!(tool_calls.len(), 1);
    assert_eq!(tool_calls[0]["name"], "get_hours");
    let refund_turn = sent
        .iter()
        .find(|v| v["type"] == "reply:done" && v["turn_id"] == 2)
        .unwrap();
    assert_eq!(
        refund_turn["turn_record"]["own_tools"],
        json!([{"name": "refund", "ok": false, "denied": true}])
    );
    let hangup = sent.iter().find(|v| v["type"] == "command").unwrap();
    assert_eq!(hangup["name"], "hangup");
    assert_eq!(hangup["args"], json!({"reason": "resolved"}));
    assert_eq!(t.ended.as_ref().unwrap().0, "harness_hangup");
}
