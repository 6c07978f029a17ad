//! Server-sent events: the WHATWG `text/event-stream` format, decoded and encoded sans-IO.
//!
//! [`SseDecoder`] turns bytes into [`SseEvent`]s with the exact WHATWG HTML parsing rules;
//! [`SseEncoder`] writes events, ids, reconnection times and comments that the decoder reads
//! back identically. Both leave the socket to you.
//!
//! ```
//! use harness_core::sse::{SseDecoder, SseEncoder, SseEvent};
//!
//! let mut wire = Vec::new();
//! SseEncoder::event(&mut wire, &SseEvent::new(r#"{"type":"response.created"}"#).with_id("0"))?;
//!
//! let mut dec = SseDecoder::new();
//! for chunk in wire.chunks(3) {           // any chunking gives the same events
//!     dec.push(chunk);
//! }
//! let ev = dec.poll_event().unwrap().unwrap();
//! assert_eq!(ev.data(), r#"{"type":"response.created"}"#);
//! assert_eq!(dec.last_event_id(), Some("0"));
//! dec.finish().unwrap();
//! # Ok::<(), harness_core::sse::SseEncodeError>(())
//! ```

mod decoder;
mod encoder;
mod event;
mod fields;

pub use decoder::{SseConfig, SseDecoder, SseFeed};
pub use encoder::{SseEncodeError, SseEncoder};
pub use event::{DEFAULT_EVENT_TYPE, SseError, SseEvent, SseEventRef};
