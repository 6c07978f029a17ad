//! Testing a harness without jambonz and without a network: [`simulate_call`] connects the
//! [`driver`](crate::driver) serving an agent to the [`Simulator`] playing a script, on a
//! virtual clock, deterministically, in the calling thread.
//!
//! ```
//! use std::time::{Duration, Instant};
//! use harness_core::agent::ToolLoopAgent;
//! use harness_core::model::ScriptedModel;
//! use harness_core::{Tool, Tools};
//! use harness_jambonz::driver::ServeConfig;
//! use harness_jambonz::simulator::{Script, SimConfig, Simulator};
//! use harness_jambonz::testing::simulate_call;
//! use serde_json::json;
//!
//! // The platform's tools: jambonz runs them (here, the simulator).
//! let platform = Tools::new().with(Tool::json("get_hours", "Opening hours", |_| {
//!     Ok(json!({"weekdays": "8am to 6pm"}))
//! }));
//! let agent = ToolLoopAgent::new("faq").with_tools(&platform);
//! let model = ScriptedModel::new()
//!     .reply("Thanks for calling Acme.")
//!     .tool_call("get_hours", json!({}))
//!     .reply("We're open eight to six on weekdays.");
//! let start = Instant::now();
//! let sim = Simulator::new(start, SimConfig::default(), Script::new().greeting().say("When are you open"))
//!     .with_tools(platform);
//! // The harness has no tools of its own here.
//! let call = simulate_call(agent, model, Tools::new(), sim, start, ServeConfig::default());
//! assert_eq!(call.transcript.heard(), ["Thanks for calling Acme.", "We're open eight to six on weekdays."]);
//! assert!(call.transcript.violations.is_empty());
//! ```

use std::fmt;
use std::pin::pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use futures::SinkExt;
use futures::channel::mpsc;
use harness_core::model::Model;
use harness_core::{Harness, Tools};

use crate::driver::{CallReport, Incoming, ServeConfig, ServeError, serve};
use crate::harness_side::Transmit;
use crate::simulator::{CallTranscript, Simulator};

/// Who sent a frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Direction {
    /// jambonz → harness.
    ToHarness,
    /// harness → jambonz.
    ToJambonz,
}

/// One frame of a simulated call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SimFrame {
    /// Virtual time since the call began.
    pub at_ms: u64,
    /// Who sent it.
    pub direction: Direction,
    /// The frame.
    pub frame: Transmit,
}

/// The outcome of [`simulate_call`].
#[derive(Debug)]
pub struct SimulatedCall {
    /// What the caller heard, turn summaries and violations.
    pub transcript: CallTranscript,
    /// What the driver reported.
    pub report: Result<CallReport, ServeError>,
    /// Every frame, in order.
    pub frames: Vec<SimFrame>,
    /// The simulator, for further inspection.
    pub simulator: Simulator,
}

impl fmt::Display for SimFrame {
    /// One line: the time, the direction and the frame. A precision cuts the frame's text
    /// to that many characters (`{:.150}`), with `…` after it.
    ///
    /// ```
    /// use harness_jambonz::harness_side::Transmit;
    /// use harness_jambonz::testing::{Direction, SimFrame};
    ///
    /// let f = SimFrame { at_ms: 42, direction: Direction::ToJambonz, frame: Transmit::Text(r#"{"type":"reply:done"}"#.into()) };
    /// assert_eq!(format!("{f:.10}"), r#"    42 ms  harness → jambonz  {"type":"r…"#);
    /// ```
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let dir = match self.direction {
            Direction::ToHarness => "jambonz → harness",
            Direction::ToJambonz => "harness → jambonz",
        };
        write!(f, "{:>6} ms  {dir}  ", self.at_ms)?;
        match &self.frame {
            Transmit::Text(t) => match f.precision().and_then(|p| t.char_indices().nth(p)) {
                Some((end, _)) => write!(f, "{}…", &t[..end]),
                None => f.write_str(t),
            },
            Transmit::Close { code, reason } => write!(f, "close ({code} {reason})"),
        }
    }
}

impl SimulatedCall {
    /// The text frames sent in one direction, in order.
    pub fn texts(&self, direction: Direction) -> Vec<&str> {
        self.frames
            .iter()
            .filter(|f| f.direction == direction)
            .filter_map(|f| match &f.frame {
                Transmit::Text(t) => Some(t.as_str()),
                Transmit::Close { .. } => None,
            })
            .collect()
    }
}

/// Runs a whole simulated call: `harness` served by the driver (its model calls answered by
/// `model`, its own tools `tools` run by the driver), `sim` playing jambonz (with the
/// platform's tools), on a virtual clock starting at `start`. Returns when the call ended
/// (or after 24 virtual hours, or if nothing can make progress).
///
/// Pass an `Arc` of the harness or the model to keep a handle (to read a
/// [`ScriptedModel`](harness_core::model::ScriptedModel)'s calls afterwards).
pub fn simulate_call(
    harness: impl Harness + 'static,
    model: impl Model + 'static,
    tools: Tools,
    mut sim: Simulator,
    start: Instant,
    config: ServeConfig,
) -> SimulatedCall {
    let now = Arc::new(Mutex::new(start));
    let clock_now = now.clone();
    let clock = move || {
        *clock_now
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    };
    let read =
        |n: &Arc<Mutex<Instant>>| *n.lock().unwrap_or_else(std::sync::PoisonError::into_inner);

    let (to_harness, incoming) = mpsc::unbounded::<Incoming>();
    let (outgoing, mut from_harness) = mpsc::unbounded::<Transmit>();
    let outgoing = outgoing.sink_map_err(|e| e.to_string());
    let mut fut = pin!(serve(
        harness, model, tools, clock, incoming, outgoing, config,
    ));
    let waker = futures::task::noop_waker();
    let mut cx = Context::from_waker(&waker);
    let mut frames = Vec::new();
    let mut report = None;
    let ms = |t: Instant| {
        u64::try_from(t.saturating_duration_since(start).as_millis()).unwrap_or(u64::MAX)
    };

    sim.start(start);
    let limit = start
        .checked_add(Duration::from_secs(24 * 3600))
        .unwrap_or(start);
    for _ in 0..10_000_000u32 {
        let mut progress = false;
        if report.is_none() {
            if let Poll::Ready(r) = fut.as_mut().poll(&mut cx) {
                report = Some(r);
                progress = true;
            }
        }
        let t = read(&now);
        while let Some(tx) = sim.poll_transmit() {
            progress = true;
            let inc = match &tx {
                Transmit::Text(s) => Incoming::Text(s.clone()),
                Transmit::Close { code, reason } => Incoming::Close {
                    code: Some(*code),
                    reason: reason.clone(),
                },
            };
            frames.push(SimFrame {
                at_ms: ms(t),
                direction: Direction::ToHarness,
                frame: tx,
            });
            // The driver may have returned already; a closed channel is the socket gone.
            let _ = to_harness.unbounded_send(inc);
        }
        while let Ok(tx) = from_harness.try_recv() {
            progress = true;
            match &tx {
                Transmit::Text(s) => sim.handle_frame(t, s),
                Transmit::Close { code, reason } => sim.handle_close(t, *code, reason),
            }
            frames.push(SimFrame {
                at_ms: ms(t),
                direction: Direction::ToJambonz,
                frame: tx,
            });
        }
        // Everything is in the transcript; keep the event queue empty.
        while sim.poll_event().is_some() {}
        if progress {
            continue;
        }
        if sim.is_ended() {
            if report.is_some() {
                break;
            }
            // The socket is gone: end the driver's input.
            to_harness.close_channel();
            if let Poll::Ready(r) = fut.as_mut().poll(&mut cx) {
                report = Some(r);
            }
            break;
        }
        match sim.poll_timeout() {
            Some(next) if next <= limit => {
                let next = next.max(t);
                *now.lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner) = next;
                sim.handle_timeout(next);
            }
            _ => break,
        }
    }
    to_harness.close_channel();
    SimulatedCall {
        transcript: sim.transcript().clone(),
        report: report
            .unwrap_or_else(|| Err(ServeError::Transport("the call did not finish".into()))),
        frames,
        simulator: sim,
    }
}
