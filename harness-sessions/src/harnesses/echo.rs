use async_trait::async_trait;
use harness_core::message::{Message, ModelRequest};
use harness_core::{
    Capabilities, Descriptor, EventSink, Harness, HarnessError, Resumability, Start,
};

/// The spec's reference harness 1 (`harness/echoagent`): sends the last input's text to the
/// model through the sink and lets the recorded completion be the output. It never calls
/// `sink.output` (Rule 2). ID `echo`, version `1`, models `["echo"]`, STATELESS_REPLAY,
/// fork-safe.
#[derive(Clone, Copy, Debug, Default)]
pub struct EchoHarness;

#[async_trait]
impl Harness for EchoHarness {
    async fn describe(&self) -> Result<Descriptor, HarnessError> {
        Ok(Descriptor {
            id: "echo".into(),
            version: "1".into(),
            models: vec!["echo".into()],
            tools: Vec::new(),
            capabilities: Capabilities {
                resumability: Resumability::StatelessReplay,
                fork_safe: true,
                ..Capabilities::default()
            },
        })
    }

    async fn run(&self, start: Start, sink: &mut dyn EventSink) -> Result<(), HarnessError> {
        let text = start.inputs.last().map(Message::text).unwrap_or_default();
        sink.model(ModelRequest::new(vec![Message::user(text)]).with_model("echo"))
            .await?;
        Ok(())
    }
}
