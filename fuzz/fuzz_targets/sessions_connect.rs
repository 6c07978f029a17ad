//! `Harness.Connect` frame decoding, both sides: the input is a script of steps, each a byte
//! saying what happens and a length-prefixed chunk. Chunks are decoded with prost as
//! `ControllerFrame`s (fed to a `HarnessConnect`) or `Event`s (fed to a `HostConnect`), and
//! between them each side's own calls are made (the agent's sink calls, the host's answers),
//! so hostile bytes meet every state of both machines.
//!
//! Nothing panics; a decoded message converts to the crate's frame and back to the same
//! frame; the harness side transmits at most one terminal frame (END or EVENT_PARKED) and
//! nothing after it; the host side takes nothing after an END or a park acknowledgement, and
//! ends a turn only where the exchange allows it.
#![no_main]

use harness_core::event::EventBody;
use harness_core::message::{
    Mediation, Message, ModelRequest, ModelResponse, ToolCall, ToolResult,
};
use harness_core::{HarnessError, Start};
use harness_sessions::connect::{
    ControllerFrame, Ending, Frame, HarnessConnect, HarnessFrame, HostConnect, pb,
};
use libfuzzer_sys::fuzz_target;

/// Decodes `bytes` as the protobuf `P` and converts it to the crate's `F`; encoding that
/// frame and decoding it again gives `expect(&f)` (the frame, less what is never sent).
fn decode<P, F>(bytes: &[u8], expect: impl Fn(&F) -> F) -> Option<F>
where
    P: prost::Message + Default + for<'a> From<&'a F>,
    F: From<P> + PartialEq + std::fmt::Debug,
{
    let f = F::from(P::decode(bytes).ok()?);
    let again = F::from(
        P::decode(P::from(&f).encode_to_vec().as_slice()).expect("our own encoding decodes"),
    );
    assert_eq!(again, expect(&f));
    Some(f)
}

fn controller_frame(bytes: &[u8]) -> Option<ControllerFrame> {
    // A host never sends `Start.identity` (as the Go bridge).
    decode::<pb::ControllerFrame, _>(bytes, |f: &ControllerFrame| {
        let mut sent = f.clone();
        if let Some(Frame::Start(s)) = &mut sent.frame {
            s.identity = Default::default();
        }
        sent
    })
}

fn event(bytes: &[u8]) -> Option<HarnessFrame> {
    decode::<pb::Event, _>(bytes, HarnessFrame::clone)
}

fn is_terminal(f: &HarnessFrame) -> bool {
    match f {
        HarnessFrame::Parked { .. } => true,
        HarnessFrame::Event(e) => matches!(e.body, EventBody::End(_)),
        _ => false,
    }
}

/// The harness side's state as the test sees it.
struct Harness {
    m: HarnessConnect,
    terminal: bool,
}

impl Harness {
    fn drain(&mut self) {
        while let Some(f) = self.m.poll_transmit() {
            assert!(!self.terminal, "a frame after the terminal one: {f:?}");
            self.terminal = is_terminal(&f);
        }
        while self.m.poll_event().is_some() {}
    }

    fn act(&mut self, op: u8, arg: &[u8]) {
        let text = String::from_utf8_lossy(arg).into_owned();
        let _ = match op % 8 {
            0 => self.m.model(ModelRequest::new(vec![Message::user(text)])),
            1 => self
                .m
                .tool_call(ToolCall::new(text.clone(), "t", Default::default())),
            2 => self.m.tool_call(
                ToolCall::new(text.clone(), "t", Default::default())
                    .with_mediation(Mediation::RequiresApproval),
            ),
            3 => self.m.output(&text),
            4 => self.m.report(ToolResult::error(text, "e")),
            5 => {
                let _ = self.m.finish(&Ok(()));
                Ok(())
            }
            6 => {
                let _ = self.m.finish(&Err(HarnessError::Failed(text)));
                Ok(())
            }
            _ => {
                self.m.handle_close();
                Ok(())
            }
        };
        self.drain();
    }
}

/// The host side's state as the test sees it.
struct Host {
    m: HostConnect,
    broken: bool,
    ended: bool,
}

impl Host {
    fn drain(&mut self) {
        while self.m.poll_transmit().is_some() {}
        while self.m.poll_event().is_some() {}
    }

    fn take(&mut self, f: HarnessFrame) {
        if self.broken {
            return;
        }
        let terminal = is_terminal(&f);
        match self.m.handle_event(f) {
            Ok(()) => {
                assert!(
                    !self.ended,
                    "an event accepted after the END or the park ack"
                );
                self.ended |= terminal;
            }
            // A driver drops the stream on an error.
            Err(_) => self.broken = true,
        }
        self.drain();
    }

    fn act(&mut self, op: u8, arg: &[u8]) {
        if self.broken {
            return;
        }
        let text = String::from_utf8_lossy(arg).into_owned();
        let seq = arg.first().map_or(0, |b| i64::from(*b) - 8);
        let r = match op % 6 {
            0 => self.m.model_result(ModelResponse {
                message: Message::assistant(text),
                ..ModelResponse::default()
            }),
            1 => self.m.tool_result(ToolResult::error(text, "e")),
            2 => self.m.park(&text, seq),
            3 => {
                self.m.cancel(&text);
                Ok(())
            }
            4 => {
                let mut r = ToolResult::error(text, "denied");
                r.approval_request_seq = seq;
                r.approval_decision_seq = seq + 1;
                self.m.tool_result(r)
            }
            _ => {
                // The stream ends: a turn ends only after its END or its park acknowledgement.
                match self.m.handle_close() {
                    Ok(Ending::Completed | Ending::Failed { .. } | Ending::Parked(_)) => {
                        assert!(self.ended, "a turn ended without its END or park ack");
                    }
                    Ok(_) => {}
                    Err(_) => assert!(!self.ended),
                }
                self.broken = true;
                Ok(())
            }
        };
        // An answer out of turn is refused (the host's own bug, not the peer's): go on.
        let _ = r;
        self.drain();
    }
}

fuzz_target!(|data: &[u8]| {
    let start = Start {
        execution_id: "x1".into(),
        session_uid: "s".into(),
        inputs: vec![Message::user("hi")],
        ..Start::default()
    };
    let mut harness = Harness {
        m: HarnessConnect::new(),
        terminal: false,
    };
    let Ok(m) = HostConnect::new(&start) else {
        return;
    };
    let mut host = Host {
        m,
        broken: false,
        ended: false,
    };
    host.drain();
    let mut rest = data;
    while let [op, len, tail @ ..] = rest {
        let n = usize::from(*len).min(tail.len());
        let (chunk, next) = tail.split_at(n);
        rest = next;
        match op % 4 {
            0 => {
                if let Some(f) = controller_frame(chunk) {
                    let _ = harness.m.handle_frame(f);
                    harness.drain();
                }
            }
            1 => harness.act(op / 4, chunk),
            2 => {
                if let Some(f) = event(chunk) {
                    host.take(f);
                }
            }
            _ => host.act(op / 4, chunk),
        }
    }
});
