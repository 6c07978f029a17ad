//! Open objects read in one pass: [`WireObject`], what [`wire_struct!`](crate::wire_struct)
//! implements, and the functions its code calls.

use std::fmt;
use std::marker::PhantomData;

use serde::de::{self, Deserialize, DeserializeOwned, DeserializeSeed, Deserializer, MapAccess};
use serde::ser::{SerializeMap, Serializer};
use serde_json::{Map, Value};

use super::{Json, Key};

/// An open object with declared fields, written by [`wire_struct!`](crate::wire_struct). It
/// is read in place: each key's value goes straight into its field of the value being built
/// (a large value is never built aside and then moved, at each level of the object tree,
/// into the next).
pub trait WireObject: Sized + Default {
    /// Which declared keys came (to check the required ones).
    type Seen: Default;
    /// The tag key and its literal value, when the object has one.
    const TAG: Option<(&'static str, &'static str)>;
    /// What a reader expects, for the error on a value that is not an object.
    const EXPECTING: &'static str;
    /// Reads one key's value into its field (or into the unknown keys).
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
    /// Writes the keys in declaration order, then the unknown ones, into a map being
    /// serialized (an enclosing layer may have written keys before them).
    fn write_fields<M: SerializeMap>(&self, m: &mut M) -> Result<(), M::Error>;
}

/// Deserializes into a value that is already in place: a large value is built where it
/// will stay, instead of being returned through every layer of serde and moved at each.
pub trait DeserializeInto {
    /// Reads the value into `out`, which must be *fresh*: its default, or for a union any
    /// variant whose fields are all at their default (a placeholder). A union whose variant
    /// is the one read is filled as it is; another variant is replaced.
    fn deserialize_into<'de, D: Deserializer<'de>>(d: D, out: &mut Self) -> Result<(), D::Error>;
}

/// Keys of an object read before its tag, with their values as written: they are given to
/// the variant once the tag has said which one it is.
pub type Pending = Vec<(String, Json)>;

/// Reads one value into a field (the seed [`fill_rest`] hands each key's value to).
struct FieldSeed<'a, 'k, T: WireObject> {
    /// The object being read.
    out: &'a mut T,
    /// Which declared keys came.
    seen: &'a mut T::Seen,
    /// The key.
    key: &'k str,
}

impl<'de, T: WireObject> DeserializeSeed<'de> for FieldSeed<'_, '_, T> {
    type Value = ();
    #[inline]
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        self.out.put(self.seen, self.key, d)
    }
}

/// Reads the rest of a map into `out` (a default value), after the keys seen before the tag
/// (`pending`) and the tag itself, then checks the required keys.
pub fn fill_rest<'de, T: WireObject, A: MapAccess<'de>>(
    map: A,
    pending: Pending,
    tag: Option<&str>,
    out: &mut T,
) -> Result<(), A::Error> {
    let mut seen = T::Seen::default();
    if let (Some((key, lit)), Some(tag)) = (T::TAG, tag) {
        if tag == lit {
            // The union read it to choose `T`: nothing to check.
            T::tag_seen(&mut seen);
        } else {
            put_tag(out, &mut seen, key, tag)?;
        }
    }
    if !pending.is_empty() {
        put_pending(out, &mut seen, pending).map_err(de::Error::custom)?;
    }
    fill_keys(map, seen, out)
}

/// Reads a tag that is not `T`'s literal into `T` (whose `put` says what is wrong with it).
/// Out of line: the one call of `put` in line is the one of the keys' loop.
#[inline(never)]
fn put_tag<T: WireObject, E: de::Error>(
    out: &mut T,
    seen: &mut T::Seen,
    key: &str,
    tag: &str,
) -> Result<(), E> {
    out.put(seen, key, de::value::StrDeserializer::<E>::new(tag))
}

/// Reads the keys that came before the tag, as written, into `T`. Out of line, as
/// [`put_tag`].
#[inline(never)]
fn put_pending<T: WireObject>(
    out: &mut T,
    seen: &mut T::Seen,
    pending: Pending,
) -> Result<(), serde_json::Error> {
    for (k, raw) in pending {
        let mut d = serde_json::Deserializer::from_str(raw.get());
        out.put(seen, &k, &mut d)?;
    }
    Ok(())
}

/// Reads the keys of a map into `out`, then checks the required keys.
#[inline]
fn fill_keys<'de, T: WireObject, A: MapAccess<'de>>(
    mut map: A,
    mut seen: T::Seen,
    out: &mut T,
) -> Result<(), A::Error> {
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
pub fn finish_rest<'de, T: WireObject, A: MapAccess<'de>>(
    map: A,
    pending: Pending,
    tag: Option<&str>,
) -> Result<T, A::Error> {
    let mut v = T::default();
    fill_rest(map, pending, tag, &mut v)?;
    Ok(v)
}

/// Visits a whole map into `T` (the `Deserialize` of a wire struct).
pub struct ObjectVisitor<T>(PhantomData<T>);

impl<T> ObjectVisitor<T> {
    /// The visitor.
    #[inline]
    pub fn new() -> Self {
        ObjectVisitor(PhantomData)
    }
}

impl<T> Default for ObjectVisitor<T> {
    fn default() -> Self {
        ObjectVisitor::new()
    }
}

impl<'de, T: WireObject> de::Visitor<'de> for ObjectVisitor<T> {
    type Value = T;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(T::EXPECTING)
    }
    #[inline]
    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<T, A::Error> {
        // A whole object: no keys before a tag, no tag read.
        let mut v = T::default();
        fill_keys(map, T::Seen::default(), &mut v)?;
        Ok(v)
    }
}

/// Checks a tag value against its literal.
pub fn check_tag<'de, D: Deserializer<'de>>(
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

/// Serializes a wire object as a map.
#[inline]
pub fn serialize_object<T: WireObject, S: Serializer>(v: &T, s: S) -> Result<S::Ok, S::Error> {
    let mut m = s.serialize_map(None)?;
    v.write_fields(&mut m)?;
    m.end()
}

/// Whether a field is left out when serializing (`val` and `lenient` fields of
/// [`wire_struct!`](crate::wire_struct)): an unset `Option`; any other type is written.
pub trait Absent {
    /// `true` when the field is not written.
    #[inline]
    fn absent(&self) -> bool {
        false
    }
}

impl<T> Absent for Option<T> {
    #[inline]
    fn absent(&self) -> bool {
        self.is_none()
    }
}
impl Absent for String {}
impl Absent for bool {}
impl Absent for i64 {}
impl Absent for u64 {}
impl Absent for f64 {}
impl Absent for Json {}
impl Absent for Value {}
impl Absent for Map<String, Value> {}
impl<T> Absent for Vec<T> {}

/// Reads a `lenient` field: the value as given, then typed when it has the field's shape
/// (see [`keep_or_set`]).
pub fn read_lenient<'de, D: Deserializer<'de>, T: DeserializeOwned + Default>(
    d: D,
    slot: &mut T,
    given: &mut Map<String, Value>,
    key: &str,
) -> Result<(), D::Error> {
    let v = Value::deserialize(d)?;
    keep_or_set(slot, given, key, v);
    Ok(())
}

/// Sets a declared field from a value when it has the field's shape (dropping an earlier
/// value kept as given); else leaves the field at its default and keeps the value, as given,
/// in the object's unknown keys, to be written back in the field's stead.
pub fn keep_or_set<T: DeserializeOwned + Default>(
    slot: &mut T,
    given: &mut Map<String, Value>,
    key: &str,
    v: Value,
) {
    match T::deserialize(&v) {
        Ok(t) => {
            *slot = t;
            given.remove(key);
        }
        Err(_) => {
            *slot = T::default();
            given.insert(key.to_owned(), v);
        }
    }
}

/// Whether a declared field is written as given: a value kept for it in the unknown keys
/// (it did not have the field's shape) while the field is still at its default.
#[inline]
pub fn given<T: Default + PartialEq>(extra: &Map<String, Value>, key: &str, field: &T) -> bool {
    extra.contains_key(key) && is_default(field)
}

/// Whether a value is its type's default.
#[inline]
pub fn is_default<T: Default + PartialEq>(v: &T) -> bool {
    *v == T::default()
}

/// Declares an open wire object: a struct with the declared fields, in wire order, an
/// `extra` of the keys it does not declare, and its one-pass serde (keys read in place, no
/// `#[serde(flatten)]` buffering, written back in declaration order then `extra`).
///
/// ```text
/// wire_struct! {
///     /// Docs.
///     pub struct Name [tag "type" = "lit" @ N] [as_given] [skip "k1", "k2"] {
///         /// Docs.
///         kind field: Type = "wireName",
///         kind(reader) field: Type = "wireName",
///     }
/// }
/// ```
///
/// The bracketed options, each optional, in this order:
///
/// - `[tag "key" = "lit" @ N]`: a literal-valued key (a discriminator), checked on read and
///   not stored; written after the first N declared fields.
/// - `[as_given]`: `extra` is a `serde_json::Map<String, Value>` of fields kept *as given*:
///   besides unknown keys, it may hold a declared key whose value did not have the field's
///   shape (`lenient` fields, and `from_fields_lenient`, a `pub(crate)` constructor from an
///   object's fields that reads every declared field that way). Such a value is written back
///   in the field's stead while the field is at its default; once the field is set, the
///   field wins. Without `[as_given]`, `extra` is an [`Extra`](crate::wire::Extra): unknown
///   keys only, in order, values as written, written back verbatim.
/// - `[skip "k", …]`: keys an enclosing layer reads (a frame's `type`): neither fields nor
///   kept, and not written from `extra`.
///
/// Field kinds (the slot is the field's type in the struct):
///
/// | kind | slot | absent | `null` | written |
/// | --- | --- | --- | --- | --- |
/// | `req` | `T` | error | as `T` reads it (a `Json` keeps it) | always |
/// | `req_in` | `T` | error | as `T` reads it | always; read in place ([`DeserializeInto`]) |
/// | `req_obj` | `Json` | error | error: must be an object | always |
/// | `req_nonempty` | `T` | error | as `T` reads it; empty is an error | always |
/// | `opt` | `Option<T>` | `None` | as `T` reads it (a `Json` keeps it) | when set |
/// | `opt_nn` | `Option<Json>` | `None` | error | when set |
/// | `opt_obj` | `Option<Json>` | `None` | error: must be an object | when set |
/// | `opt_null` | `Option<T>` | `None` | absent (the slot is left as it is) | when set |
/// | `val` | `T` | `T::default()` | as `T` reads it (an `Option` as `None`) | unless [`Absent`] |
/// | `lenient` | `T` | `T::default()` | as `T` reads it | unless [`Absent`]; needs `[as_given]` |
///
/// `req`, `opt` and `opt_null` take an optional reader, `kind(path)`: a function
/// `fn<'de, D: Deserializer<'de>>(D) -> Result<T, D::Error>` (for `opt_null`,
/// `Result<Option<T>, _>`, `None` being absent) that reads the value instead of `T`'s
/// `Deserialize`, for a protocol's own checks.
///
/// A `lenient` field reads the value as given, then as `T`: when it does not have that
/// shape, the field is left at its default and the value is kept in `extra`.
///
/// ```
/// harness_core::wire_struct! {
///     /// A text part.
///     pub struct TextPart [tag "type" = "text" @ 0] {
///         /// The text.
///         req text: String = "text",
///         /// Extra information (any JSON but `null`).
///         opt_nn metadata: harness_core::wire::Json = "metadata",
///     }
/// }
///
/// let p: TextPart = serde_json::from_str(r#"{"z":1,"text":"hi","type":"text","a":[2]}"#)?;
/// assert_eq!(p.text, "hi");
/// // Declared keys first (the tag at 0), then the unknown ones in the order they came.
/// assert_eq!(serde_json::to_string(&p)?, r#"{"type":"text","text":"hi","z":1,"a":[2]}"#);
/// assert!(serde_json::from_str::<TextPart>(r#"{"type":"text"}"#).is_err()); // `text` is required
/// assert!(serde_json::from_str::<TextPart>(r#"{"type":"text","text":"","metadata":null}"#).is_err());
/// # Ok::<(), serde_json::Error>(())
/// ```
///
/// ```
/// harness_core::wire_struct! {
///     /// A record whose fields are kept as given.
///     pub struct Record [as_given] [skip "type"] {
///         /// How long it took.
///         lenient ms: Option<u64> = "ms",
///         /// A note.
///         val note: Option<String> = "note",
///     }
/// }
///
/// let r: Record = serde_json::from_str(r#"{"type":"x","ms":"slow","note":null,"k":true}"#)?;
/// assert_eq!((r.ms, r.note.as_deref()), (None, None));
/// assert_eq!(r.extra["ms"], "slow"); // the wrong shape, kept as given
/// assert_eq!(serde_json::to_string(&r)?, r#"{"k":true,"ms":"slow"}"#);
/// # Ok::<(), serde_json::Error>(())
/// ```
#[macro_export]
macro_rules! wire_struct {
    (
        $(#[$m:meta])*
        pub struct $name:ident $([tag $tk:literal = $tv:literal @ $tpos:literal])? [as_given]
            $([skip $($skip:literal),* $(,)?])? {
            $( $(#[$fm:meta])* $kind:ident $(($with:path))? $field:ident : $ty:ty = $wire:literal ),* $(,)?
        }
    ) => {
        $crate::__wire_struct! {
            @as_given
            [$crate::__private::serde_json::Map<::std::string::String, $crate::__private::serde_json::Value>]
            ["Fields this version does not know, kept as given."]
            [concat!("a ", stringify!($name), " object")]
            // Read whole, in a loop of its own: the field match is best in line (measured).
            [inline]
            $(#[$m])*
            $name [$($tk, $tv, $tpos)?] [$($($skip),*)?]
            { $( $(#[$fm])* $kind $(($with))? $field : $ty = $wire ),* }
        }

        impl $name {
            /// Reads the struct from an object's fields whatever their shapes: a declared
            /// field whose value does not have the field's shape is kept in `extra`, as given.
            #[allow(dead_code)]
            pub(crate) fn from_fields_lenient(
                fields: $crate::__private::serde_json::Map<
                    ::std::string::String,
                    $crate::__private::serde_json::Value,
                >,
            ) -> Self {
                let mut out = <$name as ::core::default::Default>::default();
                for (k, v) in fields {
                    let key: &str = &k;
                    #[allow(unreachable_patterns)]
                    match key {
                        $( $wire => $crate::wire::keep_or_set(&mut out.$field, &mut out.extra, $wire, v), )*
                        $($( $skip => {} )*)?
                        _ => {
                            out.extra.insert(k, v);
                        }
                    }
                }
                out
            }
        }
    };
    (
        $(#[$m:meta])*
        pub struct $name:ident $([tag $tk:literal = $tv:literal @ $tpos:literal])?
            $([skip $($skip:literal),* $(,)?])? {
            $( $(#[$fm:meta])* $kind:ident $(($with:path))? $field:ident : $ty:ty = $wire:literal ),* $(,)?
        }
    ) => {
        $crate::__wire_struct! {
            @schema
            [$crate::wire::Extra]
            ["Keys the schema does not declare, kept in order and written back."]
            ["a JSON object"]
            // Mostly read as a union's variant: the field match out of line (measured).
            []
            $(#[$m])*
            $name [$($tk, $tv, $tpos)?] [$($($skip),*)?]
            { $( $(#[$fm])* $kind $(($with))? $field : $ty = $wire ),* }
        }
    };
}

/// The body of [`wire_struct!`](crate::wire_struct), for both kinds of `extra`.
#[doc(hidden)]
#[macro_export]
macro_rules! __wire_struct {
    (@tag) => { ::core::option::Option::None };
    (@tag $tk:literal, $tv:literal) => { ::core::option::Option::Some(($tk, $tv)) };
    (@pos) => { 0 };
    (@pos $p:literal) => { $p };

    (@unknown schema, $extra:expr, $key:ident, $d:ident) => {{
        let v = <$crate::wire::Json as $crate::__private::serde::Deserialize>::deserialize($d)?;
        $extra.insert($key, v);
    }};
    (@unknown as_given, $extra:expr, $key:ident, $d:ident) => {{
        let v = <$crate::__private::serde_json::Value as $crate::__private::serde::Deserialize>::deserialize($d)?;
        $extra.insert(::std::borrow::ToOwned::to_owned($key), v);
    }};

    (@write_field schema, $m:ident, $extra:expr, $v:expr, $kind:ident, $w:literal) => {
        $crate::__wire_field!(@write $kind, $m, $v, $w)
    };
    (@write_field as_given, $m:ident, $extra:expr, $v:expr, $kind:ident, $w:literal) => {
        // A value kept as given (it did not have the field's shape) is written from
        // `extra`, unless the field was set since.
        if !$crate::wire::given(&$extra, $w, &$v) {
            $crate::__wire_field!(@write $kind, $m, $v, $w)
        }
    };

    (@write_extra schema, $m:ident, $extra:expr, [$($w:literal => $v:expr),*] [$($skip:literal),*]) => {
        $extra.serialize_entries($m)
    };
    (@write_extra as_given, $m:ident, $extra:expr, [$($w:literal => $v:expr),*] [$($skip:literal),*]) => {{
        for (k, v) in &$extra {
            #[allow(unreachable_patterns)]
            let shadowed = match k.as_str() {
                $( $w => !$crate::wire::is_default(&$v), )*
                $( $skip => true, )*
                _ => false,
            };
            if !shadowed {
                $m.serialize_entry(k, v)?;
            }
        }
        ::core::result::Result::Ok(())
    }};

    (
        @$flavour:ident [$extra_ty:ty] [$extra_doc:expr] [$expecting:expr] [$($put_attr:meta)?]
        $(#[$m:meta])*
        $name:ident [$($tk:literal, $tv:literal, $tpos:literal)?] [$($skip:literal),*]
        { $( $(#[$fm:meta])* $kind:ident $(($with:path))? $field:ident : $ty:ty = $wire:literal ),* }
    ) => {
        $(#[$m])*
        #[derive(Clone, Debug, PartialEq, Default)]
        pub struct $name {
            $( $(#[$fm])* pub $field: $crate::__wire_field!(@ty $kind, $ty), )*
            #[doc = $extra_doc]
            pub extra: $extra_ty,
        }

        impl $crate::wire::Absent for $name {}

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
                const TAG: ::core::option::Option<(&'static str, &'static str)> =
                    $crate::__wire_struct!(@tag $($tk, $tv)?);
                const EXPECTING: &'static str = $expecting;

                #[allow(unreachable_code, unused_variables, unreachable_patterns)]
                $(#[$put_attr])?
                fn put<'de, D: $crate::__private::serde::Deserializer<'de>>(
                    &mut self,
                    seen: &mut Seen,
                    key: &str,
                    d: D,
                ) -> ::core::result::Result<(), D::Error> {
                    $(
                        if key == $tk {
                            $crate::wire::check_tag(d, $tk, $tv)?;
                            seen.__tag = true;
                            return ::core::result::Result::Ok(());
                        }
                    )?
                    match key {
                        $( $wire => {
                            $crate::__wire_field!(@set $kind $(($with))?, $ty, d, $wire, self.$field, seen.$field, self.extra);
                            seen.$field = true;
                        } )*
                        $( $skip => {
                            <$crate::__private::serde::de::IgnoredAny as $crate::__private::serde::Deserialize>::deserialize(d)?;
                        } )*
                        _ => $crate::__wire_struct!(@unknown $flavour, self.extra, key, d),
                    }
                    ::core::result::Result::Ok(())
                }

                fn tag_seen(seen: &mut Seen) {
                    seen.__tag = true;
                }

                #[allow(unused_variables)]
                fn check<E: $crate::__private::serde::de::Error>(
                    &self,
                    seen: &Seen,
                ) -> ::core::result::Result<(), E> {
                    $(
                        if !seen.__tag {
                            return ::core::result::Result::Err(E::missing_field($tk));
                        }
                    )?
                    $( $crate::__wire_field!(@check $kind, seen.$field, $wire); )*
                    ::core::result::Result::Ok(())
                }

                #[allow(unused_mut, unused_variables, unused_assignments)]
                fn write_fields<M: $crate::__private::serde::ser::SerializeMap>(
                    &self,
                    m: &mut M,
                ) -> ::core::result::Result<(), M::Error> {
                    const TAG_POS: usize = $crate::__wire_struct!(@pos $($tpos)?);
                    let tag = <Self as $crate::wire::WireObject>::TAG;
                    let mut i = 0usize;
                    if let (::core::option::Option::Some((k, v)), true) = (tag, TAG_POS == 0) {
                        m.serialize_entry(k, v)?;
                    }
                    $(
                        $crate::__wire_struct!(@write_field $flavour, m, self.extra, self.$field, $kind, $wire);
                        i += 1;
                        if let (::core::option::Option::Some((k, v)), true) = (tag, TAG_POS == i) {
                            m.serialize_entry(k, v)?;
                        }
                    )*
                    $crate::__wire_struct!(@write_extra $flavour, m, self.extra, [$($wire => self.$field),*] [$($skip),*])
                }
            }
        };

        impl $crate::__private::serde::Serialize for $name {
            fn serialize<S: $crate::__private::serde::Serializer>(
                &self,
                s: S,
            ) -> ::core::result::Result<S::Ok, S::Error> {
                $crate::wire::serialize_object(self, s)
            }
        }

        impl<'de> $crate::__private::serde::Deserialize<'de> for $name {
            fn deserialize<D: $crate::__private::serde::Deserializer<'de>>(
                d: D,
            ) -> ::core::result::Result<Self, D::Error> {
                d.deserialize_map($crate::wire::ObjectVisitor::<$name>::new())
            }
        }
    };
}

/// The field kinds of [`wire_struct!`](crate::wire_struct): their slot type, how a value is
/// read into the slot, whether the key is required, how the slot is written.
#[doc(hidden)]
#[macro_export]
macro_rules! __wire_field {
    (@ty opt, $t:ty) => { ::core::option::Option<$t> };
    (@ty opt_nn, $t:ty) => { ::core::option::Option<$t> };
    (@ty opt_obj, $t:ty) => { ::core::option::Option<$t> };
    (@ty opt_null, $t:ty) => { ::core::option::Option<$t> };
    (@ty $kind:ident, $t:ty) => { $t };

    // Reading: `$slot = …`, or `return Ok(())` to leave the slot (and the key not seen).
    (@set req_in, $t:ty, $d:ident, $w:literal, $slot:expr, $seen:expr, $extra:expr) => {{
        if $seen {
            // The key again: the last one wins, whole (the slot is fresh again).
            $slot = <$t as ::core::default::Default>::default();
        }
        <$t as $crate::wire::DeserializeInto>::deserialize_into($d, &mut $slot)?
    }};
    (@set req ($with:path), $t:ty, $d:ident, $w:literal, $slot:expr, $seen:expr, $extra:expr) => {
        $slot = $with($d)?
    };
    (@set opt ($with:path), $t:ty, $d:ident, $w:literal, $slot:expr, $seen:expr, $extra:expr) => {
        $slot = ::core::option::Option::Some($with($d)?)
    };
    (@set opt_null ($with:path), $t:ty, $d:ident, $w:literal, $slot:expr, $seen:expr, $extra:expr) => {
        match $with($d)? {
            ::core::option::Option::Some(v) => $slot = ::core::option::Option::Some(v),
            ::core::option::Option::None => return ::core::result::Result::Ok(()),
        }
    };
    (@set opt_null, $t:ty, $d:ident, $w:literal, $slot:expr, $seen:expr, $extra:expr) => {
        match <::core::option::Option<$t> as $crate::__private::serde::Deserialize>::deserialize($d)? {
            ::core::option::Option::Some(v) => $slot = ::core::option::Option::Some(v),
            ::core::option::Option::None => return ::core::result::Result::Ok(()),
        }
    };
    (@set lenient, $t:ty, $d:ident, $w:literal, $slot:expr, $seen:expr, $extra:expr) => {
        $crate::wire::read_lenient($d, &mut $slot, &mut $extra, $w)?
    };
    (@set $kind:ident, $t:ty, $d:ident, $w:literal, $slot:expr, $seen:expr, $extra:expr) => {
        $slot = $crate::__wire_field!(@read $kind, $t, $d, $w)
    };

    (@read req, $t:ty, $d:ident, $w:literal) => {
        <$t as $crate::__private::serde::Deserialize>::deserialize($d)?
    };
    (@read val, $t:ty, $d:ident, $w:literal) => {
        <$t as $crate::__private::serde::Deserialize>::deserialize($d)?
    };
    (@read opt, $t:ty, $d:ident, $w:literal) => {
        ::core::option::Option::Some(<$t as $crate::__private::serde::Deserialize>::deserialize($d)?)
    };
    (@read opt_nn, $t:ty, $d:ident, $w:literal) => {{
        let j = <$crate::wire::Json as $crate::__private::serde::Deserialize>::deserialize($d)?;
        if j.is_null() {
            return ::core::result::Result::Err($crate::__private::serde::de::Error::custom(
                concat!($w, ": must not be null"),
            ));
        }
        ::core::option::Option::Some(j)
    }};
    (@read req_obj, $t:ty, $d:ident, $w:literal) => {{
        let j = <$crate::wire::Json as $crate::__private::serde::Deserialize>::deserialize($d)?;
        if !j.is_object() {
            return ::core::result::Result::Err($crate::__private::serde::de::Error::custom(
                concat!($w, ": must be an object"),
            ));
        }
        j
    }};
    (@read opt_obj, $t:ty, $d:ident, $w:literal) => {
        ::core::option::Option::Some($crate::__wire_field!(@read req_obj, $t, $d, $w))
    };
    (@read req_nonempty, $t:ty, $d:ident, $w:literal) => {{
        let v = <$t as $crate::__private::serde::Deserialize>::deserialize($d)?;
        if v.is_empty() {
            return ::core::result::Result::Err($crate::__private::serde::de::Error::custom(
                concat!($w, ": must not be empty"),
            ));
        }
        v
    }};

    // Fails when a required key did not come.
    (@check req, $seen:expr, $w:literal) => { $crate::__wire_field!(@check req_in, $seen, $w) };
    (@check req_obj, $seen:expr, $w:literal) => { $crate::__wire_field!(@check req_in, $seen, $w) };
    (@check req_nonempty, $seen:expr, $w:literal) => { $crate::__wire_field!(@check req_in, $seen, $w) };
    (@check req_in, $seen:expr, $w:literal) => {
        if !$seen {
            return ::core::result::Result::Err(
                $crate::__private::serde::de::Error::missing_field($w),
            );
        }
    };
    (@check $kind:ident, $seen:expr, $w:literal) => {};

    // Writing.
    (@write req, $m:ident, $v:expr, $w:literal) => { $m.serialize_entry($w, &$v)? };
    (@write req_in, $m:ident, $v:expr, $w:literal) => { $m.serialize_entry($w, &$v)? };
    (@write req_obj, $m:ident, $v:expr, $w:literal) => { $m.serialize_entry($w, &$v)? };
    (@write req_nonempty, $m:ident, $v:expr, $w:literal) => { $m.serialize_entry($w, &$v)? };
    (@write val, $m:ident, $v:expr, $w:literal) => {
        if !$crate::wire::Absent::absent(&$v) {
            $m.serialize_entry($w, &$v)?;
        }
    };
    (@write lenient, $m:ident, $v:expr, $w:literal) => { $crate::__wire_field!(@write val, $m, $v, $w) };
    (@write $kind:ident, $m:ident, $v:expr, $w:literal) => {
        if let ::core::option::Option::Some(v) = &$v {
            $m.serialize_entry($w, v)?;
        }
    };
}
