//! Serde plumbing shared by every message: flat structs that keep unknown fields without
//! `#[serde(flatten)]` (which buffers the whole object through serde's `Content`, as slow as
//! an internally tagged enum).
//!
//! [`wire_struct!`] declares a struct whose known fields are matched by their wire name and
//! whose every other field lands in `extra`, kept as given. Keys are borrowed from the input
//! when they have no escapes, so a known key costs a string compare and nothing else.

use std::borrow::Cow;
use std::fmt;

use serde::Deserializer;
use serde::de::{self, Visitor};
use serde_json::{Map, Value};

/// Whether a field is left out when serializing (an unset `Option`).
pub(crate) trait Absent {
    /// `true` when the field is not written.
    fn absent(&self) -> bool {
        false
    }
}

impl<T> Absent for Option<T> {
    fn absent(&self) -> bool {
        self.is_none()
    }
}
impl Absent for String {}
impl Absent for u64 {}
impl Absent for bool {}
impl Absent for Value {}
impl Absent for Map<String, Value> {}
impl<T> Absent for Vec<T> {}

/// A map key, borrowed from the input when it has no escapes.
pub(crate) struct Key<'de>(pub(crate) Cow<'de, str>);

impl<'de> de::Deserialize<'de> for Key<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Key<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a field name")
            }
            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
                Ok(Key(Cow::Borrowed(v)))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
                Ok(Key(Cow::Owned(v.to_owned())))
            }
            fn visit_string<E: de::Error>(self, v: String) -> Result<Self::Value, E> {
                Ok(Key(Cow::Owned(v)))
            }
        }
        d.deserialize_str(V)
    }
}

/// Declares a flat wire struct: known fields by wire name, every other field kept in
/// `extra`. `skip` lists keys consumed by an enclosing layer (the frame's `type`, an event's
/// `name`) that are neither fields nor kept. `lenient` structs keep a known field whose value
/// does not have the typed shape in `extra` instead of failing (the turn record, whose
/// fields are "kept as given").
macro_rules! wire_struct {
    (
        $(#[$meta:meta])*
        pub struct $name:ident {
            skip: [$($skip:literal),*],
            lenient: $lenient:literal,
            $(
                $(#[$fmeta:meta])*
                pub $field:ident : $ty:ty = $wire:literal,
            )*
        }
    ) => {
        $(#[$meta])*
        #[derive(Clone, Debug, PartialEq, Default)]
        pub struct $name {
            $(
                $(#[$fmeta])*
                pub $field: $ty,
            )*
            /// Fields this version does not know, kept as given.
            pub extra: ::serde_json::Map<String, ::serde_json::Value>,
        }

        impl $crate::wire::Absent for $name {}

        impl $name {
            /// Writes the fields (known first, then `extra`) into a map being serialized.
            #[allow(dead_code)]
            pub(crate) fn serialize_fields<M: ::serde::ser::SerializeMap>(
                &self,
                map: &mut M,
            ) -> Result<(), M::Error> {
                $(
                    // A value kept in `extra` because it did not have the typed shape is
                    // written back as given, unless the typed field was set since.
                    let given = self.extra.contains_key($wire)
                        && self.$field == <$ty as ::std::default::Default>::default();
                    if !given && !$crate::wire::Absent::absent(&self.$field) {
                        map.serialize_entry($wire, &self.$field)?;
                    }
                )*
                for (k, v) in &self.extra {
                    let shadowed = match k.as_str() {
                        $($wire => self.$field != <$ty as ::std::default::Default>::default(),)*
                        $($skip => true,)*
                        _ => false,
                    };
                    if !shadowed {
                        map.serialize_entry(k, v)?;
                    }
                }
                Ok(())
            }
        }

        impl $name {
            /// Reads the struct from an object's fields whatever their shapes: a known field
            /// whose value does not have the typed shape is kept in `extra`, as given (what
            /// `lenient` structs always do; the fallback of strict ones).
            #[allow(dead_code)]
            pub(crate) fn from_fields_lenient(
                fields: ::serde_json::Map<String, ::serde_json::Value>,
            ) -> Self {
                let mut out = $name::default();
                for (k, v) in fields {
                    let key: &str = &k;
                    match key {
                        $(
                            $wire => match <$ty as ::serde::Deserialize>::deserialize(&v) {
                                Ok(t) => {
                                    out.$field = t;
                                    out.extra.remove($wire);
                                }
                                Err(_) => {
                                    out.$field = ::std::default::Default::default();
                                    out.extra.insert(k, v);
                                }
                            },
                        )*
                        $( $skip => {} )*
                        _ => {
                            out.extra.insert(k, v);
                        }
                    }
                }
                out
            }
        }

        impl ::serde::Serialize for $name {
            fn serialize<S: ::serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                use ::serde::ser::SerializeMap;
                let mut map = s.serialize_map(None)?;
                self.serialize_fields(&mut map)?;
                map.end()
            }
        }

        impl<'de> ::serde::Deserialize<'de> for $name {
            fn deserialize<D: ::serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                struct V;
                impl<'de> ::serde::de::Visitor<'de> for V {
                    type Value = $name;
                    fn expecting(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                        f.write_str(concat!("a ", stringify!($name), " object"))
                    }
                    fn visit_map<A: ::serde::de::MapAccess<'de>>(
                        self,
                        mut map: A,
                    ) -> Result<$name, A::Error> {
                        let mut out = $name::default();
                        while let Some(key) = map.next_key::<$crate::wire::Key<'de>>()? {
                            match &*key.0 {
                                $(
                                    $wire => {
                                        if $lenient {
                                            let v: ::serde_json::Value = map.next_value()?;
                                            // A repeated key: the last one wins, typed or kept.
                                            match <$ty as ::serde::Deserialize>::deserialize(&v) {
                                                Ok(t) => {
                                                    out.$field = t;
                                                    out.extra.remove($wire);
                                                }
                                                Err(_) => {
                                                    out.$field = ::std::default::Default::default();
                                                    out.extra.insert(key.0.into_owned(), v);
                                                }
                                            }
                                        } else {
                                            out.$field = map.next_value()?;
                                        }
                                    }
                                )*
                                $(
                                    $skip => {
                                        map.next_value::<::serde::de::IgnoredAny>()?;
                                    }
                                )*
                                _ => {
                                    let v: ::serde_json::Value = map.next_value()?;
                                    out.extra.insert(key.0.into_owned(), v);
                                }
                            }
                        }
                        Ok(out)
                    }
                }
                d.deserialize_map(V)
            }
        }
    };
}

pub(crate) use wire_struct;
