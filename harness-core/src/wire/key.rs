//! [`Key`]: a string borrowed from the input when it has no escapes (an object key, a tag, an
//! enum value), and [`wire_enum!`](crate::wire_enum), a string enum that keeps unknown values.

use std::borrow::Cow;
use std::fmt;

use serde::de::{self, Deserialize, Deserializer, Visitor};

/// A string borrowed from the input when it has no escapes (else owned): an object key, a
/// tag, an enum value. A known key then costs a compare and no allocation.
///
/// ```
/// use harness_core::wire::Key;
/// let k: Key<'_> = serde_json::from_str(r#""type""#).unwrap();
/// assert!(matches!(k.0, std::borrow::Cow::Borrowed("type")));
/// let k: Key<'_> = serde_json::from_str(r#""ty\u0070e""#).unwrap();
/// assert_eq!(k.0, "type"); // unescaped, so owned
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Key<'a>(pub Cow<'a, str>);

impl<'de: 'a, 'a> Deserialize<'de> for Key<'a> {
    #[inline]
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> Visitor<'de> for V<'a> {
            type Value = Key<'a>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string")
            }
            #[inline]
            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Key<'a>, E> {
                Ok(Key(Cow::Borrowed(v)))
            }
            #[inline]
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Key<'a>, E> {
                Ok(Key(Cow::Owned(v.to_owned())))
            }
            #[inline]
            fn visit_string<E: de::Error>(self, v: String) -> Result<Key<'a>, E> {
                Ok(Key(Cow::Owned(v)))
            }
        }
        d.deserialize_str(V(std::marker::PhantomData))
    }
}

/// Declares a string enum with known values and `Other(String)` for the rest (a protocol that
/// says to ignore what a later version adds keeps an unknown value; it is not an error).
///
/// ```
/// harness_core::wire_enum! {
///     /// A status.
///     pub enum Status {
///         /// `done`
///         Done = "done",
///     }
/// }
/// let s: Status = serde_json::from_str(r#""later""#).unwrap();
/// assert_eq!(s, Status::Other("later".into()));
/// assert_eq!(serde_json::to_string(&Status::Done).unwrap(), r#""done""#);
/// ```
#[macro_export]
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
            Other(::std::string::String),
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

        impl ::core::convert::From<&str> for $name {
            fn from(s: &str) -> Self {
                match s {
                    $( $lit => $name::$var, )*
                    other => $name::Other(::std::borrow::ToOwned::to_owned(other)),
                }
            }
        }

        impl ::core::fmt::Display for $name {
            fn fmt(&self, f: &mut ::core::fmt::Formatter<'_>) -> ::core::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl $crate::__private::serde::Serialize for $name {
            fn serialize<S: $crate::__private::serde::Serializer>(
                &self,
                s: S,
            ) -> ::core::result::Result<S::Ok, S::Error> {
                s.serialize_str(self.as_str())
            }
        }

        impl<'de> $crate::__private::serde::Deserialize<'de> for $name {
            fn deserialize<D: $crate::__private::serde::Deserializer<'de>>(
                d: D,
            ) -> ::core::result::Result<Self, D::Error> {
                let k = <$crate::wire::Key<'de> as $crate::__private::serde::Deserialize>::deserialize(d)?;
                ::core::result::Result::Ok(<$name as ::core::convert::From<&str>>::from(&*k.0))
            }
        }
    };
}
