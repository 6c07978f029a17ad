//! Bearer tokens (architecture.md §5, security.md §1): each key names a principal, every
//! object is scoped to the principal that made it.
//!
//! Tokens are kept as SHA-256 digests and compared in constant time against every key (no
//! early exit, so the time taken says nothing about which key, if any, nearly matched). A
//! missing token is `missing_credential`, anything else that is not a live key
//! `invalid_credential`: both 401, with one message, so "no such token" and "token not
//! permitted here" cannot be told apart. A revoked key stops working for the next request.

use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use super::error::ApiError;

/// Who a request is for: the owner of every object it creates, the only one who can read them.
#[derive(
    Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
#[serde(transparent)]
pub struct Principal(pub String);

impl Principal {
    /// A principal by name.
    pub fn new(name: impl Into<String>) -> Self {
        Principal(name.into())
    }

    /// Its name.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// The keys the server accepts.
#[derive(Clone, Default)]
pub struct ApiKeys {
    keys: Vec<([u8; 32], Principal)>,
}

impl std::fmt::Debug for ApiKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the digests, let alone the tokens.
        f.debug_struct("ApiKeys")
            .field("keys", &self.keys.len())
            .finish()
    }
}

fn digest(token: &[u8]) -> [u8; 32] {
    Sha256::digest(token).into()
}

impl ApiKeys {
    /// No keys: every authenticated endpoint answers 401.
    pub fn new() -> Self {
        Self::default()
    }

    /// Accepts `token` for `principal` (a second token for the same principal is fine).
    pub fn add(&mut self, token: &str, principal: Principal) {
        self.keys.push((digest(token.as_bytes()), principal));
    }

    /// Stops accepting `token`; whether it was a key.
    pub fn revoke(&mut self, token: &str) -> bool {
        let d = digest(token.as_bytes());
        let before = self.keys.len();
        self.keys.retain(|(k, _)| !bool::from(k.ct_eq(&d)));
        self.keys.len() != before
    }

    /// The principal of an `Authorization` header value, or the 401 to answer.
    pub fn authenticate(&self, authorization: Option<&[u8]>) -> Result<Principal, ApiError> {
        let Some(value) = authorization else {
            return Err(unauthorized("missing_credential"));
        };
        let token = value
            .strip_prefix(b"Bearer ")
            .or_else(|| value.strip_prefix(b"bearer "))
            .map(<[u8]>::trim_ascii)
            .filter(|t| !t.is_empty())
            .ok_or_else(|| unauthorized("invalid_credential"))?;
        let d = digest(token);
        let mut found: Option<&Principal> = None;
        for (k, p) in &self.keys {
            // Every key is compared; the match is remembered, not returned early.
            if bool::from(k.ct_eq(&d)) && found.is_none() {
                found = Some(p);
            }
        }
        found
            .cloned()
            .ok_or_else(|| unauthorized("invalid_credential"))
    }
}

fn unauthorized(code: &str) -> ApiError {
    ApiError::new(code, "A valid bearer token is required.")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_map_to_principals_and_revoke() {
        let mut k = ApiKeys::new();
        k.add("alpha", Principal::new("a"));
        k.add("beta", Principal::new("b"));
        assert_eq!(
            k.authenticate(Some(b"Bearer beta")),
            Ok(Principal::new("b"))
        );
        assert_eq!(
            k.authenticate(None).unwrap_err().code(),
            "missing_credential"
        );
        for bad in [&b"Bearer gamma"[..], b"Basic alpha", b"Bearer ", b"alpha"] {
            let e = k.authenticate(Some(bad)).unwrap_err();
            assert_eq!((e.status, e.code()), (401, "invalid_credential"));
        }
        assert!(k.revoke("alpha"));
        assert!(k.authenticate(Some(b"Bearer alpha")).is_err());
        assert!(format!("{k:?}").find("beta").is_none());
    }
}
