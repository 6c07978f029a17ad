//! Unions tagged by a key (`type`, `op`, `role`), decoded by reading the tag when it comes
//! instead of buffering the whole object the way `#[serde(tag = "type")]` does.
//!
//! Every encoder we know writes the tag first, so the rest of the object is read straight
//! into the variant, in one pass. When it is not first, the keys before it are held until it
//! comes, in one of two ways:
//!
//! - unions of [`wire_struct!`](crate::wire_struct) objects ([`wire_union!`](crate::wire_union),
//!   [`wire_open_union!`](crate::wire_open_union), [`seek_tag`]) hold them as raw JSON and
//!   give them to the variant in their order, exact to the byte;
//! - [`Tagged`] types, whose variants are any `Deserialize` (serde-derived structs), gather the
//!   whole object into a `serde_json::Map` and decode from there (correct, slower).

use std::fmt;
use std::marker::PhantomData;

use serde::de::value::MapAccessDeserializer;
use serde::de::{self, Deserializer, MapAccess, Visitor};
use serde_json::{Map, Value};

use super::{Extra, Key, Pending, WireObject, fill_rest};

/// Reads an object's keys up to its tag: the tag's value, and the keys before it with their
/// values as written. An object without the tag key is an error (`missing field`).
#[inline(always)]
pub fn seek_tag<'de, A: MapAccess<'de>>(
    map: &mut A,
    key: &'static str,
) -> Result<(Key<'de>, Pending), A::Error> {
    let mut pending = Pending::new();
    while let Some(k) = map.next_key::<Key<'de>>()? {
        if k.0 == key {
            return Ok((map.next_value()?, pending));
        }
        pending.push((k.0.into_owned(), map.next_value()?));
    }
    Err(de::Error::missing_field(key))
}

/// Reads the rest of an object into the variant of a union that its tag names, in place:
/// into `out` when it is that variant already (a placeholder, filled as it is), else into a
/// fresh one put there first. `variant` makes the variant, `as_variant` finds it.
#[inline(always)]
pub fn fill_variant<'de, U, T: WireObject, A: MapAccess<'de>>(
    out: &mut U,
    variant: impl FnOnce(T) -> U,
    as_variant: impl Fn(&mut U) -> Option<&mut T>,
    tag: &str,
    pending: Pending,
    map: A,
) -> Result<(), A::Error> {
    if as_variant(out).is_none() {
        // Built where it stays: a fresh value, filled in place.
        *out = variant(T::default());
    }
    match as_variant(out) {
        Some(v) => fill_rest(map, pending, Some(tag), v),
        None => Ok(()),
    }
}

/// An object whose tag this version does not know, kept as it came.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct UnknownObject {
    /// The tag's value.
    pub tag: String,
    /// Every other key, in order, as written.
    pub fields: Extra,
}

impl UnknownObject {
    /// Reads the rest of an object whose tag is `tag`, after the keys before the tag.
    pub fn read_rest<'de, A: MapAccess<'de>>(
        tag: &str,
        pending: Pending,
        mut map: A,
    ) -> Result<UnknownObject, A::Error> {
        let mut fields = Extra::new();
        for (k, v) in pending {
            fields.insert(k, v);
        }
        while let Some(k) = map.next_key::<Key<'de>>()? {
            let v: super::Json = map.next_value()?;
            fields.insert(k.0, v);
        }
        Ok(UnknownObject {
            tag: tag.to_owned(),
            fields,
        })
    }

    /// Writes the tag under `key`, then the fields, into a map being serialized.
    pub fn write_fields<M: serde::ser::SerializeMap>(
        &self,
        key: &'static str,
        m: &mut M,
    ) -> Result<(), M::Error> {
        m.serialize_entry(key, &self.tag)?;
        self.fields.serialize_entries(m)
    }
}

/// Declares a closed union of [`wire_struct!`](crate::wire_struct) objects keyed on a tag
/// (`type`, `op`, `role`): an unknown tag is an error. The tag is read when it comes; keys
/// before it are held as raw JSON (see [`seek_tag`]).
///
/// ```
/// harness_core::wire_struct! {
///     /// `{"op":"remove","path":…}`
///     pub struct Remove [tag "op" = "remove" @ 0] {
///         /// Where.
///         req path: String = "path",
///     }
/// }
/// harness_core::wire_union! {
///     /// An operation.
///     pub enum Op ["op"] {
///         /// `remove`
///         Remove(Remove) = "remove",
///     }
/// }
/// let op: Op = serde_json::from_str(r#"{"path":"/a","op":"remove"}"#)?; // the tag comes late
/// assert_eq!(op.tag(), "remove");
/// assert_eq!(serde_json::to_string(&op)?, r#"{"op":"remove","path":"/a"}"#);
/// assert!(serde_json::from_str::<Op>(r#"{"op":"add"}"#).is_err());
/// # Ok::<(), serde_json::Error>(())
/// ```
#[macro_export]
macro_rules! wire_union {
    ($($t:tt)*) => {
        $crate::__wire_union! { closed [] $($t)* }
    };
}

/// Like [`wire_union!`](crate::wire_union), with an `Unknown(UnknownObject)` variant for a
/// tag this version does not know ("ignore a frame with a type that you do not know"). It
/// reads in place too ([`DeserializeInto`](crate::wire::DeserializeInto)): into a fresh
/// value of the variant read, the placeholder kept when it is that variant already.
///
/// ```
/// harness_core::wire_struct! {
///     /// `{"type":"ping"}`
///     pub struct Ping [tag "type" = "ping" @ 0] {}
/// }
/// harness_core::wire_open_union! {
///     /// A frame.
///     pub enum Frame ["type"] {
///         /// `ping`
///         Ping(Ping) = "ping",
///     }
/// }
/// let f: Frame = serde_json::from_str(r#"{"id":1,"type":"pong","at":2}"#)?;
/// let Frame::Unknown(u) = &f else { panic!() };
/// assert_eq!(u.tag, "pong");
/// assert_eq!(serde_json::to_string(&f)?, r#"{"type":"pong","id":1,"at":2}"#);
/// # Ok::<(), serde_json::Error>(())
/// ```
#[macro_export]
macro_rules! wire_open_union {
    ($($t:tt)*) => {
        $crate::__wire_union! {
            open [
                /// A tag this version does not know, kept as it came.
                Unknown($crate::wire::UnknownObject),
            ]
            $($t)*
        }
    };
}

/// The body of [`wire_union!`](crate::wire_union) (`closed`) and
/// [`wire_open_union!`](crate::wire_open_union) (`open`, with the `Unknown` variant given).
#[doc(hidden)]
#[macro_export]
macro_rules! __wire_union {
    (
        $openness:ident [$($unknown:tt)*]
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
            $($unknown)*
        }

        $( impl ::core::convert::From<$ty> for $name {
            fn from(v: $ty) -> Self {
                $name::$var(v)
            }
        } )*

        impl $crate::__private::serde::Serialize for $name {
            fn serialize<S: $crate::__private::serde::Serializer>(
                &self,
                s: S,
            ) -> ::core::result::Result<S::Ok, S::Error> {
                match self {
                    $( $name::$var(v) => $crate::wire::serialize_object(v, s), )*
                    #[allow(unreachable_patterns)]
                    other => $crate::__wire_union!(@serialize_unknown $openness, other, $name, $tagkey, s),
                }
            }
        }

        $crate::__wire_union!(@read $openness, $name, $tagkey, { $( $var($ty) = $lit ),* });
    };

    // The arm of what is not a declared variant: `Unknown` in an open union; none, in a
    // closed one (the arm is never taken).
    (@serialize_unknown closed, $v:expr, $name:ident, $tagkey:literal, $s:ident) => {{
        let _ = $v;
        ::core::result::Result::Err($crate::__private::serde::ser::Error::custom(
            "a variant without a wire form",
        ))
    }};
    (@serialize_unknown open, $v:expr, $name:ident, $tagkey:literal, $s:ident) => {
        match $v {
            $name::Unknown(u) => {
                let mut m = $crate::__private::serde::Serializer::serialize_map(
                    $s,
                    ::core::option::Option::None,
                )?;
                u.write_fields($tagkey, &mut m)?;
                $crate::__private::serde::ser::SerializeMap::end(m)
            }
            _ => $crate::__wire_union!(@serialize_unknown closed, $v, $name, $tagkey, $s),
        }
    };

    (@read closed, $name:ident, $tagkey:literal, { $( $var:ident($ty:ty) = $lit:literal ),* }) => {
        impl $name {
            /// The wire value of the tag.
            pub fn tag(&self) -> &'static str {
                match self {
                    $( $name::$var(_) => $lit, )*
                }
            }
        }

        impl<'de> $crate::__private::serde::Deserialize<'de> for $name {
            fn deserialize<D: $crate::__private::serde::Deserializer<'de>>(
                d: D,
            ) -> ::core::result::Result<Self, D::Error> {
                struct V;
                impl<'de> $crate::__private::serde::de::Visitor<'de> for V {
                    type Value = $name;
                    fn expecting(&self, f: &mut ::core::fmt::Formatter<'_>) -> ::core::fmt::Result {
                        f.write_str(concat!("an object with a \"", $tagkey, "\""))
                    }
                    fn visit_map<A: $crate::__private::serde::de::MapAccess<'de>>(
                        self,
                        mut map: A,
                    ) -> ::core::result::Result<$name, A::Error> {
                        let (tag, pending) = $crate::wire::seek_tag(&mut map, $tagkey)?;
                        match &*tag.0 {
                            $( $lit => $crate::wire::finish_rest::<$ty, A>(map, pending, ::core::option::Option::Some(&tag.0)).map($name::$var), )*
                            other => ::core::result::Result::Err($crate::__private::serde::de::Error::custom(format_args!(
                                concat!($tagkey, ": unknown value {:?}"), other
                            ))),
                        }
                    }
                }
                d.deserialize_map(V)
            }
        }
    };

    (@read open, $name:ident, $tagkey:literal, { $( $var:ident($ty:ty) = $lit:literal ),* }) => {
        impl $name {
            /// The wire value of the tag.
            pub fn tag(&self) -> &str {
                match self {
                    $( $name::$var(_) => $lit, )*
                    $name::Unknown(u) => &u.tag,
                }
            }
        }

        impl $crate::wire::DeserializeInto for $name {
            fn deserialize_into<'de, D: $crate::__private::serde::Deserializer<'de>>(
                d: D,
                out: &mut $name,
            ) -> ::core::result::Result<(), D::Error> {
                struct V<'a>(&'a mut $name);
                impl<'de> $crate::__private::serde::de::Visitor<'de> for V<'_> {
                    type Value = ();
                    fn expecting(&self, f: &mut ::core::fmt::Formatter<'_>) -> ::core::fmt::Result {
                        f.write_str(concat!("an object with a \"", $tagkey, "\""))
                    }
                    fn visit_map<A: $crate::__private::serde::de::MapAccess<'de>>(
                        self,
                        mut map: A,
                    ) -> ::core::result::Result<(), A::Error> {
                        let (tag, pending) = $crate::wire::seek_tag(&mut map, $tagkey)?;
                        match &*tag.0 {
                            $( $lit => $crate::wire::fill_variant(
                                self.0,
                                $name::$var,
                                |u| match u {
                                    $name::$var(v) => ::core::option::Option::Some(v),
                                    _ => ::core::option::Option::None,
                                },
                                $lit,
                                pending,
                                map,
                            ), )*
                            other => {
                                *self.0 = $name::Unknown($crate::wire::UnknownObject::read_rest(other, pending, map)?);
                                ::core::result::Result::Ok(())
                            }
                        }
                    }
                }
                d.deserialize_map(V(out))
            }
        }

        impl<'de> $crate::__private::serde::Deserialize<'de> for $name {
            fn deserialize<D: $crate::__private::serde::Deserializer<'de>>(
                d: D,
            ) -> ::core::result::Result<Self, D::Error> {
                let mut out = $name::Unknown(<$crate::wire::UnknownObject as ::core::default::Default>::default());
                <$name as $crate::wire::DeserializeInto>::deserialize_into(d, &mut out)?;
                ::core::result::Result::Ok(out)
            }
        }
    };
}

/// A type whose JSON form is an object with a string tag (`type`, by default) choosing its
/// shape, each shape any `Deserialize` (a serde-derived struct, say). Decoded through
/// [`TaggedVisitor`]: `Deserialize` is one line, [`tagged_deserialize!`](crate::tagged_deserialize).
///
/// ```
/// use harness_core::wire::Tagged;
/// use serde::Deserialize;
///
/// #[derive(Debug, PartialEq, Deserialize)]
/// struct Text { text: String }
///
/// #[derive(Debug, PartialEq)]
/// enum Part { Text(Text), Other(String) }
///
/// impl<'de> Tagged<'de> for Part {
///     const EXPECTING: &'static str = "a part object";
///     fn from_rest<D: serde::Deserializer<'de>>(tag: &str, rest: D) -> Result<Self, D::Error> {
///         Ok(match tag {
///             "text" => Part::Text(Text::deserialize(rest)?),
///             other => {
///                 serde::de::IgnoredAny::deserialize(rest)?;
///                 Part::Other(other.to_owned())
///             }
///         })
///     }
/// }
/// harness_core::tagged_deserialize!(Part);
///
/// let p: Part = serde_json::from_str(r#"{"type":"text","text":"hi"}"#)?;
/// assert_eq!(p, Part::Text(Text { text: "hi".into() }));
/// let p: Part = serde_json::from_str(r#"{"text":"hi","type":"text"}"#)?; // the slow path
/// assert_eq!(p, Part::Text(Text { text: "hi".into() }));
/// assert!(serde_json::from_str::<Part>(r#"{"text":"hi"}"#).is_err()); // no `type`
/// # Ok::<(), serde_json::Error>(())
/// ```
pub trait Tagged<'de>: Sized {
    /// The tag key.
    const KEY: &'static str = "type";

    /// What the visitor says it expects, for error messages.
    const EXPECTING: &'static str;

    /// Decodes the value of tag `tag` from the object's other fields (the tag removed).
    fn from_rest<D: Deserializer<'de>>(tag: &str, rest: D) -> Result<Self, D::Error>;

    /// Decodes an object that has no tag at all: an error, unless the schema gives the type
    /// a default shape there.
    fn untagged(fields: Map<String, Value>) -> Result<Self, serde_json::Error> {
        let _ = fields;
        Err(de::Error::missing_field(Self::KEY))
    }
}

/// The visitor of a [`Tagged`] type: reads the first key; when it is the tag, the rest of
/// the object is handed straight to the variant's deserializer, in one pass. When it is not,
/// the object is gathered into a `serde_json::Map` and decoded from there.
pub struct TaggedVisitor<T>(PhantomData<T>);

impl<T> TaggedVisitor<T> {
    /// The visitor.
    #[inline]
    pub fn new() -> Self {
        TaggedVisitor(PhantomData)
    }
}

impl<T> Default for TaggedVisitor<T> {
    fn default() -> Self {
        TaggedVisitor::new()
    }
}

impl<'de, T: Tagged<'de>> Visitor<'de> for TaggedVisitor<T> {
    type Value = T;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(T::EXPECTING)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<T, A::Error> {
        let Some(first) = map.next_key::<Key<'de>>()? else {
            return T::untagged(Map::new()).map_err(de::Error::custom);
        };
        if first.0 == T::KEY {
            let tag: Key<'de> = map.next_value()?;
            return T::from_rest(&tag.0, MapAccessDeserializer::new(map));
        }
        // Slow path: the tag is not the first key.
        let mut obj = Map::new();
        let v: Value = map.next_value()?;
        obj.insert(first.0.into_owned(), v);
        while let Some((k, v)) = map.next_entry::<String, Value>()? {
            obj.insert(k, v);
        }
        let tag = match obj.remove(T::KEY) {
            Some(Value::String(s)) => s,
            Some(_) => {
                return Err(de::Error::custom(format_args!(
                    "`{}` is not a string",
                    T::KEY
                )));
            }
            None => return T::untagged(obj).map_err(de::Error::custom),
        };
        T::from_rest(&tag, Value::Object(obj)).map_err(de::Error::custom)
    }
}

/// Implements `Deserialize` for a [`Tagged`](crate::wire::Tagged) type through
/// [`TaggedVisitor`](crate::wire::TaggedVisitor).
#[macro_export]
macro_rules! tagged_deserialize {
    ($ty:ty) => {
        impl<'de> $crate::__private::serde::Deserialize<'de> for $ty {
            fn deserialize<D: $crate::__private::serde::Deserializer<'de>>(
                d: D,
            ) -> ::core::result::Result<Self, D::Error> {
                d.deserialize_map($crate::wire::TaggedVisitor::new())
            }
        }
    };
}

/// Serializes `inner` as an object with `"type": tag` first and `inner`'s fields after it.
pub fn serialize_tagged<S: serde::Serializer, T: serde::Serialize>(
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
