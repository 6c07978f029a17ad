//! Arbitrary host bytes never panic the TanStack client, over SSE and as socket frames,
//! with closes, reconnects and time in between; and the client never delivers one cursor
//! twice between two gaps (a gap resets what was built from events).
#![no_main]

use std::collections::HashSet;
use std::time::{Duration, Instant};

use harness_tanstack::client::{Client, ClientConfig, ClientEvent};
use harness_tanstack::frame::Input;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut now = Instant::now();
    let mut c = Client::new(ClientConfig::new("thread-1"));
    c.connect(now);
    let mut seen: HashSet<String> = HashSet::new();
    for line in data.split(|b| *b == b'\n') {
        let text = String::from_utf8_lossy(line);
        match line.first().copied().unwrap_or(0) % 8 {
            0 => c.handle_sse_bytes(now, line),
            1 => {
                let code = line.get(1..3).map(|b| u16::from_be_bytes([b[0], b[1]]));
                let _ = c.handle_close(now, code);
                if line.len() % 2 == 0 {
                    let _ = c.connect_sse(now);
                } else {
                    c.connect(now);
                }
            }
            2 => now += Duration::from_secs(u64::from(line.len() as u8)),
            3 => {
                c.send_input(Input::prompt(&text));
                let _ = c.retry_pending();
            }
            4 => c.handle_timeout(now),
            5 => {
                let _ = c.handle_control_answer(u16::from(line.len() as u8) + 100, &text);
            }
            _ => c.handle_frame(now, &text),
        }
        while c.poll_transmit().is_some() {}
        while let Some(e) = c.poll_event() {
            match e {
                ClientEvent::Event(d) => {
                    assert!(seen.insert(d.cursor.as_str().to_owned()), "delivered twice");
                }
                ClientEvent::Gap(_) => seen.clear(),
                _ => {}
            }
        }
    }
});
