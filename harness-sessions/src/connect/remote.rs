//! Driving a harness that runs elsewhere: the host's driver around
//! [`HostConnect`](super::HostConnect), runtime-agnostic (futures only), and
//! [`RemoteHarness`], a [`Harness`] whose turns run over a [`Connector`].

use std::pin::Pin;

use async_trait::async_trait;
use futures::stream::BoxStream;
use futures::{Sink, SinkExt, Stream, StreamExt};
use harness_core::{Descriptor, EventSink, Harness, HarnessError, Resumability, SinkError, Start};

use super::frame::{ConnectError, ControllerFrame, HarnessFrame};
use super::host_side::{Ending, HostConnect, HostConnectEvent, transport};

/// Drives one turn of a remote harness over one `Harness.Connect` stream: sends the start
/// frame, answers each of the harness's requests with the host's own `sink` (live or
/// replay: the journal cannot tell a remote harness from a local one), and returns when the
/// stream ends after END (`Ok` for `COMPLETED`), after the park acknowledgement (the park,
/// as the sink gave it), or when the exchange breaks.
///
/// A sink error ends the exchange at once (the streams are dropped, which cancels the RPC):
/// over the wire a failed model or tool call ends the turn, as in the Go bridge. A broken
/// exchange (the stream ending before END, a second END, an event of another execution, a
/// host-owned event) is [`SinkError::Transport`]: the turn is left interrupted, for resume.
pub async fn drive_connect<I, O>(
    start: Start,
    sink: &mut dyn EventSink,
    inbound: I,
    outbound: O,
) -> Result<(), HarnessError>
where
    I: Stream<Item = Result<HarnessFrame, ConnectError>> + Unpin + Send,
    O: Sink<ControllerFrame, Error = ConnectError> + Unpin + Send,
{
    let span = tracing::info_span!(
        "connect.stream",
        side = "host",
        session = %start.session_uid,
        execution_id = %start.execution_id,
        outcome = tracing::field::Empty,
    );
    let _open = crate::telemetry::OpenStream::new("host");
    let fut = drive_connect_in(start, sink, inbound, outbound);
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

async fn drive_connect_in<I, O>(
    start: Start,
    sink: &mut dyn EventSink,
    mut inbound: I,
    mut outbound: O,
) -> Result<(), HarnessError>
where
    I: Stream<Item = Result<HarnessFrame, ConnectError>> + Unpin + Send,
    O: Sink<ControllerFrame, Error = ConnectError> + Unpin + Send,
{
    let wire = |e: ConnectError| HarnessError::Sink(transport(e));
    let mut m = HostConnect::new(&start).map_err(wire)?;
    let mut parked: Option<SinkError> = None;
    loop {
        while let Some(f) = m.poll_transmit() {
            outbound.send(f).await.map_err(wire)?;
        }
        let ev = match inbound.next().await {
            Some(Ok(ev)) => ev,
            Some(Err(e)) => return Err(wire(e)),
            None => {
                return match m.handle_close().map_err(wire)? {
                    Ending::Completed => Ok(()),
                    Ending::Failed { state, description } => Err(HarnessError::Failed(format!(
                        "harnesswire: remote harness ended {state}: {description}"
                    ))),
                    Ending::Parked(p) => Err(HarnessError::Sink(parked.take().unwrap_or(
                        SinkError::ApprovalParked {
                            tool_call_id: p.tool_call_id,
                            request_seq: p.request_seq,
                        },
                    ))),
                };
            }
        };
        m.handle_event(ev).map_err(wire)?;
        while let Some(req) = m.poll_event() {
            match req {
                HostConnectEvent::Model(r) => {
                    let resp = sink.model(r).await?;
                    m.model_result(resp).map_err(wire)?;
                }
                HostConnectEvent::Output(t) => sink.output(&t).await?,
                HostConnectEvent::Reasoning(t) => sink.reasoning(&t).await?,
                HostConnectEvent::ToolCall(c) => match sink.tool_call(c).await {
                    Ok(r) => m.tool_result(r).map_err(wire)?,
                    Err(SinkError::ApprovalParked {
                        tool_call_id,
                        request_seq,
                    }) => {
                        m.park(&tool_call_id, request_seq).map_err(wire)?;
                        parked = Some(SinkError::ApprovalParked {
                            tool_call_id,
                            request_seq,
                        });
                    }
                    Err(e) => return Err(e.into()),
                },
                HostConnectEvent::Report(r) => sink.report(r).await?,
                HostConnectEvent::Usage(u) => sink.usage(u).await?,
            }
        }
    }
}

/// One open `Harness.Connect` stream: the harness's events in, the host's frames out.
pub struct RemoteConnection {
    /// What the harness sends.
    pub inbound: BoxStream<'static, Result<HarnessFrame, ConnectError>>,
    /// Where the host's frames go.
    pub outbound: Pin<Box<dyn Sink<ControllerFrame, Error = ConnectError> + Send>>,
}

impl std::fmt::Debug for RemoteConnection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RemoteConnection").finish_non_exhaustive()
    }
}

/// How a [`RemoteHarness`] reaches its harness: its `Describe` and a new `Connect` stream.
/// The `grpc` feature's `GrpcConnector` is one; tests use an in-memory one.
#[async_trait]
pub trait Connector: Send + Sync {
    /// `Harness.Describe`. An error is the harness being unavailable.
    async fn describe(&self) -> Result<Descriptor, HarnessError>;
    /// Opens a `Harness.Connect` stream.
    async fn connect(&self) -> Result<RemoteConnection, HarnessError>;
}

/// A harness that runs elsewhere, driven over `Harness.Connect`: usable anywhere a
/// [`Harness`] is. Register it with
/// [`ControllerBuilder::remote_harness`](crate::controller::ControllerBuilder::remote_harness)
/// so that the controller refuses it when it declares `REQUIRES_MEMORY_SNAPSHOT` (the host
/// does not own its process, so it cannot capture its memory).
///
/// Each turn asks `Describe` again on the connector that runs it and refuses a
/// memory-snapshot answer before the stream opens ("The host asks again on the connection
/// that runs the turn").
#[derive(Clone, Debug)]
pub struct RemoteHarness<C> {
    connector: C,
}

impl<C: Connector> RemoteHarness<C> {
    /// A remote harness reached through `connector`.
    pub fn new(connector: C) -> Self {
        RemoteHarness { connector }
    }

    /// The connector.
    pub fn connector(&self) -> &C {
        &self.connector
    }
}

/// The refusal of a remote harness that declares `REQUIRES_MEMORY_SNAPSHOT`.
pub(crate) const MEMORY_SNAPSHOT_REFUSED: &str = "a remote harness must be STATELESS_REPLAY: the host cannot capture the memory of a process it does not own";

#[async_trait]
impl<C: Connector> Harness for RemoteHarness<C> {
    async fn describe(&self) -> Result<Descriptor, HarnessError> {
        self.connector.describe().await
    }

    async fn run(&self, start: Start, sink: &mut dyn EventSink) -> Result<(), HarnessError> {
        let d = self.connector.describe().await?;
        if d.capabilities.resumability == Resumability::RequiresMemorySnapshot {
            return Err(HarnessError::Failed(MEMORY_SNAPSHOT_REFUSED.into()));
        }
        let c = self.connector.connect().await?;
        drive_connect(start, sink, c.inbound, c.outbound).await
    }
}
