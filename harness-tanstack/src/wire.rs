//! The protocol's own readers for wire fields: JavaScript's safe integers, JSON Pointers and
//! cursors. A `wire_struct!` field names one as its reader, `req(crate::wire::pointer)`.
//!
//! The machinery itself is [`harness_core::wire`]; its [`Json`](crate::Json) (a value kept as
//! written), [`Extra`](crate::Extra) and [`UnknownObject`](crate::UnknownObject) are this
//! crate's too. Fields that the AG-UI schema types as "any JSON" (`STATE_SNAPSHOT.snapshot`,
//! `CUSTOM.value`, `metadata`, …) are `Json`: they re-serialize byte for byte, keys in their
//! order, and cost one copy to decode.
//!
//! ```
//! use harness_tanstack::Json;
//! let j = Json::from_text(r#"{"b":1,"a":[true,null]}"#).unwrap();
//! assert_eq!(j.get(), r#"{"b":1,"a":[true,null]}"#); // as written, keys in their order
//! assert_eq!(j.to_value()["a"][0], true);
//! ```

use std::fmt;

use harness_core::wire::Key;
use serde::Deserialize;
use serde::de::{self, Deserializer, Visitor};

/// Largest integer JavaScript represents exactly: 2^53 − 1.
pub const MAX_SAFE_INTEGER: i64 = 9_007_199_254_740_991;

/// An integer in ±(2^53 − 1); an integral float (`1.0`) is accepted as JavaScript does.
pub(crate) fn safe_int<'de, D: Deserializer<'de>>(d: D, min: i64) -> Result<i64, D::Error> {
    struct V(i64);
    impl Visitor<'_> for V {
        type Value = i64;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            write!(f, "an integer in {}..={MAX_SAFE_INTEGER}", self.0)
        }
        fn visit_i64<E: de::Error>(self, v: i64) -> Result<i64, E> {
            if v >= self.0 && v <= MAX_SAFE_INTEGER {
                Ok(v)
            } else {
                Err(E::custom(format_args!("integer {v} out of range")))
            }
        }
        fn visit_u64<E: de::Error>(self, v: u64) -> Result<i64, E> {
            match i64::try_from(v) {
                Ok(v) => self.visit_i64(v),
                Err(_) => Err(E::custom(format_args!("integer {v} out of range"))),
            }
        }
        fn visit_f64<E: de::Error>(self, v: f64) -> Result<i64, E> {
            // ok: the range check makes the cast exact.
            if v.fract() == 0.0 && v >= self.0 as f64 && v <= MAX_SAFE_INTEGER as f64 {
                Ok(v as i64)
            } else {
                Err(E::custom(format_args!("{v} is not an integer in range")))
            }
        }
    }
    d.deserialize_any(V(min))
}

/// An integer in ±(2^53 − 1) (`opt(crate::wire::int)`).
pub(crate) fn int<'de, D: Deserializer<'de>>(d: D) -> Result<i64, D::Error> {
    safe_int(d, -MAX_SAFE_INTEGER)
}

/// A count in 0..=2^53 − 1 (`opt(crate::wire::count)`).
pub(crate) fn count<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
    // ok: safe_int with min 0 returns a non-negative i64.
    Ok(safe_int(d, 0)?.unsigned_abs())
}

/// Whether a string is a JSON Pointer (RFC 6901): `^(/([^/~]|~[01])*)*$`.
pub fn is_json_pointer(s: &str) -> bool {
    if s.is_empty() {
        return true;
    }
    if !s.starts_with('/') {
        return false;
    }
    let b = s.as_bytes();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'~' {
            match b.get(i + 1) {
                Some(b'0') | Some(b'1') => i += 2,
                _ => return false,
            }
        } else {
            i += 1;
        }
    }
    true
}

/// A string that must be a JSON Pointer.
pub(crate) fn pointer<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    let s = String::deserialize(d)?;
    if is_json_pointer(&s) {
        Ok(s)
    } else {
        Err(de::Error::custom(format_args!(
            "{s:?} is not a JSON Pointer"
        )))
    }
}

/// A cursor, read with one allocation (borrowing the key text when it has no escapes).
pub(crate) fn cursor<'de, D: Deserializer<'de>>(d: D) -> Result<harness_core::Cursor, D::Error> {
    let k = Key::deserialize(d)?;
    Ok(harness_core::Cursor::new(&*k.0))
}

/// An optional cursor, where `null` reads as absent (a JavaScript
/// client that has no cursor yet may well send `from: null`).
pub(crate) fn cursor_or_null<'de, D: Deserializer<'de>>(
    d: D,
) -> Result<Option<harness_core::Cursor>, D::Error> {
    Ok(Option::<Key<'_>>::deserialize(d)?.map(|k| harness_core::Cursor::new(&*k.0)))
}
