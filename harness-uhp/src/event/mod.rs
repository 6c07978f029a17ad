//! Streamed events: one JSON object per SSE message, with a `type` and a `sequence_number`.
//!
//! The schema's `Event` is one flat object whose fields depend on its `type`; [`StreamEvent`]
//! mirrors it (decoded in one pass, strings borrowed from the received JSON where no escape
//! forced a copy) and [`StreamEvent::kind`] gives the typed view to `match` on. The JSON text as
//! received is kept ([`StreamEvent::raw_json`]), so unknown fields and unknown event types are
//! never lost: a proxy can pass an event on unchanged.

/// The hand-written deserializer ([`StreamEvent::parse`]).
mod de;
mod flat;
/// The typed event and its view.
mod types;

pub(crate) use de::LentSlot;
pub use types::{EventType, StreamEvent, StreamEventKind, StreamEventRef};
