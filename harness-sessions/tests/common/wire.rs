//! `Harness.Connect` without a network: a connector that serves a harness with
//! `serve_connect` on a thread per stream, over in-memory channels, recording every frame
//! the harness sends; and one that plays a canned list of frames (a misbehaving peer).

use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use futures::{SinkExt, StreamExt};
use harness_core::{Descriptor, Harness, HarnessError};
use harness_sessions::connect::{
    ConnectError, Connector, ControllerFrame, HarnessFrame, RemoteConnection, RemoteHarness,
    serve_connect,
};

fn closed(e: futures::channel::mpsc::SendError) -> ConnectError {
    ConnectError::Transport(e.to_string())
}

/// Serves `harness` on every stream it opens; `sent` records what the harness sent,
/// `received` what the host sent, `statuses` how each RPC ended.
#[derive(Clone)]
pub struct Loopback {
    pub harness: Arc<dyn Harness>,
    pub sent: Arc<Mutex<Vec<HarnessFrame>>>,
    pub received: Arc<Mutex<Vec<ControllerFrame>>>,
    pub statuses: Arc<Mutex<Vec<Result<(), ConnectError>>>>,
}

impl Loopback {
    pub fn new(harness: impl Harness + 'static) -> Self {
        Loopback {
            harness: Arc::new(harness),
            sent: Arc::default(),
            received: Arc::default(),
            statuses: Arc::default(),
        }
    }
    pub fn remote(&self) -> RemoteHarness<Loopback> {
        RemoteHarness::new(self.clone())
    }
    pub fn sent(&self) -> Vec<HarnessFrame> {
        self.sent.lock().unwrap().clone()
    }
    /// How the RPCs ended, once `n` have: the peer's thread records a status only after
    /// `serve_connect` returned, which drops its sender first, so the host may see the
    /// stream's end (and a test go on) before the status is in. Waits at most 10 s.
    pub fn statuses_after(&self, n: usize) -> Vec<Result<(), ConnectError>> {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        loop {
            let statuses = self.statuses.lock().unwrap().clone();
            if statuses.len() >= n || std::time::Instant::now() > deadline {
                return statuses;
            }
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
    }
}

#[async_trait]
impl Connector for Loopback {
    async fn describe(&self) -> Result<Descriptor, HarnessError> {
        self.harness.describe().await
    }
    async fn connect(&self) -> Result<RemoteConnection, HarnessError> {
        let (to_harness, from_host) = futures::channel::mpsc::unbounded::<ControllerFrame>();
        let (to_host, from_harness) = futures::channel::mpsc::unbounded::<HarnessFrame>();
        let me = self.clone();
        std::thread::spawn(move || {
            let received = Arc::clone(&me.received);
            let inbound = from_host.map(move |f| {
                received.lock().unwrap().push(f.clone());
                Ok(f)
            });
            let sent = Arc::clone(&me.sent);
            let outbound = to_host.sink_map_err(closed).with(move |f: HarnessFrame| {
                sent.lock().unwrap().push(f.clone());
                futures::future::ready(Ok::<_, ConnectError>(f))
            });
            let status = futures::executor::block_on(serve_connect(
                &*me.harness,
                inbound,
                Box::pin(outbound),
            ));
            me.statuses.lock().unwrap().push(status);
        });
        Ok(RemoteConnection {
            inbound: from_harness.map(Ok).boxed(),
            outbound: Box::pin(to_harness.sink_map_err(closed)),
        })
    }
}

/// A peer that describes itself as `descriptor` (`None`: it never answers Describe) and
/// answers every stream with the frames `script` makes from the host's start frame, then
/// the stream's end, whatever the host sends after the start.
pub struct Canned {
    pub descriptor: Option<Descriptor>,
    pub script: Script,
}

/// The frames a canned peer sends, made from the host's start frame.
pub type Script = Arc<dyn Fn(&ControllerFrame) -> Vec<HarnessFrame> + Send + Sync>;

#[async_trait]
impl Connector for Canned {
    async fn describe(&self) -> Result<Descriptor, HarnessError> {
        self.descriptor
            .clone()
            .ok_or_else(|| HarnessError::failed("describe: no answer within 10 s"))
    }
    async fn connect(&self) -> Result<RemoteConnection, HarnessError> {
        let (to_harness, from_host) = futures::channel::mpsc::unbounded::<ControllerFrame>();
        let script = Arc::clone(&self.script);
        // Reads the start frame, then plays the script; keeps the host's frames flowing in.
        let inbound = futures::stream::unfold(
            (Some(from_host), Vec::<HarnessFrame>::new(), false),
            move |(mut host, mut queue, started)| {
                let script = Arc::clone(&script);
                async move {
                    if !started {
                        let first = host.as_mut()?.next().await?;
                        queue = script(&first);
                        queue.reverse();
                    }
                    let next = queue.pop()?;
                    Some((Ok(next), (host, queue, true)))
                }
            },
        );
        Ok(RemoteConnection {
            inbound: inbound.boxed(),
            outbound: Box::pin(to_harness.sink_map_err(closed)),
        })
    }
}
