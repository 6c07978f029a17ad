//! Questions, hand-offs, commands, reasoning, state and steps (`harness_core::interaction`),
//! and the tape that lets a parked turn resume.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use async_trait::async_trait;
use futures::executor::block_on;
use harness_core::interaction::{
    Answer, Command, CommandResult, Feature, Handoff, Question, StateUpdate, Step,
};
use harness_core::message::{Message, ModelRequest};
use harness_core::model::ScriptedModel;
use harness_core::tape::{Tape, TapeEntry, Taped};
use harness_core::testing::{RecordingSink, SinkCall};
use harness_core::{Descriptor, EventSink, Harness, HarnessError, SinkError, Start};
use serde_json::json;

/// Asks which day when the caller names none, then answers with the model.
struct Hours;

#[async_trait]
impl Harness for Hours {
    async fn describe(&self) -> Result<Descriptor, HarnessError> {
        Ok(Descriptor::new("hours", "1"))
    }
    async fn run(&self, start: Start, sink: &mut dyn EventSink) -> Result<(), HarnessError> {
        let asked = start.inputs.iter().map(Message::text).collect::<String>();
        let day = if asked.contains("Saturday") {
            "Saturday".to_owned()
        } else if sink.supports(Feature::Questions) {
            sink.step(Step::Started("ask_day".into())).await?;
            let a = sink.ask(Question::new("Which day?")).await?;
            sink.step(Step::Finished("ask_day".into())).await?;
            a.text().unwrap_or("today").to_owned()
        } else {
            "today".to_owned()
        };
        let req = ModelRequest::new(vec![Message::user(format!("hours on {day}"))]);
        sink.model(req).await?;
        Ok(())
    }
}

fn echo_model() -> ScriptedModel {
    ScriptedModel::new().otherwise(|req| {
        Ok(Message::assistant(format!(
            "Open 9 to 5, {}.",
            req.last_user_text().unwrap_or_default()
        )))
    })
}

#[test]
fn a_question_parks_the_turn_and_the_answer_resumes_it() {
    let mut sink = RecordingSink::new(echo_model());
    let start = Start::with_inputs(vec![Message::user("What are your hours?")]);
    let err = block_on(sink.drive(&Hours, start.clone())).unwrap_err();
    assert!(
        matches!(err, HarnessError::Sink(SinkError::AwaitingAnswer { .. })),
        "{err:?}"
    );
    let q = sink.pending_questions()[0].clone();
    assert_eq!(q.message, "Which day?");
    assert!(!q.id.is_empty(), "the host gives the question an id");

    sink.answer(&q.id, "Saturday");
    block_on(sink.drive(&Hours, start)).unwrap();
    assert_eq!(sink.spoken_text(), "Open 9 to 5, hours on Saturday.");
    // The step opened before the question was shown once, not again on the second drive.
    let steps: Vec<_> = sink
        .calls()
        .iter()
        .filter(|c| matches!(c, SinkCall::Step(_)))
        .collect();
    assert_eq!(steps.len(), 2, "{steps:?}");
}

#[test]
fn a_question_id_is_the_same_when_the_turn_is_driven_again() {
    let mut sink = RecordingSink::new(echo_model());
    let start = Start::with_inputs(vec![Message::user("hours?")]);
    assert!(
        block_on(sink.drive(&Hours, start.clone()))
            .unwrap_err()
            .is_parked()
    );
    let first = sink.pending_questions()[0].id.clone();
    // Not answered: driven again, it parks on the same question.
    assert!(block_on(sink.drive(&Hours, start)).unwrap_err().is_parked());
    assert_eq!(sink.pending_questions()[0].id, first);
}

#[test]
fn a_named_day_needs_no_question() {
    let mut sink = RecordingSink::new(echo_model());
    let start = Start::with_inputs(vec![Message::user("What are your hours on Saturday?")]);
    block_on(sink.drive(&Hours, start)).unwrap();
    assert!(sink.pending_questions().is_empty());
    assert_eq!(sink.spoken_text(), "Open 9 to 5, hours on Saturday.");
}

/// "A host that cannot do one answers a typed Unsupported, never a silent no-op."
#[test]
fn a_feature_a_host_lacks_is_a_typed_unsupported() {
    for f in Feature::ALL {
        let mut sink = RecordingSink::new(ScriptedModel::new()).without(f);
        assert!(!sink.supports(f));
        let got = block_on(async {
            match f {
                Feature::Questions => sink.ask(Question::new("?")).await.map(|_| ()),
                Feature::Handoff => sink.handoff(Handoff::to_human()).await,
                Feature::Commands => sink.command(Command::hangup("done")).await.map(|_| ()),
                Feature::Reasoning => sink.reasoning("thinking").await,
                Feature::State => sink.state(StateUpdate::Snapshot(json!({}))).await,
                Feature::Steps => sink.step(Step::Started("s".into())).await,
                _ => Err(SinkError::Unsupported(f)),
            }
        });
        assert_eq!(got, Err(SinkError::Unsupported(f)), "{f}");
        assert!(sink.calls().is_empty(), "{f}: nothing recorded");
    }
}

/// The default of every new sink method is Unsupported: a sink written before them (only
/// model, output, tool_call, report, usage) still compiles and says so.
#[test]
fn an_old_sink_supports_nothing_new() {
    struct Old;
    #[async_trait]
    impl EventSink for Old {
        async fn model(
            &mut self,
            _r: ModelRequest,
        ) -> Result<harness_core::message::ModelResponse, SinkError> {
            Err(SinkError::Cancelled)
        }
        async fn output(&mut self, _d: &str) -> Result<(), SinkError> {
            Ok(())
        }
        async fn tool_call(
            &mut self,
            _c: harness_core::message::ToolCall,
        ) -> Result<harness_core::message::ToolResult, SinkError> {
            Err(SinkError::Cancelled)
        }
        async fn report(&mut self, _r: harness_core::message::ToolResult) -> Result<(), SinkError> {
            Ok(())
        }
        async fn usage(&mut self, _u: harness_core::message::Usage) -> Result<(), SinkError> {
            Ok(())
        }
    }
    let mut old = Old;
    assert!(Feature::ALL.iter().all(|f| !old.supports(*f)));
    assert_eq!(
        block_on(old.ask(Question::new("?"))),
        Err(SinkError::Unsupported(Feature::Questions))
    );
    assert_eq!(
        block_on(old.reasoning("x")),
        Err(SinkError::Unsupported(Feature::Reasoning))
    );
}

#[test]
fn commands_handoffs_reasoning_and_state_are_recorded() {
    let mut sink = RecordingSink::new(ScriptedModel::new()).on_command(|c| CommandResult {
        ok: c.name == "hangup",
        ..CommandResult::default()
    });
    block_on(async {
        assert!(sink.command(Command::hangup("resolved")).await.unwrap().ok);
        assert!(!sink.command(Command::new("play")).await.unwrap().ok);
        sink.handoff(Handoff::to_human().with_note("refund dispute"))
            .await
            .unwrap();
        sink.reasoning("checking the order").await.unwrap();
        sink.state(StateUpdate::Delta(vec![
            json!({"op": "add", "path": "/a", "value": 1}),
        ]))
        .await
        .unwrap();
    });
    assert!(
        matches!(&sink.calls()[0], SinkCall::Command { command, .. } if command.args["reason"] == "resolved")
    );
    assert!(
        matches!(&sink.calls()[2], SinkCall::Handoff(h) if h.note.as_deref() == Some("refund dispute"))
    );
    assert!(matches!(&sink.calls()[3], SinkCall::Reasoning(r) if r == "checking the order"));
}

#[test]
fn a_tape_survives_serialization_and_serves_the_same_answers() {
    let mut live = RecordingSink::new(echo_model()).answering(|_| Some(json!("Sunday")));
    let mut tape = Tape::new();
    block_on(async {
        let mut sink = Taped::new(&mut live, &mut tape);
        Hours
            .run(Start::with_inputs(vec![Message::user("hours?")]), &mut sink)
            .await
    })
    .unwrap();
    let stored = serde_json::to_string(&tape).unwrap();
    let mut back: Tape = serde_json::from_str(&stored).unwrap();
    assert_eq!(back, tape);
    assert!(
        matches!(back.entries()[1], TapeEntry::Answer { answer: Answer { ref value, .. } } if value == "Sunday")
    );

    // A host restarted with the stored tape drives the turn again: nothing reaches the live
    // sink, everything is served.
    let mut fresh = RecordingSink::new(ScriptedModel::new());
    block_on(async {
        let mut sink = Taped::new(&mut fresh, &mut back);
        Hours
            .run(Start::with_inputs(vec![Message::user("hours?")]), &mut sink)
            .await
    })
    .unwrap();
    assert!(fresh.calls().is_empty(), "{:?}", fresh.calls());
}
