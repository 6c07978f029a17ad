//! Opaque stream positions.

use std::fmt;
use std::sync::Arc;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// An opaque position in an event stream, as a server hands it out (an SSE `id:`, the
/// `cursor` of a TanStack `harness.event` frame, a UHP `Last-Event-ID`).
///
/// A client compares cursors for equality, stores them and sends them back; it never parses
/// them, orders them or does arithmetic on them, because the server is free to change what
/// they look like. `Cursor` therefore offers exactly that: equality, hashing, cloning (cheap,
/// the text is shared), display and serde as a plain JSON string, and no ordering.
///
/// ```
/// use harness_core::Cursor;
///
/// let c = Cursor::new("4");
/// assert_eq!(c.as_str(), "4");
/// assert_eq!(c, Cursor::from("4".to_string()));
/// assert_eq!(serde_json::to_string(&c).unwrap(), "\"4\"");
/// ```
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Cursor(Arc<str>);

impl Cursor {
    /// A cursor with the given text.
    pub fn new(text: impl AsRef<str>) -> Self {
        Cursor(Arc::from(text.as_ref()))
    }

    /// The text to send back to the server.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl Default for Cursor {
    /// The empty cursor: no position yet (what a client holds before its first event).
    fn default() -> Self {
        Cursor::new("")
    }
}

impl fmt::Debug for Cursor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Cursor({:?})", &*self.0)
    }
}

impl fmt::Display for Cursor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl From<&str> for Cursor {
    fn from(s: &str) -> Self {
        Cursor::new(s)
    }
}

impl From<String> for Cursor {
    fn from(s: String) -> Self {
        Cursor(Arc::from(s))
    }
}

impl From<Arc<str>> for Cursor {
    fn from(s: Arc<str>) -> Self {
        Cursor(s)
    }
}

impl AsRef<str> for Cursor {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl PartialEq<str> for Cursor {
    fn eq(&self, other: &str) -> bool {
        &*self.0 == other
    }
}

impl PartialEq<&str> for Cursor {
    fn eq(&self, other: &&str) -> bool {
        &*self.0 == *other
    }
}

impl Serialize for Cursor {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.0)
    }
}

impl<'de> Deserialize<'de> for Cursor {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        String::deserialize(d).map(Cursor::from)
    }
}
