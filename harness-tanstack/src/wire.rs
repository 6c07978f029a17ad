//! The JSON machinery under every wire type of this crate: raw JSON values kept as written,
//! unknown keys kept in order, and the macros that write one-pass (de)serializers for open
//! objects and tagged unions.
//!
//! Why not serde's derive: AG-UI objects are *open* (unknown keys are kept and re-serialized,
//! in order), keys come out in the schema's declaration order, optional fields reject `null`
//! (the TypeScript verdict), and tagged unions must not buffer the whole object the way
//! `#[serde(tag = "type")]` does. The visitor here reads the tag when it comes (first, in
//! practice), then parses the rest straight into the variant: one pass, no `Value` tree.

use std::borrow::Cow;
use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, Visitor};
use serde::ser::{SerializeMap, Serializer};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

/// One JSON value kept exactly as it was written (any JSON, `null` included).
///
/// Fields that the AG-UI schema types as "any JSON" (`STATE_SNAPSHOT.snapshot`,
/// `CUSTOM.value`, `metadata`, …) are `Json`: they re-serialize byte for byte, keys in their
/// order, and cost one copy to decode.
///
/// ```
/// use harness_tanstack::Json;
/// let j = Json::from_text(r#"{"b":1,"a":[true,null]}"#).unwrap();
/// assert_eq!(j.get(), r#"{"b":1,"a":[true,null]}"#); // as written, keys in their order
/// assert_eq!(j.to_value()["a"][0], true);
/// ```
#[derive(Clone)]
pub struct Json(Box<RawValue>);

impl Json {
    /// Serializes a value into compact JSON.
    pub fn new<T: Serialize + ?Sized>(value: &T) -> Result<Self, serde_json::Error> {
        serde_json::value::to_raw_value(value).map(Json)
    }

    /// Parses JSON text (kept as written, whitespace included).
    pub fn from_text(text: &str) -> Result<Self, serde_json::Error> {
        serde_json::from_str::<Box<RawValue>>(text).map(Json)
    }

    /// A JSON value. Never fails: a `serde_json::Value` always serializes.
    pub fn from_value(value: &serde_json::Value) -> Self {
        match serde_json::value::to_raw_value(value) {
            Ok(raw) => Json(raw),
            // A Value has only string keys, so this cannot happen; keep a valid JSON anyway.
            Err(_) => Json::null(),
        }
    }

    /// JSON `null`.
    pub fn null() -> Self {
        // Parsed once: a copy of it costs a 4-byte allocation, not a parse.
        static NULL: std::sync::OnceLock<Json> = std::sync::OnceLock::new();
        NULL.get_or_init(|| Json::from_static("null")).clone()
    }

    /// A JSON string.
    pub fn string(s: &str) -> Self {
        Json::from_value(&serde_json::Value::String(s.to_owned()))
    }

    fn from_static(text: &'static str) -> Self {
        match RawValue::from_string(text.to_owned()) {
            Ok(raw) => Json(raw),
            Err(_) => Json::null(),
        }
    }

    /// The JSON text.
    pub fn get(&self) -> &str {
        self.0.get()
    }

    /// Parses the value into a type.
    pub fn parse<'a, T: Deserialize<'a>>(&'a self) -> Result<T, serde_json::Error> {
        serde_json::from_str(self.0.get())
    }

    /// The value as a `serde_json::Value` (`Null` if it does not parse, which cannot happen
    /// for a `Json` that came from a parser).
    pub fn to_value(&self) -> serde_json::Value {
        serde_json::from_str(self.0.get()).unwrap_or(serde_json::Value::Null)
    }

    /// Whether the value is JSON `null`.
    pub fn is_null(&self) -> bool {
        self.first_byte() == Some(b'n')
    }

    /// Whether the value is a JSON object.
    pub fn is_object(&self) -> bool {
        self.first_byte() == Some(b'{')
    }

    /// Whether the value is a JSON array.
    pub fn is_array(&self) -> bool {
        self.first_byte() == Some(b'[')
    }

    /// Whether the value is a JSON string.
    pub fn is_string(&self) -> bool {
        self.first_byte() == Some(b'"')
    }

    /// The string, when the value is a JSON string.
    pub fn as_string(&self) -> Option<String> {
        if self.is_string() {
            self.parse::<String>().ok()
        } else {
            None
        }
    }

    fn first_byte(&self) -> Option<u8> {
        self.0
            .get()
            .bytes()
            .find(|b| !matches!(b, b' ' | b'\t' | b'\n' | b'\r'))
    }
}

impl Default for Json {
    /// JSON `null`.
    fn default() -> Self {
        Json::null()
    }
}

impl fmt::Debug for Json {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.0.get())
    }
}

impl fmt::Display for Json {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.0.get())
    }
}

impl PartialEq for Json {
    /// Equal JSON values (the text may differ in whitespace and key order).
    fn eq(&self, other: &Self) -> bool {
        self.0.get() == other.0.get() || self.to_value() == other.to_value()
    }
}

impl From<serde_json::Value> for Json {
    fn from(v: serde_json::Value) -> Self {
        Json::from_value(&v)
    }
}

impl From<&str> for Json {
    fn from(s: &str) -> Self {
        Json::string(s)
    }
}

impl Serialize for Json {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.0.serialize(s)
    }
}

impl<'de> Deserialize<'de> for Json {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Box::<RawValue>::deserialize(d).map(Json)
    }
}

/// The keys of an object that its schema does not declare, in the order they came, with their
/// values as written. Serialized after the declared keys.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Extra(Vec<(String, Json)>);

impl Extra {
    /// No extra keys.
    pub fn new() -> Self {
        Extra(Vec::new())
    }

    /// The value of a key.
    pub fn get(&self, key: &str) -> Option<&Json> {
        self.0.iter().rev().find(|(k, _)| k == key).map(|(_, v)| v)
    }

    /// Sets a key (replacing an earlier value).
    pub fn insert(&mut self, key: impl Into<String>, value: Json) {
        let key = key.into();
        if let Some(slot) = self.0.iter_mut().find(|(k, _)| *k == key) {
            slot.1 = value;
        } else {
            self.0.push((key, value));
        }
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// How many.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// The keys and values, in order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &Json)> {
        self.0.iter().map(|(k, v)| (k.as_str(), v))
    }

    pub(crate) fn write<M: SerializeMap>(&self, m: &mut M) -> Result<(), M::Error> {
        for (k, v) in &self.0 {
            m.serialize_entry(k, v)?;
        }
        Ok(())
    }

    pub(crate) fn push_raw(&mut self, key: &str, value: Json) {
        self.insert(key, value);
    }
}

/// An object key, borrowed from the input when it has no escapes.
pub(crate) struct Key<'de>(pub(crate) Cow<'de, str>);

impl<'de> Deserialize<'de> for Key<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Key<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Borrowed(v)))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Owned(v.to_owned())))
            }
            fn visit_string<E: de::Error>(self, v: String) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Owned(v)))
            }
        }
        d.deserialize_str(V)
    }
}

/// An open object with declared fields, written by [`wire_struct!`]. It is read in place:
/// each key's value goes straight into its field of the value being built (a large value is
/// never built aside and then moved, at each level of the object tree, into the next).
pub(crate) trait WireObject: Sized + Default {
    /// Which declared keys came (to check the required ones).
    type Seen: Default;
    /// The tag key and its literal value, when the object has one.
    const TAG: Option<(&'static str, &'static str)>;
    /// Reads one key's value into its field.
    fn put<'de, D: Deserializer<'de>>(
        &mut self,
        seen: &mut Self::Seen,
        key: &str,
        d: D,
    ) -> Result<(), D::Error>;
    /// Notes that the tag came, with its literal value.
    fn tag_seen(seen: &mut Self::Seen);
    /// Checks that the required keys (and the tag) came.
    fn check<E: de::Error>(&self, seen: &Self::Seen) -> Result<(), E>;
    /// Writes the keys in declaration order, then the extra keys.
    fn write<M: SerializeMap>(&self, m: &mut M) -> Result<(), M::Error>;
}

/// Deserializes into a value that is already in place: a large value is built where it
/// will stay, instead of being returned through every layer of serde and moved at each.
pub(crate) trait DeserializeInto {
    /// Reads the value into `out`, which must be *fresh*: its default, or for a union any
    /// variant whose fields are all at their default (a placeholder). A union whose variant
    /// is the one read is filled as it is; another variant is replaced.
    fn deserialize_into<'de, D: Deserializer<'de>>(d: D, out: &mut Self) -> Result<(), D::Error>;
}

/// Reads one value into a field.
pub(crate) struct FieldSeed<'a, 'k, T: WireObject> {
    pub(crate) out: &'a mut T,
    pub(crate) seen: &'a mut T::Seen,
    pub(crate) key: &'k str,
}

impl<'de, T: WireObject> DeserializeSeed<'de> for FieldSeed<'_, '_, T> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        self.out.put(self.seen, self.key, d)
    }
}

/// Reads the rest of a map into `out` (a default value), after the keys seen before the tag
/// (`pending`) and the tag itself.
pub(crate) fn fill_rest<'de, T: WireObject, A: MapAccess<'de>>(
    mut map: A,
    pending: Vec<(String, Json)>,
    tag: Option<&str>,
    out: &mut T,
) -> Result<(), A::Error> {
    let mut seen = T::Seen::default();
    if let (Some((key, lit)), Some(tag)) = (T::TAG, tag) {
        if tag == lit {
            // The union read it to choose `T`: nothing to check.
            T::tag_seen(&mut seen);
        } else {
            out.put(
                &mut seen,
                key,
                de::value::StrDeserializer::<A::Error>::new(tag),
            )?;
        }
    }
    for (k, raw) in pending {
        let mut d = serde_json::Deserializer::from_str(raw.get());
        out.put(&mut seen, &k, &mut d).map_err(de::Error::custom)?;
    }
    while let Some(k) = map.next_key::<Key<'de>>()? {
        map.next_value_seed(FieldSeed::<T> {
            out: &mut *out,
            seen: &mut seen,
            key: &k.0,
        })?;
    }
    out.check(&seen)
}

/// Reads the rest of a map into a new `T` (see [`fill_rest`]).
pub(crate) fn finish_rest<'de, T: WireObject, A: MapAccess<'de>>(
    map: A,
    pending: Vec<(String, Json)>,
    tag: Option<&str>,
) -> Result<T, A::Error> {
    let mut v = T::default();
    fill_rest(map, pending, tag, &mut v)?;
    Ok(v)
}

/// Visits a whole map into `T` (the standalone `Deserialize` of a wire struct).
pub(crate) struct ObjectVisitor<T>(pub(crate) std::marker::PhantomData<T>);

impl<'de, T: WireObject> Visitor<'de> for ObjectVisitor<T> {
    type Value = T;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON object")
    }
    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<T, A::Error> {
        finish_rest::<T, A>(map, Vec::new(), None)
    }
}

/// Checks a tag value against its literal.
pub(crate) fn check_tag<'de, D: Deserializer<'de>>(
    d: D,
    key: &'static str,
    lit: &'static str,
) -> Result<(), D::Error> {
    let v = Key::deserialize(d)?;
    if v.0 == lit {
        Ok(())
    } else {
        Err(de::Error::custom(format_args!(
            "{key}: expected {lit:?}, got {:?}",
            v.0
        )))
    }
}

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

/// Helper for the macros: an optional cursor, where `null` reads as absent (a JavaScript
/// client that has no cursor yet may well send `from: null`).
pub(crate) fn cursor_or_null<'de, D: Deserializer<'de>>(
    d: D,
) -> Result<Option<harness_core::Cursor>, D::Error> {
    Ok(Option::<Key<'_>>::deserialize(d)?.map(|k| harness_core::Cursor::new(&*k.0)))
}

/// Helper for the macros: writes a value through a `SerializeMap`.
pub(crate) fn entry<M: SerializeMap, V: Serialize + ?Sized>(
    m: &mut M,
    key: &'static str,
    v: &V,
) -> Result<(), M::Error> {
    m.serialize_entry(key, v)
}

/// Serializes a wire object as a map.
pub(crate) fn serialize_object<T: WireObject, S: Serializer>(
    v: &T,
    s: S,
) -> Result<S::Ok, S::Error> {
    let mut m = s.serialize_map(None)?;
    v.write(&mut m)?;
    m.end()
}

/// Kinds of fields a wire struct declares.
///
/// - `req`: required; a `null` is rejected unless the type accepts it (`Json`).
/// - `opt`: optional; present means a value of the type (`null` rejected for non-`Json`).
/// - `opt_nn`: optional `Json` that must not be `null`.
/// - `req_obj` / `opt_obj`: a `Json` that must be an object.
/// - `opt_null`: optional, `null` reads as absent.
/// - `opt_cur`: an optional cursor; `null` reads as absent.
/// - `opt_int` / `opt_count`: an `i64` in ±(2^53−1) / a count in 0..=2^53−1.
/// - `req_ptr`: a JSON Pointer string.
/// - `req_in`: required, read in place (the type implements `DeserializeInto`): for a large
///   value, such as the `event` of an event frame.
macro_rules! wire_field_ty {
    (req, $t:ty) => { $t };
    (req_in, $t:ty) => { $t };
    (req_obj, $t:ty) => { $t };
    (req_ptr, $t:ty) => { $t };
    (opt, $t:ty) => { Option<$t> };
    (opt_nn, $t:ty) => { Option<$t> };
    (opt_obj, $t:ty) => { Option<$t> };
    (opt_null, $t:ty) => { Option<$t> };
    (opt_int, $t:ty) => { Option<$t> };
    (opt_count, $t:ty) => { Option<$t> };
    (req_nonempty, $t:ty) => { $t };
    (req_cur, $t:ty) => { $t };
    (opt_cur, $t:ty) => { Option<$t> };
}

macro_rules! wire_field_put {
    (req, $t:ty, $d:ident, $w:expr) => {
        <$t as serde::Deserialize>::deserialize($d)?
    };
    (opt, $t:ty, $d:ident, $w:expr) => {
        <$t as serde::Deserialize>::deserialize($d)?
    };
    (req_ptr, $t:ty, $d:ident, $w:expr) => {
        $crate::wire::pointer($d)?
    };
    (req_cur, $t:ty, $d:ident, $w:expr) => {
        $crate::wire::cursor($d)?
    };
    (opt_cur, $t:ty, $d:ident, $w:expr) => {
        match $crate::wire::cursor_or_null($d)? {
            Some(c) => c,
            None => return Ok(()),
        }
    };
    (opt_null, $t:ty, $d:ident, $w:expr) => {
        match <Option<$t> as serde::Deserialize>::deserialize($d)? {
            Some(v) => v,
            None => return Ok(()),
        }
    };
    (opt_nn, $t:ty, $d:ident, $w:expr) => {{
        let j = <$crate::Json as serde::Deserialize>::deserialize($d)?;
        if j.is_null() {
            return Err(serde::de::Error::custom(concat!($w, ": must not be null")));
        }
        j
    }};
    (req_obj, $t:ty, $d:ident, $w:expr) => {
        wire_field_put!(opt_obj, $t, $d, $w)
    };
    (req_nonempty, $t:ty, $d:ident, $w:expr) => {{
        let v = <$t as serde::Deserialize>::deserialize($d)?;
        if v.is_empty() {
            return Err(serde::de::Error::custom(concat!($w, ": must not be empty")));
        }
        v
    }};
    (opt_obj, $t:ty, $d:ident, $w:expr) => {{
        let j = <$crate::Json as serde::Deserialize>::deserialize($d)?;
        if !j.is_object() {
            return Err(serde::de::Error::custom(concat!($w, ": must be an object")));
        }
        j
    }};
    (opt_int, $t:ty, $d:ident, $w:expr) => {
        $crate::wire::safe_int($d, -$crate::wire::MAX_SAFE_INTEGER)?
    };
    (opt_count, $t:ty, $d:ident, $w:expr) => {
        // ok: safe_int with min 0 returns a non-negative i64.
        $crate::wire::safe_int($d, 0)?.unsigned_abs()
    };
}

/// Reads a field's value into its place in the struct.
macro_rules! wire_field_set {
    (req_in, $t:ty, $d:ident, $w:expr, $slot:expr, $seen:expr) => {{
        if $seen {
            // The key again: the last one wins, whole (the slot is fresh again).
            $slot = <$t as Default>::default();
        }
        <$t as $crate::wire::DeserializeInto>::deserialize_into($d, &mut $slot)?
    }};
    (req, $t:ty, $d:ident, $w:expr, $slot:expr, $seen:expr) => {
        $slot = wire_field_put!(req, $t, $d, $w)
    };
    (req_obj, $t:ty, $d:ident, $w:expr, $slot:expr, $seen:expr) => {
        $slot = wire_field_put!(req_obj, $t, $d, $w)
    };
    (req_ptr, $t:ty, $d:ident, $w:expr, $slot:expr, $seen:expr) => {
        $slot = wire_field_put!(req_ptr, $t, $d, $w)
    };
    (req_nonempty, $t:ty, $d:ident, $w:expr, $slot:expr, $seen:expr) => {
        $slot = wire_field_put!(req_nonempty, $t, $d, $w)
    };
    (req_cur, $t:ty, $d:ident, $w:expr, $slot:expr, $seen:expr) => {
        $slot = wire_field_put!(req_cur, $t, $d, $w)
    };
    ($other:ident, $t:ty, $d:ident, $w:expr, $slot:expr, $seen:expr) => {
        $slot = Some(wire_field_put!($other, $t, $d, $w))
    };
}

/// Fails when a required field did not come.
macro_rules! wire_field_check {
    (req, $seen:expr, $w:expr) => {
        wire_field_check!(req_in, $seen, $w)
    };
    (req_obj, $seen:expr, $w:expr) => {
        wire_field_check!(req_in, $seen, $w)
    };
    (req_ptr, $seen:expr, $w:expr) => {
        wire_field_check!(req_in, $seen, $w)
    };
    (req_nonempty, $seen:expr, $w:expr) => {
        wire_field_check!(req_in, $seen, $w)
    };
    (req_cur, $seen:expr, $w:expr) => {
        wire_field_check!(req_in, $seen, $w)
    };
    (req_in, $seen:expr, $w:expr) => {
        if !$seen {
            return Err(serde::de::Error::missing_field($w));
        }
    };
    ($other:ident, $seen:expr, $w:expr) => {};
}

macro_rules! wire_field_write {
    (req, $m:ident, $v:expr, $w:expr) => {
        $crate::wire::entry($m, $w, &$v)?
    };
    (req_in, $m:ident, $v:expr, $w:expr) => {
        $crate::wire::entry($m, $w, &$v)?
    };
    (req_obj, $m:ident, $v:expr, $w:expr) => {
        $crate::wire::entry($m, $w, &$v)?
    };
    (req_ptr, $m:ident, $v:expr, $w:expr) => {
        $crate::wire::entry($m, $w, &$v)?
    };
    (req_nonempty, $m:ident, $v:expr, $w:expr) => {
        $crate::wire::entry($m, $w, &$v)?
    };
    (req_cur, $m:ident, $v:expr, $w:expr) => {
        $crate::wire::entry($m, $w, &$v)?
    };
    ($other:ident, $m:ident, $v:expr, $w:expr) => {
        if let Some(v) = &$v {
            $crate::wire::entry($m, $w, v)?;
        }
    };
}

/// Declares an open wire object: a struct with the declared fields (in wire order), an
/// `extra` of unknown keys, and its one-pass serde.
///
/// `[tag "key" = "lit" @ N]` declares a literal-valued key (a discriminator) written after
/// the first N declared fields; it is checked on read and not stored.
macro_rules! wire_struct {
    (
        $(#[$m:meta])*
        pub struct $name:ident $([tag $tk:literal = $tv:literal @ $tpos:literal])? {
            $( $(#[$fm:meta])* $kind:ident $field:ident : $ty:ty = $wire:literal ),* $(,)?
        }
    ) => {
        $(#[$m])*
        #[derive(Clone, Debug, PartialEq, Default)]
        pub struct $name {
            $( $(#[$fm])* pub $field: wire_field_ty!($kind, $ty), )*
            /// Keys the schema does not declare, kept in order and written back.
            pub extra: $crate::wire::Extra,
        }

        const _: () = {
            /// Which declared keys came.
            #[derive(Default)]
            #[allow(non_snake_case, dead_code)]
            pub struct Seen {
                $( $field: bool, )*
                __tag: bool,
            }

            impl $crate::wire::WireObject for $name {
                type Seen = Seen;
                const TAG: Option<(&'static str, &'static str)> = wire_struct!(@tag $($tk, $tv)?);

                #[allow(unreachable_code, unused_variables)]
                fn put<'de, D: serde::Deserializer<'de>>(
                    &mut self,
                    seen: &mut Seen,
                    key: &str,
                    d: D,
                ) -> Result<(), D::Error> {
                    $(
                        if key == $tk {
                            $crate::wire::check_tag(d, $tk, $tv)?;
                            seen.__tag = true;
                            return Ok(());
                        }
                    )?
                    match key {
                        $( $wire => {
                            wire_field_set!($kind, $ty, d, $wire, self.$field, seen.$field);
                            seen.$field = true;
                        } )*
                        _ => {
                            let v = <$crate::Json as serde::Deserialize>::deserialize(d)?;
                            self.extra.push_raw(key, v);
                        }
                    }
                    Ok(())
                }

                fn tag_seen(seen: &mut Seen) {
                    seen.__tag = true;
                }

                #[allow(unused_variables)]
                fn check<E: serde::de::Error>(&self, seen: &Seen) -> Result<(), E> {
                    $(
                        if !seen.__tag {
                            return Err(E::missing_field($tk));
                        }
                    )?
                    $( wire_field_check!($kind, seen.$field, $wire); )*
                    Ok(())
                }

                #[allow(unused_mut, unused_variables, unused_assignments)]
                fn write<M: serde::ser::SerializeMap>(&self, m: &mut M) -> Result<(), M::Error> {
                    const TAG_POS: usize = wire_struct!(@pos $($tpos)?);
                    let tag = <Self as $crate::wire::WireObject>::TAG;
                    let mut i = 0usize;
                    if let (Some((k, v)), true) = (tag, TAG_POS == 0) {
                        m.serialize_entry(k, v)?;
                    }
                    $(
                        wire_field_write!($kind, m, self.$field, $wire);
                        i += 1;
                        if let (Some((k, v)), true) = (tag, TAG_POS == i) {
                            m.serialize_entry(k, v)?;
                        }
                    )*
                    self.extra.write(m)
                }
            }
        };

        impl serde::Serialize for $name {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                $crate::wire::serialize_object(self, s)
            }
        }

        impl<'de> serde::Deserialize<'de> for $name {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                d.deserialize_map($crate::wire::ObjectVisitor::<$name>(std::marker::PhantomData))
            }
        }
    };
    (@tag) => { None };
    (@pos) => { 0 };
    (@pos $p:literal) => { $p };
    (@tag $tk:literal, $tv:literal) => { Some(($tk, $tv)) };
}

/// Declares a closed union of wire structs keyed on a tag (`type`, `op`, `role`): an unknown
/// tag is an error. The tag is read when it comes; keys before it are held as raw JSON.
macro_rules! wire_union {
    (
        $(#[$m:meta])*
        pub enum $name:ident [$tagkey:literal] {
            $( $(#[$vm:meta])* $var:ident($ty:ty) = $lit:literal ),* $(,)?
        }
    ) => {
        $(#[$m])*
        #[derive(Clone, Debug, PartialEq)]
        #[non_exhaustive]
        #[allow(clippy::large_enum_variant)]
        pub enum $name {
            $( $(#[$vm])* $var($ty), )*
        }

        impl $name {
            /// The wire value of the tag.
            pub fn tag(&self) -> &'static str {
                match self {
                    $( $name::$var(_) => $lit, )*
                }
            }
        }

        $( impl From<$ty> for $name {
            fn from(v: $ty) -> Self {
                $name::$var(v)
            }
        } )*

        impl serde::Serialize for $name {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                match self {
                    $( $name::$var(v) => $crate::wire::serialize_object(v, s), )*
                }
            }
        }

        impl<'de> serde::Deserialize<'de> for $name {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                struct V;
                impl<'de> serde::de::Visitor<'de> for V {
                    type Value = $name;
                    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                        f.write_str(concat!("an object with a \"", $tagkey, "\""))
                    }
                    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<$name, A::Error> {
                        let mut pending: Vec<(String, $crate::Json)> = Vec::new();
                        while let Some(k) = map.next_key::<$crate::wire::Key<'de>>()? {
                            if k.0 == $tagkey {
                                let tag: $crate::wire::Key<'de> = map.next_value()?;
                                return match &*tag.0 {
                                    $( $lit => $crate::wire::finish_rest::<$ty, A>(map, pending, Some(&tag.0)).map($name::$var), )*
                                    other => Err(serde::de::Error::custom(format_args!(
                                        concat!($tagkey, ": unknown value {:?}"), other
                                    ))),
                                };
                            }
                            pending.push((k.0.into_owned(), map.next_value()?));
                        }
                        Err(serde::de::Error::missing_field($tagkey))
                    }
                }
                d.deserialize_map(V)
            }
        }
    };
}

/// Declares a string enum with known values and `Other(String)` for the rest (the protocol
/// says to ignore what a later version adds, so an unknown value is kept, not an error).
macro_rules! wire_enum {
    (
        $(#[$m:meta])*
        pub enum $name:ident {
            $( $(#[$vm:meta])* $var:ident = $lit:literal ),* $(,)?
        }
    ) => {
        $(#[$m])*
        #[derive(Clone, Debug, PartialEq, Eq, Hash)]
        pub enum $name {
            $( $(#[$vm])* $var, )*
            /// A value this version does not know, kept as given.
            Other(String),
        }

        impl $name {
            /// The wire value.
            pub fn as_str(&self) -> &str {
                match self {
                    $( $name::$var => $lit, )*
                    $name::Other(s) => s,
                }
            }
        }

        impl From<&str> for $name {
            fn from(s: &str) -> Self {
                match s {
                    $( $lit => $name::$var, )*
                    other => $name::Other(other.to_owned()),
                }
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl serde::Serialize for $name {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(self.as_str())
            }
        }

        impl<'de> serde::Deserialize<'de> for $name {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let k = <$crate::wire::Key<'de> as serde::Deserialize>::deserialize(d)?;
                Ok($name::from(&*k.0))
            }
        }
    };
}

/// An object whose tag this version does not know, kept as it came.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct UnknownObject {
    /// The tag's value.
    pub tag: String,
    /// Every other key, in order, as written.
    pub fields: Extra,
}

/// Like `wire_union!`, with an `Unknown(UnknownObject)` variant for a tag this version does
/// not know (frames: "ignore a frame with a type that you do not know").
macro_rules! wire_open_union {
    (
        $(#[$m:meta])*
        pub enum $name:ident [$tagkey:literal] {
            $( $(#[$vm:meta])* $var:ident($ty:ty) = $lit:literal ),* $(,)?
        }
    ) => {
        $(#[$m])*
        #[derive(Clone, Debug, PartialEq)]
        #[non_exhaustive]
        #[allow(clippy::large_enum_variant)]
        pub enum $name {
            $( $(#[$vm])* $var($ty), )*
            /// A tag this version does not know, kept as it came.
            Unknown($crate::wire::UnknownObject),
        }

        impl $name {
            /// The wire value of the tag.
            pub fn tag(&self) -> &str {
                match self {
                    $( $name::$var(_) => $lit, )*
                    $name::Unknown(u) => &u.tag,
                }
            }
        }

        $( impl From<$ty> for $name {
            fn from(v: $ty) -> Self {
                $name::$var(v)
            }
        } )*

        impl serde::Serialize for $name {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                match self {
                    $( $name::$var(v) => $crate::wire::serialize_object(v, s), )*
                    $name::Unknown(u) => {
                        use serde::ser::SerializeMap;
                        let mut m = s.serialize_map(None)?;
                        m.serialize_entry($tagkey, &u.tag)?;
                        u.fields.write(&mut m)?;
                        m.end()
                    }
                }
            }
        }

        impl $crate::wire::DeserializeInto for $name {
            fn deserialize_into<'de, D: serde::Deserializer<'de>>(
                d: D,
                out: &mut $name,
            ) -> Result<(), D::Error> {
                struct V<'a>(&'a mut $name);
                impl<'de> serde::de::Visitor<'de> for V<'_> {
                    type Value = ();
                    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                        f.write_str(concat!("an object with a \"", $tagkey, "\""))
                    }
                    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
                        let mut pending: Vec<(String, $crate::Json)> = Vec::new();
                        while let Some(k) = map.next_key::<$crate::wire::Key<'de>>()? {
                            if k.0 == $tagkey {
                                let tag: $crate::wire::Key<'de> = map.next_value()?;
                                match &*tag.0 {
                                    $( $lit => {
                                        // Built where it stays: a fresh value, filled in place.
                                        if !matches!(self.0, $name::$var(_)) {
                                            *self.0 = $name::$var(<$ty>::default());
                                        }
                                        return match self.0 {
                                            $name::$var(v) => $crate::wire::fill_rest::<$ty, A>(map, pending, Some($lit), v),
                                            _ => Ok(()),
                                        };
                                    } )*
                                    other => {
                                        let mut fields = $crate::wire::Extra::new();
                                        for (k, v) in pending {
                                            fields.push_raw(&k, v);
                                        }
                                        while let Some(k) = map.next_key::<$crate::wire::Key<'de>>()? {
                                            let v: $crate::Json = map.next_value()?;
                                            fields.push_raw(&k.0, v);
                                        }
                                        *self.0 = $name::Unknown($crate::wire::UnknownObject { tag: other.to_owned(), fields });
                                        return Ok(());
                                    }
                                }
                            }
                            pending.push((k.0.into_owned(), map.next_value()?));
                        }
                        Err(serde::de::Error::missing_field($tagkey))
                    }
                }
                d.deserialize_map(V(out))
            }
        }

        impl<'de> serde::Deserialize<'de> for $name {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let mut out = $name::Unknown($crate::wire::UnknownObject::default());
                <$name as $crate::wire::DeserializeInto>::deserialize_into(d, &mut out)?;
                Ok(out)
            }
        }
    };
}
