//! A real model: the OpenAI Chat Completions wire format, streamed. OpenAI serves it, and so
//! do vLLM, Ollama, llama.cpp's `llama-server`, DeepSeek, OpenRouter, LM Studio and most
//! other model servers, so one codec reaches all of them.
//!
//! Two layers, as everywhere in harness-rs:
//!
//! - **The codec, sans-IO, in the default build.** [`request_json`] / [`request_body`] turn a
//!   [`ModelRequest`](crate::message::ModelRequest) into the body of
//!   `POST {base}/chat/completions` (`stream: true`, with the usage chunk);
//!   [`ChatStreamDecoder`] turns the response body's bytes, pushed in any chunks, into
//!   [`ModelEvent`](crate::model::ModelEvent)s: text deltas, reasoning deltas, then the
//!   completed message with its tool calls and usage; [`http_error`] and [`retry_after`] turn an
//!   HTTP error answer into a [`ModelError`](crate::model::ModelError) that says whether and
//!   when to retry. No socket, no clock (the time a `Retry-After` date is read against is a
//!   parameter).
//! - **The transport, behind the `openai` feature:** `OpenAiModel`, a
//!   [`Model`](crate::model::Model) over hyper and rustls, configured from `OPENAI_API_KEY`,
//!   `OPENAI_BASE_URL` and a model name, with connect, first-byte and idle timeouts.
//!
//! The codec on bytes, as any HTTP client would hand them over:
//!
//! ```
//! use harness_core::message::{Message, ModelRequest};
//! use harness_core::model::ModelEvent;
//! use harness_core::openai::{ChatStreamDecoder, request_body};
//!
//! // What to send: POST {base}/chat/completions with this body.
//! let body = request_body(&ModelRequest::new(vec![Message::user("Weather in Paris?")]), "gpt-4.1-mini");
//! let sent: serde_json::Value = serde_json::from_slice(&body).unwrap();
//! assert_eq!((&sent["model"], &sent["stream"]), (&"gpt-4.1-mini".into(), &true.into()));
//!
//! // What comes back, here one tool call whose arguments arrive in three pieces.
//! let answer = concat!(
//!     r#"data: {"choices":[{"index":0,"delta":{"role":"assistant","content":null,"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"get_weather","arguments":""}}]},"finish_reason":null}]}"#, "\n\n",
//!     r#"data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"ci"}}]},"finish_reason":null}]}"#, "\n\n",
//!     r#"data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"ty\":\"Par"}}]},"finish_reason":null}]}"#, "\n\n",
//!     r#"data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"is\"}"}}]},"finish_reason":"tool_calls"}]}"#, "\n\n",
//!     "data: [DONE]\n\n",
//! );
//! let mut dec = ChatStreamDecoder::new();
//! dec.push(answer.as_bytes());
//! let Some(ModelEvent::Completed(resp)) = dec.poll_event()? else { panic!("one completed response") };
//! let call = resp.message.tool_calls().next().expect("a tool call");
//! assert_eq!((call.id.as_str(), call.tool.as_str()), ("call_1", "get_weather"));
//! assert_eq!(call.args["city"], "Paris");
//! dec.finish()?;
//! # Ok::<(), harness_core::openai::ChatStreamError>(())
//! ```
//!
//! Where the shapes come from: the OpenAI API reference (the chat completion chunk object,
//! `stream_options.include_usage`, tool calls, error objects), vLLM's OpenAI-compatible server
//! (`reasoning_content` / `reasoning`, `choices: null` in the usage chunk, its error objects),
//! Ollama's OpenAI compatibility (`reasoning`, whole tool calls in one delta) and llama.cpp's
//! `llama-server` (`reasoning_content`, `timings`). The recorded streams the tests replay are
//! in `harness-core/tests/fixtures/openai/`, each with its provenance in its README.

mod chunk;
mod decoder;
mod request;
mod status;
#[cfg(feature = "openai")]
mod transport;

pub use decoder::{ChatStreamConfig, ChatStreamDecoder, ChatStreamError, FinishReason};
pub use request::{request_body, request_json};
pub use status::{http_error, retry_after};
#[cfg(feature = "openai")]
pub use transport::{DEFAULT_BASE_URL, OpenAiConfig, OpenAiConfigError, OpenAiModel};
