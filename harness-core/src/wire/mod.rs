//! The JSON machinery under the protocol crates' wire types: raw JSON values kept as
//! written, unknown keys kept, and the macros that write one-pass (de)serializers for open
//! objects and tagged unions.
//!
//! Why not serde's derive: protocol objects are *open* (unknown keys are kept and written
//! back), keys come out in the schema's declaration order, a schema may reject `null` on an
//! optional field, and tagged unions must not buffer the whole object the way
//! `#[serde(tag = "type")]` does (or `#[serde(flatten)]`, which goes through the same
//! buffer). The visitors here read each key straight into its field, and a tag when it comes
//! (first, in practice): one pass, no `Value` tree.
//!
//! - [`Json`]: one value kept exactly as written; [`Extra`]: the keys of an object its schema
//!   does not declare, in order; [`Key`]: a string borrowed from the input.
//! - [`wire_struct!`](crate::wire_struct): an open object ([`WireObject`]), strict to its
//!   schema or with its fields kept as given; [`wire_enum!`](crate::wire_enum): a string enum
//!   that keeps unknown values.
//! - [`wire_union!`](crate::wire_union) / [`wire_open_union!`](crate::wire_open_union):
//!   unions of wire objects keyed on a tag; [`Tagged`]: unions of any `Deserialize` types.
//!
//! The macros name their dependencies through `$crate`, so a crate that uses them needs
//! neither `serde` nor `serde_json` itself.

mod json;
mod key;
mod object;
mod tagged;

pub use json::{Extra, Json};
pub use key::Key;
pub use object::{
    Absent, DeserializeInto, ObjectVisitor, Pending, WireObject, check_tag, fill_rest, finish_rest,
    given, is_default, keep_or_set, read_lenient, serialize_object,
};
pub use tagged::{Tagged, TaggedVisitor, UnknownObject, fill_variant, seek_tag, serialize_tagged};
