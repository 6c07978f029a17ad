//! The client side, sans-IO: subscribe with the last cursor, inputs with `requestId` and
//! `inputId` (the same `inputId` when a lost answer is retried), receipts matched to their
//! requests, cursor tracking, the gap procedure, close and error codes mapped to what to
//! do, idle detection, and the run tree.
//!
//! Drive it as [`harness_core::run_loop`] states: after each input (`connect`,
//! `handle_frame`, `send_input`, `handle_close`, `handle_timeout`), drain
//! [`Client::poll_event`] and [`Client::poll_transmit`], and call
//! [`Client::handle_timeout`] at [`Client::poll_timeout`].
//!
//! ```
//! use std::time::Instant;
//! use harness_tanstack::client::{Client, ClientConfig, ClientEvent};
//! use harness_tanstack::frame::Input;
//!
//! let now = Instant::now();
//! let mut c = Client::new(ClientConfig::new("thread-1"));
//! c.connect(now);                                    // socket / stdio: a subscribe frame
//! assert_eq!(c.poll_transmit().unwrap(), r#"{"type":"harness.subscribe","threadId":"thread-1","v":2}"#);
//! c.handle_frame(now, r#"{"type":"harness.hello","v":2,"threadId":"thread-1"}"#);
//! let req = c.send_input(Input::prompt("Hello"));
//! let sent = c.poll_transmit().unwrap();
//! assert!(sent.contains(r#""requestId":"req-1""#) && sent.contains(r#""inputId":"#));
//! c.handle_frame(now, r#"{"type":"harness.event","cursor":"4","threadId":"thread-1","operationId":"op-1","event":{"type":"TEXT_MESSAGE_CONTENT","messageId":"m-1","delta":"Hi"}}"#);
//! let events: Vec<_> = std::iter::from_fn(|| c.poll_event()).collect();
//! assert!(matches!(&events[0], ClientEvent::Hello { .. }));
//! assert!(matches!(&events[1], ClientEvent::Event(e) if e.cursor == "4"));
//! assert_eq!(c.last_cursor().map(|c| c.as_str()), Some("4"));
//! # let _ = req;
//! ```

mod receive;
mod run_tree;

use std::collections::{HashMap, HashSet, VecDeque};
use std::time::{Duration, Instant};

use harness_core::Cursor;

use crate::agui::AguiEvent;
use crate::catalog::GapReason;
use crate::frame::{
    self, ClientFrame, ErrorCode, FrameError, Input, InputFrame, ReceiptStatus, SnapshotRequest,
    Subscribe, close,
};
use crate::transport::SseFrameDecoder;

use run_tree::RunTree;

/// How a client behaves.
#[derive(Clone, Debug, PartialEq)]
pub struct ClientConfig {
    /// The thread to read.
    pub thread_id: String,
    /// No bytes for this long: the connection is dead, reconnect ("`createHarnessClient`
    /// connects again when no bytes come for 60 s (its `idleTimeoutMs`)"). Default 60 s.
    pub idle_timeout: Duration,
    /// The protocol version to ask for (2).
    pub version: i64,
    /// How many delivered cursors to remember to drop a replayed event. Default 4096.
    pub dedup_window: usize,
    /// How many runs the run tree keeps (at least 1). Past it the oldest runs that ended
    /// (`RUN_FINISHED` / `RUN_ERROR`) are forgotten first, and only when none has ended,
    /// the oldest of all. Default 4096.
    pub max_runs: usize,
}

impl ClientConfig {
    /// A client of this thread with the defaults.
    pub fn new(thread_id: impl Into<String>) -> Self {
        ClientConfig {
            thread_id: thread_id.into(),
            idle_timeout: Duration::from_secs(60),
            version: frame::PROTOCOL_VERSION,
            dedup_window: 4096,
            max_runs: 4096,
        }
    }
}

/// What the application must do after a close or an error.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Action {
    /// Nothing: the stream goes on.
    Continue,
    /// Sign in again (4401, `unauthorized`).
    SignIn,
    /// Stop: the user cannot read the thread (4403, `forbidden`), or the server speaks
    /// another version (4400, `unsupported_version`).
    Stop,
    /// Subscribe again from the last cursor (4408 `slow_consumer`, 1011 feed ended,
    /// `internal` read failure).
    Resubscribe {
        /// The cursor to send (`from` / `Last-Event-ID`).
        from: Option<Cursor>,
    },
    /// The connection died (no bytes for the idle timeout, or it closed with another code):
    /// connect again from the last cursor.
    Reconnect {
        /// The cursor to send.
        from: Option<Cursor>,
    },
}

/// Why `POST control` gave no receipt, and what to do about it
/// ([`Client::handle_control_answer`]).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ControlFailure {
    /// `401`: the request has no user. Sign in again, then send the same body.
    SignIn,
    /// `403 { error: 'forbidden' }`: the user may not use the thread. Stop.
    Forbidden,
    /// `400 { error }` (or another 4xx that is not a timeout): the host refused the input as
    /// it is. Sending it again does not help.
    Invalid {
        /// The HTTP status.
        status: u16,
        /// The `error` of the body (empty when it had none).
        error: String,
    },
    /// No answer that can be read (a 5xx, a 408 / 429, a `200` that is not a receipt, a
    /// status the spec does not give): the input may or may not have run. "Send the same id
    /// again after a lost answer": resend the same body when
    /// [`Input::is_idempotent`](crate::frame::Input::is_idempotent) (a `prompt`, `command`,
    /// `agent` or `append` with the same `inputId` runs once); any other op may run twice,
    /// so check the transcript or ask the user first.
    Lost {
        /// The HTTP status.
        status: u16,
    },
}

/// One event of the session, delivered once.
#[derive(Clone, Debug, PartialEq)]
pub struct DeliveredEvent {
    /// Its cursor.
    pub cursor: Cursor,
    /// The run that made it.
    pub operation_id: String,
    /// The parent of that run in the run tree (`parentRunId` of its `RUN_STARTED`), when known.
    pub parent_run_id: Option<String>,
    /// The AG-UI event.
    pub event: AguiEvent,
}

impl DeliveredEvent {
    /// Whether this event ends its run: `RUN_FINISHED` (whatever its outcome, `cancelled`
    /// included) or `RUN_ERROR`. With [`parent_run_id`](Self::parent_run_id) `None`, the
    /// end of a turn: what an app waiting for its answer stops on.
    #[must_use]
    pub fn ends_run(&self) -> bool {
        matches!(
            self.event,
            AguiEvent::RunFinished(_) | AguiEvent::RunError(_)
        )
    }
}

/// The gap procedure, as an instruction: "1. Delete the state that you built from events.
/// 2. Load `GET snapshot` and `GET transcript` again. On the socket, send
/// `harness.snapshot`. 3. Store `resumeAt` as your cursor, and continue to read the
/// stream." The client has done step 3 (and queued `harness.snapshot` on a socket).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Resync {
    /// The cursor the client sent.
    pub from: Cursor,
    /// The new cursor.
    pub resume_at: Cursor,
    /// `truncated` or `evicted`.
    pub reason: GapReason,
}

/// The answer to one input.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InputAnswer {
    /// The request it answers.
    pub request_id: String,
    /// The input's id (the one the client sent).
    pub input_id: String,
    /// `accepted`, `queued` or `rejected`.
    pub status: ReceiptStatus,
    /// The run.
    pub operation_id: Option<String>,
    /// Why it was rejected.
    pub reason: Option<String>,
}

/// What the client tells the application.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
#[allow(clippy::large_enum_variant)]
pub enum ClientEvent {
    /// The host accepted the subscribe.
    Hello {
        /// Its version.
        v: Option<i64>,
    },
    /// An event of the session (never twice).
    Event(DeliveredEvent),
    /// Events are missing: do the gap procedure (see [`Resync`]).
    Gap(Resync),
    /// The answer to an input.
    Receipt(InputAnswer),
    /// The snapshot the client asked for.
    Snapshot(crate::Json),
    /// A `harness.error`, with what to do.
    Error {
        /// Its code.
        code: Option<ErrorCode>,
        /// For people.
        message: String,
        /// The request it is about.
        request_id: Option<String>,
        /// What to do.
        action: Action,
    },
    /// The connection is over: do this.
    Closed(Action),
    /// A frame that does not read (kept for logs; the stream goes on).
    BadFrame(FrameError),
    /// An input whose answer was lost, which [`Client::retry_pending`] does not send again:
    /// see [`InDoubt`].
    InDoubt(InDoubt),
}

/// An input whose answer never came (its connection ended first), of an op that does not
/// "run once": only "a `prompt`, `command`, `agent`, or `append` input with the same
/// `inputId` runs once", so a `steer` or `followUp` sent again may run twice. It may have
/// reached the host: if it did, the stream has a `harness.input.*` event with its
/// `inputId`. The app decides whether to send it again (with [`Client::send_input`]).
#[derive(Clone, Debug, PartialEq)]
pub struct InDoubt {
    /// The request that got no answer.
    pub request_id: String,
    /// Its `inputId`.
    pub input_id: String,
    /// The input.
    pub input: Input,
}

#[derive(Clone, Debug)]
struct Pending {
    /// The order it was first sent in (retries keep it).
    seq: u64,
    input_id: String,
    input: Input,
}

/// The sans-IO client of one thread.
#[derive(Debug)]
pub struct Client {
    cfg: ClientConfig,
    connected: bool,
    /// What ended the current connection before its close came (a closing error frame, or
    /// the idle timeout): the close then answers the same.
    ended: Option<Action>,
    last_cursor: Option<Cursor>,
    last_bytes: Option<Instant>,
    pending: HashMap<String, Pending>,
    next_request: u64,
    next_input: u64,
    events: VecDeque<ClientEvent>,
    out: VecDeque<String>,
    runs: RunTree,
    seen: HashSet<Cursor>,
    seen_order: VecDeque<Cursor>,
    sse: SseFrameDecoder,
    socket: bool,
}

impl Client {
    /// A client.
    pub fn new(cfg: ClientConfig) -> Self {
        Client {
            cfg,
            connected: false,
            ended: None,
            last_cursor: None,
            last_bytes: None,
            pending: HashMap::new(),
            next_request: 0,
            next_input: 0,
            events: VecDeque::new(),
            out: VecDeque::new(),
            runs: RunTree::default(),
            seen: HashSet::new(),
            seen_order: VecDeque::new(),
            sse: SseFrameDecoder::new(),
            socket: true,
        }
    }

    /// A client that resumes from a stored cursor.
    pub fn resume(cfg: ClientConfig, cursor: Cursor) -> Self {
        let mut c = Client::new(cfg);
        c.last_cursor = Some(cursor);
        c
    }

    /// The last cursor: store it, send it back.
    pub fn last_cursor(&self) -> Option<&Cursor> {
        self.last_cursor.as_ref()
    }

    /// Whether a connection is up.
    pub fn is_connected(&self) -> bool {
        self.connected
    }

    /// The parent of each run seen (`parentRunId` of its `RUN_STARTED`; `None`: top-level),
    /// at most [`max_runs`](ClientConfig::max_runs) of them: the oldest runs that ended are
    /// forgotten first.
    pub fn run_tree(&self) -> &HashMap<String, Option<String>> {
        &self.runs.parents
    }

    /// Starts a socket or stdio connection: queues `harness.subscribe` with the last cursor.
    pub fn connect(&mut self, now: Instant) {
        self.socket = true;
        self.connected = true;
        self.ended = None;
        self.last_bytes = Some(now);
        let sub = ClientFrame::Subscribe(Subscribe {
            thread_id: self.cfg.thread_id.clone(),
            from: self.last_cursor.clone(),
            v: Some(self.cfg.version),
            ..Subscribe::default()
        });
        self.out.push_back(sub.to_json());
    }

    /// Starts an SSE connection: the query string of `GET events` and the `Last-Event-ID`
    /// header to send.
    pub fn connect_sse(&mut self, now: Instant) -> (String, Option<String>) {
        self.socket = false;
        self.connected = true;
        self.ended = None;
        self.last_bytes = Some(now);
        self.sse = SseFrameDecoder::new();
        let query = format!(
            "threadId={}&v={}",
            percent(&self.cfg.thread_id),
            self.cfg.version
        );
        (
            query,
            self.last_cursor.as_ref().map(|c| c.as_str().to_owned()),
        )
    }

    /// Sends an input: a new `requestId`, and an `inputId` (kept when the input has one).
    /// Returns the `requestId`.
    pub fn send_input(&mut self, mut input: Input) -> String {
        let input_id = match input.input_id() {
            Some(id) => id.to_owned(),
            None => {
                self.next_input += 1;
                let id = format!("{}-in-{}", self.cfg.thread_id, self.next_input);
                input.set_input_id(id.clone());
                id
            }
        };
        let seq = self.next_request + 1;
        self.send_frame(seq, input_id, input)
    }

    fn send_frame(&mut self, seq: u64, input_id: String, input: Input) -> String {
        self.next_request += 1;
        let request_id = format!("req-{}", self.next_request);
        let frame = ClientFrame::Input(InputFrame {
            request_id: Some(request_id.clone()),
            input: input.clone(),
            ..InputFrame::default()
        });
        self.out.push_back(frame.to_json());
        self.pending.insert(
            request_id.clone(),
            Pending {
                seq,
                input_id,
                input,
            },
        );
        request_id
    }

    /// Sends again every input that has no answer yet (after a reconnect) and that "runs
    /// once" (`prompt`, `command`, `agent`, `append`), in the order they were first sent: a
    /// new `requestId`, the same `inputId`, so the host runs it once. Returns their new
    /// `requestId`s. Any other input without an answer is not sent again (it could run
    /// twice): each is reported as [`ClientEvent::InDoubt`], for the app to decide.
    pub fn retry_pending(&mut self) -> Vec<String> {
        let mut p: Vec<(String, Pending)> = self.pending.drain().collect();
        p.sort_by_key(|(_, p)| p.seq);
        let mut sent = Vec::new();
        for (request_id, p) in p {
            if p.input.is_idempotent() {
                sent.push(self.send_frame(p.seq, p.input_id, p.input));
            } else {
                self.events.push_back(ClientEvent::InDoubt(InDoubt {
                    request_id,
                    input_id: p.input_id,
                    input: p.input,
                }));
            }
        }
        sent
    }

    /// Inputs without an answer, by `requestId`.
    pub fn pending_inputs(&self) -> Vec<(&str, &str)> {
        self.pending
            .iter()
            .map(|(r, p)| (r.as_str(), p.input_id.as_str()))
            .collect()
    }

    /// The body of `POST control` for an input (with an `inputId`), and that id.
    pub fn control_body(&mut self, mut input: Input) -> (String, String) {
        let input_id = match input.input_id() {
            Some(id) => id.to_owned(),
            None => {
                self.next_input += 1;
                let id = format!("{}-in-{}", self.cfg.thread_id, self.next_input);
                input.set_input_id(id.clone());
                id
            }
        };
        let body = serde_json::json!({ "threadId": self.cfg.thread_id, "input": input });
        (body.to_string(), input_id)
    }

    /// Asks for the snapshot (socket and stdio).
    pub fn request_snapshot(&mut self) {
        self.out
            .push_back(ClientFrame::Snapshot(SnapshotRequest::default()).to_json());
    }

    /// The connection closed (a WebSocket close code; `None` for an SSE or stdio end).
    /// Returns what to do, and reports it as [`ClientEvent::Closed`].
    ///
    /// When a closing `harness.error` frame or the idle timeout already ended the connection
    /// (and reported what to do), the close returns that same action and reports nothing
    /// new; so does a second close of the same connection. With no connection at all it is
    /// [`Action::Continue`].
    pub fn handle_close(&mut self, _now: Instant, code: Option<u16>) -> Action {
        if !self.connected {
            return self.ended.clone().unwrap_or(Action::Continue);
        }
        self.connected = false;
        let from = self.last_cursor.clone();
        let action = match code {
            Some(close::UNAUTHORIZED) => Action::SignIn,
            Some(close::FORBIDDEN) | Some(close::UNSUPPORTED_VERSION) => Action::Stop,
            Some(close::SLOW_CONSUMER) | Some(close::FEED_ENDED) => Action::Resubscribe { from },
            _ => Action::Reconnect { from },
        };
        self.ended = Some(action.clone());
        self.events.push_back(ClientEvent::Closed(action.clone()));
        action
    }

    /// The answer of `POST control` (status and body): the receipt, or what to do instead.
    ///
    /// The spec's answers are "`200`: the receipt", "`400`: `{ error }`", "`401`: the
    /// request has no user" and "`403`: `{ error: 'forbidden' }`". Anything else, and a `200`
    /// whose body is not a receipt, is a lost answer: the input may or may not have run
    /// ([`ControlFailure::Lost`]).
    pub fn handle_control_answer(
        &mut self,
        status: u16,
        body: &str,
    ) -> Result<InputAnswer, ControlFailure> {
        let error = || {
            serde_json::from_str::<serde_json::Value>(body)
                .ok()
                .and_then(|v| v.get("error")?.as_str().map(str::to_owned))
                .unwrap_or_default()
        };
        match status {
            200 => match serde_json::from_str::<frame::Receipt>(body) {
                Ok(r) => Ok(InputAnswer {
                    request_id: String::new(),
                    input_id: r.input_id,
                    status: r.status,
                    operation_id: r.operation_id,
                    reason: r.reason,
                }),
                Err(_) => Err(ControlFailure::Lost { status }),
            },
            401 => Err(ControlFailure::SignIn),
            403 => Err(ControlFailure::Forbidden),
            // A 4xx other than 408 (timeout) and 429 (too many requests): the host read the
            // request and refused it as it is.
            400..=499 if status != 408 && status != 429 => Err(ControlFailure::Invalid {
                status,
                error: error(),
            }),
            _ => Err(ControlFailure::Lost { status }),
        }
    }

    /// Idle detection: no bytes for `idle_timeout` means a dead connection.
    pub fn handle_timeout(&mut self, now: Instant) {
        let idle = self
            .last_bytes
            .map(|t| now.saturating_duration_since(t) >= self.cfg.idle_timeout);
        if self.connected && idle == Some(true) {
            self.connected = false;
            let action = Action::Reconnect {
                from: self.last_cursor.clone(),
            };
            self.ended = Some(action.clone());
            self.events.push_back(ClientEvent::Closed(action));
        }
    }

    /// When to call [`handle_timeout`](Self::handle_timeout).
    #[must_use]
    pub fn poll_timeout(&self) -> Option<Instant> {
        if self.connected {
            self.last_bytes
                .and_then(|t| t.checked_add(self.cfg.idle_timeout))
        } else {
            None
        }
    }

    /// The next thing to tell the application.
    #[must_use = "a dropped event is never seen by the application"]
    pub fn poll_event(&mut self) -> Option<ClientEvent> {
        self.events.pop_front()
    }

    /// The next frame to send (socket and stdio).
    #[must_use = "a dropped frame never reaches the host"]
    pub fn poll_transmit(&mut self) -> Option<String> {
        self.out.pop_front()
    }
}

fn percent(s: &str) -> String {
    let mut out = String::new();
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}
