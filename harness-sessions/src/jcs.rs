//! RFC 8785 (JCS) canonical JSON in one pass: serde_json's serializer with a formatter that
//! writes into one buffer and sorts an object's members in place when it closes.
//!
//! Byte for byte the output of `serde_json_canonicalizer` (the reference the property tests
//! hold it to, `tests/jcs_props.rs`): members ordered by the UTF-16 code units of their
//! unescaped keys, the first of two equal keys kept; every number written as its float64
//! value prints in ECMAScript (`ryu-js`); strings escaped as JSON.stringify escapes them
//! (`\b \t \n \f \r \" \\`, other controls as `\u00xx`). What that crate costs per member (a
//! buffer for the key and one for the value, the key parsed back, a set node) is what this
//! writer does not: a member is three offsets into the output, and an object already in
//! order (or empty, or of one member) is never moved.

use std::cmp::Ordering;
use std::io;

use serde::Serialize;
use serde_json::ser::{CharEscape, Formatter};

/// The canonical JSON of `value` (an object or array: a top-level non-finite float is
/// serde_json's `null` here, where the reference refuses it; no caller serializes one).
pub(crate) fn to_string<T: Serialize + ?Sized>(value: &T) -> Result<String, serde_json::Error> {
    let mut out = String::with_capacity(256);
    let jcs = Jcs {
        out: &mut out,
        objects: Vec::new(),
        members: Vec::new(),
        scratch: String::new(),
    };
    let mut ser = serde_json::Serializer::with_formatter(Refuse, jcs);
    value.serialize(&mut ser)?;
    Ok(out)
}

/// The serializer's own writer: every byte goes through the formatter into its buffer, so
/// nothing is written here (a write would be a formatter method left to its default).
struct Refuse;

impl io::Write for Refuse {
    fn write(&mut self, _: &[u8]) -> io::Result<usize> {
        Err(io::Error::other("canonical JSON bypassed its formatter"))
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// An object being written: where its `{` is, and its first member in `members`.
struct Object {
    start: usize,
    first_member: usize,
}

/// A member written: its key's opening quote, its `:`, and the end of its value.
#[derive(Clone, Copy)]
struct Member {
    key: usize,
    colon: usize,
    end: usize,
}

struct Jcs<'a> {
    out: &'a mut String,
    objects: Vec<Object>,
    members: Vec<Member>,
    scratch: String,
}

/// The order of two keys as written (escaped, between their quotes): RFC 8785 §3.2.3, by
/// UTF-16 code units of the unescaped strings. Without escapes and below U+E000, UTF-8 byte
/// order is that order; otherwise the keys are unescaped and compared as UTF-16.
fn key_order(a: &str, b: &str) -> Ordering {
    let plain = |s: &str| !s.bytes().any(|c| c == b'\\' || c >= 0xEE);
    if plain(a) && plain(b) {
        return a.as_bytes().cmp(b.as_bytes());
    }
    let unescape = |s: &str| -> String {
        // A key this formatter wrote is a JSON string; were it not, its text is compared.
        serde_json::from_str(&format!("\"{s}\"")).unwrap_or_else(|_| s.to_owned())
    };
    let (a, b) = (unescape(a), unescape(b));
    a.encode_utf16().cmp(b.encode_utf16())
}

/// A member's key as written, between its quotes (`colon` is just after the closing quote).
fn key<'a>(out: &'a str, m: &Member) -> &'a str {
    out.get(m.key + 1..m.colon.saturating_sub(1))
        .unwrap_or_default()
}

impl Jcs<'_> {
    fn number(&mut self, value: f64) -> io::Result<()> {
        if !value.is_finite() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "NaN and +/-Infinity are not permitted in JSON",
            ));
        }
        let mut buffer = ryu_js::Buffer::new();
        self.out.push_str(buffer.format_finite(value));
        Ok(())
    }
}

macro_rules! numbers {
    ($($name:ident: $t:ty),* $(,)?) => {$(
        // ECMAScript has one number type: every number is written as its float64 value.
        #[allow(clippy::cast_precision_loss, clippy::cast_lossless)]
        fn $name<W: ?Sized + io::Write>(&mut self, _: &mut W, value: $t) -> io::Result<()> {
            self.number(value as f64)
        }
    )*};
}

impl Formatter for Jcs<'_> {
    numbers!(
        write_i8: i8, write_i16: i16, write_i32: i32, write_i64: i64, write_i128: i128,
        write_u8: u8, write_u16: u16, write_u32: u32, write_u64: u64, write_u128: u128,
        write_f32: f32, write_f64: f64,
    );

    fn write_null<W: ?Sized + io::Write>(&mut self, _: &mut W) -> io::Result<()> {
        self.out.push_str("null");
        Ok(())
    }

    fn write_bool<W: ?Sized + io::Write>(&mut self, _: &mut W, value: bool) -> io::Result<()> {
        self.out.push_str(if value { "true" } else { "false" });
        Ok(())
    }

    fn write_number_str<W: ?Sized + io::Write>(
        &mut self,
        _: &mut W,
        value: &str,
    ) -> io::Result<()> {
        let number: f64 = value
            .parse()
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "Cannot parse str to f64"))?;
        self.number(number)
    }

    fn begin_string<W: ?Sized + io::Write>(&mut self, _: &mut W) -> io::Result<()> {
        self.out.push('"');
        Ok(())
    }

    fn end_string<W: ?Sized + io::Write>(&mut self, _: &mut W) -> io::Result<()> {
        self.out.push('"');
        Ok(())
    }

    fn write_string_fragment<W: ?Sized + io::Write>(
        &mut self,
        _: &mut W,
        fragment: &str,
    ) -> io::Result<()> {
        self.out.push_str(fragment);
        Ok(())
    }

    fn write_char_escape<W: ?Sized + io::Write>(
        &mut self,
        _: &mut W,
        escape: CharEscape,
    ) -> io::Result<()> {
        const HEX: &[u8; 16] = b"0123456789abcdef";
        let s = match escape {
            CharEscape::Quote => "\\\"",
            CharEscape::ReverseSolidus => "\\\\",
            // JSON.stringify does not escape `/` (RFC 8785 §3.2.2.2).
            CharEscape::Solidus => "/",
            CharEscape::Backspace => "\\b",
            CharEscape::FormFeed => "\\f",
            CharEscape::LineFeed => "\\n",
            CharEscape::CarriageReturn => "\\r",
            CharEscape::Tab => "\\t",
            CharEscape::AsciiControl(byte) => {
                self.out.push_str("\\u00");
                self.out.push(char::from(HEX[usize::from(byte >> 4)]));
                self.out.push(char::from(HEX[usize::from(byte & 0xf)]));
                return Ok(());
            }
        };
        self.out.push_str(s);
        Ok(())
    }

    fn write_raw_fragment<W: ?Sized + io::Write>(&mut self, _: &mut W, _: &str) -> io::Result<()> {
        // Raw text is not canonical until it is parsed again: refused, as by the reference.
        Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "Raw values are not supported for JCS serialization",
        ))
    }

    fn begin_array<W: ?Sized + io::Write>(&mut self, _: &mut W) -> io::Result<()> {
        self.out.push('[');
        Ok(())
    }

    fn end_array<W: ?Sized + io::Write>(&mut self, _: &mut W) -> io::Result<()> {
        self.out.push(']');
        Ok(())
    }

    fn begin_array_value<W: ?Sized + io::Write>(
        &mut self,
        _: &mut W,
        first: bool,
    ) -> io::Result<()> {
        if !first {
            self.out.push(',');
        }
        Ok(())
    }

    fn end_array_value<W: ?Sized + io::Write>(&mut self, _: &mut W) -> io::Result<()> {
        Ok(())
    }

    fn begin_object<W: ?Sized + io::Write>(&mut self, _: &mut W) -> io::Result<()> {
        self.objects.push(Object {
            start: self.out.len(),
            first_member: self.members.len(),
        });
        self.out.push('{');
        Ok(())
    }

    fn begin_object_key<W: ?Sized + io::Write>(
        &mut self,
        _: &mut W,
        first: bool,
    ) -> io::Result<()> {
        if !first {
            self.out.push(',');
        }
        self.members.push(Member {
            key: self.out.len(),
            colon: self.out.len(),
            end: self.out.len(),
        });
        Ok(())
    }

    fn end_object_key<W: ?Sized + io::Write>(&mut self, _: &mut W) -> io::Result<()> {
        Ok(())
    }

    fn begin_object_value<W: ?Sized + io::Write>(&mut self, _: &mut W) -> io::Result<()> {
        let at = self.out.len();
        if let Some(m) = self.members.last_mut() {
            m.colon = at;
        }
        self.out.push(':');
        Ok(())
    }

    fn end_object_value<W: ?Sized + io::Write>(&mut self, _: &mut W) -> io::Result<()> {
        let at = self.out.len();
        if let Some(m) = self.members.last_mut() {
            m.end = at;
        }
        Ok(())
    }

    fn end_object<W: ?Sized + io::Write>(&mut self, _: &mut W) -> io::Result<()> {
        let Some(object) = self.objects.pop() else {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "end_object called before begin_object",
            ));
        };
        let Jcs {
            out,
            members,
            scratch,
            ..
        } = self;
        let first = object.first_member.min(members.len());
        let mine = &mut members[first..];
        let in_order = mine
            .windows(2)
            .all(|w| key_order(key(out, &w[0]), key(out, &w[1])) == Ordering::Less);
        if in_order {
            out.push('}');
        } else {
            // Out of order (or a key twice): the members again, sorted (stable: of two equal
            // keys the first stays, and only it is written, as the reference keeps it).
            mine.sort_by(|a, b| key_order(key(out, a), key(out, b)));
            scratch.clear();
            scratch.push('{');
            let mut prev: Option<&Member> = None;
            for m in mine.iter() {
                if let Some(p) = prev {
                    if key_order(key(out, p), key(out, m)) == Ordering::Equal {
                        continue;
                    }
                    scratch.push(',');
                }
                scratch.push_str(out.get(m.key..m.end).unwrap_or_default());
                prev = Some(m);
            }
            scratch.push('}');
            out.truncate(object.start);
            out.push_str(scratch);
        }
        members.truncate(first);
        Ok(())
    }
}
