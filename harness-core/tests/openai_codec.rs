//! The OpenAI Chat Completions codec on recorded streams (`tests/fixtures/openai/`, provenance
//! in its README): every shape decoded, in every chunking; arbitrary bytes never panic; the
//! request body against the documented request shape; HTTP errors mapped.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::{Duration, SystemTime};

use harness_core::message::{
    JsonObject, Message, ModelRequest, ModelResponse, Part, Role, TextPart, ToolCall, ToolChoice,
    ToolChoiceMode, ToolDefinition, ToolResult,
};
use harness_core::model::{ModelError, ModelEvent};
use harness_core::openai::{
    ChatStreamConfig, ChatStreamDecoder, ChatStreamError, FinishReason, http_error, request_json,
    retry_after,
};
use proptest::prelude::*;
use serde_json::json;

macro_rules! fixture {
    ($name:literal) => {
        include_bytes!(concat!("fixtures/openai/", $name)).as_slice()
    };
}

const TEXT: &[u8] = fixture!("openai_text.sse");
const PARALLEL: &[u8] = fixture!("openai_parallel_tool_calls.sse");
const LENGTH: &[u8] = fixture!("openai_length.sse");
const CUT_TOOL: &[u8] = fixture!("openai_tool_call_cut_by_length.sse");
const ERROR_EVENT: &[u8] = fixture!("openai_error_event.sse");
const CUT: &[u8] = fixture!("openai_cut_mid_chunk.sse");
const NO_DONE: &[u8] = fixture!("openai_no_done.sse");
const INVALID: &[u8] = fixture!("invalid_json.sse");
const VLLM: &[u8] = fixture!("vllm_reasoning_tool_call.sse");
const VLLM_ERROR: &[u8] = fixture!("vllm_error_event.sse");
const OLLAMA: &[u8] = fixture!("ollama_reasoning_tool_call.sse");
const LLAMACPP: &[u8] = fixture!("llamacpp_reasoning.sse");

const ALL: &[&[u8]] = &[
    TEXT,
    PARALLEL,
    LENGTH,
    CUT_TOOL,
    ERROR_EVENT,
    CUT,
    NO_DONE,
    INVALID,
    VLLM,
    VLLM_ERROR,
    OLLAMA,
    LLAMACPP,
];

/// Everything a decoder said about a body pushed in these chunks.
#[derive(Debug, PartialEq)]
struct Outcome {
    events: Vec<ModelEvent>,
    error: Option<ChatStreamError>,
    finish_reason: Option<FinishReason>,
}

impl Outcome {
    fn text_deltas(&self) -> Vec<&str> {
        self.events
            .iter()
            .filter_map(|e| match e {
                ModelEvent::TextDelta(d) => Some(d.as_str()),
                _ => None,
            })
            .collect()
    }

    fn reasoning(&self) -> String {
        self.events
            .iter()
            .filter_map(|e| match e {
                ModelEvent::ReasoningDelta(d) => Some(d.as_str()),
                _ => None,
            })
            .collect()
    }

    fn response(&self) -> &ModelResponse {
        match self.events.last() {
            Some(ModelEvent::Completed(r)) => r,
            other => panic!("no completed response: {other:?} / {:?}", self.error),
        }
    }
}

fn decode_chunks<'a>(chunks: impl IntoIterator<Item = &'a [u8]>) -> Outcome {
    let mut dec = ChatStreamDecoder::new();
    let mut events = Vec::new();
    let mut error = None;
    'body: for c in chunks {
        dec.push(c);
        loop {
            match dec.poll_event() {
                Ok(Some(ev)) => events.push(ev),
                Ok(None) => break,
                Err(e) => {
                    error = Some(e);
                    break 'body;
                }
            }
        }
    }
    if error.is_none() {
        if let Err(e) = dec.finish() {
            error = Some(e);
        }
        while let Ok(Some(ev)) = dec.poll_event() {
            events.push(ev);
        }
    }
    // Nothing comes out after the end, whatever it was.
    assert_eq!(dec.poll_event(), Ok(None));
    Outcome {
        events,
        error,
        finish_reason: dec.finish_reason().cloned(),
    }
}

fn decode(body: &[u8]) -> Outcome {
    decode_chunks([body])
}

/// The usage counts and the finish reason a decoded stream ended with.
fn ending(out: &Outcome) -> ((u64, u64), Option<FinishReason>) {
    let u = &out.response().usage;
    ((u.input_tokens, u.output_tokens), out.finish_reason.clone())
}

fn call(id: &str, tool: &str, args: serde_json::Value) -> ToolCall {
    let serde_json::Value::Object(args) = args else {
        panic!("args must be an object")
    };
    ToolCall::new(id, tool, args)
}

#[test]
fn openai_text_stream() {
    let out = decode(TEXT);
    assert_eq!(out.error, None);
    assert_eq!(
        out.text_deltas(),
        [
            "We",
            " open",
            " at",
            " eight",
            " and",
            " close",
            " at",
            " six",
            "—",
            "including",
            " weekends",
            "."
        ]
    );
    let r = out.response();
    assert_eq!(r.message.role, Role::Assistant);
    assert_eq!(
        r.message.parts,
        [Part::text(
            "We open at eight and close at six—including weekends."
        )]
    );
    assert_eq!(r.usage.model, "gpt-4.1-mini-2025-04-14");
    assert_eq!(ending(&out), ((27, 12), Some(FinishReason::Stop)));
    // The events are the deltas, then exactly one completed response, last.
    assert_eq!(out.events.len(), 13);
}

#[test]
fn openai_parallel_tool_calls_assembled_by_index() {
    let out = decode(PARALLEL);
    assert_eq!(out.error, None);
    assert!(out.text_deltas().is_empty());
    let r = out.response();
    assert_eq!(
        r.message.parts,
        [
            Part::ToolCall(call(
                "call_rH3pX9cQ2vLk8sT4nW6yB1dF",
                "get_weather",
                json!({"city": "Paris", "unit": "c"})
            )),
            Part::ToolCall(call(
                "call_Vb7mN2qR5tY8uI1oP4aS6dG0",
                "get_weather",
                json!({"city": "Tokyo", "unit": "c"})
            )),
        ]
    );
    assert_eq!(ending(&out), ((82, 51), Some(FinishReason::ToolCalls)));
}

#[test]
fn finish_reason_length_keeps_the_cut_text() {
    let out = decode(LENGTH);
    assert_eq!(out.error, None);
    assert_eq!(out.response().message.text(), "Our opening hours are from");
    assert_eq!(out.finish_reason, Some(FinishReason::Length));
}

#[test]
fn tool_arguments_cut_by_length_are_a_typed_error() {
    let out = decode(CUT_TOOL);
    let Some(ChatStreamError::InvalidToolCall { index, name, error }) = out.error else {
        panic!("expected InvalidToolCall, got {:?}", out.error);
    };
    assert_eq!((index, name.as_str()), (0, "get_weather"));
    assert!(error.contains("not valid JSON"), "{error}");
    assert!(
        !out.events
            .iter()
            .any(|e| matches!(e, ModelEvent::Completed(_)))
    );
    let model_error = ModelError::from(ChatStreamError::InvalidToolCall { index, name, error });
    assert!(matches!(model_error, ModelError::Provider(m) if m.contains("get_weather")));
}

#[test]
fn error_object_in_the_stream() {
    let out = decode(ERROR_EVENT);
    assert_eq!(out.text_deltas(), ["Let", " me", " check"]);
    let err = out.error.expect("an error");
    assert_eq!(
        err,
        ChatStreamError::Api {
            message: "The server had an error while processing your request. Sorry about that!"
                .into(),
            kind: Some("server_error".into()),
            code: None,
        }
    );
    assert!(
        matches!(ModelError::from(err), ModelError::Provider(m) if m.starts_with("The server had"))
    );
}

#[test]
fn vllm_error_object_with_a_numeric_code() {
    let out = decode(VLLM_ERROR);
    let err = out.error.expect("an error");
    assert!(
        matches!(&err, ChatStreamError::Api { code: Some(c), kind: Some(k), .. } if c == "400" && k == "BadRequestError")
    );
    assert!(matches!(
        ModelError::from(err),
        ModelError::Rejected { status: 400, .. }
    ));
}

#[test]
fn a_stream_cut_mid_chunk_is_incomplete() {
    let out = decode(CUT);
    assert_eq!(out.error, Some(ChatStreamError::Incomplete));
    assert_eq!(out.text_deltas().len(), 6); // the chunks before the cut still streamed
    assert_eq!(
        ModelError::from(ChatStreamError::Incomplete),
        ModelError::Incomplete
    );
}

#[test]
fn a_stream_without_done_is_incomplete() {
    let out = decode(NO_DONE);
    assert_eq!(out.error, Some(ChatStreamError::Incomplete));
    assert!(
        !out.events
            .iter()
            .any(|e| matches!(e, ModelEvent::Completed(_)))
    );
}

#[test]
fn invalid_json_is_a_typed_error() {
    let out = decode(INVALID);
    assert!(
        matches!(out.error, Some(ChatStreamError::InvalidChunk { .. })),
        "{:?}",
        out.error
    );
}

#[test]
fn vllm_reasoning_then_a_tool_call() {
    let out = decode(VLLM);
    assert_eq!(out.error, None);
    let reasoning = "\nOkay, the user wants the weather in Paris. I should call get_weather.\n";
    assert_eq!(out.reasoning(), reasoning);
    assert_eq!(out.text_deltas(), ["\n\n"]);
    let r = out.response();
    let Part::Reasoning(rp) = &r.message.parts[0] else {
        panic!("a reasoning part first: {:?}", r.message.parts)
    };
    assert_eq!(rp.model_id, "Qwen/Qwen3-8B");
    assert_eq!(
        rp.summary,
        [Part::Text(TextPart {
            text: reasoning.into()
        })]
    );
    assert_eq!(r.message.parts[1], Part::text("\n\n"));
    assert_eq!(
        r.message.parts[2],
        Part::ToolCall(call(
            "chatcmpl-tool-5b1e9f3a7c2d4e8f",
            "get_weather",
            json!({"city": "Paris", "unit": "c"})
        ))
    );
    assert_eq!(ending(&out), ((241, 57), Some(FinishReason::ToolCalls)));
}

#[test]
fn ollama_reasoning_field_and_a_whole_tool_call() {
    let out = decode(OLLAMA);
    assert_eq!(out.error, None);
    assert_eq!(out.reasoning(), "The user asks about Paris weather.");
    assert!(out.text_deltas().is_empty()); // `"content":""` in every delta is no text
    let r = out.response();
    assert_eq!(r.message.tool_calls().count(), 1);
    assert_eq!(
        r.message.tool_calls().next(),
        Some(&call(
            "call_x8k2m4pq",
            "get_weather",
            json!({"city": "Paris"})
        ))
    );
    assert_eq!(r.usage.model, "qwen3:8b");
    assert_eq!((r.usage.input_tokens, r.usage.output_tokens), (163, 48));
}

#[test]
fn llamacpp_reasoning_content_and_timings() {
    let out = decode(LLAMACPP);
    assert_eq!(out.error, None);
    assert_eq!(out.reasoning(), "User greets. Reply briefly.");
    assert_eq!(out.response().message.text(), "Hello! How can I help?");
    assert_eq!(out.response().usage.output_tokens, 14);
    assert_eq!(out.finish_reason, Some(FinishReason::Stop));
}

#[test]
fn byte_by_byte_equals_whole() {
    for body in ALL {
        let whole = decode(body);
        let bytes = decode_chunks(body.chunks(1));
        assert_eq!(whole, bytes);
    }
}

#[test]
fn server_variants_in_single_chunks() {
    // Shapes no fixture shows: usage with `choices: null` or no `choices`, a call without
    // `index`, arguments sent as an object, content as an array of parts, `reasoning` and
    // `reasoning_content` both (the latter wins), choices of n > 1, data after [DONE].
    let body = concat!(
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":[{\"type\":\"text\",\"text\":\"A\"},{\"type\":\"thinking\",\"thinking\":\"x\"}]}}]}\n\n",
        "data: {\"choices\":[{\"index\":1,\"delta\":{\"content\":\"other choice\"}}]}\n\n",
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"reasoning_content\":\"r\",\"reasoning\":\"r\"}}]}\n\n",
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"id\":\"c1\",\"function\":{\"name\":\"f\",\"arguments\":{\"a\":1}}},{\"function\":{\"name\":\"g\",\"arguments\":null}}]}}]}\n\n",
        ": keep-alive comment\n\n",
        "data: \n\n",
        "data: {\"choices\":null,\"usage\":{\"prompt_tokens\":1,\"completion_tokens\":2,\"completion_tokens_details\":{\"reasoning_tokens\":1}}}\n\n",
        "data: {\"model\":\"m\"}\n\n",
        "data: [DONE]\n\n",
        "data: {not json after the end}\n\n",
    );
    let out = decode(body.as_bytes());
    assert_eq!(out.error, None);
    assert_eq!(out.text_deltas(), ["A"]);
    assert_eq!(out.reasoning(), "r");
    let r = out.response();
    let calls: Vec<_> = r.message.tool_calls().cloned().collect();
    assert_eq!(
        calls,
        [
            call("c1", "f", json!({"a": 1})),
            call("call_1", "g", json!({}))
        ]
    );
    assert_eq!(
        (
            r.usage.input_tokens,
            r.usage.output_tokens,
            r.usage.reasoning_tokens
        ),
        (1, 2, 1)
    );
    assert_eq!(r.usage.model, "m");
}

#[test]
fn a_tool_call_without_a_name_or_with_non_object_arguments() {
    let nameless = "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"{}\"}}]}}]}\n\ndata: [DONE]\n\n";
    let out = decode(nameless.as_bytes());
    assert!(
        matches!(out.error, Some(ChatStreamError::InvalidToolCall { ref error, .. }) if error == "no function name")
    );
    let array = "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"name\":\"f\",\"arguments\":\"[1]\"}}]}}]}\n\ndata: [DONE]\n\n";
    let out = decode(array.as_bytes());
    assert!(
        matches!(out.error, Some(ChatStreamError::InvalidToolCall { ref error, .. }) if error.contains("an array"))
    );
}

#[test]
fn limits_are_errors() {
    let cfg = ChatStreamConfig {
        max_response_bytes: 10,
        ..ChatStreamConfig::DEFAULT
    };
    let mut dec = ChatStreamDecoder::with_config(cfg);
    dec.push(TEXT);
    let mut got = None;
    while got.is_none() {
        match dec.poll_event() {
            Ok(Some(_)) => {}
            Ok(None) => break,
            Err(e) => got = Some(e),
        }
    }
    assert_eq!(got, Some(ChatStreamError::TooLarge { limit: 10 }));
    assert_eq!(dec.poll_event(), Ok(None));
    assert_eq!(dec.finish(), Ok(())); // the error was already reported

    let cfg = ChatStreamConfig {
        max_tool_calls: 1,
        ..ChatStreamConfig::DEFAULT
    };
    let mut dec = ChatStreamDecoder::with_config(cfg);
    dec.push(PARALLEL);
    let err = std::iter::from_fn(|| Some(dec.poll_event()))
        .find_map(|r| match r {
            Ok(None) => Some(None),
            Err(e) => Some(Some(e)),
            Ok(Some(_)) => None,
        })
        .flatten();
    assert_eq!(err, Some(ChatStreamError::TooManyToolCalls { limit: 1 }));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Any chunking of a recorded stream gives the same events, the same response, the same
    /// error.
    #[test]
    fn any_chunking_gives_the_same_outcome(
        which in 0..ALL.len(),
        cuts in proptest::collection::vec(any::<prop::sample::Index>(), 0..24),
    ) {
        let body = ALL[which];
        let mut at: Vec<usize> = cuts.iter().map(|i| i.index(body.len() + 1)).collect();
        at.sort_unstable();
        let mut chunks = Vec::new();
        let mut start = 0;
        for end in at {
            chunks.push(&body[start..end]);
            start = end;
        }
        chunks.push(&body[start..]);
        prop_assert_eq!(decode_chunks(chunks), decode(body));
    }

    /// Arbitrary bytes never panic, in any chunking, and end in a response or an error.
    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..2048), split in any::<prop::sample::Index>()) {
        let at = split.index(bytes.len() + 1);
        let out = decode_chunks([&bytes[..at], &bytes[at..]]);
        let completed = matches!(out.events.last(), Some(ModelEvent::Completed(_)));
        prop_assert!(completed || out.error.is_some());
    }

    /// A recorded stream with bytes flipped never panics either.
    #[test]
    fn mangled_recordings_never_panic(
        which in 0..ALL.len(),
        flips in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..8),
    ) {
        let mut body = ALL[which].to_vec();
        for (i, b) in flips {
            let i = i.index(body.len());
            body[i] = b;
        }
        let _ = decode_chunks(body.chunks(13));
    }
}

/// The request body against the shape the OpenAI API reference documents for
/// `POST /v1/chat/completions`: messages by role (`tool` with `tool_call_id`, an assistant's
/// `tool_calls` with JSON-text arguments), function tools, tool_choice, streaming options,
/// parameters with their JSON types.
#[test]
fn request_body_has_the_documented_shape() {
    let schema = json!({
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"]
    });
    let serde_json::Value::Object(schema) = schema else {
        unreachable!()
    };
    let mut assistant = Message {
        role: Role::Assistant,
        parts: vec![
            Part::Reasoning(Default::default()),
            Part::text("Checking."),
            Part::ToolCall(call("call_1", "get_weather", json!({"city": "Paris"}))),
            Part::ToolCall(call("call_2", "get_weather", json!({"city": "Tokyo"}))),
        ],
    };
    let mut req = ModelRequest::new(vec![
        Message::system("You are a weather desk."),
        Message::user("Weather in Paris and Tokyo?"),
        assistant.clone(),
        Message::tool_result(ToolResult::ok_json("call_1", json!({"celsius": 21}))),
        Message::tool_result(ToolResult::error("call_2", "station offline")),
    ])
    .with_model("a-harness-label")
    .with_tools(vec![ToolDefinition {
        name: "get_weather".into(),
        description: "Current weather in a city".into(),
        input_schema: Some(schema),
    }]);
    req.tool_choice = Some(ToolChoice {
        mode: ToolChoiceMode::Required,
        name: "get_weather".into(),
    });
    for (k, v) in [
        ("temperature", "0.2"),
        ("max_tokens", "256"),
        ("parallel_tool_calls", "true"),
        ("stop", "END"),
        ("user", "42"),
        ("response_format", r#"{"type":"json_object"}"#),
        ("stream", "false"), // ignored: the codec streams
        ("model", "other"),  // ignored: the argument wins
    ] {
        req.params.insert(k.into(), v.into());
    }
    let expected = json!({
        "model": "gpt-4.1-mini",
        "messages": [
            {"role": "system", "content": "You are a weather desk."},
            {"role": "user", "content": "Weather in Paris and Tokyo?"},
            {"role": "assistant", "content": "Checking.", "tool_calls": [
                {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\":\"Paris\"}"}},
                {"id": "call_2", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\":\"Tokyo\"}"}}
            ]},
            {"role": "tool", "tool_call_id": "call_1", "content": "{\"celsius\":21}"},
            {"role": "tool", "tool_call_id": "call_2", "content": "{\"error\":\"station offline\"}"}
        ],
        "tools": [{"type": "function", "function": {
            "name": "get_weather",
            "description": "Current weather in a city",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
        }}],
        "tool_choice": {"type": "function", "function": {"name": "get_weather"}},
        "stream": true,
        "stream_options": {"include_usage": true},
        "temperature": 0.2,
        "max_tokens": 256,
        "parallel_tool_calls": true,
        "stop": "END",
        "user": "42",
        "response_format": {"type": "json_object"}
    });
    assert_eq!(request_json(&req, "gpt-4.1-mini"), expected);

    // An assistant turn of tool calls only has `content: null`; the other tool choices.
    assistant.parts.retain(|p| matches!(p, Part::ToolCall(_)));
    let mut req =
        ModelRequest::new(vec![assistant]).with_tools(vec![ToolDefinition::new("get_weather", "")]);
    for (mode, want) in [
        (ToolChoiceMode::Auto, json!("auto")),
        (ToolChoiceMode::None, json!("none")),
        (ToolChoiceMode::Required, json!("required")),
    ] {
        req.tool_choice = Some(ToolChoice {
            mode,
            name: String::new(),
        });
        let v = request_json(&req, "m");
        assert_eq!(v["tool_choice"], want);
        assert_eq!(v["messages"][0]["content"], serde_json::Value::Null);
        assert_eq!(
            v["tools"][0],
            json!({"type": "function", "function": {"name": "get_weather"}})
        );
    }
    // No tools: neither `tools` nor `tool_choice`.
    req.tools.clear();
    let v = request_json(&req, "m");
    assert!(v.get("tools").is_none() && v.get("tool_choice").is_none());
}

#[test]
fn request_images_and_files() {
    use harness_core::message::FilePart;
    let m = Message {
        role: Role::User,
        parts: vec![
            Part::text("What is this?"),
            Part::File(FilePart {
                mime: "image/png".into(),
                bytes: Some(vec![0x89, b'P', b'N', b'G']),
                ..Default::default()
            }),
            Part::File(FilePart {
                mime: "image/jpeg".into(),
                uri: "https://example.com/cat.jpg".into(),
                ..Default::default()
            }),
            Part::File(FilePart {
                mime: "application/pdf".into(),
                bytes: Some(b"%PDF".to_vec()),
                name: "a.pdf".into(),
                ..Default::default()
            }),
        ],
    };
    let v = request_json(&ModelRequest::new(vec![m]), "m");
    assert_eq!(
        v["messages"][0]["content"],
        json!([
            {"type": "text", "text": "What is this?"},
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw=="}},
            {"type": "image_url", "image_url": {"url": "https://example.com/cat.jpg"}},
            {"type": "file", "file": {"filename": "a.pdf", "file_data": "data:application/pdf;base64,JVBERg=="}}
        ])
    );
    let mut empty_output = ToolResult::ok("c", JsonObject::new());
    empty_output.output = None;
    let v = request_json(
        &ModelRequest::new(vec![Message::tool_result(empty_output)]),
        "m",
    );
    assert_eq!(v["messages"][0]["content"], "{}");
}

#[test]
fn http_errors_from_recorded_bodies() {
    let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_758_876_342);
    let wait = retry_after(Some("20"), None, now);
    let err = http_error(429, wait, fixture!("http_429_body.json"));
    let ModelError::Retryable {
        status: 429,
        message,
        retry_after_ms: Some(20_000),
    } = &err
    else {
        panic!("{err:?}")
    };
    assert!(message.starts_with("Rate limit reached for gpt-4.1-mini"));
    assert_eq!(err.retry_after(), Some(Duration::from_secs(20)));

    let date = httpdate_in(now, 90);
    assert_eq!(
        retry_after(Some(&date), None, now),
        Some(Duration::from_secs(90))
    );
    assert_eq!(
        retry_after(Some("Thu, 01 Jan 1970 00:00:00 GMT"), None, now),
        Some(Duration::ZERO)
    );

    let err = http_error(401, None, fixture!("http_401_body.json"));
    assert!(
        matches!(&err, ModelError::Rejected { status: 401, message } if message.starts_with("Incorrect API key"))
    );
    assert!(!err.is_retryable());
    assert!(matches!(
        http_error(403, None, b""),
        ModelError::Rejected { status: 403, ref message } if message == "HTTP 403"
    ));

    let err = http_error(500, None, fixture!("http_500_body.json"));
    assert!(
        matches!(&err, ModelError::Retryable { status: 500, retry_after_ms: None, message } if message.starts_with("The server had an error"))
    );
    assert!(err.is_retryable());
    // A proxy's HTML page: its text, cut.
    let page = format!("<html>{}</html>", "x".repeat(5000));
    let ModelError::Retryable { message, .. } = http_error(502, None, page.as_bytes()) else {
        panic!()
    };
    assert!(message.len() < 1100 && message.starts_with("<html>"));
    // vLLM's top-level error object.
    let err = http_error(
        404,
        None,
        br#"{"object":"error","message":"The model `x` does not exist.","type":"NotFoundError","param":null,"code":404}"#,
    );
    assert!(
        matches!(err, ModelError::Rejected { status: 404, ref message } if message == "The model `x` does not exist.")
    );
}

fn httpdate_in(now: SystemTime, secs: u64) -> String {
    // 1_758_876_342 + 90 s = Fri, 26 Sep 2025 08:47:12 GMT
    assert_eq!(
        now.duration_since(SystemTime::UNIX_EPOCH)
            .unwrap()
            .as_secs()
            + secs,
        1_758_876_432
    );
    "Fri, 26 Sep 2025 08:47:12 GMT".to_owned()
}

#[test]
fn model_error_serde_round_trip() {
    for e in [
        ModelError::Retryable {
            status: 429,
            message: "slow down".into(),
            retry_after_ms: Some(1500),
        },
        ModelError::Retryable {
            status: 503,
            message: "down".into(),
            retry_after_ms: None,
        },
        ModelError::Rejected {
            status: 401,
            message: "bad key".into(),
        },
    ] {
        let s = serde_json::to_string(&e).unwrap();
        assert_eq!(serde_json::from_str::<ModelError>(&s).unwrap(), e);
    }
    assert_eq!(
        serde_json::to_value(ModelError::Rejected {
            status: 401,
            message: "bad key".into()
        })
        .unwrap(),
        json!({"rejected": {"status": 401, "message": "bad key"}})
    );
}
