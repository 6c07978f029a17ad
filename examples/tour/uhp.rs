//! Chapter: harness-uhp. A task stream with a lost delta, a replayed one, a stray event
//! after the end and a `[DONE]` sentinel; the retry table; and a dropped stream recovered from the stored response,
//! all sans-IO. (`cargo run --example uhp_recover` does the last part over real HTTP.)

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
    Ok(())
}
