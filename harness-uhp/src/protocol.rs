//! The protocol as data: versions and the version header, conformance classes and
//! capabilities with the discovery-document check, endpoint paths and id prefixes.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// The version this crate implements (the one the Python peer transcribes).
pub const PROTOCOL_VERSION: &str = "2026-08-11";

/// Every published version, oldest first. Each later one is additive; versions are dates
/// and sort as strings.
pub const VERSIONS: &[&str] = &["2026-08-11", "2026-09-12", "2026-09-28", "2026-10-04"];

/// The request header that asks for a version; a server sets it on every response.
pub const VERSION_HEADER: &str = "UHP-Version";

/// The request header that makes `POST /v1/responses` idempotent.
pub const IDEMPOTENCY_KEY_HEADER: &str = "Idempotency-Key";

/// The header that resumes a stream after the given event.
pub const LAST_EVENT_ID_HEADER: &str = "Last-Event-ID";

/// Conformance classes, weakest first. Each includes the one before it.
pub const CONFORMANCE_CLASSES: &[&str] = &["core", "extended", "full"];

/// The capability keys of the discovery document (2026-08-11). An absent key reads `false`.
pub const CAPABILITIES: &[&str] = &[
    "streaming",
    "sessions",
    "cancellation",
    "files_input",
    "files_output",
    "session_listing",
    "harness_management",
    "session_sharing",
    "idempotency",
];

/// What each class obliges a server to implement (`idempotency` is class-independent).
pub fn class_capabilities(class: &str) -> Option<&'static [&'static str]> {
    match class {
        "core" => Some(&CAPABILITIES[..3]),
        "extended" => Some(&CAPABILITIES[..6]),
        "full" => Some(&CAPABILITIES[..8]),
        _ => None,
    }
}

/// The discovery document, `GET /v1/uhp` (served without authentication).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Discovery {
    /// `uhp.discovery`.
    #[serde(default)]
    pub object: String,
    /// `uhp`.
    #[serde(default)]
    pub protocol: String,
    /// The versions the server speaks.
    #[serde(default)]
    pub versions: Vec<String>,
    /// The version it serves when the client sends none.
    #[serde(default)]
    pub default_version: String,
    /// `core`, `extended` or `full`.
    #[serde(default)]
    pub conformance_class: String,
    /// Named booleans; absent = `false`.
    #[serde(default)]
    pub capabilities: BTreeMap<String, Value>,
    /// Name and version of the implementation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub implementation: Option<Map<String, Value>>,
    /// Fields this version does not define (`plugin_schemas`, …).
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl Discovery {
    /// Whether the server reports a capability (`true` only; absent or not a boolean is
    /// `false`).
    pub fn has(&self, capability: &str) -> bool {
        self.capabilities.get(capability) == Some(&Value::Bool(true))
    }

    /// Checks the document against the schema and against its own class claim: a class that
    /// contradicts the capabilities tells a client two different things. Returns the
    /// problems found (none: the document can be trusted).
    pub fn check(&self) -> Vec<String> {
        let mut problems = Vec::new();
        if self.object != "uhp.discovery" {
            problems.push(format!(
                "object is {:?}, expected \"uhp.discovery\"",
                self.object
            ));
        }
        if self.protocol != "uhp" {
            problems.push(format!("protocol is {:?}, expected \"uhp\"", self.protocol));
        }
        if self.versions.is_empty() {
            problems.push("versions is missing or empty".to_owned());
        } else if !self.versions.contains(&self.default_version) {
            problems.push(format!(
                "default_version {:?} is not in versions",
                self.default_version
            ));
        }
        match class_capabilities(&self.conformance_class) {
            None => problems.push(format!(
                "conformance_class {:?} is not a known class",
                self.conformance_class
            )),
            Some(required) => {
                for cap in required {
                    if !self.has(cap) {
                        problems.push(format!(
                            "class {} requires capability {cap}, which is not true",
                            self.conformance_class
                        ));
                    }
                }
            }
        }
        for (k, v) in &self.capabilities {
            if !v.is_boolean() {
                problems.push(format!("capability {k} is not a boolean"));
            }
        }
        if self.has("plugins") && !self.extra.contains_key("plugin_schemas") {
            problems.push("capability plugins is true but plugin_schemas is absent".to_owned());
        }
        problems
    }

    /// The newest version both the server and `ours` speak.
    pub fn negotiate<'a>(&self, ours: &[&'a str]) -> Option<&'a str> {
        ours.iter()
            .filter(|v| self.versions.iter().any(|s| s == *v))
            .max()
            .copied()
    }
}

/// Endpoint paths. Ids are opaque strings chosen by the server: each is inserted as one path
/// segment, escaped (RFC 3986 §3.3) — anything but unreserved characters is percent-encoded
/// and a `.` or `..` id is written `%2E` / `%2E%2E` — so no id can reach another endpoint.
/// The protocol's own ids (`resp_…`, `hsess…`) are unreserved and appear unchanged.
pub mod endpoints {
    use std::borrow::Cow;
    use std::fmt::Write;

    /// `id` as one path segment (see the module's documentation).
    ///
    /// ```
    /// use harness_uhp::protocol::endpoints::segment;
    /// assert_eq!(segment("resp_7f3a"), "resp_7f3a");
    /// assert_eq!(segment("a/../b"), "a%2F..%2Fb");
    /// assert_eq!(segment(".."), "%2E%2E");
    /// ```
    pub fn segment(id: &str) -> Cow<'_, str> {
        // A segment of dots only is a dot-segment (`.`, `..`): its dots are escaped too.
        let dots = !id.is_empty() && id.bytes().all(|b| b == b'.');
        let keep = |b: u8| match b {
            b'.' => !dots,
            b'-' | b'_' | b'~' => true,
            _ => b.is_ascii_alphanumeric(),
        };
        if id.bytes().all(keep) {
            return Cow::Borrowed(id);
        }
        let mut out = String::with_capacity(id.len().saturating_mul(3));
        for b in id.bytes() {
            if keep(b) {
                out.push(char::from(b));
            } else {
                let _ = write!(out, "%{b:02X}"); // ok: writing to a String cannot fail
            }
        }
        Cow::Owned(out)
    }

    /// `GET /v1/uhp`: the discovery document.
    pub const DISCOVERY: &str = "/v1/uhp";
    /// `GET /v1/harnesses`.
    pub const HARNESSES: &str = "/v1/harnesses";
    /// `GET /v1/models`.
    pub const MODELS: &str = "/v1/models";
    /// `POST /v1/responses`: run a task.
    pub const RESPONSES: &str = "/v1/responses";
    /// `GET /v1/sessions`.
    pub const SESSIONS: &str = "/v1/sessions";
    /// `POST /v1/files`.
    pub const FILES: &str = "/v1/files";

    /// `/v1/harnesses/{id}`.
    pub fn harness(id: &str) -> String {
        format!("/v1/harnesses/{}", segment(id))
    }
    /// `/v1/harnesses/{id}/models`.
    pub fn harness_models(id: &str) -> String {
        format!("/v1/harnesses/{}/models", segment(id))
    }
    /// `/v1/harnesses/{id}/events`: the live SSE feed of a harness.
    pub fn harness_events(id: &str) -> String {
        format!("/v1/harnesses/{}/events", segment(id))
    }
    /// `/v1/responses/{id}`: read a task back (GET, the source of truth) or delete it.
    pub fn response(id: &str) -> String {
        format!("/v1/responses/{}", segment(id))
    }
    /// `/v1/responses/{id}/input_items`.
    pub fn response_input_items(id: &str) -> String {
        format!("/v1/responses/{}/input_items", segment(id))
    }
    /// `/v1/responses/{id}/cancel`.
    pub fn response_cancel(id: &str) -> String {
        format!("/v1/responses/{}/cancel", segment(id))
    }
    /// `/v1/sessions/{id}`.
    pub fn session(id: &str) -> String {
        format!("/v1/sessions/{}", segment(id))
    }
    /// `/v1/sessions/{id}/turns`.
    pub fn session_turns(id: &str) -> String {
        format!("/v1/sessions/{}/turns", segment(id))
    }
    /// `/v1/sessions/{id}/files`.
    pub fn session_files(id: &str) -> String {
        format!("/v1/sessions/{}/files", segment(id))
    }
    /// `/v1/sessions/{id}/files/archive`.
    pub fn session_files_archive(id: &str) -> String {
        format!("/v1/sessions/{}/files/archive", segment(id))
    }
    /// `/v1/sessions/{id}/cancel`.
    pub fn session_cancel(id: &str) -> String {
        format!("/v1/sessions/{}/cancel", segment(id))
    }
    /// `/v1/sessions/{id}/share`.
    pub fn session_share(id: &str) -> String {
        format!("/v1/sessions/{}/share", segment(id))
    }
    /// `/v1/traces/{id}`: delete a session (alias of `DELETE /v1/sessions/{id}`).
    pub fn session_delete(id: &str) -> String {
        format!("/v1/traces/{}", segment(id))
    }
    /// `/v1/containers/{cid}/files/{fid}/content`: download an artifact.
    pub fn file_content(container_id: &str, file_id: &str) -> String {
        format!(
            "/v1/containers/{}/files/{}/content",
            segment(container_id),
            segment(file_id)
        )
    }
    /// `/v1/containers/{cid}/files/{fid}/pdf`.
    pub fn file_pdf(container_id: &str, file_id: &str) -> String {
        format!(
            "/v1/containers/{}/files/{}/pdf",
            segment(container_id),
            segment(file_id)
        )
    }
}

/// What an id points at, by its prefix.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ObjectKind {
    /// `chrn_`.
    Harness,
    /// `resp_`.
    Response,
    /// `hsess` (no underscore).
    Session,
    /// `file_`.
    File,
    /// `cntr_`.
    Container,
}

/// The id prefixes.
pub const ID_PREFIXES: &[(&str, ObjectKind)] = &[
    ("chrn_", ObjectKind::Harness),
    ("resp_", ObjectKind::Response),
    ("hsess", ObjectKind::Session),
    ("file_", ObjectKind::File),
    ("cntr_", ObjectKind::Container),
];

/// What kind of object an id points at; `None` for an unknown prefix.
pub fn object_kind(id: &str) -> Option<ObjectKind> {
    ID_PREFIXES
        .iter()
        .find(|(p, _)| id.starts_with(p))
        .map(|(_, k)| *k)
}
