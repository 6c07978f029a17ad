//! Serving a harness on one `Harness.Connect` stream: the driver around
//! [`HarnessConnect`](super::HarnessConnect), runtime-agnostic (futures only).

use std::pin::pin;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use futures::channel::mpsc;
use futures::future::{Either, select};
use futures::{Sink, SinkExt, Stream, StreamExt};
use harness_core::interaction::Feature;
use harness_core::message::{ModelRequest, ModelResponse, ToolCall, ToolResult, Usage};
use harness_core::{EventSink, Harness, HarnessError, SinkError};

use super::frame::{ConnectError, ControllerFrame, HarnessFrame};
use super::harness_side::{HarnessConnect, HarnessConnectEvent, SinkReply};
use super::host_side::transport;

/// The agent's sink on the wire: every call becomes the Go bridge's frames, and the agent
/// never sees the stream or the sequence numbers.
struct WireSink<'o, O> {
    machine: Arc<Mutex<HarnessConnect>>,
    out: &'o mut O,
    replies: mpsc::UnboundedReceiver<SinkReply>,
}

fn with<T>(
    m: &Mutex<HarnessConnect>,
    f: impl FnOnce(&mut HarnessConnect) -> T,
) -> Result<T, SinkError> {
    let mut g = m
        .lock()
        .map_err(|_| SinkError::Transport("harnesswire: state poisoned".into()))?;
    Ok(f(&mut g))
}

impl<O: Sink<HarnessFrame, Error = ConnectError> + Unpin + Send> WireSink<'_, O> {
    /// Sends what the machine queued, in order.
    async fn flush(&mut self) -> Result<(), SinkError> {
        while let Some(f) = with(&self.machine, HarnessConnect::poll_transmit)? {
            self.out.send(f).await.map_err(transport)?;
        }
        Ok(())
    }

    /// Queues a call with `op`, sends it and, with `reply`, waits for the host's answer.
    async fn call(
        &mut self,
        op: impl FnOnce(&mut HarnessConnect) -> Result<(), SinkError>,
        reply: bool,
    ) -> Result<Option<SinkReply>, SinkError> {
        with(&self.machine, op)??;
        self.flush().await?;
        if !reply {
            return Ok(None);
        }
        match self.replies.next().await {
            Some(SinkReply::Failed(e)) => Err(e),
            Some(r) => Ok(Some(r)),
            None => Err(SinkError::Transport(
                "harnesswire: the stream is closed".into(),
            )),
        }
    }
}

fn unexpected() -> SinkError {
    SinkError::Transport("harnesswire: a reply of the wrong kind".into())
}

#[async_trait]
impl<O: Sink<HarnessFrame, Error = ConnectError> + Unpin + Send> EventSink for WireSink<'_, O> {
    async fn model(&mut self, req: ModelRequest) -> Result<ModelResponse, SinkError> {
        match self.call(|m| m.model(req), true).await? {
            Some(SinkReply::Model(r)) => Ok(r),
            _ => Err(unexpected()),
        }
    }
    async fn output(&mut self, delta: &str) -> Result<(), SinkError> {
        self.call(|m| m.output(delta), false).await.map(drop)
    }
    async fn tool_call(&mut self, call: ToolCall) -> Result<ToolResult, SinkError> {
        match self.call(|m| m.tool_call(call), true).await? {
            Some(SinkReply::Tool(r)) => Ok(r),
            _ => Err(unexpected()),
        }
    }
    async fn report(&mut self, result: ToolResult) -> Result<(), SinkError> {
        self.call(|m| m.report(result), false).await.map(drop)
    }
    async fn usage(&mut self, usage: Usage) -> Result<(), SinkError> {
        self.call(|m| m.usage(usage), false).await.map(drop)
    }
    /// Approvals (the host parks a gated call and resumes it with its decision) and
    /// reasoning (an OUTPUT of one reasoning part). Questions, hand-offs, commands, state
    /// and steps have no frame: `Unsupported`, as on the in-process host.
    fn supports(&self, feature: Feature) -> bool {
        matches!(feature, Feature::Approvals | Feature::Reasoning)
    }
    async fn reasoning(&mut self, delta: &str) -> Result<(), SinkError> {
        self.call(|m| m.reasoning(delta), false).await.map(drop)
    }
}

/// How the frame reader stopped before the turn did.
enum Stopped {
    Cancelled,
    Gone(ConnectError),
}

/// Reads host frames into the machine and routes replies to the waiting sink call, until a
/// `cancel` or a transport error. When the host closes its side, waits for the turn.
async fn read_frames<I>(
    machine: &Mutex<HarnessConnect>,
    inbound: &mut I,
    replies: &mpsc::UnboundedSender<SinkReply>,
) -> Stopped
where
    I: Stream<Item = Result<ControllerFrame, ConnectError>> + Unpin,
{
    loop {
        let next = inbound.next().await;
        let closed = {
            let Ok(mut m) = machine.lock() else {
                return Stopped::Gone(ConnectError::Transport("state poisoned".into()));
            };
            match next {
                Some(Ok(frame)) => {
                    // During the turn an invalid frame fails the sink call; the END says so.
                    let _ = m.handle_frame(frame);
                }
                Some(Err(e)) => return Stopped::Gone(e),
                None => m.handle_close(),
            }
            while let Some(ev) = m.poll_event() {
                match ev {
                    HarnessConnectEvent::Reply(r) => {
                        let _ = replies.unbounded_send(r);
                    }
                    HarnessConnectEvent::Cancel(_) => return Stopped::Cancelled,
                    HarnessConnectEvent::Start(_) => {}
                }
            }
            m.closed()
        };
        if closed {
            // The host closed its side: the turn goes on until it needs a reply.
            return futures::future::pending().await;
        }
    }
}

/// Serves `harness` on one `Harness.Connect` stream: reads the start frame, runs the turn
/// with a sink that speaks the Go bridge's frames, and ends with exactly one END (or, for a
/// parked turn, one `EVENT_PARKED`). A `cancel` frame stops the turn (its future is dropped)
/// and ends it `CANCELED`; a transport failure drops it and sends nothing more.
///
/// `Ok` when the RPC ends OK; `Err` with the status to end it with otherwise (a failed or
/// cancelled turn after its END, a start frame that is not one, a broken stream).
///
/// ```
/// use futures::{SinkExt, StreamExt};
/// use harness_core::message::Message;
/// use harness_sessions::connect::{serve_connect, ConnectError, ControllerFrame, Frame, HarnessFrame};
/// use harness_sessions::harnesses::CounterHarness;
///
/// // The host's frames, and where the harness's go.
/// let start = harness_core::Start::with_inputs(vec![Message::user("hi")]);
/// let host = futures::stream::iter([Ok::<_, ConnectError>(ControllerFrame {
///     session: "s".into(), execution_id: "x1".into(), frame: Some(Frame::Start(Box::new(start))) })]);
/// let (tx, rx) = futures::channel::mpsc::unbounded::<HarnessFrame>();
/// let out = tx.sink_map_err(|e| ConnectError::Transport(e.to_string()));
/// futures::executor::block_on(serve_connect(&CounterHarness::default(), host, out))?;
/// let sent: Vec<HarnessFrame> = futures::executor::block_on(rx.collect());
/// assert_eq!(sent.len(), 2); // OUTPUT "1", END{COMPLETED}
/// # Ok::<(), ConnectError>(())
/// ```
pub async fn serve_connect<H, I, O>(
    harness: &H,
    inbound: I,
    outbound: O,
) -> Result<(), ConnectError>
where
    H: Harness + ?Sized,
    I: Stream<Item = Result<ControllerFrame, ConnectError>> + Unpin + Send,
    O: Sink<HarnessFrame, Error = ConnectError> + Unpin + Send,
{
    let span = tracing::info_span!(
        "connect.stream",
        side = "harness",
        session = tracing::field::Empty,
        execution_id = tracing::field::Empty,
        outcome = tracing::field::Empty,
    );
    let _open = crate::telemetry::OpenStream::new("harness");
    let fut = serve_connect_in(harness, inbound, outbound);
    let r = tracing::Instrument::instrument(fut, span.clone()).await;
    match &r {
        Ok(()) => span.record("outcome", "ok"),
        Err(e) => {
            tracing::debug!(parent: &span, error = %e, "the Connect stream ended in error");
            span.record("outcome", "error")
        }
    };
    r
}

async fn serve_connect_in<H, I, O>(
    harness: &H,
    mut inbound: I,
    mut outbound: O,
) -> Result<(), ConnectError>
where
    H: Harness + ?Sized,
    I: Stream<Item = Result<ControllerFrame, ConnectError>> + Unpin + Send,
    O: Sink<HarnessFrame, Error = ConnectError> + Unpin + Send,
{
    let first = match inbound.next().await {
        Some(Ok(f)) => f,
        Some(Err(e)) => return Err(e),
        None => return Err(ConnectError::Closed("the stream ended before Start".into())),
    };
    let mut machine = HarnessConnect::new();
    machine.handle_frame(first)?;
    let Some(HarnessConnectEvent::Start(start)) = machine.poll_event() else {
        return Err(ConnectError::protocol(
            "first ControllerFrame must be Start",
        ));
    };
    let span = tracing::Span::current();
    span.record("session", start.session_uid.as_str());
    span.record("execution_id", start.execution_id.as_str());
    let machine = Arc::new(Mutex::new(machine));
    let (tx, rx) = mpsc::unbounded();
    let result: Result<Result<(), HarnessError>, ConnectError> = {
        let mut sink = WireSink {
            machine: Arc::clone(&machine),
            out: &mut outbound,
            replies: rx,
        };
        let run = pin!(harness.run(*start, &mut sink));
        let reader = pin!(read_frames(&machine, &mut inbound, &tx));
        match select(run, reader).await {
            Either::Left((r, _)) => Ok(r),
            Either::Right((Stopped::Cancelled, _)) => {
                Ok(Err(HarnessError::Sink(SinkError::Cancelled)))
            }
            Either::Right((Stopped::Gone(e), _)) => Err(e),
        }
    };
    let result = result?;
    let (status, frames) = {
        let mut m = machine
            .lock()
            .map_err(|_| ConnectError::Transport("state poisoned".into()))?;
        let status = m.finish(&result);
        let frames: Vec<HarnessFrame> = std::iter::from_fn(|| m.poll_transmit()).collect();
        (status, frames)
    };
    for f in frames {
        outbound.send(f).await?;
    }
    outbound.close().await?;
    status.map_err(ConnectError::Failed)
}
