//! The tamper-evident hash chain: each record's `content_hash` is the lowercase hex SHA-256 of
//! the RFC 8785 (JCS) canonical JSON of `{"event": <event as proto3-JSON>, "prev_hash":
//! <previous record's content_hash, "" for seq 1>, "seq": <seq as a decimal string>}`, exactly
//! as agentsessions computes it (`canon/canon.go`), so a journal written here verifies by the
//! same rules as one written there.
//!
//! ```
//! use harness_core::event::{Event, EventBody};
//! use harness_core::message::Message;
//! use harness_sessions::hash::{canonical_event, content_hash};
//!
//! let ev = Event::new("exec-1", EventBody::Output(Message::assistant("hello")));
//! let canon = canonical_event(&ev).unwrap();
//! assert_eq!(canon, r#"{"execution_id":"exec-1","kind":"EVENT_OUTPUT","message":{"parts":[{"text":{"text":"hello"}}],"role":"assistant"}}"#);
//! let h = content_hash(&canon, None, 1);
//! assert_eq!(h.to_string().len(), 64);
//! ```

use std::fmt;
use std::str::FromStr;

use harness_core::event::Event;
use sha2::{Digest, Sha256};

/// A SHA-256 digest: a record's `content_hash` (and the next record's `prev_hash`).
/// Displayed and parsed as 64 lowercase hex digits.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ContentHash(pub [u8; 32]);

impl fmt::Debug for ContentHash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ContentHash({self})")
    }
}

const HEX: &[u8; 16] = b"0123456789abcdef";

/// Appends the lowercase hex form of `bytes` to `out`.
pub fn hex_into(bytes: &[u8], out: &mut String) {
    out.reserve(bytes.len() * 2);
    for b in bytes {
        out.push(char::from(HEX[usize::from(b >> 4)]));
        out.push(char::from(HEX[usize::from(b & 0x0f)]));
    }
}

/// The lowercase hex form of `bytes`.
pub fn hex(bytes: &[u8]) -> String {
    let mut s = String::with_capacity(bytes.len() * 2);
    hex_into(bytes, &mut s);
    s
}

impl fmt::Display for ContentHash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut buf = [0u8; 64];
        for (i, b) in self.0.iter().enumerate() {
            buf[2 * i] = HEX[usize::from(b >> 4)];
            buf[2 * i + 1] = HEX[usize::from(b & 0x0f)];
        }
        // Every byte of `buf` is an ASCII hex digit.
        f.write_str(std::str::from_utf8(&buf).map_err(|_| fmt::Error)?)
    }
}

/// A string that is not 64 lowercase hex digits.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("not a content hash (64 lowercase hex digits)")]
pub struct ContentHashError;

impl FromStr for ContentHash {
    type Err = ContentHashError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        ContentHash::from_hex(s.as_bytes()).ok_or(ContentHashError)
    }
}

/// Lowercase hex digit values; 0xff for every other byte.
static UNHEX: [u8; 256] = {
    let mut t = [0xffu8; 256];
    let mut i = 0;
    while i < 10 {
        t[b'0' as usize + i] = i as u8;
        i += 1;
    }
    let mut i = 0;
    while i < 6 {
        t[b'a' as usize + i] = 10 + i as u8;
        i += 1;
    }
    t
};

impl ContentHash {
    /// Parses 64 lowercase hex digits (the only form agentsessions writes).
    pub fn from_hex(s: &[u8]) -> Option<Self> {
        if s.len() != 64 {
            return None;
        }
        let mut out = [0u8; 32];
        let mut bad = 0u8;
        for (o, pair) in out.iter_mut().zip(s.chunks_exact(2)) {
            let (hi, lo) = (UNHEX[usize::from(pair[0])], UNHEX[usize::from(pair[1])]);
            bad |= hi | lo;
            *o = (hi << 4) | (lo & 0x0f);
        }
        (bad & 0xf0 == 0).then_some(ContentHash(out))
    }

    /// SHA-256 of `bytes`.
    pub fn of(bytes: &[u8]) -> Self {
        ContentHash(Sha256::digest(bytes).into())
    }
}

pub use crate::depth::MAX_EVENT_DEPTH;

/// Why an event could not be canonicalized (a number JSON cannot hold, such as NaN, in a
/// tool argument; JSON nested deeper than [`MAX_EVENT_DEPTH`]).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("event cannot be canonicalized: {0}")]
pub struct CanonicalError(pub String);

/// The RFC 8785 canonical JSON of an event's proto3-JSON form: the bytes the chain hashes,
/// and the form the file journal stores.
///
/// An event whose JSON nests deeper than [`MAX_EVENT_DEPTH`] arrays and objects is refused:
/// the journal could store it but never read it back. One far deeper is refused before it is
/// serialized (which recurses once per level).
pub fn canonical_event(event: &Event) -> Result<String, CanonicalError> {
    let too_deep = || CanonicalError(crate::depth::too_deep());
    let nesting = crate::depth::nesting(event);
    if nesting > MAX_EVENT_DEPTH {
        return Err(too_deep());
    }
    let canonical = crate::jcs::to_string(event).map_err(|e| CanonicalError(e.to_string()))?;
    if crate::depth::may_exceed(nesting)
        && crate::depth::json_depth(canonical.as_bytes()) > MAX_EVENT_DEPTH
    {
        return Err(too_deep());
    }
    Ok(canonical)
}

/// The RFC 8785 canonical JSON of any JSON value.
pub fn canonical_value(value: &serde_json::Value) -> Result<String, CanonicalError> {
    crate::jcs::to_string(value).map_err(|e| CanonicalError(e.to_string()))
}

/// Feeds the canonical wrapper `{"event":…,"prev_hash":"…","seq":"…"}` to `hasher`.
///
/// Because `canonical_event` is already canonical, its keys sort as `event` < `prev_hash` <
/// `seq`, and hex digits and decimal digits need no escaping, this concatenation *is* the
/// RFC 8785 form of the wrapper object: no second canonicalization pass is needed.
fn feed(hasher: &mut Sha256, canonical_event: &[u8], prev: Option<&ContentHash>, seq: u64) {
    hasher.update(b"{\"event\":");
    hasher.update(canonical_event);
    hasher.update(b",\"prev_hash\":\"");
    if let Some(p) = prev {
        let mut buf = [0u8; 64];
        for (i, b) in p.0.iter().enumerate() {
            buf[2 * i] = HEX[usize::from(b >> 4)];
            buf[2 * i + 1] = HEX[usize::from(b & 0x0f)];
        }
        hasher.update(buf);
    }
    hasher.update(b"\",\"seq\":\"");
    hasher.update(itoa::Buffer::new().format(seq));
    hasher.update(b"\"}");
}

/// The `content_hash` of the record at `seq` whose event's canonical JSON is
/// `canonical_event`, chained onto `prev` (`None` for seq 1).
pub fn content_hash(canonical_event: &str, prev: Option<&ContentHash>, seq: u64) -> ContentHash {
    content_hash_bytes(canonical_event.as_bytes(), prev, seq)
}

/// [`content_hash`] over raw bytes (what `verify` reads from storage).
pub fn content_hash_bytes(
    canonical_event: &[u8],
    prev: Option<&ContentHash>,
    seq: u64,
) -> ContentHash {
    let mut h = Sha256::new();
    feed(&mut h, canonical_event, prev, seq);
    ContentHash(h.finalize().into())
}

/// The `content_hash` of an event given as any JSON value (for example a record read from
/// another implementation): canonicalizes `{"event", "prev_hash", "seq"}` with RFC 8785 and
/// hashes it, with no shortcut.
pub fn content_hash_of_value(
    event: &serde_json::Value,
    prev_hash: &str,
    seq: &str,
) -> Result<ContentHash, CanonicalError> {
    let wrapper = serde_json::json!({"event": event, "prev_hash": prev_hash, "seq": seq});
    Ok(ContentHash::of(canonical_value(&wrapper)?.as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_round_trip_and_rejects() {
        let h = ContentHash::of(b"abc");
        assert_eq!(
            h.to_string(),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert_eq!(h.to_string().parse::<ContentHash>(), Ok(h));
        assert!(
            "BA7816BF8F01CFEA414140DE5DAE2223B00361A396177A9CB410FF61F20015AD"
                .parse::<ContentHash>()
                .is_err()
        );
        assert!("ab".parse::<ContentHash>().is_err());
        assert!("zz".repeat(32).parse::<ContentHash>().is_err());
    }

    #[test]
    fn shortcut_equals_full_canonicalization() {
        let ev = serde_json::json!({"kind":"EVENT_OUTPUT","message":{"role":"assistant","parts":[{"text":{"text":"é \u{1F600} <&>"}}]},"execution_id":"x"});
        let canon = canonical_value(&ev).unwrap();
        let prev = ContentHash::of(b"p");
        assert_eq!(
            content_hash(&canon, Some(&prev), 42),
            content_hash_of_value(&ev, &prev.to_string(), "42").unwrap()
        );
        assert_eq!(
            content_hash(&canon, None, 1),
            content_hash_of_value(&ev, "", "1").unwrap()
        );
    }
}
