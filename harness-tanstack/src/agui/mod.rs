//! AG-UI 1.0 as typed Rust: the 31 events ([`AguiEvent`]) and the types they carry.
//!
//! Wire names, required and optional fields and key order are `@ag-ui/core@1.0.0`'s zod
//! schemas (where the Python library is laxer, TypeScript wins): optional fields reject
//! `null`, `timestamp` is an integer within ±(2^53−1), `rawEvent` and `result` are never
//! `null`, `metadata` is an object, JSON Pointers are checked. Every object is open: unknown
//! keys are kept in order ([`Extra`](crate::Extra)) and written back after the declared ones,
//! so a valid event re-encodes to the bytes the reference encoders write.

mod event;
mod types;

pub use event::*;
pub use types::*;

/// The AG-UI protocol version these types implement.
pub const PROTOCOL_VERSION: &str = "1.0";
