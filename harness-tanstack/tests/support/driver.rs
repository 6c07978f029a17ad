//! A service (host + driver) on a virtual clock, read without a network: what the tests of
//! the driver share.

use std::sync::{Arc, Mutex};
use std::time::Instant;

use futures::StreamExt;
use futures::executor::LocalPool;
use harness_core::{Descriptor, EventSink, Harness, HarnessError, Start};
use harness_tanstack::driver::Service;
use harness_tanstack::host::{Host, HostConfig};
use harness_tanstack::log::{EventLog, MemoryLog};
use serde_json::Value;

/// A clock a test moves by hand.
pub type TestClock = Arc<Mutex<Instant>>;

/// A service over `log`, with this configuration, reading the test's clock.
pub fn service_over<L: EventLog + 'static>(cfg: HostConfig, log: L) -> (Service<L>, TestClock) {
    let t = Arc::new(Mutex::new(Instant::now()));
    let clock = Arc::clone(&t);
    let svc = Service::new(Host::new(cfg, log), move || *clock.lock().unwrap());
    (svc, t)
}

/// A service over a memory log, with the defaults.
pub fn service() -> (Service<MemoryLog>, TestClock) {
    service_over(HostConfig::default(), MemoryLog::default())
}

/// Everything the stream of `thread` holds right now (hello first), as frames.
pub fn read_thread<L: EventLog + 'static>(
    pool: &mut LocalPool,
    svc: &Service<L>,
    thread: &str,
) -> Vec<Value> {
    let mut s = svc
        .open_sse(Some(thread), Some("2"), None, None, None, "r")
        .unwrap();
    drain(pool, &mut s)
        .iter()
        .filter_map(|text| text.lines().find_map(|l| l.strip_prefix("data: ")))
        .map(|d| serde_json::from_str(d).unwrap())
        .collect()
}

/// Everything the stream of `thread-1` holds right now (hello first), as frames.
pub fn read_all<L: EventLog + 'static>(pool: &mut LocalPool, svc: &Service<L>) -> Vec<Value> {
    read_thread(pool, svc, "thread-1")
}

/// What a stream gives without waiting (a stream that would wait forever does not hang the
/// test), as text; `<end>` marks that the stream ended.
pub fn drain<S: futures::Stream<Item = bytes::Bytes> + Unpin>(
    pool: &mut LocalPool,
    s: &mut S,
) -> Vec<String> {
    let mut out = Vec::new();
    loop {
        let mut next = Box::pin(s.next());
        match pool.run_until(async { futures::poll!(&mut next) }) {
            std::task::Poll::Ready(Some(b)) => out.push(String::from_utf8(b.to_vec()).unwrap()),
            std::task::Poll::Ready(None) => {
                out.push("<end>".into());
                break;
            }
            std::task::Poll::Pending => break,
        }
    }
    out
}

/// `POST control` with `{threadId, input}`: the receipt (or the error body) as JSON, and the
/// status.
pub fn control<L: EventLog + 'static>(
    svc: &Service<L>,
    thread: &str,
    input: Value,
) -> (u16, Value) {
    let body = serde_json::json!({ "threadId": thread, "input": input }).to_string();
    let a = svc.control(None, body.as_bytes(), "r", None);
    (a.status, serde_json::from_str(&a.body).unwrap())
}

/// The event of each frame: its `CUSTOM` name or its type.
pub fn names(frames: &[Value]) -> Vec<String> {
    frames
        .iter()
        .filter(|f| f["type"] == "harness.event")
        .map(|f| {
            f["event"]["name"]
                .as_str()
                .or(f["event"]["type"].as_str())
                .unwrap()
                .to_owned()
        })
        .collect()
}

/// [`control`], then the turns run as far as they go: the receipt of a `200`.
pub fn send<L: EventLog + 'static>(
    svc: &Service<L>,
    pool: &mut LocalPool,
    thread: &str,
    input: Value,
) -> Value {
    let (status, receipt) = control(svc, thread, input);
    assert_eq!(status, 200, "{receipt}");
    pool.run_until_stalled();
    receipt
}

/// What a test harness does in a turn.
pub type RunFn = Box<
    dyn for<'a> Fn(
            Start,
            &'a mut dyn EventSink,
        ) -> futures::future::BoxFuture<'a, Result<(), HarnessError>>
        + Send
        + Sync,
>;

/// A harness made of a function: `harness(|start, sink| Box::pin(async move { … }))`.
pub struct FnHarness(RunFn);

/// A [`FnHarness`] running `f`.
pub fn harness<F>(f: F) -> FnHarness
where
    F: for<'a> Fn(
            Start,
            &'a mut dyn EventSink,
        ) -> futures::future::BoxFuture<'a, Result<(), HarnessError>>
        + Send
        + Sync
        + 'static,
{
    FnHarness(Box::new(f))
}

#[async_trait::async_trait]
impl Harness for FnHarness {
    async fn describe(&self) -> Result<Descriptor, HarnessError> {
        Ok(Descriptor::new("test", "1"))
    }
    async fn run(&self, start: Start, sink: &mut dyn EventSink) -> Result<(), HarnessError> {
        (self.0)(start, sink).await
    }
}

/// Serves `harness` on `svc` (the echo model, no tools), in `pool`.
pub fn serve<L: EventLog + 'static>(
    svc: &Service<L>,
    pool: &LocalPool,
    harness: impl Harness + 'static,
) {
    use futures::task::LocalSpawnExt;
    let turns = harness_tanstack::driver::run_turns(
        svc.clone(),
        harness,
        harness_core::model::ScriptedModel::echo(),
        harness_core::Tools::new(),
    );
    pool.spawner().spawn_local(turns).unwrap();
}
