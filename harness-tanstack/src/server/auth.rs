//! Who is calling: the auth hook (`getUser` of the spec) and the built-in bearer check.

use std::sync::Arc;

use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

/// The user a request signs in (`getUser` returning `{ id }`). Threads belong to their
/// user on a `membersOnly` host.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct UserId(String);

impl UserId {
    /// A user id.
    pub fn new(id: impl Into<String>) -> Self {
        UserId(id.into())
    }

    /// The id.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl From<&str> for UserId {
    fn from(s: &str) -> Self {
        UserId(s.to_owned())
    }
}

impl From<String> for UserId {
    fn from(s: String) -> Self {
        UserId(s)
    }
}

/// Why a request signs in no user (`getUser` returning `null`): HTTP routes answer
/// `401 {error:"unauthorized"}` (or `403 {error:"forbidden"}`), the WebSocket is closed
/// with 4401 (or 4403) after its upgrade, as the spec's table of close codes says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Rejection {
    /// No user: `401` / close 4401.
    Unauthorized,
    /// A user that may not use this host: `403` / close 4403.
    Forbidden,
}

impl Rejection {
    /// The HTTP status.
    pub fn status(self) -> u16 {
        match self {
            Rejection::Unauthorized => 401,
            Rejection::Forbidden => 403,
        }
    }

    /// The WebSocket close code.
    pub fn close_code(self) -> u16 {
        match self {
            Rejection::Unauthorized => 4401,
            Rejection::Forbidden => 4403,
        }
    }

    /// The `error` of the JSON answer.
    pub fn error(self) -> &'static str {
        match self {
            Rejection::Unauthorized => "unauthorized",
            Rejection::Forbidden => "forbidden",
        }
    }
}

/// Maps a request (its head: method, URI, headers) to its user.
pub type TanstackAuthHook =
    Arc<dyn Fn(&http::request::Parts) -> Result<UserId, Rejection> + Send + Sync>;

/// Bearer tokens, each signing in its user: `Authorization: Bearer <token>`, the scheme
/// matched without regard to case (RFC 7235 2.1: "It uses a case-insensitive token as a
/// means to identify the authentication scheme"), so `bearer` and `BEARER` work too. On a
/// WebSocket upgrade `?token=<token>` works as well, since "a browser cannot set headers on
/// a WebSocket".
///
/// The check is constant-time: the token presented and every token known are compared as
/// SHA-256 digests with [`subtle`], every known token each time, so neither how much of a
/// token matches nor which one matched shows in the time taken.
#[derive(Clone)]
pub struct BearerTokens {
    /// (digest of the token, its user)
    tokens: Vec<([u8; 32], UserId)>,
}

impl std::fmt::Debug for BearerTokens {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BearerTokens")
            .field("tokens", &self.tokens.len())
            .finish()
    }
}

fn digest(token: &[u8]) -> [u8; 32] {
    Sha256::digest(token).into()
}

impl BearerTokens {
    /// Tokens and the users they sign in. An empty token never signs anyone in.
    pub fn new<T, U>(tokens: impl IntoIterator<Item = (T, U)>) -> Self
    where
        T: AsRef<str>,
        U: Into<UserId>,
    {
        BearerTokens {
            tokens: tokens
                .into_iter()
                .filter(|(t, _)| !t.as_ref().is_empty())
                .map(|(t, u)| (digest(t.as_ref().as_bytes()), u.into()))
                .collect(),
        }
    }

    /// The user of a token, in constant time over the tokens known.
    pub fn user_of(&self, presented: &str) -> Option<UserId> {
        let d = digest(presented.as_bytes());
        let mut found: Option<&UserId> = None;
        for (known, user) in &self.tokens {
            // No early exit: every token is compared.
            if bool::from(known.ct_eq(&d)) && found.is_none() {
                found = Some(user);
            }
        }
        found.cloned()
    }

    /// The user of a request: its bearer credentials, or on a WebSocket upgrade its
    /// `?token=`; else [`Rejection::Unauthorized`].
    pub fn check(&self, req: &http::request::Parts) -> Result<UserId, Rejection> {
        let header = req
            .headers
            .get(http::header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(bearer_credentials);
        if let Some(token) = header {
            return self.user_of(token).ok_or(Rejection::Unauthorized);
        }
        if is_upgrade(req) {
            if let Some(token) = query_param(req.uri.query().unwrap_or(""), "token") {
                return self.user_of(&token).ok_or(Rejection::Unauthorized);
            }
        }
        Err(Rejection::Unauthorized)
    }

    /// This check as an [`TanstackAuthHook`].
    pub fn into_hook(self) -> TanstackAuthHook {
        Arc::new(move |p| self.check(p))
    }
}

/// The token of `Authorization: Bearer <token>` (RFC 6750 2.1), the scheme in any case,
/// one or more spaces after it.
pub fn bearer_credentials(value: &str) -> Option<&str> {
    let value = value.trim_matches(' ');
    let (scheme, rest) = value.split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("bearer") {
        return None;
    }
    let token = rest.trim_start_matches(' ');
    (!token.is_empty()).then_some(token)
}

fn is_upgrade(req: &http::request::Parts) -> bool {
    req.headers
        .get(http::header::UPGRADE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.eq_ignore_ascii_case("websocket"))
}

/// One query parameter, percent-decoded (`+` is a space, as in a form).
pub(crate) fn query_param(query: &str, name: &str) -> Option<String> {
    query.split('&').find_map(|pair| {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        (percent_decode(k).as_deref() == Some(name))
            .then(|| percent_decode(v))
            .flatten()
    })
}

/// Whether every name and value of a query string percent-decodes to UTF-8.
pub(crate) fn query_decodes(query: &str) -> bool {
    query.split('&').all(|pair| {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        percent_decode(k).is_some() && percent_decode(v).is_some()
    })
}

fn percent_decode(s: &str) -> Option<String> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'%' => {
                let hex = |c: u8| (c as char).to_digit(16);
                let hi = b.get(i + 1).copied().and_then(hex)?;
                let lo = b.get(i + 2).copied().and_then(hex)?;
                // ok: two hex digits make at most 255
                out.push((hi * 16 + lo) as u8);
                i += 3;
            }
            b'+' => {
                out.push(b' ');
                i += 1;
            }
            c => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8(out).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scheme_is_case_insensitive_and_token_exact() {
        assert_eq!(bearer_credentials("Bearer abc"), Some("abc"));
        assert_eq!(bearer_credentials("bearer abc"), Some("abc"));
        assert_eq!(bearer_credentials("BEARER  abc"), Some("abc"));
        assert_eq!(bearer_credentials("Basic abc"), None);
        assert_eq!(bearer_credentials("Bearer"), None);
        assert_eq!(bearer_credentials("Bearerabc"), None);
    }

    #[test]
    fn query_params_are_decoded() {
        assert_eq!(
            query_param("a=1&token=x%20y", "token").as_deref(),
            Some("x y")
        );
        assert_eq!(query_param("token=a+b", "token").as_deref(), Some("a b"));
        assert_eq!(query_param("token=%zz", "token"), None);
        assert_eq!(query_param("", "token"), None);
        assert!(query_decodes("threadId=t%201&v=2&offset=-1"));
        assert!(query_decodes(""));
        assert!(!query_decodes("threadId=%ff%fe&v=2"), "not UTF-8");
        assert!(!query_decodes("v=2&threadId=%z1"), "not hex");
        assert!(!query_decodes("%e9=1"), "a name that does not decode");
    }

    #[test]
    fn tokens_sign_in_their_users() {
        let t = BearerTokens::new([("t1", "user-1"), ("t2", "user-2"), ("", "nobody")]);
        assert_eq!(t.user_of("t2"), Some(UserId::from("user-2")));
        assert_eq!(t.user_of("t3"), None);
        assert_eq!(t.user_of(""), None);
    }
}
