//! The UHP server's request path on arbitrary input: method, target, headers and body from
//! the fuzzer's bytes, through routing, authentication and every endpoint; a task that starts
//! is driven to its end. Nothing may panic.
#![no_main]

use std::time::Instant;

use harness_uhp::server::{
    Base, Now, Principal, Request, ServerEvent, TurnEnd, UhpServer, UhpServerConfig,
};
use http::{HeaderMap, HeaderValue};
use libfuzzer_sys::fuzz_target;

const METHODS: [&str; 5] = ["GET", "POST", "PUT", "DELETE", "PATCH"];

fuzz_target!(|data: &[u8]| {
    let Some((&sel, rest)) = data.split_first() else {
        return;
    };
    let (target, body) = match rest.iter().position(|b| *b == b'\n') {
        Some(i) => (&rest[..i], &rest[i + 1..]),
        None => (rest, &[][..]),
    };
    let Ok(target) = std::str::from_utf8(target) else {
        return;
    };
    let cfg = UhpServerConfig::new(
        vec![Base {
            base: "faq".into(),
            label: "FAQ".into(),
        }],
        vec!["scripted".into()],
    );
    let mut server = UhpServer::new(cfg);
    server.add_api_key("k", Principal::new("p"));
    let mut headers = HeaderMap::new();
    if sel & 8 == 0 {
        headers.insert("authorization", HeaderValue::from_static("Bearer k"));
    }
    if sel & 16 != 0 {
        headers.insert(
            "content-type",
            HeaderValue::from_static("multipart/form-data; boundary=b"),
        );
    }
    if sel & 32 != 0 {
        headers.insert("idempotency-key", HeaderValue::from_static("key"));
    }
    let now = Now::new(Instant::now(), 0);
    let method = METHODS[usize::from(sel) % METHODS.len()];
    for _ in 0..2 {
        let _ = server.handle_request(now, &Request::new(method, target, &headers, body));
        while let Some(ev) = server.poll_event() {
            if let ServerEvent::StartTurn(t) = ev {
                let _ = server.turn_text(now, &t.response_id, "x");
                let _ = server.turn_write_file(now, &t.response_id, target, body.to_vec());
                server.turn_end(now, &t.response_id, TurnEnd::Completed);
            }
        }
    }
});
