//! WebSocket frames on the server's side of a call (RFC 6455 §5), after the upgrade.
//!
//! tungstenite does the upgrade (the HTTP request, its checks, the 101); the frames are read
//! and written here, because tungstenite keeps a read buffer and a write buffer for the life
//! of a connection, grown to the largest frame seen, which cannot be released between turns
//! through its API: most of an idle call's memory. Here nothing is kept between frames: a
//! frame is parsed from the bytes just read and only the bytes of a frame not yet complete
//! are kept (freed once it is).
//!
//! Sans-IO: [`Reader::next`] takes bytes and says what they are; the `encode_*` functions
//! append a frame to a buffer.
//!
//! What a server must check (RFC 6455): every frame from a client is masked (§5.1: "The
//! server MUST close the connection upon receiving a frame that is not masked"); no RSV bit
//! is set, as no extension is negotiated (§5.2); an unknown opcode fails the connection
//! (§5.2); control frames are at most 125 bytes and not fragmented (§5.5); a continuation
//! frame continues a message and a new message does not start inside one (§5.4); a text
//! message is UTF-8 (§8.1: otherwise "MUST _Fail the WebSocket Connection_", 1007); a close
//! frame's body is empty or a valid code and a UTF-8 reason (§5.5.1, §7.4). A message past
//! the limit fails with 1009 as soon as its header says so (§7.4.1).

use std::fmt;

/// The most bytes of a frame header: 2, 8 of extended length, 4 of mask.
const MAX_HEADER: usize = 14;

/// What a frame (or the message it completes) is.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Event {
    /// A whole text message.
    Text(String),
    /// A whole binary message (its bytes are not kept: the protocol has none).
    Binary,
    /// A ping: answer with a pong of this payload.
    Ping(Vec<u8>),
    /// A close: its code and reason, if it had a body.
    Close(Option<(u16, String)>),
}

/// Why the connection fails, with the close code to send (RFC 6455 §7.4.1).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Fault {
    /// 1002: a frame the protocol does not allow.
    Protocol(&'static str),
    /// 1007: a text message or close reason that is not UTF-8.
    NotUtf8,
    /// 1009: a message past the limit.
    TooBig {
        /// The message's size, as far as it is known.
        size: u64,
        /// The limit.
        max: usize,
    },
}

impl Fault {
    /// The close code for this fault.
    pub(super) fn code(&self) -> u16 {
        match self {
            Fault::Protocol(_) => 1002,
            Fault::NotUtf8 => 1007,
            Fault::TooBig { .. } => 1009,
        }
    }
}

impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Fault::Protocol(why) => write!(f, "WebSocket protocol error: {why}"),
            Fault::NotUtf8 => f.write_str("WebSocket text that is not UTF-8"),
            Fault::TooBig { size, max } => {
                write!(f, "message too long: {size} > {max}")
            }
        }
    }
}

/// A message arriving in fragments.
#[derive(Debug)]
struct Partial {
    text: bool,
    data: Vec<u8>,
}

/// Reads frames; keeps only a message arriving in fragments (none, while a call is idle).
#[derive(Debug)]
pub(super) struct Reader {
    partial: Option<Box<Partial>>,
    max_message: usize,
}

impl Reader {
    /// A reader of messages of at most `max_message` bytes.
    pub(super) fn new(max_message: usize) -> Self {
        Reader {
            partial: None,
            max_message,
        }
    }

    /// Reads one frame from the front of `buf`: `Ok(None)` when `buf` does not hold a whole
    /// one yet, else how many bytes it took and the message it completes, if any.
    pub(super) fn next(&mut self, buf: &[u8]) -> Result<Option<(usize, Option<Event>)>, Fault> {
        let Some(head) = Header::parse(buf)? else {
            return Ok(None);
        };
        let control = head.opcode >= 8;
        // Checked on the header alone: a message past the limit is refused before its bytes
        // arrive (nothing is buffered for it).
        if !control {
            let so_far = self.partial.as_ref().map_or(0, |p| p.data.len() as u64);
            let size = so_far.saturating_add(head.len);
            if size > self.max_message as u64 {
                return Err(Fault::TooBig {
                    size,
                    max: self.max_message,
                });
            }
        }
        // Within the limit (or a control frame, at most 125 bytes): fits in usize.
        let len = usize::try_from(head.len).map_err(|_| Fault::Protocol("frame too long"))?;
        let end = head.size + len;
        if buf.len() < end {
            return Ok(None);
        }
        let mut payload = buf[head.size..end].to_vec();
        unmask(&mut payload, head.mask);
        let event = match head.opcode {
            // Continuation.
            0 => {
                let Some(p) = &mut self.partial else {
                    return Err(Fault::Protocol("continuation frame without a message"));
                };
                p.data.extend_from_slice(&payload);
                if head.fin {
                    self.partial
                        .take()
                        .and_then(|p| whole(p.text, p.data).transpose())
                } else {
                    None
                }
            }
            // Text, binary.
            1 | 2 => {
                if self.partial.is_some() {
                    return Err(Fault::Protocol("a new message inside a fragmented one"));
                }
                let text = head.opcode == 1;
                if head.fin {
                    whole(text, payload).transpose()
                } else {
                    self.partial = Some(Box::new(Partial {
                        text,
                        data: payload,
                    }));
                    None
                }
            }
            8 => Some(Ok(Event::Close(close_body(&payload)?))),
            9 => Some(Ok(Event::Ping(payload))),
            // Pong: nothing to do.
            10 => None,
            _ => return Err(Fault::Protocol("unknown opcode")),
        };
        Ok(Some((end, event.transpose()?)))
    }
}

/// A whole message.
fn whole(text: bool, data: Vec<u8>) -> Result<Option<Event>, Fault> {
    if !text {
        return Ok(Some(Event::Binary));
    }
    String::from_utf8(data)
        .map(|s| Some(Event::Text(s)))
        .map_err(|_| Fault::NotUtf8)
}

/// A close frame's body: empty, or a code a peer may send and a UTF-8 reason.
fn close_body(body: &[u8]) -> Result<Option<(u16, String)>, Fault> {
    match body {
        [] => Ok(None),
        [_] => Err(Fault::Protocol("a close body of one byte")),
        [hi, lo, reason @ ..] => {
            let code = u16::from_be_bytes([*hi, *lo]);
            // §7.4.1, §7.4.2: 1000-1003, 1007-1011 defined (1004-1006 and 1015 never
            // sent); 3000-4999 for libraries, applications and private use.
            let allowed = matches!(code, 1000..=1003 | 1007..=1011 | 3000..=4999);
            if !allowed {
                return Err(Fault::Protocol("a close code a peer may not send"));
            }
            let reason = std::str::from_utf8(reason).map_err(|_| Fault::NotUtf8)?;
            Ok(Some((code, reason.to_owned())))
        }
    }
}

/// A frame header from a client.
struct Header {
    fin: bool,
    opcode: u8,
    mask: [u8; 4],
    /// The payload's length.
    len: u64,
    /// The header's own length.
    size: usize,
}

impl Header {
    fn parse(buf: &[u8]) -> Result<Option<Header>, Fault> {
        let [b0, b1, ..] = *buf else {
            return Ok(None);
        };
        let fin = b0 & 0x80 != 0;
        if b0 & 0x70 != 0 {
            return Err(Fault::Protocol(
                "a reserved bit set (no extension was agreed)",
            ));
        }
        let opcode = b0 & 0x0f;
        if b1 & 0x80 == 0 {
            return Err(Fault::Protocol("a frame from the client not masked"));
        }
        let (len, at) = match b1 & 0x7f {
            126 => match buf.get(2..4) {
                Some(b) => (u64::from(u16::from_be_bytes([b[0], b[1]])), 4),
                None => return Ok(None),
            },
            127 => match buf.get(2..10).and_then(|b| <[u8; 8]>::try_from(b).ok()) {
                Some(b) => {
                    let len = u64::from_be_bytes(b);
                    if len >> 63 != 0 {
                        return Err(Fault::Protocol("a length with its top bit set"));
                    }
                    (len, 10)
                }
                None => return Ok(None),
            },
            n => (u64::from(n), 2),
        };
        if opcode >= 8 {
            if !fin {
                return Err(Fault::Protocol("a fragmented control frame"));
            }
            if len > 125 {
                return Err(Fault::Protocol("a control frame over 125 bytes"));
            }
        }
        let Some(mask) = buf
            .get(at..at + 4)
            .and_then(|m| <[u8; 4]>::try_from(m).ok())
        else {
            return Ok(None);
        };
        debug_assert!(at + 4 <= MAX_HEADER);
        Ok(Some(Header {
            fin,
            opcode,
            mask,
            len,
            size: at + 4,
        }))
    }
}

fn unmask(data: &mut [u8], mask: [u8; 4]) {
    for (i, b) in data.iter_mut().enumerate() {
        *b ^= mask[i & 3];
    }
}

/// Appends a frame from the server (unmasked, §5.1) with this opcode and payload.
fn encode(out: &mut Vec<u8>, opcode: u8, parts: &[&[u8]]) {
    let len: usize = parts.iter().map(|p| p.len()).sum();
    out.reserve(MAX_HEADER + len);
    out.push(0x80 | opcode);
    match len {
        0..=125 => out.push(len as u8),
        126..=0xffff => {
            out.push(126);
            out.extend_from_slice(&(len as u16).to_be_bytes());
        }
        _ => {
            out.push(127);
            out.extend_from_slice(&(len as u64).to_be_bytes());
        }
    }
    for p in parts {
        out.extend_from_slice(p);
    }
}

/// Appends a text frame.
pub(super) fn encode_text(out: &mut Vec<u8>, text: &str) {
    encode(out, 1, &[text.as_bytes()]);
}

/// Appends a pong answering a ping of `payload`.
pub(super) fn encode_pong(out: &mut Vec<u8>, payload: &[u8]) {
    encode(out, 10, &[payload]);
}

/// Appends a close frame: `code` and `reason` (cut at a character to fit the 125 bytes of
/// a control frame), or an empty body.
pub(super) fn encode_close(out: &mut Vec<u8>, close: Option<(u16, &str)>) {
    match close {
        None => encode(out, 8, &[]),
        Some((code, reason)) => {
            let mut cut = reason.len().min(123);
            while !reason.is_char_boundary(cut) {
                cut -= 1;
            }
            encode(out, 8, &[&code.to_be_bytes(), &reason.as_bytes()[..cut]]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A frame as a client sends it (masked).
    fn client(fin: bool, opcode: u8, payload: &[u8], mask: [u8; 4]) -> Vec<u8> {
        let mut out = vec![(u8::from(fin) << 7) | opcode];
        match payload.len() {
            n @ 0..=125 => out.push(0x80 | n as u8),
            n @ 126..=0xffff => {
                out.push(0x80 | 126);
                out.extend_from_slice(&(n as u16).to_be_bytes());
            }
            n => {
                out.push(0x80 | 127);
                out.extend_from_slice(&(n as u64).to_be_bytes());
            }
        }
        out.extend_from_slice(&mask);
        out.extend(payload.iter().enumerate().map(|(i, b)| b ^ mask[i & 3]));
        out
    }

    const M: [u8; 4] = [0x37, 0xfa, 0x21, 0x3d];

    #[test]
    fn a_masked_text_frame_is_a_message_and_a_part_of_one_waits() {
        let frame = client(true, 1, b"Hello", M);
        let mut r = Reader::new(1024);
        for cut in 0..frame.len() {
            assert_eq!(r.next(&frame[..cut]), Ok(None), "{cut} bytes");
        }
        let got = r.next(&frame).unwrap().unwrap();
        assert_eq!(got, (frame.len(), Some(Event::Text("Hello".into()))));
    }

    #[test]
    fn fragments_make_one_message_and_control_frames_come_between() {
        // RFC 6455 §5.4: "Control frames MAY be injected in the middle of a fragmented message."
        let mut bytes = client(false, 1, b"Hel", M);
        bytes.extend(client(true, 9, b"p", M));
        bytes.extend(client(true, 0, b"lo", M));
        let mut r = Reader::new(1024);
        let (n1, e1) = r.next(&bytes).unwrap().unwrap();
        assert_eq!(e1, None);
        let (n2, e2) = r.next(&bytes[n1..]).unwrap().unwrap();
        assert_eq!(e2, Some(Event::Ping(b"p".to_vec())));
        let (n3, e3) = r.next(&bytes[n1 + n2..]).unwrap().unwrap();
        assert_eq!(e3, Some(Event::Text("Hello".into())));
        assert_eq!(n1 + n2 + n3, bytes.len());
    }

    #[test]
    fn lengths_of_16_and_64_bits() {
        for n in [125usize, 126, 65_535, 65_536] {
            let text = "x".repeat(n);
            let frame = client(true, 1, text.as_bytes(), M);
            let got = Reader::new(1 << 20).next(&frame).unwrap().unwrap();
            assert_eq!(got, (frame.len(), Some(Event::Text(text))));
        }
    }

    /// RFC 6455 §5.1: "The server MUST close the connection upon receiving a frame that is
    /// not masked"; §5.2 RSV bits "MUST be 0 unless an extension is negotiated"; unknown
    /// opcodes, §5.5 control frames, §5.4 fragments, §8.1 UTF-8.
    #[test]
    fn frames_a_server_must_refuse() {
        let unmasked = {
            let mut f = client(true, 1, b"hi", M);
            f[1] &= 0x7f;
            f.drain(2..6);
            f
        };
        let rsv = {
            let mut f = client(true, 1, b"hi", M);
            f[0] |= 0x40;
            f
        };
        let cases: Vec<(Vec<u8>, u16)> = vec![
            (unmasked, 1002),
            (rsv, 1002),
            (client(true, 3, b"", M), 1002),
            (client(true, 11, b"", M), 1002),
            (client(false, 9, b"", M), 1002),
            (client(true, 9, &[0; 126], M), 1002),
            (client(true, 0, b"x", M), 1002),
            (client(true, 8, &[3], M), 1002),
            (client(true, 8, &1005u16.to_be_bytes(), M), 1002),
            (client(true, 8, &999u16.to_be_bytes(), M), 1002),
            (client(true, 1, &[0xff, 0xfe], M), 1007),
            (client(true, 8, &[0x03, 0xe8, 0xff], M), 1007),
        ];
        for (frame, code) in cases {
            let got = Reader::new(1024).next(&frame);
            assert_eq!(got.map_err(|f| f.code()), Err(code), "{frame:02x?}");
        }
        // A new message inside a fragmented one.
        let mut r = Reader::new(1024);
        r.next(&client(false, 1, b"a", M)).unwrap();
        let got = r.next(&client(true, 1, b"b", M));
        assert_eq!(got.map_err(|f| f.code()), Err(1002));
    }

    /// §7.4.1: 1009, "a message that is too big for it to process": refused on its header,
    /// before its payload arrives, and across fragments.
    #[test]
    fn a_message_past_the_limit_is_refused_on_its_header() {
        let frame = client(true, 1, &[b'a'; 300], M);
        // The header whole (4 bytes and the mask), none of the payload.
        let got = Reader::new(100).next(&frame[..8]);
        assert_eq!(got.map_err(|f| f.code()), Err(1009));
        let mut r = Reader::new(100);
        r.next(&client(false, 1, &[b'a'; 60], M)).unwrap();
        let got = r.next(&client(true, 0, &[b'a'; 60], M));
        assert_eq!(
            got,
            Err(Fault::TooBig {
                size: 120,
                max: 100
            })
        );
    }

    #[test]
    fn a_close_with_a_code_and_reason_and_one_without() {
        let mut body = 1000u16.to_be_bytes().to_vec();
        body.extend_from_slice(b"bye");
        let got = Reader::new(64).next(&client(true, 8, &body, M)).unwrap();
        assert_eq!(
            got.unwrap().1,
            Some(Event::Close(Some((1000, "bye".into()))))
        );
        let got = Reader::new(64).next(&client(true, 8, b"", M)).unwrap();
        assert_eq!(got.unwrap().1, Some(Event::Close(None)));
    }

    proptest::proptest! {
        /// Any text messages, each cut into any fragments with pings between them, read
        /// back from any split of the bytes into reads: the same messages, in order, and
        /// each ping's payload.
        #[test]
        fn messages_survive_any_fragmentation_and_any_reads(
            messages in proptest::collection::vec(("\\PC{0,300}", 1usize..4), 1..6),
            mask in proptest::prelude::any::<[u8; 4]>(),
            cuts in proptest::collection::vec(1usize..200, 1..40),
        ) {
            let mut bytes = Vec::new();
            let mut want = Vec::new();
            for (text, parts) in &messages {
                let raw = text.as_bytes();
                let step = raw.len().div_ceil(*parts).max(1);
                let pieces: Vec<&[u8]> = if raw.is_empty() { vec![raw] } else { raw.chunks(step).collect() };
                for (i, piece) in pieces.iter().enumerate() {
                    let (opcode, last) = (if i == 0 { 1 } else { 0 }, i + 1 == pieces.len());
                    bytes.extend(client(last, opcode, piece, mask));
                    if last {
                        want.push(Event::Text(text.clone()));
                    }
                    if i == 0 {
                        bytes.extend(client(true, 9, b"ping", mask));
                        want.push(Event::Ping(b"ping".to_vec()));
                    }
                }
            }
            // Feed the bytes in reads of the given sizes, as the socket would.
            let mut r = Reader::new(1 << 20);
            let (mut pending, mut got, mut at, mut cut) = (Vec::new(), Vec::new(), 0, 0);
            while at < bytes.len() || !pending.is_empty() {
                if at < bytes.len() {
                    let n = cuts[cut % cuts.len()].min(bytes.len() - at);
                    cut += 1;
                    pending.extend_from_slice(&bytes[at..at + n]);
                    at += n;
                }
                while let Some((n, ev)) = r.next(&pending).unwrap() {
                    pending.drain(..n);
                    got.extend(ev);
                }
                if at == bytes.len() {
                    proptest::prop_assert!(pending.is_empty());
                }
            }
            proptest::prop_assert_eq!(got, want);
        }

        /// Arbitrary bytes, read in any splits, never panic the reader: each step either
        /// waits for more, takes a whole frame (at least its 6-byte minimum, never past the
        /// bytes given), or fails with a close code RFC 6455 §7.4.1 defines; the same bytes
        /// read at once or in pieces give the same messages up to the first fault.
        #[test]
        fn arbitrary_bytes_never_panic_and_chunking_does_not_matter(
            bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..600),
            cuts in proptest::collection::vec(1usize..64, 1..20),
            max in 0usize..400,
        ) {
            let read = |splits: &[usize]| -> (Vec<Event>, Option<u16>) {
                let mut r = Reader::new(max);
                let (mut pending, mut got, mut at, mut i) = (Vec::<u8>::new(), Vec::new(), 0, 0);
                while at < bytes.len() {
                    let n = splits[i % splits.len()].min(bytes.len() - at);
                    i += 1;
                    pending.extend_from_slice(&bytes[at..at + n]);
                    at += n;
                    loop {
                        match r.next(&pending) {
                            Ok(None) => break,
                            Ok(Some((n, ev))) => {
                                assert!((6..=pending.len()).contains(&n));
                                pending.drain(..n);
                                got.extend(ev);
                            }
                            Err(fault) => {
                                assert!(matches!(fault.code(), 1002 | 1007 | 1009));
                                return (got, Some(fault.code()));
                            }
                        }
                    }
                }
                (got, None)
            };
            let whole = read(&[bytes.len().max(1)]);
            let pieces = read(&cuts);
            // A fault found on a header is found at once, whatever the split; only a
            // fault's timing may differ, never the messages before it.
            proptest::prop_assert_eq!(whole, pieces);
        }
    }

    #[test]
    fn server_frames_are_unmasked_with_the_shortest_length() {
        let mut out = Vec::new();
        encode_text(&mut out, "Hi");
        assert_eq!(out, [0x81, 2, b'H', b'i']);
        let mut out = Vec::new();
        encode_text(&mut out, &"x".repeat(300));
        assert_eq!(out[..4], [0x81, 126, 0x01, 0x2c]);
        assert_eq!(out.len(), 304);
        let mut out = Vec::new();
        encode_close(&mut out, Some((1000, "call ended")));
        assert_eq!(out[..4], [0x88, 12, 0x03, 0xe8]);
        // A reason cut to fit 125 bytes, at a character.
        let mut out = Vec::new();
        encode_close(&mut out, Some((1001, &"é".repeat(100))));
        assert_eq!(out[1], 124);
        assert!(std::str::from_utf8(&out[4..]).is_ok());
    }
}
