//! The model-input hash (I0): the hash recorded on every `MODEL_CALL`, and checked against the
//! request a harness re-issues on replay and recovery.
//!
//! agentsessions computes it as `hex(sha256(encoding/json.Marshal(api.ModelRequest)))`: Go's
//! default JSON encoding of its Go structs, not proto3-JSON and not JCS. No Rust crate writes
//! Go's `encoding/json` form, so [`go_json`] writes it here:
//!
//! - keys are the Go field names in declaration order (`Model`, `Messages`, `Params`, then the
//!   later `omitempty` fields `Tools` and `ToolChoice`); a part is `Text`, `File`, `Data`,
//!   `Reasoning`, then `ToolCall` and `ToolResult` only when set;
//! - a nil pointer, slice or map is `null` (an empty `Vec` or map here is taken as nil, except
//!   a data part's map, which is set when the part is a data part);
//! - map keys are sorted; `[]byte` is standard base64; no whitespace;
//! - strings escape `"`, `\`, `\b`, `\f`, `\n`, `\r`, `\t` (Go 1.22+), other control
//!   characters as `\u00XX`, the HTML characters `<`, `>`, `&` as `\u003c`, `\u003e`,
//!   `\u0026`, and U+2028/U+2029;
//! - numbers in `map[string]any` are float64: shortest round-trip digits, `%f` form when
//!   1e-6 ≤ |x| < 1e21, otherwise `%e` form with `e+XX` / `e-X` exponents.
//!
//! The golden vector from agentsessions' `inputhash_compat_test.go` reproduces byte for byte
//! (see the crate's tests). The Go shapes of `ToolDefinition`, `ToolChoice` and the later
//! `ToolResult` fields were not available; their form here is documented on [`go_json`].
//!
//! ```
//! use harness_core::message::{Message, ModelRequest};
//! use harness_sessions::input_hash::{go_json, model_input_hash};
//!
//! let req = ModelRequest::new(vec![Message::user("hi")]).with_model("m");
//! assert_eq!(
//!     go_json(&req),
//!     r#"{"Model":"m","Messages":[{"Role":"user","Parts":[{"Text":{"Text":"hi"},"File":null,"Data":null,"Reasoning":null}]}],"Params":null}"#
//! );
//! assert_eq!(model_input_hash(&req).len(), 64);
//! ```

use std::collections::BTreeMap;
use std::fmt::Write as _;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use harness_core::message::{
    FilePart, JsonObject, Mediation, Message, ModelRequest, Part, ReasoningPart, ToolCall,
    ToolChoice, ToolChoiceMode, ToolDefinition, ToolResult, ToolResultCode,
};
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::hash::hex;

/// The I0 hash of a model request: lowercase hex SHA-256 of [`go_json`].
pub fn model_input_hash(req: &ModelRequest) -> String {
    hex(&Sha256::digest(go_json(req).as_bytes()))
}

/// Go `encoding/json.Marshal` of the Go `api.ModelRequest` this request is.
///
/// Shapes not pinned by a golden vector (written the way Go would write these structs, with
/// later fields `omitempty` so that older hashes stay stable, as agentsessions' comment
/// requires): `ToolDefinition{Name, Description, InputSchema}`; `ToolChoice{Mode, Name}` with
/// the mode as the string `AUTO`/`NONE`/`REQUIRED` (`""` unset); a tool call
/// `{ID, Tool, Args, Mediation, IdempotencyKey}` with the Go mediation names;
/// a tool result `{ID, Output, OutputURI, OutputDigest, IsError, Error, Content?, Code?,
/// ApprovalRequestSeq?, ApprovalDecisionSeq?}` with the code as its number.
pub fn go_json(req: &ModelRequest) -> String {
    let mut w = GoWriter(String::with_capacity(256));
    w.request(req);
    w.0
}

/// Whether `hash` (as recorded on a MODEL_CALL) is the I0 hash of `req`; `buf` is scratch
/// space reused across calls.
pub(crate) fn matches_input_hash(req: &ModelRequest, hash: &str, buf: &mut String) -> bool {
    buf.clear();
    let mut w = GoWriter(std::mem::take(buf));
    w.request(req);
    let digest = crate::hash::ContentHash::of(w.0.as_bytes());
    *buf = w.0;
    crate::hash::ContentHash::from_hex(hash.as_bytes()) == Some(digest)
}

/// A string as Go's `encoding/json` writes it (HTML characters and U+2028/U+2029 escaped).
pub(crate) fn go_json_string(s: &str) -> String {
    let mut w = GoWriter(String::with_capacity(s.len() + 2));
    w.string(s);
    w.0
}

/// Appends compact JSON text as Go's `json.Marshal` writes a `json.RawMessage` (it compacts
/// it with HTML escaping: `<`, `>`, `&`, U+2028 and U+2029 become `\u` escapes; they can
/// only stand inside strings, so replacing them in place keeps the text valid).
pub(crate) fn go_escape_raw(json: &str, out: &mut String) {
    let mut start = 0;
    for (i, c) in json.char_indices() {
        let esc = match c {
            '<' => "\\u003c",
            '>' => "\\u003e",
            '&' => "\\u0026",
            '\u{2028}' => "\\u2028",
            '\u{2029}' => "\\u2029",
            _ => continue,
        };
        out.push_str(&json[start..i]);
        out.push_str(esc);
        start = i + c.len_utf8();
    }
    out.push_str(&json[start..]);
}

struct GoWriter(String);

impl GoWriter {
    fn raw(&mut self, s: &str) {
        self.0.push_str(s);
    }

    fn key(&mut self, first: bool, name: &str) {
        if !first {
            self.0.push(',');
        }
        self.0.push('"');
        self.0.push_str(name);
        self.0.push_str("\":");
    }

    fn string(&mut self, s: &str) {
        let out = &mut self.0;
        out.push('"');
        let mut start = 0;
        for (i, c) in s.char_indices() {
            let esc: Option<&str> = match c {
                '"' => Some("\\\""),
                '\\' => Some("\\\\"),
                '\u{8}' => Some("\\b"),
                '\u{c}' => Some("\\f"),
                '\n' => Some("\\n"),
                '\r' => Some("\\r"),
                '\t' => Some("\\t"),
                '<' => Some("\\u003c"),
                '>' => Some("\\u003e"),
                '&' => Some("\\u0026"),
                '\u{2028}' => Some("\\u2028"),
                '\u{2029}' => Some("\\u2029"),
                c if (c as u32) < 0x20 => None,
                _ => continue,
            };
            out.push_str(&s[start..i]);
            match esc {
                Some(e) => out.push_str(e),
                None => {
                    let _ = write!(out, "\\u{:04x}", c as u32);
                }
            }
            start = i + c.len_utf8();
        }
        out.push_str(&s[start..]);
        out.push('"');
    }

    fn bytes(&mut self, b: Option<&[u8]>) {
        match b {
            None => self.raw("null"),
            Some(b) => {
                self.0.push('"');
                STANDARD.encode_string(b, &mut self.0);
                self.0.push('"');
            }
        }
    }

    fn bool(&mut self, b: bool) {
        self.raw(if b { "true" } else { "false" });
    }

    fn int(&mut self, n: i64) {
        let _ = write!(self.0, "{n}");
    }

    /// A Go float64 as `encoding/json` writes it (`floatEncoder`).
    fn float(&mut self, f: f64) {
        if !f.is_finite() {
            // Go refuses to marshal these; serde_json values cannot hold them.
            self.raw("null");
            return;
        }
        let abs = f.abs();
        if abs != 0.0 && !(1e-6..1e21).contains(&abs) {
            // Go: strconv 'e' (shortest), then "e-07" cleaned to "e-7"; positive exponents
            // keep their sign and two digits ("e+21").
            let s = format!("{f:e}");
            match s.split_once('e') {
                Some((mant, exp)) if !exp.starts_with('-') => {
                    let _ = write!(self.0, "{mant}e+{exp:0>2}");
                }
                _ => self.raw(&s),
            }
        } else {
            // Rust's Display is the shortest round-trip digits in positional form, as
            // strconv 'f' with precision -1.
            let _ = write!(self.0, "{f}");
        }
    }

    fn value(&mut self, v: &Value) {
        match v {
            Value::Null => self.raw("null"),
            Value::Bool(b) => self.bool(*b),
            // map[string]any holds float64: every number goes through float64.
            Value::Number(n) => self.float(n.as_f64().unwrap_or(f64::NAN)),
            Value::String(s) => self.string(s),
            Value::Array(a) => {
                self.0.push('[');
                for (i, x) in a.iter().enumerate() {
                    if i > 0 {
                        self.0.push(',');
                    }
                    self.value(x);
                }
                self.0.push(']');
            }
            Value::Object(m) => self.object(m),
        }
    }

    /// A `map[string]any` (keys sorted byte-wise, as Go sorts them).
    fn object(&mut self, m: &JsonObject) {
        let mut keys: Vec<&String> = m.keys().collect();
        keys.sort_unstable();
        self.0.push('{');
        for (i, k) in keys.iter().enumerate() {
            if i > 0 {
                self.0.push(',');
            }
            self.string(k);
            self.0.push(':');
            if let Some(v) = m.get(k.as_str()) {
                self.value(v);
            }
        }
        self.0.push('}');
    }

    /// A map field: nil (`null`) when empty.
    fn opt_object(&mut self, m: Option<&JsonObject>) {
        match m {
            Some(m) => self.object(m),
            None => self.raw("null"),
        }
    }

    fn params(&mut self, p: &BTreeMap<String, String>) {
        if p.is_empty() {
            self.raw("null");
            return;
        }
        self.0.push('{');
        for (i, (k, v)) in p.iter().enumerate() {
            if i > 0 {
                self.0.push(',');
            }
            self.string(k);
            self.0.push(':');
            self.string(v);
        }
        self.0.push('}');
    }

    fn request(&mut self, r: &ModelRequest) {
        self.0.push('{');
        self.key(true, "Model");
        self.string(&r.model);
        self.key(false, "Messages");
        self.messages(&r.messages);
        self.key(false, "Params");
        self.params(&r.params);
        if !r.tools.is_empty() {
            self.key(false, "Tools");
            self.0.push('[');
            for (i, t) in r.tools.iter().enumerate() {
                if i > 0 {
                    self.0.push(',');
                }
                self.tool_definition(t);
            }
            self.0.push(']');
        }
        if let Some(c) = &r.tool_choice {
            self.key(false, "ToolChoice");
            self.tool_choice(c);
        }
        self.0.push('}');
    }

    fn messages(&mut self, ms: &[Message]) {
        if ms.is_empty() {
            self.raw("null");
            return;
        }
        self.0.push('[');
        for (i, m) in ms.iter().enumerate() {
            if i > 0 {
                self.0.push(',');
            }
            self.0.push('{');
            self.key(true, "Role");
            self.string(m.role.as_str());
            self.key(false, "Parts");
            self.parts(&m.parts);
            self.0.push('}');
        }
        self.0.push(']');
    }

    fn parts(&mut self, ps: &[Part]) {
        if ps.is_empty() {
            self.raw("null");
            return;
        }
        self.0.push('[');
        for (i, p) in ps.iter().enumerate() {
            if i > 0 {
                self.0.push(',');
            }
            self.part(p);
        }
        self.0.push(']');
    }

    fn part(&mut self, p: &Part) {
        self.0.push('{');
        self.key(true, "Text");
        match p {
            Part::Text(t) => {
                self.0.push('{');
                self.key(true, "Text");
                self.string(&t.text);
                self.0.push('}');
            }
            _ => self.raw("null"),
        }
        self.key(false, "File");
        match p {
            Part::File(f) => self.file(f),
            _ => self.raw("null"),
        }
        self.key(false, "Data");
        match p {
            Part::Data(d) => self.object(&d.data),
            _ => self.raw("null"),
        }
        self.key(false, "Reasoning");
        match p {
            Part::Reasoning(r) => self.reasoning(r),
            _ => self.raw("null"),
        }
        match p {
            Part::ToolCall(c) => {
                self.key(false, "ToolCall");
                self.tool_call(c);
            }
            Part::ToolResult(r) => {
                self.key(false, "ToolResult");
                self.tool_result(r);
            }
            _ => {}
        }
        self.0.push('}');
    }

    fn file(&mut self, f: &FilePart) {
        self.0.push('{');
        self.key(true, "MIME");
        self.string(&f.mime);
        self.key(false, "Bytes");
        self.bytes(f.bytes.as_deref());
        self.key(false, "URI");
        self.string(&f.uri);
        self.key(false, "Digest");
        self.string(&f.digest);
        self.key(false, "Name");
        self.string(&f.name);
        self.0.push('}');
    }

    fn reasoning(&mut self, r: &ReasoningPart) {
        self.0.push('{');
        self.key(true, "Provider");
        self.string(&r.provider);
        self.key(false, "ModelID");
        self.string(&r.model_id);
        self.key(false, "Opaque");
        self.bytes(r.opaque.as_deref());
        self.key(false, "OpaqueURI");
        self.string(&r.opaque_uri);
        self.key(false, "OpaqueDigest");
        self.string(&r.opaque_digest);
        self.key(false, "Summary");
        self.parts(&r.summary);
        self.key(false, "ItemID");
        self.string(&r.item_id);
        self.key(false, "Ordinal");
        self.int(i64::from(r.ordinal));
        self.key(false, "ValidityScope");
        self.string(&r.validity_scope);
        self.0.push('}');
    }

    fn tool_call(&mut self, c: &ToolCall) {
        self.0.push('{');
        self.key(true, "ID");
        self.string(&c.id);
        self.key(false, "Tool");
        self.string(&c.tool);
        self.key(false, "Args");
        self.opt_object((!c.args.is_empty()).then_some(&c.args));
        self.key(false, "Mediation");
        self.string(match c.mediation {
            Mediation::Unspecified => "",
            Mediation::InHarnessReported => "IN_HARNESS_REPORTED",
            Mediation::ControllerMediated => "CONTROLLER_MEDIATED",
            Mediation::RequiresApproval => "REQUIRES_APPROVAL",
        });
        self.key(false, "IdempotencyKey");
        self.string(&c.idempotency_key);
        self.0.push('}');
    }

    fn tool_result(&mut self, r: &ToolResult) {
        self.0.push('{');
        self.key(true, "ID");
        self.string(&r.id);
        self.key(false, "Output");
        self.opt_object(r.output.as_ref());
        self.key(false, "OutputURI");
        self.string(&r.output_uri);
        self.key(false, "OutputDigest");
        self.string(&r.output_digest);
        self.key(false, "IsError");
        self.bool(r.is_error);
        self.key(false, "Error");
        self.string(&r.error);
        if !r.content.is_empty() {
            self.key(false, "Content");
            self.parts(&r.content);
        }
        let code = match r.code {
            ToolResultCode::Unspecified => 0,
            ToolResultCode::ApprovalDenied => 1,
            ToolResultCode::ExecutorError => 2,
        };
        if code != 0 {
            self.key(false, "Code");
            self.int(code);
        }
        if r.approval_request_seq != 0 {
            self.key(false, "ApprovalRequestSeq");
            self.int(r.approval_request_seq);
        }
        if r.approval_decision_seq != 0 {
            self.key(false, "ApprovalDecisionSeq");
            self.int(r.approval_decision_seq);
        }
        self.0.push('}');
    }

    fn tool_definition(&mut self, t: &ToolDefinition) {
        self.0.push('{');
        self.key(true, "Name");
        self.string(&t.name);
        self.key(false, "Description");
        self.string(&t.description);
        self.key(false, "InputSchema");
        self.opt_object(t.input_schema.as_ref());
        self.0.push('}');
    }

    fn tool_choice(&mut self, c: &ToolChoice) {
        self.0.push('{');
        self.key(true, "Mode");
        self.string(match c.mode {
            ToolChoiceMode::Unspecified => "",
            ToolChoiceMode::Auto => "AUTO",
            ToolChoiceMode::None => "NONE",
            ToolChoiceMode::Required => "REQUIRED",
        });
        self.key(false, "Name");
        self.string(&c.name);
        self.0.push('}');
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f(x: f64) -> String {
        let mut w = GoWriter(String::new());
        w.float(x);
        w.0
    }

    // Expected strings are what Go's encoding/json writes for these float64 values.
    #[test]
    fn go_float_formatting() {
        assert_eq!(f(0.0), "0");
        assert_eq!(f(-0.0), "-0");
        assert_eq!(f(1.0), "1");
        assert_eq!(f(1.5), "1.5");
        assert_eq!(f(100.0), "100");
        assert_eq!(f(0.000001), "0.000001");
        assert_eq!(f(0.0000001), "1e-7");
        assert_eq!(f(1.5e-10), "1.5e-10");
        assert_eq!(f(1e20), "100000000000000000000");
        assert_eq!(f(1e21), "1e+21");
        assert_eq!(f(1.2345e300), "1.2345e+300");
        assert_eq!(f(-2.5e-8), "-2.5e-8");
        assert_eq!(f(9007199254740993.0), "9007199254740992");
        assert_eq!(f(0.1 + 0.2), "0.30000000000000004");
    }

    #[test]
    fn go_string_escaping() {
        let mut w = GoWriter(String::new());
        w.string("a\"b\\c\u{8}\u{c}\n\r\t\u{1}\u{1f}<>&\u{2028}\u{2029}\u{7f}é😀");
        assert_eq!(
            w.0,
            "\"a\\\"b\\\\c\\b\\f\\n\\r\\t\\u0001\\u001f\\u003c\\u003e\\u0026\\u2028\\u2029\u{7f}é😀\""
        );
    }
}
