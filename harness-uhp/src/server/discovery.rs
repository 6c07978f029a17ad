//! Capability discovery, version negotiation (lifecycle.md §1–2) and the model catalogue
//! (harnesses.md §3).
//!
//! - `GET /v1/uhp` is served without a token and holds nothing principal-specific; every
//!   capability is reported, `true` only for what this server implements, and the class
//!   (`full`) agrees with them.
//! - `UHP-Version` absent: the default; a version served: honoured; any other: `400
//!   unsupported_protocol_version` with `detail.supported` — never another version silently.
//!   Every response, errors included, carries `UHP-Version`.
//! - A model is `available` when the server's model provider serves it: computed from the
//!   configured list, the one set of models this server's provider answers for.

use http::HeaderMap;
use serde_json::{Value, json};

use super::auth::Principal;
use super::error::ApiError;
use super::{UhpServer, json_response};
use crate::protocol::PROTOCOL_VERSION;

/// The versions this server serves.
pub(crate) const SERVED: &[&str] = &[PROTOCOL_VERSION];

/// Checks the request's `UHP-Version`.
pub(crate) fn negotiate(version: Option<&str>, headers: &HeaderMap) -> Result<(), ApiError> {
    let asked = match (version, headers.get(crate::protocol::VERSION_HEADER)) {
        (Some(v), _) => v.trim(),
        (None, None) => return Ok(()),
        (None, Some(_)) => "", // present but not text: not a version this server serves
    };
    if SERVED.contains(&asked) {
        return Ok(());
    }
    Err(ApiError::new(
        "unsupported_protocol_version",
        format!(
            "This server serves UHP {}; it cannot serve the version asked for.",
            SERVED.join(", ")
        ),
    )
    .param(crate::protocol::VERSION_HEADER)
    .detail(json!({ "supported": SERVED })))
}

impl UhpServer {
    pub(crate) fn discovery(&self) -> http::Response<Vec<u8>> {
        json_response(
            200,
            &json!({
                "object": "uhp.discovery",
                "protocol": "uhp",
                "versions": SERVED,
                "default_version": PROTOCOL_VERSION,
                "conformance_class": "full",
                "capabilities": {
                    "streaming": true,
                    "sessions": true,
                    "cancellation": true,
                    "files_input": true,
                    "files_output": true,
                    "session_listing": true,
                    "harness_management": true,
                    "session_sharing": true,
                    "idempotency": true,
                },
                "implementation": {
                    "name": self.cfg.implementation_name,
                    "version": self.cfg.implementation_version,
                },
            }),
        )
    }

    fn model_entries(&self, default: &str) -> Vec<Value> {
        self.cfg
            .models
            .iter()
            .map(|m| {
                json!({
                    "id": m, "label": m, "backend": self.cfg.backend,
                    "available": true, "default": m == default,
                })
            })
            .collect()
    }

    pub(crate) fn models_catalog(&self) -> Value {
        let default = self.cfg.models.first().cloned().unwrap_or_default();
        let mut backends = serde_json::Map::new();
        if !self.cfg.models.is_empty() {
            backends.insert(
                self.cfg.backend.clone(),
                json!({ "default": default, "models": self.model_entries(&default) }),
            );
        }
        json!({ "backends": backends })
    }

    pub(crate) fn harness_models(&self, p: &Principal, id: &str) -> Result<Value, ApiError> {
        let h = self
            .registry
            .get(p, id)
            .ok_or_else(|| ApiError::harness_not_found(id))?;
        let fallback = self.cfg.models.first().cloned().unwrap_or_default();
        let default = h.default_model.clone().unwrap_or_else(|| fallback.clone());
        Ok(json!({
            "harness_id": h.id,
            "backend": self.cfg.backend,
            "default": default,
            "fallback": fallback,
            "models": self.model_entries(&default),
        }))
    }
}
