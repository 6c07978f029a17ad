//! The golden vectors from agentsessions reproduce byte for byte: the chain `content_hash`
//! (canon/canon.go) and the Go model-input hash (controller/inputhash_compat_test.go).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use base64::Engine as _;
use harness_core::event::Event;
use harness_core::message::{
    DataPart, FilePart, Message, ModelRequest, Part, ReasoningPart, Role, TextPart,
};
use harness_sessions::hash::{canonical_event, content_hash, content_hash_of_value};
use harness_sessions::input_hash::{go_json, model_input_hash};
use harness_sessions::record::Record;
use serde_json::Value;

fn golden() -> Value {
    serde_json::from_str(include_str!("fixtures/agentsessions-golden.json")).unwrap()
}

/// The research: "content_hash = lowercase_hex(SHA-256(JCS({event: proto3-JSON(Event),
/// prev_hash, seq})))".
#[test]
fn chain_vectors_reproduce_from_the_json() {
    for v in golden()["chain"].as_array().unwrap() {
        let h = content_hash_of_value(
            &v["event"],
            v["prev_hash"].as_str().unwrap(),
            v["seq"].as_str().unwrap(),
        )
        .unwrap();
        assert_eq!(h.to_string(), v["content_hash"].as_str().unwrap());
    }
}

/// The typed event model serializes to the same proto3-JSON, so records this crate seals
/// carry agentsessions' hash.
#[test]
fn chain_vectors_reproduce_from_typed_events() {
    for v in golden()["chain"].as_array().unwrap() {
        let ev: Event = serde_json::from_value(v["event"].clone()).unwrap();
        // typed -> proto3-JSON is the same JSON value as the golden event
        assert_eq!(serde_json::to_value(&ev).unwrap(), v["event"]);
        let seq: u64 = v["seq"].as_str().unwrap().parse().unwrap();
        let rec = Record::seal(ev.clone(), seq, None, 1).unwrap();
        assert_eq!(
            rec.content_hash.to_string(),
            v["content_hash"].as_str().unwrap()
        );
        assert_eq!(
            content_hash(&canonical_event(&ev).unwrap(), None, seq).to_string(),
            v["content_hash"].as_str().unwrap()
        );
    }
}

fn text(t: &str) -> Part {
    Part::Text(TextPart { text: t.into() })
}

/// `legacyRequest()` of agentsessions' inputhash_compat_test.go, as the golden JSON shows it.
fn legacy_request() -> ModelRequest {
    let mut data = serde_json::Map::new();
    data.insert("a".into(), Value::from("x"));
    data.insert("b".into(), Value::from(1.5));
    let mut req = ModelRequest::new(vec![
        Message {
            role: Role::System,
            parts: vec![text("be brief")],
        },
        Message {
            role: Role::User,
            parts: vec![
                text("hi"),
                Part::File(FilePart {
                    mime: "image/png".into(),
                    bytes: Some(vec![1, 2]),
                    uri: String::new(),
                    name: "img".into(),
                    digest: "sha256:aa".into(),
                }),
                Part::Data(DataPart { data }),
            ],
        },
        Message {
            role: Role::Assistant,
            parts: vec![
                Part::Reasoning(ReasoningPart {
                    provider: "p".into(),
                    model_id: "m".into(),
                    opaque: Some(
                        base64::engine::general_purpose::STANDARD
                            .decode("cg==")
                            .unwrap(),
                    ),
                    opaque_uri: String::new(),
                    summary: vec![text("brief")],
                    item_id: "rs_1".into(),
                    ordinal: 1,
                    validity_scope: String::new(),
                    opaque_digest: String::new(),
                }),
                text("yo"),
            ],
        },
    ])
    .with_model("m");
    req.params.insert("temperature".into(), "0".into());
    req
}

/// The research: "hashModelInput(req) = hex(sha256(encoding/json.Marshal(api.ModelRequest)))";
/// golden go_json and hash from agentsessions.
#[test]
fn model_input_hash_vector_reproduces() {
    let g = &golden()["model_input_hash"][0];
    let req = legacy_request();
    assert_eq!(go_json(&req), g["go_json"].as_str().unwrap());
    assert_eq!(model_input_hash(&req), g["hash"].as_str().unwrap());
}
