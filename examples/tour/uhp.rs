//! Chapter: harness-uhp. A task stream with a lost delta, a replayed one, a stray event
//! after the end and a `[DONE]` sentinel; the retry table; and a dropped stream recovered from the stored response,
//! all sans-IO. (`cargo run --example uhp_recover` does the last part over real HTTP.) Then
//! the server half: the tour's FAQ agent (`harness_core::agent::faq`, unchanged) served as a
//! UHP endpoint, in process: UHP cannot ask a person, so its gated refund is decided by the
//! host's policy (deny by default), and the agent says so.

use std::time::{Duration, Instant, SystemTime};

use harness_uhp::builder::StreamBuilder;
use harness_uhp::client::{CreateRequest, RequestKind, TaskClient, TaskClientConfig};
use harness_uhp::retry::{Decision, Failure, RetryAfter, RetryPolicy, retry_class};
use harness_uhp::{ErrorObject, StreamDecoder, TaskAccumulator};

pub fn run() -> Result<(), Box<dyn std::error::Error>> {
    // 1. A server's stream, mangled on the way: CRLF line ends, event 5 lost, event 6
    //    replayed, and a stray delta after the terminal event. Pushed 5 bytes at a time.
    let mut server = StreamBuilder::new("resp_tour");
    server
        .created()
        .message(&["Sans", "-IO", " all", " the", " way."], &[])
        .completed();
    let mut events: Vec<_> = server.events().to_vec();
    events.remove(5);
    events.insert(6, events[5].clone());
    let mut stray = events[4].clone();
    stray["sequence_number"] = serde_json::json!(server.events().len());
    stray["delta"] = serde_json::json!(" STRAY");
    events.push(stray);
    let mut wire: Vec<u8> = events
        .iter()
        .flat_map(StreamBuilder::sse_event)
        .flat_map(|b| {
            if b == b'\n' {
                vec![b'\r', b'\n']
            } else {
                vec![b]
            }
        })
        .collect();
    wire.extend_from_slice(b"data: [DONE]\r\n\r\n"); // an OpenAI-style sentinel, not UHP

    let mut dec = StreamDecoder::new();
    let mut task = TaskAccumulator::new();
    for chunk in wire.chunks(5) {
        dec.push(chunk);
        loop {
            match dec.poll_event() {
                Ok(Some(ev)) => task.add(&ev),
                Ok(None) => break,
                // A message that is not an event is reported; the stream goes on.
                Err(finding) => task.add_finding(&finding),
            }
        }
    }
    // The end of the body can complete an event (a held CR) or cut one short (reported).
    task.finish_decoder(&mut dec);
    let seq = task.sequence();
    println!("  {} events in 5-byte pushes, CRLF", task.events_seen());
    println!(
        "  status {}, text {:?} (from the terminal event)",
        task.status(),
        task.text()
    );
    println!(
        "  sequence ok={} missing={:?} duplicates={:?}",
        seq.ok, seq.missing, seq.duplicates
    );
    for f in task.findings() {
        println!("  finding: {f}");
    }

    // 2. The retry table and the server's own answer.
    println!();
    for (code, ty, status) in [
        (Some("session_busy"), None, 409),
        (Some("rate_limited"), Some("rate_limit_error"), 429),
        (Some("quota_exhausted"), Some("rate_limit_error"), 429),
        (None, None, 501),
        (None, None, 503),
    ] {
        println!(
            "  {:<16} {status}: {:?}",
            code.unwrap_or("(no code)"),
            retry_class(code, ty, Some(status))
        );
    }
    let now = Instant::now();
    let wall = SystemTime::UNIX_EPOCH + Duration::from_secs(1_786_400_000);
    let date = httpdate::fmt_http_date(wall + Duration::from_secs(42));
    let ra = RetryAfter::parse(&date).ok_or("bad date")?.delay_from(wall);
    let mut policy = RetryPolicy::new().with_seed(7);
    let limited = Failure::Http {
        status: 429,
        error: None,
        retry_after: Some(ra),
    };
    if let Decision::RetryAt(at) = policy.on_failure(now, &limited) {
        println!("  429 Retry-After: {date} -> retry in {:?}", at - now);
    }
    let busy = Failure::Http {
        status: 409,
        error: Some(ErrorObject {
            detail: Some(serde_json::json!({"retry_after_ms": 1500})),
            ..ErrorObject::new("session_busy", "A task is running in this session.")
        }),
        retry_after: None,
    };
    if let Decision::RetryAt(at) = policy.on_failure(now, &busy) {
        println!(
            "  409 session_busy retry_after_ms=1500 -> retry in {:?}, same key {}",
            at - now,
            policy.idempotency_key()
        );
    }

    // 3. A dropped stream: the client fetches the stored response, it does not re-run.
    println!();
    let mut client = TaskClient::new(
        TaskClientConfig::new("http://127.0.0.1:9"),
        CreateRequest::new("hi"),
    );
    client.start(now);
    let create = client.poll_transmit().ok_or("no create")?;
    let sse = server.to_sse();
    let mut head = http::HeaderMap::new();
    head.insert("content-type", "text/event-stream".parse()?);
    client.handle_head(now, create.id, 200, &head);
    client.handle_data(now, create.id, &sse[..sse.len() / 3]);
    client.handle_transport_error(now, create.id);
    let fetch = client.poll_transmit().ok_or("no fetch")?;
    println!(
        "  stream dropped after {} events -> {:?} {}",
        client.accumulator().events_seen(),
        fetch.kind,
        fetch.request.uri()
    );
    let mut json = http::HeaderMap::new();
    json.insert("content-type", "application/json".parse()?);
    client.handle_head(now, fetch.id, 200, &json);
    client.handle_data(now, fetch.id, &serde_json::to_vec(server.response())?);
    client.handle_end(now, fetch.id);
    println!(
        "  finished={} status={} text={:?}; create requests sent: {}",
        client.is_finished(),
        client.accumulator().status(),
        client.accumulator().text(),
        client.creates_sent()
    );
    if !client.is_finished() || fetch.kind != RequestKind::Retrieve || client.creates_sent() != 1 {
        return Err("recovery failed".into());
    }
    faq_endpoint()
}

/// The FAQ agent behind `POST /v1/responses`, in process (`UhpService::handle`, what the `axum`
/// feature's router calls; `cargo run --example uhp_server` serves it over HTTP).
fn faq_endpoint() -> Result<(), Box<dyn std::error::Error>> {
    use harness_core::agent::faq::{FaqAgent, Refunds, faq_model, faq_tools};
    use harness_uhp::server::driver::{Body, CallerAuth, UhpService};

    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let refunds = Refunds::default();
    let wall = || 0_i64;
    let host = rt.block_on(
        UhpService::builder(faq_model())
            .harness("faq", "FAQ agent", FaqAgent::new())
            .models(["scripted-faq"])
            .tools(faq_tools(&refunds))
            .api_key("tour-key", "tour")
            .build(Instant::now, wall),
    )?;
    rt.spawn(host.run(tokio::time::sleep));
    println!("\n  the FAQ agent as a UHP endpoint:");
    for input in ["What are your hours on Saturday?", "Please refund order 42"] {
        let body = serde_json::json!({ "input": input }).to_string();
        let req = http::Request::post("/v1/responses")
            .header("authorization", "Bearer tour-key")
            .header("content-type", "application/json")
            .body(body.into_bytes())?;
        let Body::Full(bytes) = rt
            .block_on(host.handle(CallerAuth::Bearer, req))
            .into_body()
        else {
            return Err("a stream for a non-streaming request".into());
        };
        let task: serde_json::Value = serde_json::from_slice(&bytes)?;
        println!("  POST /v1/responses {input:?} -> {}", task["status"]);
        for item in task["output"].as_array().into_iter().flatten() {
            let what = match item["type"].as_str() {
                Some("message") => item["content"][0]["text"].to_string(),
                Some("reasoning") => item["summary"][0]["text"].to_string(),
                Some("function_call") => format!("{}({})", item["name"], item["arguments"]),
                Some("function_call_output") => item["output"].to_string(),
                _ => item.to_string().chars().take(100).collect(),
            };
            println!("    {:<22} {what}", item["type"].as_str().unwrap_or("?"));
        }
    }
    println!(
        "  the refund ran {} times (no one to approve it)",
        refunds.count()
    );
    if refunds.count() != 0 {
        return Err("a gated refund ran without an approval".into());
    }
    Ok(())
}
