//! `Harness.Connect`: the agentsessions harness wire, both sides, sans-IO.
//!
//! "Your harness usually runs in a separate process or sandbox, not in the host. The
//! controller drives the same api.Harness contract over the Harness.Connect bidi gRPC
//! stream" (spec, "Running out of process"). One stream runs one execution: the host sends
//! [`ControllerFrame`]s (start, then the answers to the harness's requests), the harness
//! sends events ([`HarnessFrame`]), ending with exactly one END, or, for a parked gated
//! call, one `EVENT_PARKED` acknowledgement and no END.
//!
//! - [`HarnessConnect`]: the harness's side (frames in, events out, the agent's sink calls
//!   in between), and [`serve_connect`], the driver that serves any [`Harness`](harness_core::Harness)
//!   on a stream of frames;
//! - [`HostConnect`]: the host's side (events in, requests for the host's own sink out, the
//!   answers back as frames), [`drive_connect`], its driver, and [`RemoteHarness`], a
//!   `Harness` whose turns run over a [`Connector`] — give it to a
//!   [`Controller`](crate::Controller) and record-before-effect, replay and resume hold
//!   across the wire unchanged, since the journaling sink answers the frames.
//!
//! Both machines follow [the run-loop contract](harness_core::run_loop) and take no time:
//! deadlines (the 10 s Describe) belong to the transport. The drivers are `futures` only;
//! the `grpc` feature puts them on tonic. The frames follow the Go bridge
//! (`harnesswire/harnesswire.go`); where it is lenient this crate is not: a stream that ends
//! before END is an interrupted turn, not a success, and anything after END is refused.
//!
//! ```
//! use std::sync::Arc;
//! use harness_core::model::ScriptedModel;
//! use harness_sessions::connect::RemoteHarness;
//! use harness_sessions::harnesses::EchoHarness;
//! use harness_sessions::{Controller, ExecRequest, MemoryJournal};
//! # use harness_sessions::connect::{serve_connect, RemoteConnection, Connector, ConnectError};
//! # use futures::{SinkExt, StreamExt};
//! # /// Serves EchoHarness on a thread per stream, over in-memory channels.
//! # struct Loopback;
//! # #[async_trait::async_trait]
//! # impl Connector for Loopback {
//! #     async fn describe(&self) -> Result<harness_core::Descriptor, harness_core::HarnessError> {
//! #         harness_core::Harness::describe(&EchoHarness).await
//! #     }
//! #     async fn connect(&self) -> Result<RemoteConnection, harness_core::HarnessError> {
//! #         let (to_h, from_host) = futures::channel::mpsc::unbounded();
//! #         let (to_host, from_h) = futures::channel::mpsc::unbounded();
//! #         std::thread::spawn(move || futures::executor::block_on(serve_connect(&EchoHarness,
//! #             from_host.map(Ok), to_host.sink_map_err(|e| ConnectError::Transport(e.to_string())))));
//! #         Ok(RemoteConnection { inbound: from_h.map(Ok).boxed(),
//! #             outbound: Box::pin(to_h.sink_map_err(|e| ConnectError::Transport(e.to_string()))) })
//! #     }
//! # }
//!
//! // `Loopback` serves EchoHarness with `serve_connect` on the other end of a stream.
//! let model = Arc::new(ScriptedModel::new().reply("Hello!"));
//! let host = Controller::builder(MemoryJournal::new())
//!     .model(model.clone())
//!     .remote_harness("echo", RemoteHarness::new(Loopback))
//!     .build();
//! futures::executor::block_on(async {
//!     host.create_session("s1", None)?;
//!     let turn = host.exec(ExecRequest::text("s1", "hi")).await?;
//!     assert_eq!(turn.output, "Hello!");
//!     assert_eq!(host.replay("s1").await?.provider_calls, 0);
//!     Ok::<(), harness_sessions::Error>(())
//! }).unwrap();
//! ```

mod address;
#[cfg(feature = "proto")]
mod convert;
mod frame;
#[cfg(feature = "grpc")]
pub mod grpc;
mod harness_side;
mod host_side;
#[cfg(feature = "proto")]
pub mod pb;
mod remote;
mod serve;

pub use self::address::{AddressError, HarnessAddress};
pub use self::frame::{
    ApprovalRef, ConnectError, ControllerFrame, Frame, HarnessFrame, ModelResult,
};
pub use self::harness_side::{HarnessConnect, HarnessConnectEvent, SinkReply};
pub use self::host_side::{Ending, HostConnect, HostConnectEvent};
pub use self::remote::{Connector, RemoteConnection, RemoteHarness, drive_connect};
pub use self::serve::serve_connect;
