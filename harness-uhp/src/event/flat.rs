//! The fast path of [`StreamEvent::parse`](super::StreamEvent::parse): most events of a
//! stream (every delta) are flat objects whose values are strings and small integers. Such an
//! object is read here directly, its strings kept as spans of the payload, without serde's
//! per-field machinery. Anything else (a nested value, a string with a control character, a
//! number that is not a plain non-negative integer, `null` where the schema wants a value, a
//! key with an escape, malformed JSON) gives `None`, and the general serde path decodes (or
//! reports) the payload. On every payload this path accepts it yields the fields the serde
//! path yields (tested below against it).

use std::borrow::Cow;

use super::de::{Fields, Key};
use super::types::{SeqField, Text};
use harness_core::wire;

/// The fields of `raw` when it is a flat event object this path reads; `None`: use serde.
#[cfg(test)]
fn fields(raw: &str) -> Option<Fields> {
    let mut f = Fields::default();
    read(raw, &mut f).map(|()| f)
}

/// Reads the fields of `raw` into `f` when it is a flat event object this path reads;
/// `None`: use serde (`f` may be left half-filled).
#[inline]
pub(super) fn read(raw: &str, f: &mut Fields) -> Option<()> {
    let mut r = Reader {
        raw,
        b: raw.as_bytes(),
        i: 0,
    };
    r.ws();
    r.eat(b'{')?;
    r.ws();
    if r.peek()? == b'}' {
        r.i += 1;
    } else {
        loop {
            let key = r.key()?;
            r.ws();
            r.eat(b':')?;
            r.ws();
            match key {
                Key::Type => f.type_name = Some(r.type_text()?),
                Key::SequenceNumber => f.sequence_number = SeqField::Valid(r.uint()?),
                Key::Delta => f.delta = Some(r.text()?),
                Key::ItemId => f.item_id = Some(r.text()?),
                Key::OutputIndex => f.output_index = Some(r.uint()?),
                Key::ContentIndex => f.content_index = Some(r.uint()?),
                Key::SummaryIndex => rare(f).summary_index = Some(r.uint()?),
                Key::AnnotationIndex => rare(f).annotation_index = Some(r.uint()?),
                Key::Text => rare(f).text = Some(r.text()?),
                Key::Arguments => rare(f).arguments = Some(r.text()?),
                Key::Code => rare(f).code = Some(r.text()?),
                Key::Message => rare(f).message = Some(r.text()?),
                Key::Param => rare(f).param = Some(r.text()?),
                Key::Other => r.scalar()?,
                Key::Response | Key::Item | Key::Part | Key::Annotation => return None,
            }
            r.ws();
            match r.peek()? {
                b',' => {
                    r.i += 1;
                    r.ws();
                }
                b'}' => {
                    r.i += 1;
                    break;
                }
                _ => return None,
            }
        }
    }
    r.ws();
    (r.i == r.b.len()).then_some(())
}

fn rare(f: &mut Fields) -> &mut super::types::Rare {
    f.rare.get_or_insert_with(Box::default)
}

/// A string read: a span of the payload, or unescaped.
enum Str {
    Span(usize, usize),
    Escaped(String),
}

struct Reader<'a> {
    raw: &'a str,
    b: &'a [u8],
    i: usize,
}

/// Eight copies of a byte.
const fn splat(b: u8) -> u64 {
    0x0101_0101_0101_0101 * b as u64
}

impl<'a> Reader<'a> {
    #[inline]
    fn peek(&self) -> Option<u8> {
        self.b.get(self.i).copied()
    }

    #[inline]
    fn eat(&mut self, c: u8) -> Option<()> {
        (self.peek()? == c).then(|| self.i += 1)
    }

    /// Skips JSON whitespace.
    #[inline]
    fn ws(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.i += 1;
        }
    }

    /// From after an opening quote: the index of the first `"`, `\` or control character after it
    /// (eight bytes at a time), or `None` at the end of the input.
    #[inline(always)]
    fn special(&self, from: usize) -> Option<usize> {
        let mut j = from;
        while let Some(w) = self.b.get(j..j + 8) {
            let mut word = [0u8; 8];
            word.copy_from_slice(w);
            let w = u64::from_le_bytes(word);
            // A zero byte of `w ^ splat(c)` is a `c`; a byte below 0x20 borrows in
            // `w - splat(0x20)`. Only the lowest flag of each test is exact, which is all
            // that is used.
            let hi = splat(0x80);
            let zero = |v: u64| v.wrapping_sub(splat(1)) & !v & hi;
            let m = zero(w ^ splat(b'"'))
                | zero(w ^ splat(b'\\'))
                | (w.wrapping_sub(splat(0x20)) & !w & hi);
            if m != 0 {
                return Some(j + (m.trailing_zeros() / 8) as usize);
            }
            j += 8;
        }
        self.b[j..]
            .iter()
            .position(|&c| c == b'"' || c == b'\\' || c < 0x20)
            .map(|p| j + p)
    }

    /// A string at the cursor: `Span` (of the payload, without the quotes) when it has no
    /// escape, else unescaped by serde_json itself. `None`: not a string, or not a valid one.
    #[inline]
    fn string(&mut self) -> Option<Str> {
        if self.peek()? != b'"' {
            return None;
        }
        let start = self.i + 1;
        let at = self.special(start)?;
        if self.b[at] == b'"' {
            self.i = at + 1;
            return Some(Str::Span(start, at));
        }
        self.escaped(at).map(Str::Escaped)
    }

    /// The rest of a string whose first special byte, at `at`, is not its closing quote:
    /// unescaped here (JSON's eight one-letter escapes and `\uXXXX`, surrogate pairs
    /// joined). `None` for anything serde_json would reject (a control character, an
    /// unknown escape, a lone surrogate, bad hex): the serde path reports it.
    #[cold]
    fn escaped(&mut self, at: usize) -> Option<String> {
        let start = self.i + 1;
        // The rest of the payload bounds the string: one allocation, never grown.
        let mut out = String::with_capacity(self.b.len() - start);
        out.push_str(self.raw.get(start..at)?);
        let mut j = at;
        loop {
            // `j` is at a special byte: a quote, a backslash or a control character.
            match *self.b.get(j)? {
                b'"' => break,
                b'\\' => {
                    let c = match *self.b.get(j + 1)? {
                        b'"' => '"',
                        b'\\' => '\\',
                        b'/' => '/',
                        b'b' => '\u{8}',
                        b'f' => '\u{c}',
                        b'n' => '\n',
                        b'r' => '\r',
                        b't' => '\t',
                        b'u' => {
                            let (c, len) = self.unicode(j + 2)?;
                            out.push(c);
                            j += 2 + len;
                            let next = self.special(j)?;
                            out.push_str(self.raw.get(j..next)?);
                            j = next;
                            continue;
                        }
                        _ => return None,
                    };
                    out.push(c);
                    j += 2;
                }
                _ => return None, // a control character
            }
            let next = self.special(j)?;
            out.push_str(self.raw.get(j..next)?);
            j = next;
        }
        self.i = j + 1;
        Some(out)
    }

    /// Four hex digits at `at`.
    #[inline]
    fn hex4(&self, at: usize) -> Option<u32> {
        let mut n = 0u32;
        for &c in self.b.get(at..at + 4)? {
            n = n * 16 + (c as char).to_digit(16)?;
        }
        Some(n)
    }

    /// The character of a `\u` escape whose hex digits start at `at` (a high surrogate
    /// with the low one after it), and how many bytes after the `\u` it took.
    fn unicode(&self, at: usize) -> Option<(char, usize)> {
        let hi = self.hex4(at)?;
        match hi {
            0xD800..=0xDBFF => {
                if self.b.get(at + 4..at + 6)? != b"\\u" {
                    return None;
                }
                let lo = self.hex4(at + 6)?;
                if !(0xDC00..=0xDFFF).contains(&lo) {
                    return None;
                }
                let c = 0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00);
                Some((char::from_u32(c)?, 10))
            }
            0xDC00..=0xDFFF => None,
            _ => Some((char::from_u32(hi)?, 4)),
        }
    }

    /// Whether the input at the cursor starts with `lit` (then the cursor moves past it).
    #[inline(always)]
    fn lit(&mut self, lit: &[u8]) -> bool {
        let hit = self.b.get(self.i..self.i + lit.len()) == Some(lit);
        if hit {
            self.i += lit.len();
        }
        hit
    }

    /// A key (no escapes: a key with one goes the serde way). The keys of a delta event are
    /// matched whole, quotes included (no scan for the closing quote; a literal has no
    /// escape), by the byte after the opening quote; any other key is scanned.
    #[inline]
    fn key(&mut self) -> Option<Key> {
        let hot = match self.b.get(self.i + 1) {
            Some(b't') => self.lit(b"\"type\"").then_some(Key::Type),
            Some(b's') => self
                .lit(b"\"sequence_number\"")
                .then_some(Key::SequenceNumber),
            Some(b'i') => self.lit(b"\"item_id\"").then_some(Key::ItemId),
            Some(b'o') => self.lit(b"\"output_index\"").then_some(Key::OutputIndex),
            Some(b'c') => self.lit(b"\"content_index\"").then_some(Key::ContentIndex),
            Some(b'd') => self.lit(b"\"delta\"").then_some(Key::Delta),
            _ => None,
        };
        if let Some(k) = hot {
            return Some(k);
        }
        match self.string()? {
            Str::Span(s, e) => self.raw.get(s..e).map(Key::of),
            Str::Escaped(_) => None,
        }
    }

    /// A string value as the event keeps it (what [`Text::of`] makes of serde's string).
    #[inline]
    fn text(&mut self) -> Option<Text> {
        Some(match self.string()? {
            Str::Span(s, e) => match (u32::try_from(s), u32::try_from(e)) {
                (Ok(s32), Ok(e32)) => Text::Span(s32, e32),
                _ => Text::of(self.raw, wire::Key(Cow::Borrowed(self.raw.get(s..e)?))),
            },
            Str::Escaped(o) => Text::of(self.raw, wire::Key(Cow::Owned(o))),
        })
    }

    /// The `type` value: the delta's matched whole (no scan), any other read as a string.
    #[inline]
    fn type_text(&mut self) -> Option<Text> {
        const DELTA: &[u8] = b"\"response.output_text.delta\"";
        let start = self.i + 1;
        if self.lit(DELTA) {
            if let (Ok(s), Ok(e)) = (u32::try_from(start), u32::try_from(self.i - 1)) {
                return Some(Text::Span(s, e));
            }
            self.i = start - 1;
        }
        self.text()
    }

    /// A plain non-negative integer that fits a `u64` (no sign, fraction, exponent or
    /// leading zero).
    #[inline]
    fn uint(&mut self) -> Option<u64> {
        let start = self.i;
        let mut n: u64 = 0;
        while let Some(d @ b'0'..=b'9') = self.peek() {
            n = n.wrapping_mul(10).wrapping_add(u64::from(d - b'0'));
            self.i += 1;
        }
        let len = self.i - start;
        if len == 0 || (len > 1 && self.b[start] == b'0') {
            return None;
        }
        if let Some(b'.' | b'e' | b'E') = self.peek() {
            return None;
        }
        if len > 19 {
            // Past 19 digits it may not fit: checked (and too big goes the serde way).
            return self.raw.get(start..self.i)?.parse().ok();
        }
        Some(n)
    }

    /// A value of a key the event does not keep: a string, a plain integer, `true`, `false`
    /// or `null` (anything else goes the serde way).
    fn scalar(&mut self) -> Option<()> {
        match self.peek()? {
            b'"' => self.string().map(drop),
            b'0'..=b'9' => self.uint().map(drop),
            _ => {
                for lit in [&b"true"[..], b"false", b"null"] {
                    if self.b[self.i..].starts_with(lit) {
                        self.i += lit.len();
                        return Some(());
                    }
                }
                None
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::StreamEvent;
    use super::fields;
    use proptest::prelude::*;

    /// What the flat path makes of `raw`, when it takes it, must be what serde makes of it.
    fn agree(raw: &str) -> Result<bool, TestCaseError> {
        let Some(f) = fields(raw) else {
            return Ok(false);
        };
        let fast = f.into_event(raw.to_owned());
        let slow = StreamEvent::parse_serde(raw.to_owned());
        prop_assert_eq!(fast, slow, "payload {}", raw);
        Ok(true)
    }

    #[test]
    fn the_delta_of_a_real_stream_is_read_flat() {
        let raw = r#"{"type":"response.output_text.delta","sequence_number":4,"item_id":"msg_1","output_index":0,"content_index":0,"delta":" caf\u00e9 \"q\"\n","obfuscation":"x1"}"#;
        assert!(agree(raw).unwrap());
        let ev = StreamEvent::parse(raw.to_owned()).unwrap();
        assert_eq!(ev.delta(), Some(" café \"q\"\n"));
        assert_eq!(ev.sequence_number(), Some(4));
    }

    #[test]
    fn anything_unusual_goes_the_serde_way() {
        for raw in [
            r#"{"type":"x","response":{}}"#,
            r#"{"type":"x","sequence_number":-1}"#,
            r#"{"type":"x","sequence_number":1.0}"#,
            r#"{"type":"x","sequence_number":01}"#,
            r#"{"type":"x","sequence_number":18446744073709551616}"#,
            r#"{"type":null}"#,
            r#"{"ty\u0070e":"x"}"#,
            "{\"type\":\"a\u{1}b\"}",
            r#"{"type":"x"} x"#,
            r#"{"type":"x",}"#,
            r#"{"type":"x","other":[1]}"#,
            r#"[DONE]"#,
            r#"{"type":"\x"}"#,
        ] {
            assert!(fields(raw).is_none(), "{raw}");
        }
    }

    fn piece() -> impl Strategy<Value = String> {
        prop_oneof![
            Just(r#""type""#.to_owned()),
            Just(r#""sequence_number""#.to_owned()),
            Just(r#""delta""#.to_owned()),
            Just(r#""item_id""#.to_owned()),
            Just(r#""output_index""#.to_owned()),
            Just(r#""summary_index""#.to_owned()),
            Just(r#""text""#.to_owned()),
            Just(r#""other""#.to_owned()),
            Just(r#""response.output_text.delta""#.to_owned()),
            Just(r#""a\"b\\c\u00e9\ud83d\ude80""#.to_owned()),
            Just(r#""\ud800""#.to_owned()),
            Just("\"caf\u{e9} \u{1f680}\"".to_owned()),
            Just("\"\u{1}\"".to_owned()),
            Just(":".to_owned()),
            Just(",".to_owned()),
            Just("{".to_owned()),
            Just("}".to_owned()),
            Just("[]".to_owned()),
            Just(" \n\t\r".to_owned()),
            Just("null".to_owned()),
            Just("true".to_owned()),
            Just("-1".to_owned()),
            Just("1.5e3".to_owned()),
            Just("007".to_owned()),
            Just("18446744073709551615".to_owned()),
            Just("18446744073709551616".to_owned()),
            "[0-9]{1,4}",
            "\"[a-z_. \\\\\"]{0,12}\"",
        ]
    }

    /// Objects shaped like events: `{`, then key/value pairs, with pieces sprinkled in.
    fn object() -> impl Strategy<Value = String> {
        let pair = (piece(), piece(), any::<u8>()).prop_map(|(k, v, sep)| match sep % 8 {
            0 => format!("{k}{v}"),
            1 => format!("{k} : {v} "),
            _ => format!("{k}:{v}"),
        });
        (
            prop::collection::vec(pair, 0..8),
            any::<bool>(),
            any::<bool>(),
        )
            .prop_map(|(pairs, open, close)| {
                let mut s = String::new();
                if open {
                    s.push('{');
                }
                s.push_str(&pairs.join(","));
                if close {
                    s.push('}');
                }
                s
            })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2048))]

        /// Every payload the flat path accepts decodes exactly as serde decodes it.
        #[test]
        fn the_flat_path_agrees_with_serde(raw in object()) {
            agree(&raw)?;
        }

        /// Any string, escaped as serde_json escapes it or with every character as `\\u`
        /// escapes (surrogate pairs past the BMP, either hex case), is read flat and unescaped
        /// exactly as serde unescapes it.
        #[test]
        fn escaped_strings_are_unescaped_as_serde_does(s in "\\PC{0,24}", upper in any::<bool>()) {
            let mut all_u = String::from("\"");
            for u in s.encode_utf16() {
                let e = format!("\\u{u:04x}");
                all_u.push_str(&if upper { e.to_uppercase().replace("\\U", "\\u") } else { e });
            }
            all_u.push('"');
            for lit in [serde_json::to_string(&s).unwrap(), all_u] {
                let raw = format!(r#"{{"type":"response.output_text.delta","sequence_number":1,"delta":{lit}}}"#);
                prop_assert!(agree(&raw)?, "payload {}", raw);
                let ev = StreamEvent::parse(raw).unwrap();
                prop_assert_eq!(ev.delta(), Some(s.as_str()));
            }
        }

        /// Escape sequences, valid or not, anywhere in a string: the flat path takes only
        /// what serde takes, and decodes it the same.
        #[test]
        fn any_escape_agrees_with_serde(parts in prop::collection::vec(prop_oneof![
            Just("\\".to_owned()), Just("\\u".to_owned()), Just("d83d".to_owned()),
            Just("DE80".to_owned()), Just("dc00".to_owned()), Just("00e9".to_owned()),
            Just("0G".to_owned()), Just("\\\"".to_owned()), Just("\\n".to_owned()),
            Just("\\x".to_owned()), Just("\u{1}".to_owned()), "[a-z/ ]{0,3}",
        ], 0..8)) {
            let raw = format!(r#"{{"type":"x","delta":"{}"}}"#, parts.concat());
            agree(&raw)?;
        }

        /// Well-formed flat events are taken by the flat path (it is the fast path in fact).
        #[test]
        fn flat_events_are_read_flat(seq in any::<u64>(), oi in 0u64..5, delta in "[^\\\\\"\\x00-\\x1f]{0,20}", other in any::<bool>()) {
            let extra = if other { r#","obfuscation":"zz""# } else { "" };
            let raw = format!(r#"{{"type":"response.output_text.delta","sequence_number":{seq},"item_id":"m","output_index":{oi},"content_index":0,"delta":"{delta}"{extra}}}"#);
            prop_assert!(agree(&raw)?);
        }
    }
}
