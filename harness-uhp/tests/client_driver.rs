//! The HTTP driver of the task client (feature `client-hyper`) over real loopback sockets:
//! a task run to its end against this crate's own UHP server (feature `axum`), its events
//! streamed as they come; a stream cut mid-way recovered from the stored response (read
//! while `in_progress`, then `completed`) without creating the task twice; a refused key
//! reported, not retried; a server that never answers bounded by the head timeout.
#![cfg(feature = "client-hyper")]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use futures::StreamExt;
use harness_uhp::builder::StreamBuilder;
use harness_uhp::client::{
    CreateRequest, HttpClientConfig, HttpTaskClient, RequestKind, TaskClientConfig, TaskError,
    TaskEvent,
};
use harness_uhp::{EventType, ResponseStatus, RetryPolicy, StreamEventKind};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// Reads one request (head, and a body by its `Content-Length`); returns its request line.
async fn read_request(s: &mut TcpStream) -> Option<String> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    let head_end = loop {
        let n = s.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).to_string();
    let len = head
        .lines()
        .find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.eq_ignore_ascii_case("content-length")
                .then(|| v.trim().parse::<usize>().ok())?
        })
        .unwrap_or(0);
    while buf.len() < head_end + len {
        let n = s.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
    }
    head.lines().next().map(str::to_owned)
}

/// Fails the test instead of hanging it.
async fn within<T>(fut: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(30), fut)
        .await
        .expect("the run did not end within 30 s")
}

/// What the cutting server was asked.
#[derive(Default)]
struct Seen {
    creates: AtomicUsize,
    reads: AtomicUsize,
}

/// How the stream of the create ends.
#[derive(Clone, Copy)]
enum Ending {
    /// The socket closes without the chunked body's end.
    Cut,
    /// The socket stays open, silent.
    Stall,
}

/// A server that streams the start of task `resp_cut` and then cuts the connection
/// mid-stream, or falls silent (no terminal event, no end of the chunked body); it answers
/// `GET /v1/responses/resp_cut` with the task `in_progress`, then `completed`.
async fn cutting_server(seen: Arc<Seen>, ending: Ending) -> String {
    let mut task = StreamBuilder::new("resp_cut");
    task.created()
        .message_start()
        .message_delta("Hel")
        .message_delta("lo");
    let partial = task.to_sse();
    let running = serde_json::to_vec(task.response()).unwrap();
    task.message_delta(", world").message_end(&[]).completed();
    let done = serde_json::to_vec(task.response()).unwrap();

    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let Ok((mut s, _)) = listener.accept().await else {
                return;
            };
            let (seen, partial, running, done) =
                (seen.clone(), partial.clone(), running.clone(), done.clone());
            tokio::spawn(async move {
                let Some(line) = read_request(&mut s).await else {
                    return;
                };
                if line.starts_with("POST /v1/responses ") {
                    seen.creates.fetch_add(1, Ordering::SeqCst);
                    let mut out = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\
                        transfer-encoding: chunked\r\n\r\n"
                        .to_vec();
                    out.extend_from_slice(format!("{:x}\r\n", partial.len()).as_bytes());
                    out.extend_from_slice(&partial);
                    out.extend_from_slice(b"\r\n");
                    s.write_all(&out).await.unwrap();
                    s.flush().await.unwrap();
                    if let Ending::Stall = ending {
                        tokio::time::sleep(Duration::from_secs(60)).await;
                    }
                    // The socket closes without the chunked body's end.
                } else if line.starts_with("GET /v1/responses/resp_cut ") {
                    let n = seen.reads.fetch_add(1, Ordering::SeqCst);
                    let body = if n == 0 { &running } else { &done };
                    let head = format!(
                        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n\
                         content-length: {}\r\nconnection: close\r\n\r\n",
                        body.len()
                    );
                    s.write_all(head.as_bytes()).await.unwrap();
                    s.write_all(body).await.unwrap();
                } else {
                    let _ = s
                        .write_all(b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n")
                        .await;
                }
            });
        }
    });
    format!("http://{addr}")
}

/// Runs a task against the cutting server; the deltas streamed live, and the lost streams.
async fn recover(ending: Ending, inactivity: Duration) -> (Arc<Seen>, Vec<String>, Vec<String>) {
    let seen = Arc::new(Seen::default());
    let url = cutting_server(seen.clone(), ending).await;
    let mut cfg = TaskClientConfig::new(url);
    cfg.poll_interval = Duration::from_millis(20);
    let client = HttpTaskClient::new(cfg).unwrap().idle_timeout(inactivity);

    let mut run = client.run(CreateRequest::new("hi"));
    let mut deltas = Vec::new();
    let mut lost = Vec::new();
    let mut ends = 0;
    while let Some(ev) = within(run.next()).await {
        match ev {
            TaskEvent::Event(e) => {
                if let StreamEventKind::OutputTextDelta { delta, .. } = e.kind() {
                    deltas.push(delta.to_owned());
                }
            }
            TaskEvent::StreamLost { response_id } => lost.push(response_id),
            TaskEvent::Finished => ends += 1,
            TaskEvent::Failed(e) => panic!("failed: {e}"),
            _ => {}
        }
    }
    assert_eq!(ends, 1);
    let task = within(run.finish()).await.unwrap();
    assert_eq!(task.status(), &ResponseStatus::Completed);
    assert_eq!(task.text(), "Hello, world");
    (seen, deltas, lost)
}

// spec/uhp-2026-08-11/streaming.md:134 "A dropped connection MUST NOT abort the task. The work
// continues server-side." and :151 "A client SHOULD treat the stream as an optimisation and the
// stored response as the source of truth": the driver reads the task back, never creates it again.
#[tokio::test]
async fn a_cut_stream_is_recovered_from_the_stored_response_without_a_second_create() {
    let (seen, deltas, lost) = recover(Ending::Cut, Duration::from_secs(75)).await;
    // The deltas before the cut were streamed live; the rest came from the stored response.
    assert_eq!(deltas, ["Hel", "lo"]);
    assert_eq!(lost, ["resp_cut"]);
    // Recovery reads the task back (it was still running once); it never creates it again.
    assert_eq!(seen.creates.load(Ordering::SeqCst), 1);
    assert_eq!(seen.reads.load(Ordering::SeqCst), 2);
}

// spec/uhp-2026-08-11/errors.md:120 "Streaming: no total timeout. Use an inactivity timeout
// instead": a silent stream is given up after the inactivity timeout, and read back.
#[tokio::test]
async fn a_silent_stream_is_given_up_after_the_idle_timeout_and_recovered() {
    let started = Instant::now();
    let (seen, deltas, lost) = recover(Ending::Stall, Duration::from_millis(300)).await;
    assert_eq!(deltas, ["Hel", "lo"]);
    assert_eq!(lost, ["resp_cut"]);
    assert_eq!(seen.creates.load(Ordering::SeqCst), 1);
    assert_eq!(seen.reads.load(Ordering::SeqCst), 2);
    // Given up after the idle timeout, long before the server would close the socket (60 s).
    assert!(started.elapsed() < Duration::from_secs(10));
}

#[tokio::test]
async fn a_server_that_never_answers_is_bounded_by_the_head_timeout() {
    // Accepts, reads the request, and says nothing.
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let creates = Arc::new(AtomicUsize::new(0));
    let c = creates.clone();
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((mut s, _)) = listener.accept().await {
            if read_request(&mut s).await.is_some() {
                c.fetch_add(1, Ordering::SeqCst);
            }
            held.push(s);
        }
    });
    let mut cfg = TaskClientConfig::new(format!("http://{addr}"));
    cfg.inactivity_timeout = Duration::from_secs(600); // the driver's bound must act alone
    let mut http = HttpClientConfig::default();
    http.head_timeout = Duration::from_millis(200);
    let client = HttpTaskClient::with_config(cfg, http).unwrap();
    let started = Instant::now();
    let mut run = client.run_with_policy(
        CreateRequest::new("hi"),
        RetryPolicy::new().with_max_attempts(2).with_seed(7),
    );
    let mut retries = 0;
    while let Some(ev) = within(run.next()).await {
        if let TaskEvent::Retrying { kind, .. } = ev {
            assert_eq!(kind, RequestKind::Create);
            retries += 1;
        }
    }
    let err = within(run.finish()).await.unwrap_err();
    assert!(matches!(err, TaskError::Transport { .. }), "{err:?}");
    assert_eq!(retries, 1);
    // Both attempts were sent, each given up after the head timeout (plus one backoff).
    assert_eq!(creates.load(Ordering::SeqCst), 2);
    assert!(started.elapsed() < Duration::from_secs(30));
}

#[cfg(feature = "axum")]
mod own_server {
    use std::time::{Instant, SystemTime, UNIX_EPOCH};

    use harness_core::agent::ToolLoopAgent;
    use harness_core::model::ScriptedModel;
    use harness_core::{Descriptor, EventSink, Harness, HarnessError, Start};
    use harness_uhp::server::axum::{RouterConfig, UhpServeConfig, router, serve};
    use harness_uhp::server::{ServiceBuilder, UhpService};

    use super::*;

    async fn start() -> String {
        let host = UhpService::builder(
            ScriptedModel::new()
                .reply("We open at eight.")
                .reply("Tomorrow too."),
        )
        .harness("faq", "FAQ agent", ToolLoopAgent::new("faq"));
        serve_host(host).await
    }

    /// Says "first", then works for ever.
    struct Waiter;

    #[async_trait::async_trait]
    impl Harness for Waiter {
        async fn describe(&self) -> Result<Descriptor, HarnessError> {
            Ok(Descriptor::new("waiter", "1"))
        }
        async fn run(&self, _s: Start, sink: &mut dyn EventSink) -> Result<(), HarnessError> {
            sink.output("first").await?;
            futures::future::pending::<()>().await;
            Ok(())
        }
    }

    async fn serve_host(builder: ServiceBuilder) -> String {
        let wall = || {
            SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_millis() as i64)
        };
        let host = builder
            .models(["scripted"])
            .api_key("secret", "alice")
            .build(Instant::now, wall)
            .await
            .unwrap();
        tokio::spawn(host.clone().run(tokio::time::sleep));
        let app = router(host, RouterConfig::default());
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(serve(listener, app, UhpServeConfig::default()));
        format!("http://{addr}")
    }

    #[tokio::test]
    async fn a_task_runs_to_its_end_on_the_crates_own_server() {
        let url = start().await;
        let client = HttpTaskClient::new(TaskClientConfig::new(&url).with_token("secret")).unwrap();

        // Streamed: the events arrive as the server makes them, in order, then the end.
        let mut run = client.run(CreateRequest::new("When do you open?"));
        let mut types = Vec::new();
        let mut text = String::new();
        while let Some(ev) = within(run.next()).await {
            match ev {
                TaskEvent::Event(e) => {
                    if let StreamEventKind::OutputTextDelta { delta, .. } = e.kind() {
                        text.push_str(delta);
                    }
                    types.push(e.event_type());
                }
                TaskEvent::Failed(e) => panic!("failed: {e}"),
                _ => {}
            }
        }
        assert_eq!(types.first(), Some(&EventType::Created));
        assert_eq!(types.last(), Some(&EventType::Completed), "{types:?}");
        assert_eq!(text, "We open at eight.");
        let task = within(run.finish()).await.unwrap();
        assert_eq!(task.status(), &ResponseStatus::Completed);
        assert_eq!(task.text(), "We open at eight.");

        // Or just the end.
        let task = within(client.run_to_end(CreateRequest::new("And tomorrow?")))
            .await
            .unwrap();
        assert_eq!(task.status(), &ResponseStatus::Completed);
        assert_eq!(task.text(), "Tomorrow too.");
    }

    #[tokio::test]
    async fn a_refused_key_is_reported_not_retried() {
        let url = start().await;
        let client = HttpTaskClient::new(TaskClientConfig::new(&url).with_token("wrong")).unwrap();
        let mut run = client.run(CreateRequest::new("hi"));
        while let Some(ev) = within(run.next()).await {
            assert!(!matches!(ev, TaskEvent::Retrying { .. }), "{ev:?}");
        }
        match within(run.finish()).await {
            Err(TaskError::Http { status: 401, .. }) => {}
            other => panic!("{other:?}"),
        }
    }

    // spec/uhp-2026-08-11/errors.md:124 "A client that gives up MUST NOT assume the task
    // stopped. It has not. Cancel it explicitly.": `TaskRun::cancel` sends the cancel beside
    // the stream, and the stream then ends with the task `cancelled`.
    #[tokio::test]
    async fn a_cancelled_run_ends_with_the_task_cancelled() {
        let url = serve_host(
            UhpService::builder(ScriptedModel::new()).harness("waiter", "Waiter", Waiter),
        )
        .await;
        let client = HttpTaskClient::new(TaskClientConfig::new(&url).with_token("secret")).unwrap();
        let mut run = client.run(CreateRequest::new("work"));
        let mut text = String::new();
        while let Some(ev) = within(run.next()).await {
            match ev {
                TaskEvent::Event(e) => {
                    if let StreamEventKind::OutputTextDelta { delta, .. } = e.kind() {
                        text.push_str(delta);
                        run.cancel(); // the harness now works for ever: stop it
                    }
                }
                TaskEvent::CancelFailed(e) => panic!("cancel failed: {e}"),
                _ => {}
            }
        }
        assert_eq!(text, "first");
        let task = within(run.finish()).await.unwrap();
        assert_eq!(task.status(), &ResponseStatus::Cancelled);
    }
}
