//! `Harness.Connect` over gRPC (feature `grpc`): tonic, prost and tokio, the standard Rust
//! gRPC stack, around the sans-IO drivers.
//!
//! - [`HarnessService`] serves any [`Harness`] as the `agentsessions.v1.Harness` service
//!   (what `cmd/harnessnode` does with `harnesswire.NewServer`); [`serve`] binds it at a
//!   [`HarnessAddress`], [`serve_listener`] on a TCP listener of your own.
//! - [`GrpcConnector`] reaches one at an address; [`remote`] makes the
//!   [`RemoteHarness`] a [`Controller`](crate::Controller) registers with
//!   [`remote_harness`](crate::controller::ControllerBuilder::remote_harness).
//!
//! Cleartext h2c, no credentials or metadata, as the reference transport: bind loopback
//! unless the host is on another machine. Messages up to [`MAX_MESSAGE`] bytes each way
//! (`Start.history` carries the whole prior journal).
//!
//! A Rust harness served in three lines:
//!
//! ```no_run
//! # use harness_sessions::harnesses::EchoHarness as MyHarness;
//! # async fn run() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
//! use harness_sessions::connect::grpc::serve;
//! serve(&"127.0.0.1:8090".parse()?, MyHarness).await?;
//! # Ok(()) }
//! ```

use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use futures::{SinkExt, Stream, StreamExt, TryStreamExt};
use harness_core::{Descriptor, Harness, HarnessError, SinkError};
use tonic::transport::{Channel, Endpoint, Server, Uri};
use tonic::{Request, Response, Status, Streaming};

use super::address::HarnessAddress;
use super::frame::{ConnectError, ControllerFrame, HarnessFrame};
use super::pb;
use super::remote::{Connector, RemoteConnection, RemoteHarness};
use super::serve::serve_connect;

/// The largest message either side takes or sends (64 MiB; gRPC's default is 4 MiB).
pub const MAX_MESSAGE: usize = 64 << 20;

/// How long the host waits for `Describe` ("the harness has not answered Describe within 10
/// seconds": UNAVAILABLE).
pub const DESCRIBE_TIMEOUT: Duration = Duration::from_secs(10);

fn status_error(s: &Status) -> ConnectError {
    ConnectError::Transport(format!("{:?}: {}", s.code(), s.message()))
}

/// Serves a [`Harness`] as the `agentsessions.v1.Harness` gRPC service: `Describe` answers
/// its descriptor, `Connect` runs one turn per stream ([`serve_connect`]), each in a tokio
/// task of its own.
#[derive(Clone)]
pub struct HarnessService {
    harness: Arc<dyn Harness>,
}

impl std::fmt::Debug for HarnessService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HarnessService").finish_non_exhaustive()
    }
}

impl HarnessService {
    /// The service for `harness`.
    pub fn new(harness: impl Harness + 'static) -> Self {
        HarnessService {
            harness: Arc::new(harness),
        }
    }

    /// As a tonic service, to add to a `tonic::transport::Server`.
    pub fn into_server(self) -> pb::harness_server::HarnessServer<Self> {
        pb::harness_server::HarnessServer::new(self)
            .max_decoding_message_size(MAX_MESSAGE)
            .max_encoding_message_size(MAX_MESSAGE)
    }
}

type EventStream = Pin<Box<dyn Stream<Item = Result<pb::Event, Status>> + Send>>;

#[async_trait]
impl pb::harness_server::Harness for HarnessService {
    async fn describe(
        &self,
        _: Request<pb::DescribeRequest>,
    ) -> Result<Response<pb::HarnessDescriptor>, Status> {
        match self.harness.describe().await {
            Ok(d) => Ok(Response::new((&d).into())),
            Err(e) => Err(Status::unknown(e.to_string())),
        }
    }

    type ConnectStream = EventStream;

    async fn connect(
        &self,
        req: Request<Streaming<pb::ControllerFrame>>,
    ) -> Result<Response<EventStream>, Status> {
        let inbound = req
            .into_inner()
            .map(|r| r.map(ControllerFrame::from).map_err(|s| status_error(&s)));
        let (tx, rx) = futures::channel::mpsc::channel::<Result<pb::Event, Status>>(16);
        let harness = Arc::clone(&self.harness);
        tokio::spawn(async move {
            let mut status_tx = tx.clone();
            let out = tx
                .sink_map_err(|e| ConnectError::Transport(e.to_string()))
                .with(|f: HarnessFrame| futures::future::ready(Ok(Ok(pb::Event::from(&f)))));
            // A failed turn ends the RPC with its error after the END, as the Go server
            // returns Run's error (the host acts on the END).
            if let Err(e) = serve_connect(&*harness, inbound, Box::pin(out)).await {
                let _ = status_tx.send(Err(Status::unknown(e.to_string()))).await;
            }
        });
        Ok(Response::new(Box::pin(rx)))
    }
}

/// Serves `harness` at `address` until the process ends (TCP `host:port`, or a unix
/// socket, which is created; an old socket file there is removed first). `dns:` addresses
/// are for hosts to dial, not to bind.
pub async fn serve(
    address: &HarnessAddress,
    harness: impl Harness + 'static,
) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    match address {
        HarnessAddress::Tcp {
            host,
            port,
            resolver: None,
        } => {
            let listener = tokio::net::TcpListener::bind((host.as_str(), *port)).await?;
            return serve_listener(listener, harness).await;
        }
        HarnessAddress::Unix(path) => {
            let _ = std::fs::remove_file(path);
            let listener = tokio::net::UnixListener::bind(path)?;
            Server::builder()
                .add_service(HarnessService::new(harness).into_server())
                .serve_with_incoming(tokio_stream::wrappers::UnixListenerStream::new(listener))
                .await?;
        }
        other => {
            return Err(format!("cannot bind {other}: a dns: address is for hosts to dial").into());
        }
    }
    Ok(())
}

/// Serves `harness` on a TCP listener already bound (port 0 included: ask the listener for
/// its address), until the process ends. Every connection is `TCP_NODELAY`: `Connect` is a
/// conversation of small frames, each waiting for the other side's answer, which Nagle's
/// algorithm and delayed acknowledgements would hold back by tens of milliseconds each.
pub async fn serve_listener(
    listener: tokio::net::TcpListener,
    harness: impl Harness + 'static,
) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    let incoming = tonic::transport::server::TcpIncoming::from(listener).with_nodelay(Some(true));
    Server::builder()
        .add_service(HarnessService::new(harness).into_server())
        .serve_with_incoming(incoming)
        .await?;
    Ok(())
}

/// Reaches a harness served at an address: `Describe` (within [`DESCRIBE_TIMEOUT`], else
/// the harness is unavailable) and one `Connect` stream per turn, over one lazily connected
/// channel that reconnects on its own once the harness is back.
#[derive(Clone, Debug)]
pub struct GrpcConnector {
    address: HarnessAddress,
    channel: Channel,
    describe_timeout: Duration,
}

impl GrpcConnector {
    /// A connector to `address` (nothing is dialled until the first call). Must be made
    /// inside a tokio runtime.
    pub fn new(address: HarnessAddress) -> Result<Self, tonic::transport::Error> {
        let channel = match &address {
            HarnessAddress::Unix(path) => {
                let path = path.clone();
                Endpoint::from_static("http://harness.local").connect_with_connector_lazy(
                    tower::service_fn(move |_: Uri| {
                        let path = path.clone();
                        async move {
                            let s = tokio::net::UnixStream::connect(path).await?;
                            Ok::<_, std::io::Error>(hyper_util::rt::TokioIo::new(s))
                        }
                    }),
                )
            }
            tcp => Endpoint::from_shared(format!("http://{tcp}"))?.connect_lazy(),
        };
        Ok(GrpcConnector {
            address,
            channel,
            describe_timeout: DESCRIBE_TIMEOUT,
        })
    }

    /// Waits `timeout` for `Describe` instead of [`DESCRIBE_TIMEOUT`].
    #[must_use]
    pub fn with_describe_timeout(mut self, timeout: Duration) -> Self {
        self.describe_timeout = timeout;
        self
    }

    /// The address.
    pub fn address(&self) -> &HarnessAddress {
        &self.address
    }

    fn client(&self) -> pb::harness_client::HarnessClient<Channel> {
        pb::harness_client::HarnessClient::new(self.channel.clone())
            .max_decoding_message_size(MAX_MESSAGE)
            .max_encoding_message_size(MAX_MESSAGE)
    }
}

#[async_trait]
impl Connector for GrpcConnector {
    async fn describe(&self) -> Result<Descriptor, HarnessError> {
        let mut client = self.client();
        match tokio::time::timeout(
            self.describe_timeout,
            client.describe(pb::DescribeRequest {}),
        )
        .await
        {
            Ok(Ok(d)) => Ok(d.into_inner().into()),
            Ok(Err(s)) => Err(HarnessError::Failed(format!(
                "harness at {}: describe: {}",
                self.address,
                status_error(&s)
            ))),
            Err(_) => Err(HarnessError::Failed(format!(
                "harness at {}: no answer to Describe within {:?}",
                self.address, self.describe_timeout
            ))),
        }
    }

    async fn connect(&self) -> Result<RemoteConnection, HarnessError> {
        let (tx, rx) = futures::channel::mpsc::channel::<pb::ControllerFrame>(16);
        let mut client = self.client();
        // The call is made when the host first reads, after its start frame is queued: a
        // server that answers its headers only with its first event does not deadlock.
        let call = async move {
            client
                .connect(Request::new(rx))
                .await
                .map(|r| {
                    r.into_inner()
                        .map(|e| e.map(HarnessFrame::from).map_err(|s| status_error(&s)))
                })
                .map_err(|s| status_error(&s))
        };
        let outbound = tx
            .sink_map_err(|e| ConnectError::Transport(e.to_string()))
            .with(|f: ControllerFrame| futures::future::ready(Ok(pb::ControllerFrame::from(&f))));
        Ok(RemoteConnection {
            inbound: futures::stream::once(call).try_flatten().boxed(),
            outbound: Box::pin(outbound),
        })
    }
}

/// The remote harness at `address`, for
/// [`ControllerBuilder::remote_harness`](crate::controller::ControllerBuilder::remote_harness).
/// Must be called inside a tokio runtime.
pub fn remote(address: HarnessAddress) -> Result<RemoteHarness<GrpcConnector>, HarnessError> {
    GrpcConnector::new(address)
        .map(RemoteHarness::new)
        .map_err(|e| HarnessError::Sink(SinkError::Transport(e.to_string())))
}
