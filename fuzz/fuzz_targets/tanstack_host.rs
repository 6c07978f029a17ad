//! Arbitrary frames never panic the TanStack host: each line of the input is a socket frame
//! or a `POST control` body, interleaved with turn output, time, stalls and reconnects.
#![no_main]

use std::time::{Duration, Instant};

use harness_tanstack::agui::AguiEvent;
use harness_tanstack::host::{Host, HostConfig, HostEvent, Transport, TurnOutcome};
use harness_tanstack::log::MemoryLog;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut now = Instant::now();
    let mut host = Host::new(
        HostConfig {
            max_queued_frames: 16,
            ..HostConfig::default()
        },
        MemoryLog::new(8, 4096),
    );
    let mut conn = host.connect(now, Transport::WebSocket, None, "up");
    let mut turns: Vec<String> = Vec::new();
    for line in data.split(|b| *b == b'\n') {
        let text = String::from_utf8_lossy(line);
        match line.first().copied().unwrap_or(0) % 6 {
            0 => host.handle_frame(now, conn, &text),
            1 => {
                let _ = host.control(
                    now,
                    None,
                    line,
                    "r",
                    Some("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"),
                );
            }
            2 => now += Duration::from_secs(u64::from(line.len() as u8)),
            3 => {
                if let Some(op) = turns.pop() {
                    let _ = host.emit(
                        now,
                        "thread-1",
                        &op,
                        AguiEvent::text_content("m", text.to_string()),
                    );
                    let _ = host.finish_turn(now, "thread-1", &op, TurnOutcome::Completed);
                }
            }
            4 => {
                host.disconnect(conn);
                conn = host.connect(now, Transport::Stdio, None, "stdio");
            }
            _ => {
                let _ = host.open_sse(
                    now,
                    Some("thread-1"),
                    Some(&text),
                    Some(&text),
                    None,
                    None,
                    "r",
                );
            }
        }
        host.handle_timeout(now);
        while let Some(ev) = host.poll_event() {
            match ev {
                HostEvent::Wake(c) => while host.poll_transmit(now, c).is_some() {},
                HostEvent::StartTurn(t) => turns.push(t.operation_id),
                HostEvent::CancelTurn { operation_id, .. } => {
                    let _ =
                        host.finish_turn(now, "thread-1", &operation_id, TurnOutcome::Cancelled);
                }
                _ => {}
            }
        }
    }
});
