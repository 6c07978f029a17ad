//! The service's side of forwarding (spec tanstack-harness-wire-protocol.md:392: "When
//! another server owns the thread, the value goes to that server with the input"): a request
//! waiting for the owner's answer is bounded by the requests in flight, including the ones
//! whose client went away while they waited.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::{Arc, Mutex};

use std::future::Future;

use futures::FutureExt;
use harness_tanstack::agui::AguiEvent;
use harness_tanstack::catalog::GapReason;
use harness_tanstack::host::HostConfig;
use harness_tanstack::log::{EventLog, Forward, Lease, LogError, LogRecord, MemoryLog};

mod support;
use support::driver::service_over;

/// A memory log on which another host holds every thread's lease and takes every forward
/// (what a `PgLog` beside a live owner does), counting the forwards it took.
struct OwnedElsewhere {
    log: MemoryLog,
    forwarded: Arc<Mutex<Vec<Forward>>>,
}

impl EventLog for OwnedElsewhere {
    fn append_as(
        &mut self,
        key: &str,
        thread_id: &str,
        operation_id: &str,
        event: &AguiEvent,
    ) -> Result<LogRecord, LogError> {
        self.log.append_as(key, thread_id, operation_id, event)
    }
    fn get(&mut self, thread_id: &str, seq: u64) -> Result<Option<LogRecord>, LogError> {
        self.log.get(thread_id, seq)
    }
    fn head_seq(&self, thread_id: &str) -> u64 {
        self.log.head_seq(thread_id)
    }
    fn first_seq(&self, thread_id: &str) -> u64 {
        self.log.first_seq(thread_id)
    }
    fn gap_reason(&self) -> GapReason {
        self.log.gap_reason()
    }
    fn threads(&self) -> Vec<String> {
        self.log.threads()
    }
    fn is_durable(&self) -> bool {
        false
    }
    fn lease(&mut self, _key: &str, _thread_id: &str) -> Result<Lease, LogError> {
        Ok(Lease::HeldBy {
            holder: "host-a".into(),
        })
    }
    fn forward(&mut self, _holder: &str, input: &Forward) -> Result<Option<u64>, LogError> {
        let mut f = self.forwarded.lock().unwrap();
        f.push(input.clone());
        Ok(Some(f.len() as u64))
    }
}

fn body(thread: &str, n: usize) -> Vec<u8> {
    format!(
        r#"{{"threadId":"{thread}","input":{{"op":"prompt","message":"hi","inputId":"in-{n}"}}}}"#
    )
    .into_bytes()
}

#[test]
fn a_forwarded_request_dropped_while_it_waits_leaves_no_entry_behind() {
    let forwarded = Arc::new(Mutex::new(Vec::new()));
    let log = OwnedElsewhere {
        log: MemoryLog::default(),
        forwarded: Arc::clone(&forwarded),
    };
    let (svc, _clock) = service_over(HostConfig::default(), log);
    for n in 0..100 {
        // One poll: forwarded, waiting for the owner; then its client goes away (the HTTP
        // server drops the handler's future).
        let b = body("t1", n);
        let fut = svc.control_forwarding(Some("u"), &b, "r", None, futures::future::pending());
        assert!(fut.now_or_never().is_none(), "it waits for the owner");
        assert_eq!(svc.waiting_forwards(), 0, "request {n} left its entry");
    }
    assert_eq!(
        forwarded.lock().unwrap().len(),
        100,
        "each went to the owner"
    );
    for n in 0..100 {
        let b = format!(
            r#"{{"threadId":"t2","runId":"run-{n}","messages":[{{"id":"m","role":"user","content":"hi"}}]}}"#
        );
        let fut = svc.run_forwarding(
            b.as_bytes(),
            Some("u"),
            "r",
            None,
            futures::future::pending(),
        );
        assert!(fut.now_or_never().is_none(), "it waits for the owner");
        assert_eq!(svc.waiting_forwards(), 0, "run {n} left its entry");
    }
    assert_eq!(forwarded.lock().unwrap().len(), 200);
}

#[test]
fn a_request_waiting_for_the_owner_is_counted_until_its_deadline() {
    let log = OwnedElsewhere {
        log: MemoryLog::default(),
        forwarded: Arc::default(),
    };
    let (svc, _clock) = service_over(HostConfig::default(), log);
    let b = body("t1", 0);
    let (tx, rx) = futures::channel::oneshot::channel::<()>();
    let mut fut = Box::pin(
        svc.control_forwarding(Some("u"), &b, "r", None, async move {
            let _ = rx.await;
        }),
    );
    let waker = futures::task::noop_waker();
    let mut cx = std::task::Context::from_waker(&waker);
    assert!(fut.as_mut().poll(&mut cx).is_pending());
    assert_eq!(svc.waiting_forwards(), 1);
    tx.send(()).unwrap();
    // The owner never answered and the log did not take the input back: `504`.
    let a = futures::executor::block_on(fut);
    assert_eq!(a.status, 504);
    assert_eq!(svc.waiting_forwards(), 0);
}
