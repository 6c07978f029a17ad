//! `Harness.Connect` over real gRPC on loopback (feature `grpc`): the controller drives a
//! harness served by `HarnessService` (`serve_listener`) through tonic, over TCP and a unix socket.
#![cfg(feature = "grpc")]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::{Op, ScriptHarness, hashes, host};
use harness_sessions::Code;
use harness_sessions::connect::grpc::{GrpcConnector, serve_listener};
use harness_sessions::connect::{HarnessAddress, RemoteHarness};
use harness_sessions::controller::{Controller, ExecRequest, TurnStatus};
use harness_sessions::journal::Journal;
use harness_sessions::tools::MemoryReceipts;

/// Serves `h` on a loopback port the OS picks; the server stops when the handle is aborted.
async fn serve_tcp(h: ScriptHarness) -> (HarnessAddress, tokio::task::JoinHandle<()>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr: HarnessAddress = listener.local_addr().unwrap().to_string().parse().unwrap();
    let task = tokio::spawn(async move {
        let _ = serve_listener(listener, h).await;
    });
    (addr, task)
}

fn remote_host(h: &common::Host, addr: HarnessAddress) -> Controller {
    Controller::builder(Arc::clone(&h.journal))
        .model(Arc::clone(&h.model))
        .tools(h.effects.tools())
        .receipts(MemoryReceipts::default())
        .remote_harness(
            "script",
            RemoteHarness::new(
                GrpcConnector::new(addr)
                    .unwrap()
                    .with_describe_timeout(Duration::from_millis(500)),
            ),
        )
        .build()
}

/// "Sessions choose it by name, and everything else behaves as it does for a built-in
/// harness" (line 363): exec, replay and verify over gRPC write the journal the in-process
/// harness writes, hash for hash.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exec_replay_over_grpc_as_in_process() {
    let ops = vec![
        Op::Model,
        Op::Output("…".into()),
        Op::Tool,
        Op::Report,
        Op::Usage(3),
        Op::Model,
    ];
    let local = host(ops.clone());
    local
        .host
        .exec(ExecRequest::text("s", "hello"))
        .await
        .unwrap();
    let h = host(ops);
    let (addr, server) = serve_tcp(h.harness.clone()).await;
    let remote = remote_host(&h, addr);
    let turn = remote.exec(ExecRequest::text("s", "hello")).await.unwrap();
    assert_eq!(turn.status, TurnStatus::Completed);
    assert_eq!(hashes(&*h.journal, "s"), hashes(&*local.journal, "s"));
    assert_eq!(remote.replay("s").await.unwrap().provider_calls, 0);
    remote.verify("s").unwrap();
    server.abort();
}

/// Approvals over gRPC: the turn parks (the harness acknowledged with EVENT_PARKED and
/// closed), approve, resume: the effect runs once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn approval_over_grpc() {
    let h = host(vec![Op::Model, Op::Gated, Op::Model]);
    let (addr, server) = serve_tcp(h.harness.clone()).await;
    let remote = remote_host(&h, addr);
    let turn = remote
        .exec(ExecRequest::text("s", "publish"))
        .await
        .unwrap();
    assert!(matches!(turn.status, TurnStatus::Parked { .. }), "{turn:?}");
    let p = remote.pending_approval("s").unwrap().unwrap();
    remote.approve("s", &p.call.id, true, "").unwrap();
    let turn = remote.resume("s").await.unwrap().unwrap();
    assert_eq!(turn.status, TurnStatus::Completed);
    assert_eq!(h.effects.count(), 1);
    server.abort();
}

/// A unix socket address, relative form included ("unix:h.sock").
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_harness_on_a_unix_socket() {
    let dir = common::scratch_dir("unix");
    let path = dir.join("h.sock");
    let addr: HarnessAddress = format!("unix://{}", path.display()).parse().unwrap();
    let served = addr.clone();
    let h = host(vec![Op::Model]);
    let harness = h.harness.clone();
    let server = tokio::spawn(async move {
        let _ = harness_sessions::connect::grpc::serve(&served, harness).await;
    });
    for _ in 0..50 {
        if path.exists() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let remote = remote_host(&h, addr);
    let turn = remote.exec(ExecRequest::text("s", "hi")).await.unwrap();
    assert_eq!(turn.status, TurnStatus::Completed);
    server.abort();
}

/// "If nothing answers at the address when an exec, resume, or fork is admitted (the
/// connection is refused, or the harness has not answered Describe within 10 seconds), the
/// call fails with UNAVAILABLE and nothing is journaled" (line 372): a refused connection,
/// and a listener that accepts and never answers (the timeout shortened for the test).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nothing_answering_is_unavailable_and_nothing_is_journaled() {
    let h = host(vec![Op::Model]);
    let refused: HarnessAddress = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().to_string().parse().unwrap()
    };
    let err = remote_host(&h, refused)
        .exec(ExecRequest::text("s", "hi"))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::Unavailable, "{err}");
    let silent = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr: HarnessAddress = silent.local_addr().unwrap().to_string().parse().unwrap();
    let hold = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((s, _)) = silent.accept().await {
            held.push(s);
        }
    });
    let err = remote_host(&h, addr)
        .exec(ExecRequest::text("s", "hi"))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::Unavailable, "{err}");
    assert_eq!(h.journal.head("s").unwrap().seq, 0);
    hold.abort();
}

/// The script harness, whose process dies (a panic in its turn's task) after its tool call
/// the first time.
struct DiesOnce {
    inner: ScriptHarness,
    die: Arc<std::sync::atomic::AtomicBool>,
}

#[async_trait::async_trait]
impl harness_core::Harness for DiesOnce {
    async fn describe(&self) -> Result<harness_core::Descriptor, harness_core::HarnessError> {
        self.inner.describe().await
    }
    async fn run(
        &self,
        start: harness_core::Start,
        sink: &mut dyn harness_core::EventSink,
    ) -> Result<(), harness_core::HarnessError> {
        struct Tap<'a> {
            sink: &'a mut dyn harness_core::EventSink,
            die: &'a std::sync::atomic::AtomicBool,
        }
        #[async_trait::async_trait]
        impl harness_core::EventSink for Tap<'_> {
            async fn model(
                &mut self,
                r: harness_core::message::ModelRequest,
            ) -> Result<harness_core::message::ModelResponse, harness_core::SinkError> {
                self.sink.model(r).await
            }
            async fn output(&mut self, d: &str) -> Result<(), harness_core::SinkError> {
                self.sink.output(d).await
            }
            async fn tool_call(
                &mut self,
                c: harness_core::message::ToolCall,
            ) -> Result<harness_core::message::ToolResult, harness_core::SinkError> {
                let r = self.sink.tool_call(c).await;
                if self.die.swap(false, std::sync::atomic::Ordering::SeqCst) {
                    panic!("the harness process dies");
                }
                r
            }
            async fn report(
                &mut self,
                r: harness_core::message::ToolResult,
            ) -> Result<(), harness_core::SinkError> {
                self.sink.report(r).await
            }
            async fn usage(
                &mut self,
                u: harness_core::message::Usage,
            ) -> Result<(), harness_core::SinkError> {
                self.sink.usage(u).await
            }
        }
        let mut tap = Tap {
            sink,
            die: &self.die,
        };
        self.inner.run(start, &mut tap).await
    }
}

/// "If your harness goes away after admission, in the middle of a turn, the call fails with
/// INTERNAL and the session is left with an interrupted turn: call Resume once the harness
/// is back to re-drive it from the journal" (line 372).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_harness_that_goes_away_mid_turn_leaves_an_interrupted_turn() {
    let h = host(vec![Op::Model, Op::Tool, Op::Model]);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr: HarnessAddress = listener.local_addr().unwrap().to_string().parse().unwrap();
    let harness = DiesOnce {
        inner: h.harness.clone(),
        die: Arc::new(std::sync::atomic::AtomicBool::new(true)),
    };
    let server = tokio::spawn(async move {
        let _ = serve_listener(listener, harness).await;
    });
    let remote = remote_host(&h, addr);
    let err = remote.exec(ExecRequest::text("s", "hi")).await.unwrap_err();
    assert_eq!(err.code(), Code::Internal, "{err}");
    let calls = h.model.calls();
    assert_eq!(calls, 1);
    let turn = remote.resume("s").await.unwrap().unwrap();
    assert_eq!(turn.status, TurnStatus::Completed);
    assert_eq!(
        h.model.calls(),
        calls + 1,
        "the first completion is served, the last one called"
    );
    assert_eq!(
        h.effects.count(),
        1,
        "the tool's result is served, not run again"
    );
    server.abort();
}
