//! [`Json`], one JSON value kept as written, and [`Extra`], the keys of an object that its
//! schema does not declare, kept in order.

use std::fmt;

use serde::ser::{SerializeMap, Serializer};
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::value::RawValue;

/// Predicates on the first byte of the JSON text (its kind of value).
macro_rules! first_byte_is {
    ($( $(#[$doc:meta])* $name:ident $byte:literal )*) => {$(
        $(#[$doc])*
        #[inline]
        pub fn $name(&self) -> bool {
            self.first_byte() == Some($byte)
        }
    )*};
}

/// One JSON value kept exactly as it was written (any JSON, `null` included).
///
/// Fields that a schema types as "any JSON" (AG-UI's `STATE_SNAPSHOT.snapshot`,
/// `CUSTOM.value`, `metadata`, …) are `Json`: they re-serialize byte for byte, keys in their
/// order, and cost one copy to decode.
///
/// ```
/// use harness_core::wire::Json;
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
    #[inline]
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

    first_byte_is! {
        /// Whether the value is JSON `null`.
        is_null b'n'
        /// Whether the value is a JSON object.
        is_object b'{'
        /// Whether the value is a JSON array.
        is_array b'['
        /// Whether the value is a JSON string.
        is_string b'"'
    }

    /// The string, when the value is a JSON string.
    pub fn as_string(&self) -> Option<String> {
        if self.is_string() {
            self.parse::<String>().ok()
        } else {
            None
        }
    }

    #[inline]
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
    #[inline]
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.0.serialize(s)
    }
}

impl<'de> Deserialize<'de> for Json {
    #[inline]
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Box::<RawValue>::deserialize(d).map(Json)
    }
}

/// The keys of an object that its schema does not declare, in the order they came, with their
/// values as written. Serialized after the declared keys.
///
/// ```
/// use harness_core::wire::{Extra, Json};
/// let mut extra = Extra::new();
/// extra.insert("z", Json::from_text("1").unwrap());
/// extra.insert("a", Json::from_text("[2]").unwrap());
/// extra.insert("z", Json::from_text("3").unwrap()); // replaced, in its place
/// let keys: Vec<&str> = extra.iter().map(|(k, _)| k).collect();
/// assert_eq!(keys, ["z", "a"]);
/// assert_eq!(extra.get("z").unwrap().get(), "3");
/// ```
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Extra(Vec<(String, Json)>);

impl Extra {
    /// No extra keys.
    #[inline]
    pub fn new() -> Self {
        Extra(Vec::new())
    }

    /// The value of a key.
    pub fn get(&self, key: &str) -> Option<&Json> {
        self.0.iter().rev().find(|(k, _)| k == key).map(|(_, v)| v)
    }

    /// Sets a key (replacing an earlier value, in its place).
    pub fn insert(&mut self, key: impl Into<String>, value: Json) {
        let key = key.into();
        if let Some(slot) = self.0.iter_mut().find(|(k, _)| *k == key) {
            slot.1 = value;
        } else {
            self.0.push((key, value));
        }
    }

    /// Whether there are none.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// How many.
    #[inline]
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// The keys and values, in order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &Json)> {
        self.0.iter().map(|(k, v)| (k.as_str(), v))
    }

    /// Writes the keys and values, in order, into a map being serialized.
    pub fn serialize_entries<M: SerializeMap>(&self, m: &mut M) -> Result<(), M::Error> {
        for (k, v) in &self.0 {
            m.serialize_entry(k, v)?;
        }
        Ok(())
    }
}
