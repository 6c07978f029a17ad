use async_trait::async_trait;
use harness_core::event::EventBody;
use harness_core::message::{Message, ModelRequest};
use harness_core::{
    Capabilities, Descriptor, EventSink, Harness, HarnessError, Resumability, Start,
};

/// Why a chat config was rejected. The diagnostics are fixed: they never quote the config
/// or the prompt.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// Malformed JSON, or trailing JSON or other tokens after the value.
    #[error("config is not a single valid JSON value")]
    Malformed,
    /// The value is not an object (including top-level `null`).
    #[error("config is not a JSON object")]
    NotAnObject,
    /// `system_prompt` is present but not a string (including `null`).
    #[error("config field system_prompt is not a string")]
    SystemPromptNotString,
}

/// Reads the optional system prompt from a chat execution's config, exactly as the spec
/// words the rules:
///
/// - no config or zero-length config: none;
/// - otherwise the config must be one JSON object (malformed JSON, trailing tokens and
///   non-objects, including `null`, are errors);
/// - `system_prompt` (case-sensitive; unknown fields ignored) absent or `""`: none; a string:
///   that string as decoded, whitespace and newlines included; any other type, including
///   `null`: an error.
///
/// "JSON" is what the reference host's Go `encoding/json` accepts, so that a config one host
/// accepts the other does too: whatever an unknown field holds is ignored once it is well
/// formed (a lone `\ud800` escape, a number beyond float64, bytes that are not UTF-8 inside a
/// string), nesting may go 10000 levels deep, and the prompt decodes as Go decodes it (a lone
/// surrogate escape, and each byte that is not UTF-8, become U+FFFD). A repeated
/// `system_prompt` takes its last value.
///
/// ```
/// use harness_sessions::harnesses::{ConfigError, parse_system_prompt};
///
/// assert_eq!(parse_system_prompt(b""), Ok(None));
/// assert_eq!(parse_system_prompt(br#"{"system_prompt":"Be brief."}"#), Ok(Some("Be brief.".into())));
/// assert_eq!(parse_system_prompt(b"null"), Err(ConfigError::NotAnObject));
/// assert_eq!(parse_system_prompt(br#"{} {}"#), Err(ConfigError::Malformed));
/// ```
pub fn parse_system_prompt(config: &[u8]) -> Result<Option<String>, ConfigError> {
    if config.is_empty() {
        return Ok(None);
    }
    let scanned = go_json::scan(config).ok_or(ConfigError::Malformed)?;
    if !scanned.object {
        return Err(ConfigError::NotAnObject);
    }
    match scanned.system_prompt {
        None => Ok(None),
        Some(go_json::Field::Other) => Err(ConfigError::SystemPromptNotString),
        Some(go_json::Field::String(raw)) => {
            let s = go_json::unquote(raw).ok_or(ConfigError::Malformed)?;
            Ok((!s.is_empty()).then_some(s))
        }
    }
}

/// The subset of Go's `encoding/json` the chat config needs: its scanner (which bytes are one
/// well-formed JSON value, nesting at most 10000 deep) and its string decoding.
mod go_json {
    /// Go's `maxNestingDepth`.
    const MAX_DEPTH: usize = 10_000;

    /// The value of a top-level field.
    pub(super) enum Field<'a> {
        /// A string: its bytes between the quotes, still escaped.
        String(&'a [u8]),
        /// Anything else (including `null`).
        Other,
    }

    /// What a scan of a config found.
    pub(super) struct Scanned<'a> {
        /// The value is an object.
        pub object: bool,
        /// The last top-level `system_prompt` field, if any.
        pub system_prompt: Option<Field<'a>>,
    }

    struct Scanner<'a> {
        s: &'a [u8],
        i: usize,
    }

    impl<'a> Scanner<'a> {
        fn ws(&mut self) {
            while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.s.get(self.i) {
                self.i += 1;
            }
        }

        fn peek(&self) -> Option<u8> {
            self.s.get(self.i).copied()
        }

        fn eat(&mut self, b: u8) -> bool {
            let hit = self.peek() == Some(b);
            if hit {
                self.i += 1;
            }
            hit
        }

        fn digits(&mut self) -> usize {
            let from = self.i;
            while self.peek().is_some_and(|b| b.is_ascii_digit()) {
                self.i += 1;
            }
            self.i - from
        }

        /// A string token (at its opening quote); returns its bytes between the quotes.
        fn string(&mut self) -> Option<&'a [u8]> {
            let s = self.s;
            if !self.eat(b'"') {
                return None;
            }
            let from = self.i;
            loop {
                match *s.get(self.i)? {
                    b'"' => {
                        self.i += 1;
                        return Some(&s[from..self.i - 1]);
                    }
                    b'\\' => {
                        self.i += 1;
                        match *s.get(self.i)? {
                            b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => self.i += 1,
                            b'u' => {
                                let hex = s.get(self.i + 1..self.i + 5)?;
                                if !hex.iter().all(u8::is_ascii_hexdigit) {
                                    return None;
                                }
                                self.i += 5;
                            }
                            _ => return None,
                        }
                    }
                    // Control characters must be escaped; any other byte is taken as is
                    // (Go's scanner does not check UTF-8).
                    c if c < 0x20 => return None,
                    _ => self.i += 1,
                }
            }
        }

        /// A number token: `-? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?`.
        fn number(&mut self) -> Option<()> {
            self.eat(b'-');
            match self.peek()? {
                b'0' => self.i += 1,
                b'1'..=b'9' => {
                    self.digits();
                }
                _ => return None,
            }
            if self.eat(b'.') && self.digits() == 0 {
                return None;
            }
            if matches!(self.peek(), Some(b'e' | b'E')) {
                self.i += 1;
                if !self.eat(b'+') {
                    self.eat(b'-');
                }
                if self.digits() == 0 {
                    return None;
                }
            }
            Some(())
        }

        fn literal(&mut self, word: &[u8]) -> Option<()> {
            let end = self.i + word.len();
            (self.s.get(self.i..end)? == word).then(|| self.i = end)
        }
    }

    /// Scans `s` as exactly one JSON value (surrounding whitespace allowed), iteratively so
    /// that no input can exhaust the stack. `None` when it is not well formed.
    pub(super) fn scan(s: &[u8]) -> Option<Scanned<'_>> {
        let mut p = Scanner { s, i: 0 };
        // Open containers: `true` for an object.
        let mut stack: Vec<bool> = Vec::new();
        let mut out = Scanned {
            object: false,
            system_prompt: None,
        };
        // Whether the value about to be read is the top-level `system_prompt`.
        let mut capture = false;
        p.ws();
        out.object = p.peek() == Some(b'{');
        'value: loop {
            // A value.
            p.ws();
            let c = p.peek()?;
            let captured = std::mem::take(&mut capture);
            if captured && c != b'"' {
                out.system_prompt = Some(Field::Other);
            }
            match c {
                b'{' | b'[' => {
                    p.i += 1;
                    stack.push(c == b'{');
                    if stack.len() > MAX_DEPTH {
                        return None;
                    }
                    p.ws();
                    let close = if c == b'{' { b'}' } else { b']' };
                    if p.eat(close) {
                        stack.pop();
                    } else if c == b'{' {
                        capture = key(&mut p, stack.len())?;
                        continue 'value;
                    } else {
                        continue 'value;
                    }
                }
                b'"' => {
                    let raw = p.string()?;
                    if captured {
                        out.system_prompt = Some(Field::String(raw));
                    }
                }
                b'-' | b'0'..=b'9' => p.number()?,
                b't' => p.literal(b"true")?,
                b'f' => p.literal(b"false")?,
                b'n' => p.literal(b"null")?,
                _ => return None,
            }
            // After a value: close containers or go on to the next element.
            loop {
                p.ws();
                let Some(&object) = stack.last() else {
                    break 'value;
                };
                if p.eat(b',') {
                    if object {
                        p.ws();
                        capture = key(&mut p, stack.len())?;
                    }
                    continue 'value;
                }
                if !p.eat(if object { b'}' } else { b']' }) {
                    return None;
                }
                stack.pop();
            }
        }
        (p.i == s.len()).then_some(out)
    }

    /// An object key and its colon; whether it is the top-level `system_prompt`.
    fn key(p: &mut Scanner<'_>, depth: usize) -> Option<bool> {
        let raw = p.string()?;
        p.ws();
        if !p.eat(b':') {
            return None;
        }
        Some(depth == 1 && unquote(raw).as_deref() == Some("system_prompt"))
    }

    /// The four hex digits of a `\uXXXX` escape at the start of `s` (Go's `getu4`).
    fn u4(s: &[u8]) -> Option<u32> {
        match s {
            [b'\\', b'u', h @ ..] if h.len() >= 4 && h[..4].iter().all(u8::is_ascii_hexdigit) => {
                let hex = std::str::from_utf8(&h[..4]).ok()?;
                u32::from_str_radix(hex, 16).ok()
            }
            _ => None,
        }
    }

    /// Decodes a string's bytes (between its quotes) as Go's `unquote` does: a surrogate
    /// pair escape is one character, a lone surrogate escape is U+FFFD, and so is each byte
    /// that is not part of a UTF-8 character.
    pub(super) fn unquote(raw: &[u8]) -> Option<String> {
        let mut out = String::with_capacity(raw.len());
        let mut i = 0;
        while i < raw.len() {
            if raw[i] == b'\\' {
                let c = match *raw.get(i + 1)? {
                    b'"' => '"',
                    b'\\' => '\\',
                    b'/' => '/',
                    b'b' => '\u{8}',
                    b'f' => '\u{c}',
                    b'n' => '\n',
                    b'r' => '\r',
                    b't' => '\t',
                    b'u' => {
                        let hi = u4(&raw[i..])?;
                        i += 6;
                        if (0xD800..0xE000).contains(&hi) {
                            let lo = u4(&raw[i..]);
                            if (0xD800..0xDC00).contains(&hi)
                                && let Some(lo @ 0xDC00..0xE000) = lo
                            {
                                i += 6;
                                let c = 0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00);
                                out.push(char::from_u32(c).unwrap_or('\u{FFFD}'));
                            } else {
                                out.push('\u{FFFD}');
                            }
                        } else {
                            out.push(char::from_u32(hi).unwrap_or('\u{FFFD}'));
                        }
                        continue;
                    }
                    _ => return None,
                };
                out.push(c);
                i += 2;
                continue;
            }
            // A run of raw bytes up to the next escape.
            let end = raw[i..]
                .iter()
                .position(|&b| b == b'\\')
                .map_or(raw.len(), |n| i + n);
            for chunk in raw[i..end].utf8_chunks() {
                out.push_str(chunk.valid());
                out.extend(std::iter::repeat_n('\u{FFFD}', chunk.invalid().len()));
            }
            i = end;
        }
        Some(out)
    }
}

/// The spec's reference harness 2 (`harness/chatagent`): a text-only conversation. Each turn
/// it optionally prepends one system message from the execution's config, then the messages
/// of prior INPUT and OUTPUT events in `Start::history` (journal order), then every current
/// input exactly once, and calls only `sink.model` with its configured model id. ID `chat`,
/// version `1`, STATELESS_REPLAY, fork-safe.
#[derive(Clone, Debug)]
pub struct ChatHarness {
    model: String,
}

impl ChatHarness {
    /// A chat harness asking for `model` on every call.
    pub fn new(model: impl Into<String>) -> Self {
        ChatHarness {
            model: model.into(),
        }
    }

    /// The model request of a turn (what `run` sends), or the config error.
    pub fn request(&self, start: &Start) -> Result<ModelRequest, ConfigError> {
        let prompt = parse_system_prompt(&start.config)?;
        let mut messages = Vec::with_capacity(start.history.len() + start.inputs.len() + 1);
        if let Some(p) = prompt {
            messages.push(Message::system(p));
        }
        // Audit and lifecycle events (MODEL_CALL, END, ERROR, LIFECYCLE, …) stay out.
        for ev in &start.history {
            if let EventBody::Input(m) | EventBody::Output(m) = &ev.body {
                messages.push(m.clone());
            }
        }
        messages.extend(start.inputs.iter().cloned());
        Ok(ModelRequest::new(messages).with_model(self.model.clone()))
    }
}

#[async_trait]
impl Harness for ChatHarness {
    async fn describe(&self) -> Result<Descriptor, HarnessError> {
        Ok(Descriptor {
            id: "chat".into(),
            version: "1".into(),
            models: vec![self.model.clone()],
            tools: Vec::new(),
            capabilities: Capabilities {
                resumability: Resumability::StatelessReplay,
                fork_safe: true,
                ..Capabilities::default()
            },
        })
    }

    async fn run(&self, start: Start, sink: &mut dyn EventSink) -> Result<(), HarnessError> {
        // A rejected config fails the execution before any model call.
        let req = self
            .request(&start)
            .map_err(|e| HarnessError::Config(e.to_string()))?;
        sink.model(req).await?;
        Ok(())
    }
}
