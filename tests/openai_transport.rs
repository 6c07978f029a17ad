//! `OpenAiModel` over real sockets on loopback: a tiny HTTP/1.1 server replays the recorded
//! streams of `harness-core/tests/fixtures/openai/` (provenance in its README) in odd-sized
//! chunked pieces, answers with error statuses, cuts the connection, stalls; the model must
//! give what the sans-IO decoder gives on the same bytes, and map every failure.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::{Duration, Instant};

use futures::StreamExt;
use harness_core::message::{Message, ModelRequest, ModelResponse, ToolDefinition};
use harness_core::model::{Model, ModelError, ModelEvent};
use harness_core::openai::{ChatStreamDecoder, OpenAiConfig, OpenAiConfigError, OpenAiModel};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::oneshot;

macro_rules! fixture {
    ($name:literal) => {
        include_bytes!(concat!("../harness-core/tests/fixtures/openai/", $name)).as_slice()
    };
}

/// How the server ends the response body.
#[derive(Clone, Copy, Debug, PartialEq)]
enum End {
    /// The terminating zero-length chunk.
    Clean,
    /// The socket is closed with the body unfinished.
    Abort,
    /// Nothing more is sent for this long, then the socket is closed.
    Stall(Duration),
    /// The server waits for the client to go away, and reports when it did.
    AwaitClose,
}

#[derive(Clone, Debug)]
struct Reply {
    status: u16,
    headers: Vec<(&'static str, String)>,
    body: Vec<u8>,
    /// Pieces the body is written in (each one a chunk of the chunked encoding).
    piece: usize,
    end: End,
    /// Wait this long before the status line.
    delay: Duration,
}

impl Reply {
    fn sse(body: &[u8]) -> Self {
        Reply {
            status: 200,
            headers: vec![("content-type", "text/event-stream; charset=utf-8".into())],
            body: body.to_vec(),
            piece: 37,
            end: End::Clean,
            delay: Duration::ZERO,
        }
    }

    fn status(status: u16, body: &[u8]) -> Self {
        Reply {
            status,
            headers: vec![("content-type", "application/json".into())],
            body: body.to_vec(),
            piece: usize::MAX,
            end: End::Clean,
            delay: Duration::ZERO,
        }
    }

    fn header(mut self, name: &'static str, value: &str) -> Self {
        self.headers.push((name, value.into()));
        self
    }
}

/// What the server received.
#[derive(Debug)]
struct Received {
    head: String,
    body: serde_json::Value,
}

struct Server {
    base_url: String,
    received: oneshot::Receiver<Received>,
    /// With `End::AwaitClose`: whether the client closed the connection, and how soon.
    closed: oneshot::Receiver<Option<Duration>>,
}

/// Serves one connection with `reply`.
async fn serve(reply: Reply) -> Server {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (tx, received) = oneshot::channel();
    let (closed_tx, closed) = oneshot::channel();
    tokio::spawn(async move {
        let (mut sock, _) = listener.accept().await.unwrap();
        let got = read_request(&mut sock).await;
        let _ = tx.send(got);
        tokio::time::sleep(reply.delay).await;
        let mut head = format!("HTTP/1.1 {} X\r\n", reply.status);
        for (k, v) in &reply.headers {
            head.push_str(&format!("{k}: {v}\r\n"));
        }
        head.push_str("transfer-encoding: chunked\r\nconnection: close\r\n\r\n");
        if sock.write_all(head.as_bytes()).await.is_err() {
            return;
        }
        for piece in reply.body.chunks(reply.piece.max(1)) {
            let mut chunk = format!("{:x}\r\n", piece.len()).into_bytes();
            chunk.extend_from_slice(piece);
            chunk.extend_from_slice(b"\r\n");
            if sock.write_all(&chunk).await.is_err() {
                return;
            }
            sock.flush().await.ok();
            if reply.end == End::AwaitClose {
                break; // one piece, then wait for the client to leave
            }
        }
        match reply.end {
            End::Clean => {
                let _ = sock.write_all(b"0\r\n\r\n").await;
            }
            End::Abort => {}
            End::Stall(d) => tokio::time::sleep(d).await,
            End::AwaitClose => {
                let start = Instant::now();
                let mut buf = [0u8; 64];
                let gone = tokio::time::timeout(Duration::from_secs(5), async {
                    loop {
                        match sock.read(&mut buf).await {
                            Ok(0) | Err(_) => break,
                            Ok(_) => {}
                        }
                    }
                })
                .await
                .is_ok();
                let _ = closed_tx.send(gone.then(|| start.elapsed()));
            }
        }
    });
    Server {
        base_url: format!("http://{addr}/v1"),
        received,
        closed,
    }
}

async fn read_request(sock: &mut TcpStream) -> Received {
    let mut buf = Vec::new();
    let mut tmp = [0u8; 4096];
    let head_end = loop {
        let n = sock.read(&mut tmp).await.unwrap();
        assert!(n > 0, "client closed before a whole request");
        buf.extend_from_slice(&tmp[..n]);
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
    };
    let head = String::from_utf8(buf[..head_end].to_vec()).unwrap();
    let len: usize = head
        .lines()
        .find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.eq_ignore_ascii_case("content-length")
                .then(|| v.trim().parse().unwrap())
        })
        .expect("a content-length");
    while buf.len() < head_end + len {
        let n = sock.read(&mut tmp).await.unwrap();
        assert!(n > 0);
        buf.extend_from_slice(&tmp[..n]);
    }
    Received {
        head,
        body: serde_json::from_slice(&buf[head_end..head_end + len]).unwrap(),
    }
}

fn openai_at(base_url: &str) -> OpenAiModel {
    OpenAiConfig::new("gpt-4.1-mini")
        .base_url(base_url)
        .api_key("sk-test-1234")
        .build()
        .unwrap()
}

fn request() -> ModelRequest {
    ModelRequest::new(vec![
        Message::system("You are a shop assistant."),
        Message::user("When do you open?"),
    ])
    .with_model("a-harness-label")
    .with_tools(vec![ToolDefinition::new("get_hours", "Opening hours")])
}

/// The events a model streams for one call.
async fn run(model: &OpenAiModel, req: &ModelRequest) -> Vec<Result<ModelEvent, ModelError>> {
    model.stream(req).collect().await
}

/// What the sans-IO decoder makes of the same bytes: the text deltas and the response.
fn decoded(body: &[u8]) -> (Vec<String>, ModelResponse) {
    let mut dec = ChatStreamDecoder::new();
    dec.push(body);
    let mut deltas = Vec::new();
    let mut resp = None;
    while let Some(ev) = dec.poll_event().unwrap() {
        match ev {
            ModelEvent::TextDelta(d) => deltas.push(d),
            ModelEvent::Completed(r) => resp = Some(r),
            _ => {}
        }
    }
    dec.finish().unwrap();
    (deltas, resp.unwrap())
}

fn last_error(events: &[Result<ModelEvent, ModelError>]) -> ModelError {
    match events.last() {
        Some(Err(e)) => e.clone(),
        other => panic!("expected an error last, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_text_stream_and_the_request_it_answers() {
    let body = fixture!("openai_text.sse");
    let mut server = serve(Reply::sse(body)).await;
    let model = openai_at(&server.base_url);
    let mut deltas = Vec::new();
    let resp = model
        .complete(&request(), &mut |d| deltas.push(d.to_owned()))
        .await
        .unwrap();
    let (want_deltas, want) = decoded(body);
    assert_eq!(deltas, want_deltas);
    assert_eq!(resp, want);
    assert_eq!(
        resp.message.text(),
        "We open at eight and close at six—including weekends."
    );

    let got = server.received.try_recv().unwrap();
    let head = got.head.to_ascii_lowercase();
    assert!(
        head.starts_with("post /v1/chat/completions http/1.1\r\n"),
        "{head}"
    );
    assert!(head.contains("\r\nauthorization: bearer sk-test-1234\r\n"));
    assert!(head.contains("\r\ncontent-type: application/json\r\n"));
    assert!(head.contains("\r\naccept: text/event-stream\r\n"));
    assert!(head.contains("\r\nuser-agent: harness-rs/"));
    assert_eq!(got.body["model"], "gpt-4.1-mini"); // the configured model, not the label
    assert_eq!(got.body["stream"], true);
    assert_eq!(got.body["stream_options"]["include_usage"], true);
    assert_eq!(got.body["messages"][1]["content"], "When do you open?");
    assert_eq!(got.body["tools"][0]["function"]["name"], "get_hours");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_recorded_success_gives_what_the_codec_gives() {
    for body in [
        fixture!("openai_parallel_tool_calls.sse"),
        fixture!("openai_length.sse"),
        fixture!("vllm_reasoning_tool_call.sse"),
        fixture!("ollama_reasoning_tool_call.sse"),
        fixture!("llamacpp_reasoning.sse"),
    ] {
        for piece in [1, 5, 64, 4096] {
            let server = serve(Reply {
                piece,
                ..Reply::sse(body)
            })
            .await;
            let events = run(&openai_at(&server.base_url), &request()).await;
            let (want_deltas, want) = decoded(body);
            let deltas: Vec<_> = events
                .iter()
                .filter_map(|e| match e {
                    Ok(ModelEvent::TextDelta(d)) => Some(d.clone()),
                    _ => None,
                })
                .collect();
            assert_eq!(deltas, want_deltas);
            match events.last() {
                Some(Ok(ModelEvent::Completed(r))) => assert_eq!(r, &want),
                other => panic!("piece {piece}: {other:?}"),
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn parallel_tool_calls_over_the_wire() {
    let server = serve(Reply::sse(fixture!("openai_parallel_tool_calls.sse"))).await;
    let resp = openai_at(&server.base_url)
        .complete(&request(), &mut |_| {})
        .await
        .unwrap();
    let calls: Vec<_> = resp
        .message
        .tool_calls()
        .map(|c| (c.id.as_str(), c.tool.as_str(), c.args["city"].clone()))
        .collect();
    assert_eq!(
        calls,
        [
            (
                "call_rH3pX9cQ2vLk8sT4nW6yB1dF",
                "get_weather",
                "Paris".into()
            ),
            (
                "call_Vb7mN2qR5tY8uI1oP4aS6dG0",
                "get_weather",
                "Tokyo".into()
            ),
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_429_with_retry_after_is_retryable() {
    let server =
        serve(Reply::status(429, fixture!("http_429_body.json")).header("retry-after", "20")).await;
    let err = last_error(&run(&openai_at(&server.base_url), &request()).await);
    let ModelError::Retryable {
        status: 429,
        retry_after_ms: Some(20_000),
        ref message,
    } = err
    else {
        panic!("{err:?}")
    };
    assert!(message.starts_with("Rate limit reached"));
    assert!(err.is_retryable());

    // An HTTP-date a minute ahead: read against the transport's clock.
    let date = httpdate::fmt_http_date(std::time::SystemTime::now() + Duration::from_secs(60));
    let server =
        serve(Reply::status(429, fixture!("http_429_body.json")).header("retry-after", &date))
            .await;
    let err = last_error(&run(&openai_at(&server.base_url), &request()).await);
    let wait = err.retry_after().expect("a wait");
    assert!(
        wait > Duration::from_secs(55) && wait <= Duration::from_secs(60),
        "{wait:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_500_is_retryable_and_401_is_not() {
    let server = serve(Reply::status(500, fixture!("http_500_body.json"))).await;
    let err = last_error(&run(&openai_at(&server.base_url), &request()).await);
    assert!(
        matches!(&err, ModelError::Retryable { status: 500, retry_after_ms: None, message } if message.starts_with("The server had an error")),
        "{err:?}"
    );

    let server = serve(Reply::status(401, fixture!("http_401_body.json"))).await;
    let err = last_error(&run(&openai_at(&server.base_url), &request()).await);
    assert!(
        matches!(&err, ModelError::Rejected { status: 401, message } if message.starts_with("Incorrect API key")),
        "{err:?}"
    );
    assert!(!err.is_retryable());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stream_failures_are_typed() {
    // An error object after some text: the text streamed, then the error.
    let server = serve(Reply::sse(fixture!("openai_error_event.sse"))).await;
    let events = run(&openai_at(&server.base_url), &request()).await;
    assert_eq!(
        events
            .iter()
            .filter(|e| matches!(e, Ok(ModelEvent::TextDelta(_))))
            .count(),
        3
    );
    assert!(
        matches!(last_error(&events), ModelError::Provider(m) if m.starts_with("The server had an error"))
    );

    // Invalid JSON.
    let server = serve(Reply::sse(fixture!("invalid_json.sse"))).await;
    let err = last_error(&run(&openai_at(&server.base_url), &request()).await);
    assert!(
        matches!(&err, ModelError::Provider(m) if m.contains("invalid chat completion chunk")),
        "{err:?}"
    );

    // A tool call cut by max_tokens.
    let server = serve(Reply::sse(fixture!("openai_tool_call_cut_by_length.sse"))).await;
    let err = last_error(&run(&openai_at(&server.base_url), &request()).await);
    assert!(
        matches!(&err, ModelError::Provider(m) if m.contains("get_weather")),
        "{err:?}"
    );

    // Cut mid-chunk, the body closed cleanly; cut and the socket dropped; no [DONE].
    for (body, end) in [
        (fixture!("openai_cut_mid_chunk.sse"), End::Clean),
        (fixture!("openai_cut_mid_chunk.sse"), End::Abort),
        (fixture!("openai_no_done.sse"), End::Clean),
        (fixture!("openai_text.sse"), End::Abort),
    ] {
        let mut reply = Reply::sse(body);
        reply.end = end;
        if end == End::Abort && body == fixture!("openai_text.sse") {
            reply.body.truncate(reply.body.len() / 2);
        }
        let server = serve(reply).await;
        let events = run(&openai_at(&server.base_url), &request()).await;
        assert_eq!(last_error(&events), ModelError::Incomplete, "{end:?}");
    }
}

/// The error of one call to a server that answers with `reply`, on a model configured by
/// `configure`, and how long it took.
async fn timed_error(
    reply: Reply,
    configure: impl FnOnce(OpenAiConfig) -> OpenAiConfig,
) -> (ModelError, Duration) {
    let server = serve(reply).await;
    let model = configure(OpenAiConfig::new("m").base_url(&server.base_url))
        .build()
        .unwrap();
    let start = Instant::now();
    let err = last_error(&run(&model, &request()).await);
    (err, start.elapsed())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timeouts() {
    // Idle: one piece, then silence.
    let mut stalls = Reply::sse(fixture!("openai_text.sse"));
    stalls.piece = 400;
    stalls.end = End::Stall(Duration::from_secs(10));
    stalls.body.truncate(800);
    let (err, took) = timed_error(stalls, |c| c.idle_timeout(Duration::from_millis(300))).await;
    assert_eq!(err, ModelError::Incomplete);
    assert!(took < Duration::from_secs(5), "{took:?}");

    // First byte: the server reads the request and says nothing.
    let mut silent = Reply::sse(fixture!("openai_text.sse"));
    silent.delay = Duration::from_secs(10);
    let (err, took) =
        timed_error(silent, |c| c.first_byte_timeout(Duration::from_millis(300))).await;
    assert!(
        matches!(&err, ModelError::Unavailable(m) if m.contains("no answer")),
        "{err:?}"
    );
    assert!(err.is_retryable());
    assert!(took < Duration::from_secs(5), "{took:?}");

    // Nobody listening: refused at once.
    let port = {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        l.local_addr().unwrap().port()
    };
    let model = openai_at(&format!("http://127.0.0.1:{port}/v1"));
    let err = last_error(&run(&model, &request()).await);
    assert!(
        matches!(&err, ModelError::Unavailable(m) if m.contains("127.0.0.1")),
        "{err:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropping_the_stream_cancels_the_call() {
    let mut reply = Reply::sse(fixture!("openai_text.sse"));
    reply.piece = 1200; // the first chunks, then the server waits
    reply.end = End::AwaitClose;
    let server = serve(reply).await;
    let model = openai_at(&server.base_url);
    let req = request();
    let mut stream = model.stream(&req);
    let first = stream.next().await;
    assert!(
        matches!(first, Some(Ok(ModelEvent::TextDelta(_)))),
        "{first:?}"
    );
    drop(stream);
    let closed = server.closed.await.unwrap();
    assert!(
        closed.is_some(),
        "the connection stayed open after the stream was dropped"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_the_callers_runtime_and_from_a_plain_executor() {
    let body = fixture!("openai_text.sse");
    let server = serve(Reply::sse(body)).await;
    let model = OpenAiConfig::new("m")
        .base_url(&server.base_url)
        .runtime(tokio::runtime::Handle::current())
        .build()
        .unwrap();
    let resp = model.complete(&request(), &mut |_| {}).await.unwrap();
    assert_eq!(resp, decoded(body).1);

    // futures::executor on a thread of its own: the model's own runtime does the I/O.
    let server = serve(Reply::sse(body)).await;
    let base = server.base_url.clone();
    let resp = tokio::task::spawn_blocking(move || {
        let model = OpenAiConfig::new("m").base_url(base).build().unwrap();
        let resp = futures::executor::block_on(model.complete(&request(), &mut |_| {}));
        drop(model);
        resp
    })
    .await
    .unwrap()
    .unwrap();
    assert_eq!(resp, decoded(body).1);
}

#[test]
fn configuration_is_checked() {
    let bad = |url: &str| {
        matches!(
            OpenAiConfig::new("m").base_url(url).build(),
            Err(OpenAiConfigError::InvalidBaseUrl { .. })
        )
    };
    assert!(bad("ftp://example.com/v1"));
    assert!(bad("example.com/v1"));
    assert!(bad("http://"));
    assert!(bad("http://example.com/v1?x=1"));
    for (base, endpoint) in [
        (
            "http://localhost:8000/v1/",
            "http://localhost:8000/v1/chat/completions",
        ),
        (
            "https://example.com/openai/v1/chat/completions",
            "https://example.com/openai/v1/chat/completions",
        ),
    ] {
        let m = OpenAiConfig::new("m").base_url(base).build().unwrap();
        assert_eq!(m.endpoint().to_string(), endpoint);
    }
    assert!(matches!(
        OpenAiConfig::new("m").header("bad header", "x").build(),
        Err(OpenAiConfigError::InvalidHeader { .. })
    ));
    assert!(matches!(
        OpenAiConfig::new("m").api_key("line\nbreak").build(),
        Err(OpenAiConfigError::InvalidHeader { .. })
    ));
    assert!(matches!(
        OpenAiConfig::new(" ").build(),
        Err(OpenAiConfigError::MissingModel)
    ));
    assert!(matches!(
        OpenAiModel::from_spec("scripted"),
        Err(OpenAiConfigError::InvalidSpec { .. })
    ));
    // The key never shows in Debug.
    let cfg = OpenAiConfig::new("m").api_key("sk-secret");
    assert!(!format!("{cfg:?}").contains("sk-secret"));
}
