//! Streamed events: one JSON object per SSE message, with a `type` and a `sequence_number`.
//!
//! The schema's `Event` is one flat object whose fields depend on its `type`; [`StreamEvent`]
//! mirrors it (decoded in one pass, strings borrowed from the received JSON where no escape
//! forced a copy) and [`StreamEvent::kind`] gives the typed view to `match` on. The JSON text as
//! received is kept ([`StreamEvent::raw_json`]), so unknown fields and unknown event types are
//! never lost: a proxy can pass an event on unchanged. A [`StreamEventRef`] is the same event
//! lent by [`StreamFeed::next_ref`](crate::StreamFeed::next_ref), its text the fed bytes.

/// The hand-written deserializer ([`StreamEvent::parse`]).
mod de;
mod flat;
/// The typed event, owned and lent.
mod types;
/// The lent view's accessors and the typed view.
mod view;

pub(crate) use de::LentSlot;
pub use types::{EventType, StreamEvent, StreamEventRef};
pub use view::StreamEventKind;
