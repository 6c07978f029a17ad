//! How deep an event nests: the journal never stores an event its reader cannot read back,
//! and never recurses into one too deep to serialize safely.
//!
//! A stored event is read back with `serde_json`, whose recursion limit takes JSON nested at
//! most [`MAX_EVENT_DEPTH`] arrays and objects deep. An event nesting deeper could be
//! written and hashed, but every later read of its session would fail: it is refused when it
//! is canonicalized, before anything is journaled.

use harness_core::event::{Event, EventBody};
use harness_core::message::{JsonObject, Message, Part, ToolResult};
use serde_json::Value;

/// The deepest nesting of arrays and objects an event's JSON may reach in the journal: what
/// its reader (`serde_json`, recursion limit 128) reads back.
pub const MAX_EVENT_DEPTH: usize = 127;

/// Why an event nesting too deep is refused.
pub(crate) fn too_deep() -> String {
    format!(
        "the event nests deeper than {MAX_EVENT_DEPTH} levels of JSON, more than the journal reads back"
    )
}

/// One container of an event's body, for the walk.
enum Node<'a> {
    Part(&'a Part),
    Object(&'a JsonObject),
    Value(&'a Value),
}

/// The most containers (message parts, JSON arrays and objects) nested along any path of the
/// event's body, counted without recursion; stops counting past [`MAX_EVENT_DEPTH`].
///
/// Each is at least one level of the event's JSON, so the JSON nests at least this deep; and
/// at most `3 + 3 ×` this deep ([`may_exceed`]): the envelope puts a body's parts at level 4
/// and its maps at level 3, and a part is at most three levels (its object, its variant's
/// object, the array of the parts it holds) before the next container counted.
pub(crate) fn nesting(event: &Event) -> usize {
    let mut stack: Vec<(Node<'_>, usize)> = Vec::new();
    match &event.body {
        EventBody::Input(m) | EventBody::Output(m) => return message_nesting(m),
        EventBody::ToolCall(c) => stack.push((Node::Object(&c.args), 1)),
        EventBody::ToolResult(r) => push_result(&mut stack, r, 1),
        EventBody::Unknown { fields, .. } => {
            stack.extend(fields.values().map(|v| (Node::Value(v), 1)));
        }
        _ => {}
    }
    walk(stack)
}

/// [`nesting`] of an INPUT or OUTPUT event holding `m`.
pub(crate) fn message_nesting(m: &Message) -> usize {
    walk(m.parts.iter().map(|p| (Node::Part(p), 1)).collect())
}

fn walk(mut stack: Vec<(Node<'_>, usize)>) -> usize {
    let mut max = 0;
    while let Some((node, depth)) = stack.pop() {
        let is_container = match node {
            Node::Value(v) => matches!(v, Value::Array(_) | Value::Object(_)),
            _ => true,
        };
        if !is_container {
            continue;
        }
        max = max.max(depth);
        if max > MAX_EVENT_DEPTH {
            break;
        }
        let next = depth + 1;
        match node {
            Node::Part(Part::Data(d)) => stack.push((Node::Object(&d.data), next)),
            Node::Part(Part::ToolCall(c)) => stack.push((Node::Object(&c.args), next)),
            Node::Part(Part::ToolResult(r)) => push_result(&mut stack, r, next),
            Node::Part(Part::Reasoning(r)) => {
                stack.extend(r.summary.iter().map(|p| (Node::Part(p), next)));
            }
            Node::Part(_) => {}
            Node::Object(o) | Node::Value(Value::Object(o)) => {
                stack.extend(o.values().map(|v| (Node::Value(v), next)));
            }
            Node::Value(Value::Array(a)) => stack.extend(a.iter().map(|v| (Node::Value(v), next))),
            Node::Value(_) => {}
        }
    }
    max
}

fn push_result<'a>(stack: &mut Vec<(Node<'a>, usize)>, r: &'a ToolResult, depth: usize) {
    if let Some(o) = &r.output {
        stack.push((Node::Object(o), depth));
    }
    stack.extend(r.content.iter().map(|p| (Node::Part(p), depth)));
}

/// Whether an event whose [`nesting`] is `nesting` can nest deeper than
/// [`MAX_EVENT_DEPTH`] (else its JSON need not be scanned).
pub(crate) fn may_exceed(nesting: usize) -> bool {
    3 + 3 * nesting > MAX_EVENT_DEPTH
}

/// How deep JSON text nests: the most arrays and objects open at once, strings skipped.
pub(crate) fn json_depth(json: &[u8]) -> usize {
    let (mut depth, mut max) = (0usize, 0usize);
    let mut in_string = false;
    let mut escaped = false;
    for &b in json {
        if in_string {
            if escaped {
                escaped = false;
            } else if b == b'\\' {
                escaped = true;
            } else if b == b'"' {
                in_string = false;
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'[' | b'{' => {
                depth += 1;
                max = max.max(depth);
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    max
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use harness_core::message::{DataPart, ReasoningPart, Role, ToolCall};

    use super::*;
    use crate::hash::canonical_event;

    fn nested(depth: usize) -> Value {
        let mut v = serde_json::json!(1);
        for i in 0..depth {
            v = if i % 2 == 0 {
                Value::Array(vec![v])
            } else {
                let mut o = JsonObject::new();
                o.insert("k".into(), v);
                Value::Object(o)
            };
        }
        v
    }

    fn data(depth: usize) -> Part {
        let mut data = JsonObject::new();
        data.insert("d".into(), nested(depth));
        Part::Data(DataPart { data })
    }

    /// `parts` nested `levels` deep through tool results and reasoning summaries, in turn.
    fn nested_parts(levels: usize, inner: Part) -> Part {
        let mut p = inner;
        for i in 0..levels {
            p = if i % 2 == 0 {
                Part::ToolResult(ToolResult {
                    content: vec![p],
                    ..ToolResult::default()
                })
            } else {
                Part::Reasoning(ReasoningPart {
                    summary: vec![p],
                    ..ReasoningPart::default()
                })
            };
        }
        p
    }

    fn message(parts: Vec<Part>) -> EventBody {
        EventBody::Input(Message {
            role: Role::User,
            parts,
        })
    }

    /// Events of every shape that nests: data, tool arguments and outputs, tool results
    /// and reasoning holding parts, unknown kinds.
    fn corpus() -> Vec<Event> {
        let mut bodies = Vec::new();
        for d in [0, 1, 5, 40, 118, 125] {
            bodies.push(message(vec![Part::text("t"), data(d)]));
            for levels in [1, 2, 7, 30] {
                bodies.push(message(vec![nested_parts(levels, data(d))]));
            }
            let mut args = JsonObject::new();
            args.insert("a".into(), nested(d));
            bodies.push(EventBody::ToolCall(ToolCall::new("c", "t", args.clone())));
            bodies.push(EventBody::ToolResult(ToolResult {
                output: Some(args.clone()),
                content: vec![nested_parts(3, data(d))],
                ..ToolResult::default()
            }));
            bodies.push(EventBody::Unknown {
                kind: "EVENT_FUTURE".into(),
                fields: args,
            });
        }
        bodies.into_iter().map(|b| Event::new("e", b)).collect()
    }

    /// `nesting` bounds the JSON depth both ways, so skipping the scan when `may_exceed` is
    /// false never lets a too-deep event through.
    #[test]
    fn nesting_bounds_the_json_depth() {
        for ev in corpus() {
            let json = serde_json_canonicalizer::to_string(&ev).unwrap();
            let (n, d) = (nesting(&ev), json_depth(json.as_bytes()));
            assert!(
                n < d && d <= 3 + 3 * n,
                "nesting {n}, depth {d}: {json:.200}"
            );
        }
    }

    /// Exactly what the journal reads back is accepted: at every depth around the limit, an
    /// event canonicalizes if and only if its canonical JSON decodes as an event again.
    #[test]
    fn the_limit_is_the_readers() {
        let mut accepted = Vec::new();
        for ev in corpus()
            .into_iter()
            .chain((110..=130).map(|d| Event::new("e", message(vec![data(d)]))))
        {
            let json = serde_json_canonicalizer::to_string(&ev).unwrap();
            let reads_back = serde_json::from_str::<Event>(&json).is_ok();
            assert_eq!(canonical_event(&ev).is_ok(), reads_back, "{json:.200}");
            assert_eq!(
                reads_back,
                json_depth(json.as_bytes()) <= MAX_EVENT_DEPTH,
                "{json:.200}"
            );
            accepted.push(reads_back);
        }
        assert!(accepted.contains(&true) && accepted.contains(&false));
    }

    /// Far too deep is refused without serializing it (which would recurse once per level and
    /// overflow the stack), on a thread with a small stack.
    #[test]
    fn far_too_deep_is_refused_without_recursing() {
        let result = std::thread::Builder::new()
            .stack_size(256 * 1024)
            .spawn(|| {
                let ev = Event::new("e", message(vec![nested_parts(50, data(200_000))]));
                let refused = canonical_event(&ev).is_err();
                // Dropping it would recurse too: leak it.
                std::mem::forget(ev);
                refused
            })
            .unwrap()
            .join()
            .unwrap();
        assert!(result);
    }

    #[test]
    fn json_depth_skips_strings() {
        assert_eq!(json_depth(br#"{"a":"[[{{\"]]","b":[[]]}"#), 3);
        assert_eq!(json_depth(br#""\\"[]"#), 1);
        assert_eq!(json_depth(b"1"), 0);
    }
}
