//! Hostile input to the server, as properties: the route table and the whole request path
//! take arbitrary bytes without a panic, and every refusal is the protocol's envelope
//! (errors.md §1).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod server_rig;

use harness_uhp::server::route::route;
use http::{HeaderMap, HeaderValue};
use proptest::prelude::*;
use serde_json::Value;
use server_rig::{ALICE, Got, Rig};

fn target() -> impl Strategy<Value = String> {
    prop_oneof![
        any::<String>(),
        proptest::collection::vec(
            prop_oneof![
                Just("v1".to_owned()),
                Just("responses".to_owned()),
                Just("sessions".to_owned()),
                Just("containers".to_owned()),
                Just("files".to_owned()),
                Just("harnesses".to_owned()),
                Just("..".to_owned()),
                Just("%2e%2e%2f".to_owned()),
                Just("%".to_owned()),
                Just("%ff".to_owned()),
                "[a-z_%0-9.]{0,12}",
            ],
            0..8
        )
        .prop_map(|s| format!("/{}", s.join("/"))),
    ]
}

fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<f64>().prop_map(Value::from),
        "[a-z ]{0,8}".prop_map(Value::from),
        Just(Value::from("data:text/plain;base64,aGk=")),
        Just(Value::from("SKILL.md")),
    ];
    leaf.prop_recursive(4, 48, 6, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
            proptest::collection::btree_map(
                prop_oneof![
                    Just("input".to_owned()),
                    Just("stream".to_owned()),
                    Just("type".to_owned()),
                    Just("role".to_owned()),
                    Just("content".to_owned()),
                    Just("text".to_owned()),
                    Just("file_data".to_owned()),
                    Just("file_id".to_owned()),
                    Just("metadata".to_owned()),
                    Just("harness_id".to_owned()),
                    Just("previous_response_id".to_owned()),
                    Just("base".to_owned()),
                    Just("skills".to_owned()),
                    Just("files".to_owned()),
                    Just("path".to_owned()),
                    Just("mcp_servers".to_owned()),
                    Just("name".to_owned()),
                    Just("max_step".to_owned()),
                    Just("timeout_seconds".to_owned()),
                    Just("background".to_owned()),
                    "[a-z]{1,6}",
                ],
                inner,
                0..6,
            )
            .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

fn check(got: Got) {
    match got {
        Got::Now(a) => {
            assert!(!a.header("uhp-version").is_empty());
            if a.status >= 300 {
                let v: Value = serde_json::from_slice(&a.body).expect("an envelope");
                assert!(v["error"]["code"].is_string() && v["error"]["message"].is_string());
            }
        }
        Got::Stream(..) | Got::Wait(_) => {}
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn the_route_table_takes_any_target(method in "[A-Z]{0,7}", t in target()) {
        let _ = route(&method, &t);
    }

    #[test]
    fn any_request_is_answered(
        method in prop_oneof![Just("GET"), Just("POST"), Just("PUT"), Just("DELETE"), Just("PATCH")],
        t in target(),
        body in proptest::collection::vec(any::<u8>(), 0..256),
        auth in prop_oneof![Just(None), Just(Some(format!("Bearer {ALICE}"))), any::<String>().prop_map(Some)],
        version in prop_oneof![Just(None), Just(Some("2026-08-11".to_owned())), "[0-9-]{0,12}".prop_map(Some)],
        key in prop_oneof![Just(None), "[ -~]{0,300}".prop_map(Some)],
    ) {
        let mut r = Rig::new();
        let mut h = HeaderMap::new();
        if let Some(a) = auth.and_then(|a| HeaderValue::from_str(&a).ok()) {
            h.insert("authorization", a);
        }
        if let Some(v) = version.and_then(|v| HeaderValue::from_str(&v).ok()) {
            h.insert("uhp-version", v);
        }
        if let Some(k) = key.and_then(|k| HeaderValue::from_str(&k).ok()) {
            h.insert("idempotency-key", k);
        }
        h.insert("content-type", HeaderValue::from_static("multipart/form-data; boundary=x"));
        check(r.send_with(method, &t, &h, &body));
    }

    #[test]
    fn any_json_to_the_writing_endpoints(v in json_value(), which in 0usize..4) {
        let mut r = Rig::new();
        let (m, p) = [("POST", "/v1/responses"), ("POST", "/v1/harnesses"), ("PUT", "/v1/harnesses/chrn_x"), ("GET", "/v1/sessions?limit=1&cursor=s9")][which];
        check(r.send_as(ALICE, m, p, Some(v.clone())));
        // A task that started can be driven to its end whatever it was given.
        let turns = std::mem::take(&mut r.turns);
        for t in turns {
            r.text(&t.response_id, "x");
            r.end(&t.response_id);
        }
    }
}
