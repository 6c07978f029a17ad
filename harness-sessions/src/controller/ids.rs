//! Deterministic execution and model call ids: the same journal and invocation derive the same.

use harness_core::event::ExecutionStart;
use harness_core::message::Message;
use sha2::{Digest, Sha256};

use crate::hash::hex;
use crate::input_hash::{go_escape_raw, go_json_string};
use crate::record::{Head, Record, Seq};

/// A 16-hex-digit id derived from a namespace and a position (execution and model call ids
/// are deterministic, so the same inputs write the same journal).
pub(crate) fn derive_id(kind: &str, scope: &str, seq: Seq) -> String {
    let mut h = Sha256::new();
    h.update(kind.as_bytes());
    h.update([0]);
    h.update(scope.as_bytes());
    h.update([0]);
    h.update(seq.to_be_bytes());
    hex(&h.finalize()[..8])
}

/// The wire id of the `n`-th model call a harness sends over `Harness.Connect` in
/// `execution_id`: 16 hex digits, correlation only (the host journals its own id).
pub(crate) fn derive_wire_id(execution_id: &str, n: u64) -> String {
    derive_id("wire_model_call", execution_id, n)
}

/// The id of a new execution: 16 hex digits of SHA-256 over the session, the position of its
/// start marker, the head it follows, and what it was invoked with (the marker and the
/// inputs). Deterministic, so the same journal and the same invocation write the same
/// records; and never shared by two different invocations of a session, even when a turn's
/// records were lost (a power loss under a lazy fsync policy) while the executor's durable
/// receipts, keyed by idempotency keys harnesses derive from this id, were not.
pub(crate) fn derive_execution_id(
    session: &str,
    head: &Head,
    marker: &ExecutionStart,
    inputs: &[Message],
) -> String {
    let mut h = Sha256::new();
    h.update(b"execution\0");
    h.update(session.as_bytes());
    h.update([0]);
    h.update(head.seq.wrapping_add(1).to_be_bytes());
    h.update(head.hash.map_or([0; 32], |c| c.0));
    // Serializing these types cannot fail; an error would only weaken the id, not break it.
    h.update(serde_json::to_vec(marker).unwrap_or_default());
    h.update([0]);
    h.update(serde_json::to_vec(inputs).unwrap_or_default());
    hex(&h.finalize()[..8])
}

/// The `legacy-<sha256>` execution token of a v0.1.2 turn (agentsessions
/// `controller/legacy.go`): SHA-256 of Go's `json.Marshal` of
/// `{"session_uid": uid, "seq": "<seq>", "event": <the anchor record's canonical event>}`,
/// so retries of the same legacy turn reuse it and different sessions do not. It is never
/// journaled; the wire uses it for correlation.
pub(crate) fn legacy_execution_id(session: &str, anchor: &Record) -> String {
    let mut payload = String::with_capacity(anchor.canonical().len() + session.len() + 48);
    payload.push_str("{\"session_uid\":");
    payload.push_str(&go_json_string(session));
    payload.push_str(",\"seq\":\"");
    payload.push_str(&anchor.seq.to_string());
    payload.push_str("\",\"event\":");
    go_escape_raw(anchor.canonical(), &mut payload);
    payload.push('}');
    format!("legacy-{}", hex(&Sha256::digest(payload.as_bytes())))
}
