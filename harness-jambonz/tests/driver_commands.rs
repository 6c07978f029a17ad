//! The driver's platform features: commands ("Sent as {type: "command", command_id, name,
//! args}; each gets a command:result", spec line 57), hang-up as a command, hand-offs where configured, and
//! the features jambonz has no message for, answered `Unsupported`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use harness_core::interaction::{
    Command, Feature, Handoff, HandoffTarget, Question, StateUpdate, Step,
};
use harness_core::model::ScriptedModel;
use harness_core::{Descriptor, EventSink, Harness, HarnessError, Start, Tools};
use harness_jambonz::driver::ServeConfig;
use harness_jambonz::simulator::Script;
use harness_jambonz::testing::SimulatedCall;
use serde_json::{Value, json};

mod common;
use common::driver::{Call, Live, call, sent};

/// Does what the caller says, through the sink, and notes what each sink call returned.
struct Acts {
    log: Arc<Mutex<Vec<String>>>,
}

impl Acts {
    fn new() -> (Self, Arc<Mutex<Vec<String>>>) {
        let log = Arc::new(Mutex::new(Vec::new()));
        (Acts { log: log.clone() }, log)
    }

    fn note(&self, what: impl std::fmt::Debug) {
        self.log.lock().unwrap().push(format!("{what:?}"));
    }
}

#[async_trait]
impl Harness for Acts {
    async fn describe(&self) -> Result<Descriptor, HarnessError> {
        Ok(Descriptor::new("acts", "1"))
    }
    async fn run(&self, start: Start, sink: &mut dyn EventSink) -> Result<(), HarnessError> {
        match start.inputs[0].text().as_str() {
            "play" => {
                let play = Command::new("play").with_arg("url", "https://acme.example/hold.mp3");
                self.note(sink.command(play).await);
            }
            "transfer" => {
                self.note(sink.supports(Feature::Handoff));
                self.note(sink.handoff(Handoff::to_human().with_note("billing")).await);
            }
            "bye" => {
                self.note(sink.command(Command::hangup("resolved")).await);
                // The call is over: nothing more is sent.
                self.note(sink.command(Command::new("play")).await);
                self.note(sink.output("Bye!").await);
            }
            "features" => {
                for f in Feature::ALL {
                    self.note((f, sink.supports(f)));
                }
                self.note(sink.ask(Question::new("Which day?")).await);
                self.note(sink.reasoning("thinking").await);
                self.note(sink.state(StateUpdate::Snapshot(json!({}))).await);
                self.note(sink.step(Step::Started("look_up".into())).await);
                self.note(sink.handoff(Handoff::to_human()).await);
            }
            _ => {}
        }
        sink.output("OK.").await?;
        Ok(())
    }
}

/// A call in which the caller says `said` to [`Acts`]: the call, and what each sink call
/// returned.
fn act(said: &str, cfg: ServeConfig) -> (SimulatedCall, Vec<String>) {
    let (acts, log) = Acts::new();
    let c = call(acts, ScriptedModel::new(), Script::new().say(said), cfg);
    let log = log.lock().unwrap().clone();
    (c, log)
}

/// The same on a driver fed by hand, up to the command [`Acts`] sends: the driver, what each
/// sink call returned, and the command frame (for the test to answer).
fn act_live(said: &str, cfg: ServeConfig) -> (Live, Arc<Mutex<Vec<String>>>, Value) {
    let (acts, log) = Acts::new();
    let mut live = Live::new(acts, Tools::new(), cfg);
    live.turn(1, said);
    live.poll();
    let cmd = live
        .sent()
        .into_iter()
        .find(|v| v["type"] == "command")
        .unwrap();
    (live, log, cmd)
}

/// "play, and listen with hints, are not supported yet: they get command:result with ok:
/// false." (spec line 59) `sink.command` sends `{type: "command", command_id, name, args}` and returns the
/// `command:result` as a `CommandResult`; the turn goes on.
#[test]
fn a_command_is_sent_and_its_command_result_answers_it() {
    let (c, log) = act("play", ServeConfig::default());
    assert_eq!(
        log[0],
        r#"Ok(CommandResult { ok: false, error: None, data: {} })"#
    );
    let cmd = &sent(&c, "command")[0];
    assert_eq!(
        cmd,
        &json!({"type": "command", "command_id": "c1", "name": "play", "args": {"url": "https://acme.example/hold.mp3"}})
    );
    let rec = &sent(&c, "reply:done")[0]["turn_record"];
    assert_eq!(
        rec["steps"],
        json!([{"name": "command", "ms": 0, "detail": {"command": "play", "ok": false}}])
    );
    assert_eq!(c.transcript.heard(), ["OK."]);
}

/// `command:result` beyond `{command_id, ok}` (the spec's Commands table was lost): an
/// `error` is the result's `error`, and every other field jambonz sends is kept in `data`.
#[test]
fn a_command_result_keeps_its_other_fields() {
    let (mut live, log, cmd) = act_live("play", ServeConfig::default());
    live.feed(json!({"type":"command:result","command_id":cmd["command_id"],"ok":false,"error":"no media server","retry_ms":500}));
    live.poll();
    assert_eq!(
        log.lock().unwrap()[0],
        r#"Ok(CommandResult { ok: false, error: Some("no media server"), data: {"retry_ms": Number(500)} })"#
    );
}

/// "command {command_id: "c1", name: "hangup", args: {reason: "resolved"}}", "command:result
/// {command_id: "c1", ok: true}", "session:end {reason: "harness_hangup", …}" (spec lines
/// 29-31): hanging up is
/// `sink.command(Command::hangup(reason))`. After it the call is over for the agent: a
/// command or any other sink call returns `Cancelled`, and nothing more is sent.
#[test]
fn hanging_up_is_a_command_and_ends_the_call() {
    let (c, log) = act("bye", ServeConfig::default());
    assert_eq!(
        log[..],
        [
            r#"Ok(CommandResult { ok: true, error: None, data: {} })"#,
            "Err(Cancelled)",
            "Err(Cancelled)",
        ]
    );
    let cmds = sent(&c, "command");
    assert_eq!(cmds.len(), 1);
    assert_eq!(cmds[0]["name"], "hangup");
    assert_eq!(cmds[0]["args"], json!({"reason": "resolved"}));
    assert!(sent(&c, "reply:chunk").is_empty());
    assert_eq!(c.transcript.ended.as_ref().unwrap().0, "harness_hangup");
}

/// jambonz has no hand-off message and the `transfer` command's arguments are unknown: by
/// default `sink.handoff` is `Unsupported(Handoff)` (and `supports` says so), nothing is
/// sent, and the turn goes on.
#[test]
fn a_handoff_is_unsupported_by_default() {
    let (c, log) = act("transfer", ServeConfig::default());
    assert_eq!(log[..], ["false", "Err(Unsupported(Handoff))"]);
    assert!(sent(&c, "command").is_empty());
    assert_eq!(c.transcript.heard(), ["OK."]);
}

fn transfer_config() -> ServeConfig {
    ServeConfig::default().with_handoff(|h| match (&h.to, &h.note) {
        (HandoffTarget::Human, Some(desk)) => {
            Some(Command::new("transfer").with_arg("target", format!("sip:{desk}@acme.example")))
        }
        _ => None,
    })
}

/// With `ServeConfig::with_handoff`, a hand-off the mapping takes is sent as its command;
/// the command's `ok` decides: `Ok(())`, or `Rejected` with why (the simulator answers
/// commands other than `hangup` with `ok: false`).
#[test]
fn a_handoff_is_the_mapped_command_when_configured() {
    let (mut live, log, cmd) = act_live("transfer", transfer_config());
    assert_eq!(cmd["name"], "transfer");
    assert_eq!(cmd["args"], json!({"target": "sip:billing@acme.example"}));
    live.feed(json!({"type":"command:result","command_id":cmd["command_id"],"ok":true}));
    live.poll();
    assert_eq!(log.lock().unwrap()[..], ["true", "Ok(())"]);

    let (c, log) = act("transfer", transfer_config());
    assert_eq!(
        log[1],
        r#"Err(Rejected("the hand-off command transfer failed"))"#
    );
    assert_eq!(sent(&c, "command").len(), 1);
    assert_eq!(c.transcript.heard(), ["OK."]);
}

/// A hand-off the mapping does not take (`None`) is `Unsupported`, and nothing is sent.
#[test]
fn a_handoff_the_mapping_refuses_is_unsupported() {
    struct ToAgent(Arc<Mutex<Vec<String>>>);
    #[async_trait]
    impl Harness for ToAgent {
        async fn describe(&self) -> Result<Descriptor, HarnessError> {
            Ok(Descriptor::default())
        }
        async fn run(&self, _: Start, sink: &mut dyn EventSink) -> Result<(), HarnessError> {
            let r = sink.handoff(Handoff::to_agent("billing-bot")).await;
            self.0.lock().unwrap().push(format!("{r:?}"));
            Ok(())
        }
    }
    let log = Arc::new(Mutex::new(Vec::new()));
    let c = Call {
        cfg: transfer_config(),
        ..Call::default()
    }
    .run(
        ToAgent(log.clone()),
        ScriptedModel::new(),
        Script::new().say("agent"),
    );
    assert_eq!(log.lock().unwrap()[..], ["Err(Unsupported(Handoff))"]);
    assert!(sent(&c, "command").is_empty());
}

/// The protocol has no message for questions, reasoning, state or steps, nor for asking a
/// person to approve a call: `supports` is false for each and the sink answers
/// `Unsupported` with the feature, typed. Commands are supported.
#[test]
fn questions_reasoning_state_and_steps_are_unsupported() {
    let (c, log) = act("features", ServeConfig::default());
    assert_eq!(
        log[..],
        [
            "(Approvals, false)",
            "(Questions, false)",
            "(Handoff, false)",
            "(Commands, true)",
            "(Reasoning, false)",
            "(State, false)",
            "(Steps, false)",
            "Err(Unsupported(Questions))",
            "Err(Unsupported(Reasoning))",
            "Err(Unsupported(State))",
            "Err(Unsupported(Steps))",
            "Err(Unsupported(Handoff))",
        ]
    );
    // Nothing was sent for any of them, and the turn went on.
    assert!(sent(&c, "command").is_empty());
    assert_eq!(c.transcript.heard(), ["OK."]);
}
