//! `harness_core::wire` on small objects of its own, from a crate of their own: both kinds of
//! `extra`, both kinds of union, `Tagged`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::json_value;
use harness_core::wire::*;
use proptest::prelude::*;
use serde::Deserialize;
use serde_json::{Value, json};

harness_core::wire_struct! {
    /// A strict object, its tag after `id`.
    pub struct Strict [tag "type" = "strict" @ 1] {
        /// Required.
        req id: String = "id",
        /// Optional; `null` is an error.
        opt name: String = "name",
        /// Any JSON but `null`.
        opt_nn meta: Json = "meta",
        /// Optional; `null` is absent.
        opt_null n: u64 = "n",
        /// Any JSON, `null` included, as written.
        opt value: Json = "value",
    }
}

harness_core::wire_struct! {
    /// Another variant.
    pub struct Other [tag "type" = "other" @ 0] {
        /// An object.
        opt_obj body: Json = "body",
    }
}

harness_core::wire_union! {
    /// Closed.
    pub enum Closed ["type"] {
        /// `strict`
        Strict(Strict) = "strict",
        /// `other`
        Other(Other) = "other",
    }
}

harness_core::wire_open_union! {
    /// Open.
    pub enum Open ["type"] {
        /// `strict`
        Strict(Strict) = "strict",
        /// `other`
        Other(Other) = "other",
    }
}

harness_core::wire_struct! {
    /// Fields kept as given.
    pub struct Given [as_given] [skip "type"] {
        /// Kept as given when it is not a number.
        lenient ms: Option<u64> = "ms",
        /// Strict.
        val note: Option<String> = "note",
        /// Always written.
        val text: String = "text",
    }
}

fn strict(text: &str) -> Result<Strict, serde_json::Error> {
    serde_json::from_str(text)
}

#[test]
fn declared_keys_in_order_then_unknown_ones_as_they_came() {
    let s = strict(r#"{"zeta":1,"type":"strict","alpha":{"b": 2, "a":1},"name":"n","id":"a"}"#)
        .unwrap();
    assert_eq!(s.id, "a");
    let keys: Vec<&str> = s.extra.iter().map(|(k, _)| k).collect();
    assert_eq!(keys, ["zeta", "alpha"]);
    // The tag at position 1, raw values byte for byte (the spaces too).
    assert_eq!(
        serde_json::to_string(&s).unwrap(),
        r#"{"id":"a","type":"strict","name":"n","zeta":1,"alpha":{"b": 2, "a":1}}"#
    );
}

#[test]
fn null_handling_per_kind() {
    assert!(strict(r#"{"type":"strict","id":"a","name":null}"#).is_err());
    let e = strict(r#"{"type":"strict","id":"a","meta":null}"#).unwrap_err();
    assert!(e.to_string().starts_with("meta: must not be null"), "{e}");
    let s = strict(r#"{"type":"strict","id":"a","n":null,"value":null}"#).unwrap();
    assert_eq!(s.n, None);
    assert_eq!(s.value.as_ref().map(Json::get), Some("null"));
    // `opt_null`: a `null` leaves what an earlier key set.
    assert_eq!(
        strict(r#"{"type":"strict","id":"a","n":3,"n":null}"#)
            .unwrap()
            .n,
        Some(3)
    );
    let e = serde_json::from_str::<Other>(r#"{"type":"other","body":[1]}"#).unwrap_err();
    assert!(e.to_string().starts_with("body: must be an object"), "{e}");
}

#[test]
fn required_keys_and_the_tag() {
    let e = strict(r#"{"type":"strict"}"#).unwrap_err();
    assert!(e.to_string().starts_with("missing field `id`"), "{e}");
    let e = strict(r#"{"id":"a"}"#).unwrap_err();
    assert!(e.to_string().starts_with("missing field `type`"), "{e}");
    let e = strict(r#"{"id":"a","type":"other"}"#).unwrap_err();
    assert!(
        e.to_string()
            .starts_with(r#"type: expected "strict", got "other""#),
        "{e}"
    );
    let e = strict("[]").unwrap_err();
    assert!(e.to_string().contains("expected a JSON object"), "{e}");
}

#[test]
fn a_tag_that_is_not_first_gets_the_keys_before_it_in_order() {
    let text = r#"{"x":[1, 2],"id":"a","type":"strict","y":true}"#;
    assert_eq!(
        serde_json::from_str::<Closed>(text).unwrap().tag(),
        "strict"
    );
    let Closed::Strict(s) = serde_json::from_str::<Closed>(text).unwrap() else {
        panic!()
    };
    assert_eq!(s.id, "a");
    let keys: Vec<&str> = s.extra.iter().map(|(k, _)| k).collect();
    assert_eq!(keys, ["x", "y"]);
    assert_eq!(s.extra.get("x").unwrap().get(), "[1, 2]");
    let Open::Strict(o) = serde_json::from_str::<Open>(text).unwrap() else {
        panic!()
    };
    assert_eq!(o, s);
    let e = serde_json::from_str::<Closed>(r#"{"id":"a","type":"nope"}"#).unwrap_err();
    assert!(
        e.to_string().starts_with(r#"type: unknown value "nope""#),
        "{e}"
    );
    let e = serde_json::from_str::<Closed>(r#"{"id":"a"}"#).unwrap_err();
    assert!(e.to_string().starts_with("missing field `type`"), "{e}");
}

#[test]
fn an_open_union_keeps_an_unknown_tag_and_reads_in_place() {
    let text = r#"{"a":1,"type":"later","b":{"c":null}}"#;
    let o: Open = serde_json::from_str(text).unwrap();
    let Open::Unknown(u) = &o else { panic!() };
    assert_eq!(u.tag, "later");
    assert_eq!(o.tag(), "later");
    assert_eq!(
        serde_json::to_string(&o).unwrap(),
        r#"{"type":"later","a":1,"b":{"c":null}}"#
    );
    // Into a placeholder of the variant read: filled where it is.
    let mut out = Open::Strict(Strict::default());
    let mut d = serde_json::Deserializer::from_str(r#"{"type":"strict","id":"b"}"#);
    Open::deserialize_into(&mut d, &mut out).unwrap();
    assert_eq!(out.tag(), "strict");
    let Open::Strict(s) = &out else { panic!() };
    assert_eq!(s.id, "b");
}

#[test]
fn a_lenient_field_keeps_a_value_of_another_shape_as_given() {
    let g: Given = serde_json::from_str(r#"{"type":"x","ms":"slow","text":"t","k":[1]}"#).unwrap();
    assert_eq!(g.ms, None);
    assert_eq!(g.extra["ms"], "slow");
    assert!(!g.extra.contains_key("type")); // skipped
    assert_eq!(
        serde_json::to_string(&g).unwrap(),
        r#"{"text":"t","k":[1],"ms":"slow"}"#
    );
    // Once the field is set, it wins over the value kept as given.
    let mut set = g.clone();
    set.ms = Some(5);
    assert_eq!(
        serde_json::to_string(&set).unwrap(),
        r#"{"ms":5,"text":"t","k":[1]}"#
    );
    // A later key of the right shape drops the one kept.
    let g: Given = serde_json::from_str(r#"{"ms":"slow","ms":7}"#).unwrap();
    assert_eq!((g.ms, g.extra.contains_key("ms")), (Some(7), false));
    // A strict (`val`) field of another shape is an error…
    let e = serde_json::from_str::<Given>(r#"{"note":1}"#).unwrap_err();
    assert!(e.to_string().contains("expected a string"), "{e}");
    assert!(
        serde_json::from_str::<Given>("1")
            .unwrap_err()
            .to_string()
            .contains("expected a Given object")
    );
    // …but not when read from fields leniently.
    let Value::Object(fields) = json!({"note": 1, "text": "t", "type": "x"}) else {
        panic!()
    };
    let g = Given::from_fields_lenient(fields);
    assert_eq!((g.note.as_deref(), g.text.as_str()), (None, "t"));
    assert_eq!(
        serde_json::to_value(&g).unwrap(),
        json!({"text": "t", "note": 1})
    );
    // `val` of an `Option`: `null` reads as `None` and is not written.
    let g: Given = serde_json::from_str(r#"{"note":"a","note":null}"#).unwrap();
    assert_eq!(g.note, None);
    assert_eq!(serde_json::to_string(&g).unwrap(), r#"{"text":""}"#);
}

#[derive(Debug, PartialEq, Deserialize)]
struct Text {
    text: String,
    #[serde(flatten)]
    extra: serde_json::Map<String, Value>,
}

#[derive(Debug, PartialEq)]
enum Part {
    Text(Text),
    Other(String, serde_json::Map<String, Value>),
}

impl<'de> Tagged<'de> for Part {
    const EXPECTING: &'static str = "a part object";
    fn from_rest<D: serde::Deserializer<'de>>(tag: &str, rest: D) -> Result<Self, D::Error> {
        Ok(match tag {
            "text" => Part::Text(Text::deserialize(rest)?),
            other => Part::Other(other.to_owned(), serde_json::Map::deserialize(rest)?),
        })
    }
    fn untagged(fields: serde_json::Map<String, Value>) -> Result<Self, serde_json::Error> {
        Ok(Part::Other(String::new(), fields))
    }
}
harness_core::tagged_deserialize!(Part);

#[test]
fn tagged_reads_the_tag_first_or_gathers_the_object() {
    let fast: Part = serde_json::from_str(r#"{"type":"text","text":"hi","k":1}"#).unwrap();
    let slow: Part = serde_json::from_str(r#"{"k":1,"text":"hi","type":"text"}"#).unwrap();
    assert_eq!(fast, slow);
    let Part::Text(t) = &fast else { panic!() };
    assert_eq!((t.text.as_str(), &t.extra["k"]), ("hi", &json!(1)));
    // No tag: the type's default shape.
    let p: Part = serde_json::from_str(r#"{"text":"hi"}"#).unwrap();
    assert!(matches!(p, Part::Other(t, f) if t.is_empty() && f["text"] == "hi"));
    let p: Part = serde_json::from_str("{}").unwrap();
    assert!(matches!(p, Part::Other(t, f) if t.is_empty() && f.is_empty()));
    // A tag that is not a string.
    let e = serde_json::from_str::<Part>(r#"{"k":1,"type":2}"#).unwrap_err();
    assert!(e.to_string().starts_with("`type` is not a string"), "{e}");
    let e = serde_json::from_str::<Part>(r#"{"type":2}"#).unwrap_err();
    assert!(e.to_string().contains("expected a string"), "{e}");
    // Written back with the tag first.
    #[derive(serde::Serialize)]
    struct T {
        text: &'static str,
    }
    let mut out = Vec::new();
    serialize_tagged(
        &mut serde_json::Serializer::new(&mut out),
        "text",
        &T { text: "x" },
    )
    .unwrap();
    assert_eq!(out, br#"{"type":"text","text":"x"}"#);
}

proptest! {
    /// Any object of the schema, its keys in any order with unknown ones among them, reads
    /// and writes back as: the declared keys in their order, then the unknown ones in the
    /// order they came, every value as written.
    #[test]
    fn any_object_round_trips(
        id in "[a-z\"\\\\\u{263a}]{0,6}",
        name in prop::option::of("[a-z]{0,4}"),
        value in prop::option::of(json_value()),
        unknown in prop::collection::vec(("u[a-z]{0,3}", json_value()), 0..5),
        order in any::<prop::sample::Index>(),
        tag_at in any::<prop::sample::Index>(),
        picks in any::<u64>(),
    ) {
        let mut unknown_unique: Vec<(String, Value)> = Vec::new();
        for (k, v) in unknown {
            if !unknown_unique.iter().any(|(u, _)| *u == k) {
                unknown_unique.push((k, v));
            }
        }
        let q = |s: &str| serde_json::to_string(s).unwrap();
        let mut declared = vec![format!("{}:{}", q("id"), q(&id))];
        if let Some(n) = &name {
            declared.push(format!("{}:{}", q("name"), q(n)));
        }
        if let Some(v) = &value {
            declared.push(format!("{}:{}", q("value"), v));
        }
        let unknown_entries: Vec<String> =
            unknown_unique.iter().map(|(k, v)| format!("{}:{}", q(k), v)).collect();
        // Interleave the declared keys (in a rotated order) and the unknown ones (in
        // theirs); the tag anywhere.
        let mut rotated = declared.clone();
        let len = rotated.len();
        rotated.rotate_left(order.index(len));
        let mut d = rotated.into_iter().peekable();
        let mut u = unknown_entries.iter().cloned().peekable();
        let mut bits = picks;
        let mut entries = Vec::new();
        while let Some(take_unknown) = match (d.peek(), u.peek()) {
            (Some(_), Some(_)) => {
                bits = bits.rotate_right(1);
                Some(bits & 1 == 1)
            }
            (None, Some(_)) => Some(true),
            (Some(_), None) => Some(false),
            (None, None) => None,
        } {
            let next = if take_unknown { u.next() } else { d.next() };
            entries.extend(next);
        }
        entries.insert(tag_at.index(entries.len() + 1), format!("{}:{}", q("type"), q("strict")));
        let text = format!("{{{}}}", entries.join(","));

        let s = strict(&text).unwrap();
        let Closed::Strict(c) = serde_json::from_str::<Closed>(&text).unwrap() else { panic!() };
        prop_assert_eq!(&c, &s);
        let Open::Strict(o) = serde_json::from_str::<Open>(&text).unwrap() else { panic!() };
        prop_assert_eq!(&o, &s);

        let mut want = vec![declared[0].clone(), format!("{}:{}", q("type"), q("strict"))];
        want.extend(declared[1..].iter().cloned());
        want.extend(unknown_entries);
        let written = serde_json::to_string(&s).unwrap();
        prop_assert_eq!(&written, &format!("{{{}}}", want.join(",")));
        prop_assert_eq!(strict(&written).unwrap(), s);
    }
}
