//! Objects tagged by a `type` field, decoded by peeking at the tag instead of buffering.
//!
//! serde's `#[serde(tag = "type")]` buffers the whole object into an intermediate tree before
//! it picks a variant (about 2-3x slower than a flat struct here). Every UHP server we know
//! writes `type` first, so the visitor reads the first key: when it is `type`, the rest of the
//! object is handed straight to the variant's own deserializer, in one pass. When it is not,
//! the object is gathered into a `serde_json::Map` and decoded from there (correct, slower).

use std::borrow::Cow;
use std::fmt;
use std::marker::PhantomData;

use serde::de::value::MapAccessDeserializer;
use serde::de::{self, Deserializer, MapAccess, Visitor};
use serde_json::{Map, Value};

/// A type whose JSON form is an object with a string `type` field choosing its shape.
pub(crate) trait Tagged<'de>: Sized {
    /// What the visitor says it expects, for error messages.
    const EXPECTING: &'static str;

    /// Decodes the value of type `tag` from the object's other fields (`type` removed).
    fn from_rest<D: Deserializer<'de>>(tag: &str, rest: D) -> Result<Self, D::Error>;

    /// Decodes an object that has no `type` at all: an error, unless the schema gives the
    /// type a default shape there.
    fn untagged(fields: Map<String, Value>) -> Result<Self, serde_json::Error> {
        let _ = fields;
        Err(de::Error::missing_field("type"))
    }
}

/// A string that borrows from the input when it can.
pub(crate) struct StrCow<'a>(pub(crate) Cow<'a, str>);

impl<'de: 'a, 'a> de::Deserialize<'de> for StrCow<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<'a>(PhantomData<&'a ()>);
        impl<'de: 'a, 'a> Visitor<'de> for V<'a> {
            type Value = StrCow<'a>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
                Ok(StrCow(Cow::Borrowed(v)))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
                Ok(StrCow(Cow::Owned(v.to_owned())))
            }
            fn visit_string<E: de::Error>(self, v: String) -> Result<Self::Value, E> {
                Ok(StrCow(Cow::Owned(v)))
            }
        }
        d.deserialize_str(V(PhantomData))
    }
}

/// The visitor that implements the peek.
pub(crate) struct TaggedVisitor<T>(PhantomData<T>);

impl<T> TaggedVisitor<T> {
    pub(crate) fn new() -> Self {
        TaggedVisitor(PhantomData)
    }
}

impl<'de, T: Tagged<'de>> Visitor<'de> for TaggedVisitor<T> {
    type Value = T;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(T::EXPECTING)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<T, A::Error> {
        let Some(first) = map.next_key::<StrCow<'de>>()? else {
            return T::untagged(Map::new()).map_err(de::Error::custom);
        };
        if first.0 == "type" {
            let tag: StrCow<'de> = map.next_value()?;
            return T::from_rest(&tag.0, MapAccessDeserializer::new(map));
        }
        // Slow path: `type` is not the first key.
        let mut obj = Map::new();
        let v: Value = map.next_value()?;
        obj.insert(first.0.into_owned(), v);
        while let Some((k, v)) = map.next_entry::<String, Value>()? {
            obj.insert(k, v);
        }
        let tag = match obj.remove("type") {
            Some(Value::String(s)) => s,
            Some(_) => return Err(de::Error::custom("`type` is not a string")),
            None => return T::untagged(obj).map_err(de::Error::custom),
        };
        T::from_rest(&tag, Value::Object(obj)).map_err(de::Error::custom)
    }
}

/// Implements `Deserialize` for a [`Tagged`] type through [`TaggedVisitor`].
macro_rules! tagged_deserialize {
    ($ty:ty) => {
        impl<'de> serde::Deserialize<'de> for $ty {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                d.deserialize_map($crate::tagged::TaggedVisitor::new())
            }
        }
    };
}
pub(crate) use tagged_deserialize;

/// Serializes `inner` as an object with `"type": tag` first and `inner`'s fields after it.
pub(crate) fn serialize_tagged<S: serde::Serializer, T: serde::Serialize>(
    s: S,
    tag: &str,
    inner: &T,
) -> Result<S::Ok, S::Error> {
    #[derive(serde::Serialize)]
    struct WithTag<'a, T> {
        #[serde(rename = "type")]
        tag: &'a str,
        #[serde(flatten)]
        inner: &'a T,
    }
    serde::Serialize::serialize(&WithTag { tag, inner }, s)
}
