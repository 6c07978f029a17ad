//! The task accumulator: a stream of events in, the state a client needs out.
//!
//! The terminal event is authoritative and the deltas are an optimisation: text, reasoning,
//! tool calls and annotations are assembled from the events as they come, and replaced by the
//! terminal response's when it carries them, so a task whose deltas were all lost still ends
//! with the right answer. A terminal state never changes: a second terminal event, or any
//! event after the first, is a [`ProtocolFinding`] and leaves the task alone.

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap};

use crate::decoder::StreamDecoder;
use crate::error::ErrorObject;
use crate::event::{EventType, StreamEvent, StreamEventRef};
use crate::finding::{Finding, excerpt};
use crate::response::{
    Annotation, ContainerFileCitation, FunctionCallItem, OutputContent, OutputItem, Response,
    ResponseStatus,
};
use crate::sequence::{Arrival, SequenceCheck, SequenceReport};

/// Text and tool calls assembled from deltas.
mod assembly;
/// [`TaskSummary`]: the task, serializable.
mod summary;

use assembly::{CallState, Parts};
pub use summary::{SequenceSummary, TaskSummary};

/// How many findings a task keeps; past this they are only counted.
pub const MAX_FINDINGS: usize = 1024;

/// A violation of the protocol's stream rules, found while accumulating.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ProtocolFinding {
    /// A message that did not decode to an event (see [`Finding`]).
    #[error(transparent)]
    Decode(#[from] Finding),
    /// The first event of a stream was not `response.created`.
    #[error("the first event is `{event_type}`, not `response.created`")]
    FirstEventNotCreated {
        /// Its type.
        event_type: String,
    },
    /// A known event type lacking the field it needs (a terminal event without its
    /// response cannot end the task: the stored response is the source of truth).
    #[error("`{event_type}` event without its `{field}`; not applied")]
    MissingField {
        /// Its type.
        event_type: String,
        /// The missing field.
        field: &'static str,
    },
    /// An event without a valid `sequence_number` (absent, or not an integer ≥ 0).
    #[error("`{event_type}` event without a valid sequence_number")]
    Unnumbered {
        /// Its type.
        event_type: String,
    },
    /// A second terminal event. The first one stands.
    #[error(
        "a second terminal event `{event_type}` (sequence_number {sequence_number:?}); the first stands"
    )]
    SecondTerminal {
        /// Its type.
        event_type: String,
        /// Its number.
        sequence_number: Option<u64>,
    },
    /// An event after the terminal event, which must be the last. It was not applied.
    #[error(
        "`{event_type}` event after the terminal event (sequence_number {sequence_number:?}); ignored"
    )]
    AfterTerminal {
        /// Its type.
        event_type: String,
        /// Its number.
        sequence_number: Option<u64>,
    },
    /// A terminal event whose response's status is not terminal; the event's name was used.
    #[error("terminal event `{event_type}` carries status `{status}`")]
    TerminalStatusNotTerminal {
        /// The event's type.
        event_type: String,
        /// The status it carried.
        status: String,
    },
    /// A response object (in an event, or the stored response) whose `id` is not the task's:
    /// another task's. Not applied.
    #[error("response `{got}` is not this task's (`{expected}`); not applied")]
    ResponseIdMismatch {
        /// The task's id, as first learned.
        expected: String,
        /// The id the response object carried.
        got: String,
    },
    /// A stored response whose `status` is none of the protocol's (`running`, `queued`, …,
    /// which servers send while a task is in flight). It is not terminal: the task is read
    /// again, as for `in_progress` (lifecycle: only `completed`, `failed`, `incomplete` and
    /// `cancelled` are terminal).
    #[error(
        "stored response has status `{status}`, which is not a protocol status: read as still running"
    )]
    UnknownStatus {
        /// The status it carried.
        status: String,
    },
    /// The stored response disagrees with the terminal event the stream delivered.
    #[error("stored response says `{stored}`, the stream's terminal event said `{stream}`")]
    StoredResponseDisagrees {
        /// The status from the stream.
        stream: String,
        /// The status of the stored response.
        stored: String,
    },
}

/// Where the task's terminal state came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TerminalSource {
    /// The stream's terminal event.
    Stream(EventType),
    /// The stored response (`GET /v1/responses/{id}`), after the stream was lost.
    StoredResponse,
}

/// What the terminal response carried, computed once when it arrives.
#[derive(Clone, Debug)]
struct Terminal {
    source: TerminalSource,
    response: Box<Response>,
    text: String,
    reasoning: String,
    tool_calls: Vec<FunctionCallItem>,
    annotations: Vec<Annotation>,
}

/// Accumulates one task's stream into its status, text, reasoning, tool calls, annotations,
/// error and sequence report.
///
/// ```
/// use harness_uhp::{ResponseStatus, StreamDecoder, TaskAccumulator};
///
/// let body = concat!(
///     "data: {\"type\":\"response.created\",\"sequence_number\":0,\"response\":{\"id\":\"resp_1\",\"status\":\"in_progress\",\"output\":[]}}\n\n",
///     "data: {\"type\":\"response.output_text.delta\",\"sequence_number\":1,\"output_index\":0,\"content_index\":0,\"delta\":\"Hel\"}\n\n",
///     // sequence_number 2 was lost on the way
///     "data: {\"type\":\"response.failed\",\"sequence_number\":3,\"response\":{\"id\":\"resp_1\",\"status\":\"cancelled\",",
///     "\"output\":[{\"type\":\"message\",\"content\":[{\"type\":\"output_text\",\"text\":\"Hello\"}]}]}}\n\n",
/// );
/// let mut dec = StreamDecoder::new();
/// let mut task = TaskAccumulator::new();
/// dec.push(body.as_bytes());
/// loop {
///     match dec.poll_event() {
///         Ok(Some(ev)) => task.add(&ev),
///         Ok(None) => break,
///         Err(finding) => task.add_finding(&finding),
///     }
/// }
/// assert_eq!(task.status(), &ResponseStatus::Cancelled); // the status field, not the event name
/// assert_eq!(task.text(), "Hello");                     // the terminal event is authoritative
/// assert_eq!(task.sequence().missing, vec![2..=2]);
/// ```
#[derive(Clone, Debug)]
pub struct TaskAccumulator {
    seq: SequenceCheck,
    resumed: bool,
    status: ResponseStatus,
    response_id: Option<String>,
    last_response: Option<Box<Response>>,
    terminal: Option<Terminal>,
    texts: Parts,
    reasoning: Parts,
    calls: BTreeMap<u64, CallState>,
    item_index: HashMap<String, u64>,
    /// Items placed by id alone (no `output_index`): the next slot after [`BY_ID`].
    by_id: u64,
    annotations: BTreeMap<(u64, u64, u64), Annotation>,
    error_event: Option<ErrorObject>,
    findings: Vec<ProtocolFinding>,
    findings_dropped: u64,
}

impl Default for TaskAccumulator {
    fn default() -> Self {
        Self::new()
    }
}

/// The bucket for events that name neither an output index nor an item.
const NO_INDEX: u64 = u64::MAX;

/// The first slot of the items known by their `item_id` only (no `output_index`): after
/// every real index, in order of first sight.
const BY_ID: u64 = 1 << 63;

impl TaskAccumulator {
    /// An accumulator for a stream that starts at `sequence_number` 0.
    pub fn new() -> Self {
        TaskAccumulator {
            seq: SequenceCheck::new(),
            resumed: false,
            status: ResponseStatus::InProgress,
            response_id: None,
            last_response: None,
            terminal: None,
            texts: Parts::default(),
            reasoning: Parts::default(),
            calls: BTreeMap::new(),
            item_index: HashMap::new(),
            by_id: 0,
            annotations: BTreeMap::new(),
            error_event: None,
            findings: Vec::new(),
            findings_dropped: 0,
        }
    }

    /// An accumulator for a stream resumed with `Last-Event-ID: n`: the sequence is checked
    /// from `n + 1`, and the first event need not be `response.created`.
    pub fn resumed_after(last_sequence_number: u64) -> Self {
        TaskAccumulator {
            seq: SequenceCheck::resumed_after(last_sequence_number),
            resumed: true,
            ..Self::new()
        }
    }

    fn find(&mut self, f: ProtocolFinding) {
        if self.findings.len() < MAX_FINDINGS {
            self.findings.push(f);
        } else {
            self.findings_dropped += 1;
        }
    }

    /// Records a message that did not decode. Its `sequence_number`, when it had one, counts
    /// as arrived (the event is not missing, it was unusable).
    pub fn add_finding(&mut self, finding: &Finding) {
        if let Some(n) = finding.sequence_number() {
            self.seq.record(Some(n));
        }
        self.find(ProtocolFinding::Decode(finding.clone()));
    }

    /// Feeds every complete event (and finding) of `dec` to the task: the whole run loop
    /// when the events themselves are not needed. An event not yet complete stays in the
    /// decoder: push the next bytes and drain again.
    ///
    /// ```
    /// use harness_uhp::{StreamDecoder, TaskAccumulator};
    ///
    /// let mut dec = StreamDecoder::new();
    /// let mut task = TaskAccumulator::new();
    /// dec.push(b"data: {\"type\":\"response.created\",\"sequence_number\":0,\"response\":{\"id\":\"resp_1\",\"status\":\"in_progress\",\"output\":[]}}\n\n");
    /// dec.push(b"data: [DONE]\n\ndata: {\"type\":\"response.output_text.delta\",");
    /// task.drain_decoder(&mut dec);   // the event, and `[DONE]` as a finding; the rest waits
    /// assert_eq!(task.events_seen(), 1);
    /// assert_eq!(task.findings().len(), 1);
    /// dec.push(b"\"sequence_number\":1,\"delta\":\"Hello\"}\n\n");
    /// task.drain_decoder(&mut dec);
    /// assert_eq!(task.text(), "Hello");
    /// ```
    pub fn drain_decoder(&mut self, dec: &mut StreamDecoder) {
        loop {
            match dec.poll_event() {
                Ok(Some(ev)) => self.add(&ev),
                Ok(None) => return,
                Err(finding) => self.add_finding(&finding),
            }
        }
    }

    /// Decodes `bytes` with `dec` in place and feeds every event (and finding) they complete
    /// to the task: [`drain_decoder`](Self::drain_decoder) without copying the body into the
    /// decoder (only an incomplete event is kept there) and with each event lent, its text
    /// the fed bytes themselves ([`StreamFeed::next_ref`](crate::StreamFeed::next_ref),
    /// [`add_ref`](Self::add_ref)).
    ///
    /// ```
    /// use harness_uhp::{Finding, ProtocolFinding, StreamDecoder, TaskAccumulator};
    ///
    /// let mut dec = StreamDecoder::new();
    /// let mut task = TaskAccumulator::new();
    /// task.feed(&mut dec, b"data: {\"type\":\"response.output_text.delta\",\"sequence_number\":0,");
    /// task.feed(&mut dec, b"\"delta\":\"Hello\"}\n\ndata: [DONE]\n\n");
    /// assert_eq!((task.text().as_ref(), task.events_seen()), ("Hello", 1));
    /// let done = ProtocolFinding::Decode(Finding::DoneSentinel);
    /// assert!(task.findings().contains(&done));
    /// ```
    pub fn feed(&mut self, dec: &mut StreamDecoder, bytes: &[u8]) {
        let mut feed = dec.feed(bytes);
        while let Some(ev) = feed.next_ref() {
            match ev {
                Ok(ev) => self.add_ref(ev),
                Err(finding) => self.add_finding(&finding),
            }
        }
    }

    /// Ends the stream of `dec` into the task: [`StreamDecoder::finish`], then every event
    /// still complete in the buffer (the end of the body can complete one, e.g. after a
    /// held-back CR), then the finding for an event the end cut short, if any. The
    /// end-of-stream half of the run loop whose other half is
    /// [`drain_decoder`](Self::drain_decoder). The decoder is then ready for a reconnection.
    ///
    /// ```
    /// use harness_uhp::{ProtocolFinding, StreamDecoder, TaskAccumulator};
    ///
    /// let mut dec = StreamDecoder::new();
    /// let mut task = TaskAccumulator::new();
    /// dec.push(b"data: {\"type\":\"response.output_text.delta\",\"sequence_number\":0,\"delta\":\"Hi\"}\r");
    /// task.drain_decoder(&mut dec);
    /// assert_eq!(task.text(), "");          // the CR may be the first half of a CRLF
    /// dec.push(b"\rdata: {\"type\":\"response.in_progress\"");
    /// task.finish_decoder(&mut dec);        // the body ends: the held-back event completes,
    /// assert_eq!(task.text(), "Hi");        // and the cut-off one is a finding
    /// assert!(task.findings().iter().any(|f| matches!(f, ProtocolFinding::Decode(_))));
    /// ```
    pub fn finish_decoder(&mut self, dec: &mut StreamDecoder) {
        let end = dec.finish();
        self.drain_decoder(dec);
        if let Err(cut) = end {
            self.add_finding(&cut);
        }
    }

    /// Feeds one event.
    pub fn add(&mut self, ev: &StreamEvent) {
        self.add_ref(ev.view());
    }

    /// Feeds one lent event ([`StreamFeed::next_ref`](crate::StreamFeed::next_ref)), as
    /// [`add`](Self::add) does an owned one.
    pub fn add_ref(&mut self, ev: StreamEventRef<'_>) {
        let first = self.seq.events() == 0;
        let seq = ev.sequence_number();
        let arrival = self.seq.record(seq);
        if self.terminal.is_some() {
            let f = if ev.is_terminal() {
                ProtocolFinding::SecondTerminal {
                    event_type: excerpt(ev.type_name()),
                    sequence_number: seq,
                }
            } else {
                ProtocolFinding::AfterTerminal {
                    event_type: excerpt(ev.type_name()),
                    sequence_number: seq,
                }
            };
            self.find(f);
            return;
        }
        match arrival {
            // A replay: its content was counted once already. Not for a terminal event: no
            // terminal was applied yet, so this one reuses another event's number (reported
            // as a duplicate) and, being authoritative, still ends the task.
            Arrival::Duplicate if !ev.is_terminal() => return,
            Arrival::Unnumbered => self.find(ProtocolFinding::Unnumbered {
                event_type: excerpt(ev.type_name()),
            }),
            _ => {}
        }
        if first && !self.resumed && ev.event_type() != EventType::Created {
            self.find(ProtocolFinding::FirstEventNotCreated {
                event_type: excerpt(ev.type_name()),
            });
        }
        if let Some(field) = ev.missing_field() {
            self.find(ProtocolFinding::MissingField {
                event_type: excerpt(ev.type_name()),
                field,
            });
            return;
        }
        if let Some(r) = ev.response() {
            if !self.is_own(r) {
                return;
            }
        }
        self.apply(ev, seq);
    }

    #[inline]
    fn output_index(&mut self, ev: StreamEventRef<'_>) -> u64 {
        if let Some(oi) = ev.output_index() {
            return oi;
        }
        match ev.item_id() {
            Some(id) => self.slot_of(id),
            None => NO_INDEX,
        }
    }

    /// The output index of the item `id`, as first learned; an item never placed by an
    /// `output_index` gets its own slot after all real ones.
    fn slot_of(&mut self, id: &str) -> u64 {
        if let Some(oi) = self.item_index.get(id) {
            return *oi;
        }
        let oi = BY_ID.saturating_add(self.by_id).min(NO_INDEX - 1);
        self.by_id = self.by_id.saturating_add(1);
        self.item_index.insert(id.to_owned(), oi);
        oi
    }

    fn apply(&mut self, ev: StreamEventRef<'_>, seq: Option<u64>) {
        use EventType as T;
        match ev.event_type() {
            T::OutputTextDelta => {
                let key = (self.output_index(ev), ev.content_index().unwrap_or(0));
                self.texts.get(key).push(seq, ev.delta().unwrap_or(""));
            }
            T::ReasoningSummaryTextDelta => {
                let key = (self.output_index(ev), ev.summary_index().unwrap_or(0));
                self.reasoning.get(key).push(seq, ev.delta().unwrap_or(""));
            }
            T::FunctionCallArgumentsDelta => {
                let oi = self.output_index(ev);
                let call = self.call(oi, ev.item_id());
                call.arguments.push(seq, ev.delta().unwrap_or(""));
            }
            T::FunctionCallArgumentsDone => {
                let oi = self.output_index(ev);
                let call = self.call(oi, ev.item_id());
                call.arguments.set_done(ev.arguments().unwrap_or(""));
            }
            T::OutputTextDone => {
                let key = (self.output_index(ev), ev.content_index().unwrap_or(0));
                self.texts.get(key).set_done(ev.text().unwrap_or(""));
            }
            T::ContentPartDone => {
                let oi = self.output_index(ev);
                let ci = ev.content_index().unwrap_or(0);
                if let Some(OutputContent::OutputText(t)) = ev.part() {
                    self.texts.get((oi, ci)).set_done(&t.text);
                    for (ai, a) in t.annotations.iter().enumerate() {
                        self.annotations.insert((oi, ci, ai as u64), a.clone());
                    }
                }
            }
            T::ReasoningSummaryPartDone => {
                let key = (self.output_index(ev), ev.summary_index().unwrap_or(0));
                if let Some(OutputContent::SummaryText(t)) = ev.part() {
                    self.reasoning.get(key).set_done(&t.text);
                }
            }
            T::OutputTextAnnotationAdded => {
                let oi = self.output_index(ev);
                let ci = ev.content_index().unwrap_or(0);
                if let Some(a) = ev.annotation() {
                    let ai = ev.annotation_index().unwrap_or_else(|| {
                        self.annotations
                            .range((oi, ci, 0)..=(oi, ci, u64::MAX))
                            .next_back()
                            .map_or(0, |(k, _)| k.2.saturating_add(1))
                    });
                    self.annotations.insert((oi, ci, ai), a.clone());
                }
            }
            T::OutputItemAdded | T::OutputItemDone => {
                let done = ev.event_type() == T::OutputItemDone;
                if let Some(item) = ev.item() {
                    self.item(ev.output_index(), item, done);
                }
            }
            T::Created | T::InProgress => {
                if let Some(r) = ev.response() {
                    if self.response_id.is_none() && !r.id.is_empty() {
                        self.response_id = Some(r.id.clone());
                    }
                    self.last_response = Some(Box::new(r.clone()));
                }
            }
            T::Completed | T::Incomplete | T::Failed => {
                if let Some(r) = ev.response() {
                    self.finish(TerminalSource::Stream(ev.event_type()), r);
                }
            }
            T::Error => {
                self.error_event = Some(ErrorObject {
                    code: ev.code().map(str::to_owned),
                    message: ev.message().map(str::to_owned),
                    param: ev.param().map(str::to_owned),
                    ..ErrorObject::default()
                });
            }
            T::ContentPartAdded | T::ReasoningSummaryPartAdded | T::Unknown => {}
        }
    }

    fn call(&mut self, oi: u64, item_id: Option<&str>) -> &mut CallState {
        let call = self.calls.entry(oi).or_default();
        if call.id.is_none() {
            call.id = item_id.map(str::to_owned);
        }
        call
    }

    fn item(&mut self, output_index: Option<u64>, item: &OutputItem, done: bool) {
        let oi = match (output_index, item.id()) {
            (Some(oi), Some(id)) => {
                if !self.item_index.contains_key(id) {
                    self.item_index.insert(id.to_owned(), oi);
                }
                oi
            }
            (Some(oi), None) => oi,
            (None, Some(id)) => self.slot_of(id),
            (None, None) => NO_INDEX,
        };
        match item {
            OutputItem::FunctionCall(c) => {
                let call = self.calls.entry(oi).or_default();
                call.id = c.id.clone().or(call.id.take());
                call.call_id.clone_from(&c.call_id);
                call.name.clone_from(&c.name);
                call.status.clone_from(&c.status);
                if done {
                    call.arguments.set_done(&c.arguments);
                    call.done = Some(c.clone());
                } else if !c.arguments.is_empty() && call.arguments.text.is_empty() {
                    call.arguments.push(None, &c.arguments);
                }
            }
            OutputItem::Message(m) if done => {
                for (ci, part) in m.content.iter().enumerate() {
                    if let OutputContent::OutputText(t) = part {
                        self.texts.get((oi, ci as u64)).set_done(&t.text);
                        for (ai, a) in t.annotations.iter().enumerate() {
                            self.annotations
                                .insert((oi, ci as u64, ai as u64), a.clone());
                        }
                    }
                }
            }
            OutputItem::Reasoning(r) if done => {
                for (si, part) in r.summary.iter().enumerate() {
                    if let OutputContent::SummaryText(t) = part {
                        self.reasoning.get((oi, si as u64)).set_done(&t.text);
                    }
                }
            }
            _ => {}
        }
    }

    fn finish(&mut self, source: TerminalSource, r: &Response) {
        let mut status = r.status.clone();
        if let TerminalSource::Stream(t) = source {
            if status == ResponseStatus::InProgress {
                self.find(ProtocolFinding::TerminalStatusNotTerminal {
                    event_type: t.wire_name().unwrap_or_default().to_owned(),
                    status: excerpt(status.as_str()),
                });
                status = match t {
                    EventType::Completed => ResponseStatus::Completed,
                    EventType::Incomplete => ResponseStatus::Incomplete,
                    _ => ResponseStatus::Failed,
                };
            }
        }
        if self.response_id.is_none() && !r.id.is_empty() {
            self.response_id = Some(r.id.clone());
        }
        self.status = status;
        self.terminal = Some(Terminal {
            source,
            text: r.output_text(),
            reasoning: r.reasoning_text(),
            tool_calls: r.function_calls().cloned().collect(),
            annotations: r.annotations().cloned().collect(),
            response: Box::new(r.clone()),
        });
    }

    /// Whether a response object belongs to this task: its `id` is the task's, or one of them
    /// is not known (an empty id is sloppy, not another task's). Another task's is a finding.
    fn is_own(&mut self, r: &Response) -> bool {
        match &self.response_id {
            Some(id) if !r.id.is_empty() && r.id != *id => {
                let f = ProtocolFinding::ResponseIdMismatch {
                    expected: excerpt(id),
                    got: excerpt(&r.id),
                };
                self.find(f);
                false
            }
            _ => true,
        }
    }

    /// Applies a stored response (`GET /v1/responses/{id}`, the source of truth). When its
    /// status is terminal (`completed`, `failed`, `incomplete`, `cancelled`) the task ends
    /// with it, exactly as if its terminal event had arrived. Any other status — one the
    /// protocol does not define included, such as `running` or `queued` — means the task is
    /// still running (an unknown one is a finding), and a client reads it again. A task that
    /// already ended keeps its state (a disagreement is a finding). A response with another
    /// task's `id` is not applied (a finding).
    pub fn apply_response(&mut self, r: &Response) {
        if !self.is_own(r) {
            return;
        }
        if let Some(t) = &self.terminal {
            if t.response.status != r.status {
                let f = ProtocolFinding::StoredResponseDisagrees {
                    stream: excerpt(self.status.as_str()),
                    stored: excerpt(r.status.as_str()),
                };
                self.find(f);
            }
            return;
        }
        if self.response_id.is_none() && !r.id.is_empty() {
            self.response_id = Some(r.id.clone());
        }
        if r.status.is_terminal() {
            self.finish(TerminalSource::StoredResponse, r);
        } else {
            // `in_progress`, or a status the protocol does not define (`running`, `queued`):
            // only the four terminal statuses end a task, so it is read again.
            if let ResponseStatus::Other(status) = &r.status {
                let f = ProtocolFinding::UnknownStatus {
                    status: excerpt(status),
                };
                self.find(f);
            }
            self.last_response = Some(Box::new(r.clone()));
        }
    }

    /// The task's status: `in_progress` until a terminal event (or a terminal stored
    /// response) arrives, then read from that response's `status` field — a cancelled task
    /// ends with `response.failed` carrying `cancelled`. It never changes after that.
    pub fn status(&self) -> &ResponseStatus {
        &self.status
    }

    /// Whether the task reached a terminal state.
    pub fn is_terminal(&self) -> bool {
        self.terminal.is_some()
    }

    /// Where the terminal state came from.
    pub fn terminal_source(&self) -> Option<TerminalSource> {
        self.terminal.as_ref().map(|t| t.source)
    }

    /// The response id (`resp_…`), once an event or a stored response told it.
    pub fn response_id(&self) -> Option<&str> {
        self.response_id.as_deref()
    }

    /// The terminal response, once there is one.
    pub fn response(&self) -> Option<&Response> {
        self.terminal.as_ref().map(|t| &*t.response)
    }

    /// The latest response object seen (terminal, or from `created` / `in_progress`).
    pub fn latest_response(&self) -> Option<&Response> {
        self.response().or(self.last_response.as_deref())
    }

    /// The assistant's text: the terminal response's output text when it has one, otherwise
    /// the deltas of every message part, each part in `sequence_number` order.
    pub fn text(&self) -> Cow<'_, str> {
        match &self.terminal {
            Some(t) if !t.text.is_empty() => Cow::Borrowed(&t.text),
            _ => self.texts.joined(),
        }
    }

    /// The reasoning summary text, the same way as [`text`](Self::text).
    pub fn reasoning(&self) -> Cow<'_, str> {
        match &self.terminal {
            Some(t) if !t.reasoning.is_empty() => Cow::Borrowed(&t.reasoning),
            _ => self.reasoning.joined(),
        }
    }

    /// The tools the agent invoked: the terminal response's `function_call` items when it
    /// has any, otherwise the calls seen in the stream (from `output_item.done`, or assembled
    /// from `output_item.added` and the argument deltas when that was lost).
    pub fn tool_calls(&self) -> Vec<FunctionCallItem> {
        match &self.terminal {
            Some(t) if !t.tool_calls.is_empty() => t.tool_calls.clone(),
            _ => self.calls.values().map(CallState::to_call).collect(),
        }
    }

    /// Every annotation: the terminal response's when it has any, otherwise those seen in
    /// the stream, in (output, part, annotation) order.
    pub fn annotations(&self) -> Vec<Annotation> {
        match &self.terminal {
            Some(t) if !t.annotations.is_empty() => t.annotations.clone(),
            _ => self.annotations.values().cloned().collect(),
        }
    }

    /// The artifacts: the `container_file_citation` annotations (the files the agent wrote).
    pub fn artifacts(&self) -> Vec<ContainerFileCitation> {
        self.annotations()
            .into_iter()
            .filter_map(|a| match a {
                Annotation::ContainerFileCitation(c) => Some(c),
                Annotation::Other { .. } => None,
            })
            .collect()
    }

    /// The error: from the last `error` event, else from the terminal response's `error`.
    pub fn error(&self) -> Option<&ErrorObject> {
        self.error_event.as_ref().or_else(|| {
            self.terminal
                .as_ref()
                .and_then(|t| t.response.error.as_ref())
        })
    }

    /// The sequence check so far.
    pub fn sequence(&self) -> SequenceReport {
        self.seq.report()
    }

    /// The highest `sequence_number` seen (or the resume point of a resumed stream that has
    /// delivered nothing yet): what to send as `Last-Event-ID` to resume.
    pub fn last_sequence_number(&self) -> Option<u64> {
        self.seq.last_seen()
    }

    /// Events fed so far (and findings with a sequence number).
    pub fn events_seen(&self) -> u64 {
        self.seq.events()
    }

    /// The protocol findings so far (at most [`MAX_FINDINGS`]).
    pub fn findings(&self) -> &[ProtocolFinding] {
        &self.findings
    }

    /// Findings past [`MAX_FINDINGS`], counted but not kept.
    pub fn findings_dropped(&self) -> u64 {
        self.findings_dropped
    }
}
