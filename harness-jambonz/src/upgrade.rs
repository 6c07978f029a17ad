//! The WebSocket upgrade check: "jambonz opens a WebSocket to the harness URL for each call,
//! with subprotocol harness.jambonz.org … When the agent has a secret, the upgrade request
//! carries `Authorization: Bearer <secret>`. With none, there is no Authorization header. A
//! harness that requires one should refuse the upgrade with HTTP 401."
//!
//! ```
//! use harness_jambonz::upgrade::{check_upgrade, SUBPROTOCOL};
//!
//! let headers = [
//!     ("Sec-WebSocket-Protocol", "harness.jambonz.org".as_bytes()),
//!     ("Authorization", b"Bearer s3cret".as_slice()),
//! ];
//! let accept = check_upgrade(headers, Some("s3cret")).unwrap();
//! assert_eq!(accept.subprotocol, SUBPROTOCOL); // echo it in the 101 response
//!
//! let refused = check_upgrade([("Sec-WebSocket-Protocol", "harness.jambonz.org".as_bytes())], Some("s3cret"));
//! assert_eq!(refused.unwrap_err().status, 401);
//! ```

use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

/// The WebSocket subprotocol of the jambonz harness protocol.
pub const SUBPROTOCOL: &str = "harness.jambonz.org";

/// Accept the upgrade, echoing this subprotocol in `Sec-WebSocket-Protocol`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Accept {
    /// [`SUBPROTOCOL`].
    pub subprotocol: &'static str,
}

/// Refuse the upgrade with this HTTP status.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("upgrade refused ({status}): {reason}")]
pub struct Refusal {
    /// 401 for a missing or wrong secret, 400 for a client that does not offer the
    /// subprotocol.
    pub status: u16,
    /// Why (safe to send: it never contains the secret).
    pub reason: &'static str,
}

/// Checks an upgrade request's headers against the configured secret.
///
/// - With a secret: exactly one `Authorization: Bearer <secret>` header (scheme
///   case-insensitive), compared in constant time (SHA-256 of both, so the length does not
///   leak either); otherwise 401.
/// - With none: no header is required (one that is present is ignored). An empty secret,
///   `Some("")`, is a secret no request can present: every upgrade gets 401 (fail closed; a
///   blank environment variable does not open the harness). Pass `None` for no secret.
/// - The client must offer [`SUBPROTOCOL`] in `Sec-WebSocket-Protocol` (a comma-separated
///   list, possibly over several headers); otherwise 400.
///
/// Header names are compared case-insensitively.
pub fn check_upgrade<'a, I>(headers: I, secret: Option<&str>) -> Result<Accept, Refusal>
where
    I: IntoIterator<Item = (&'a str, &'a [u8])>,
{
    let mut auth: Option<&[u8]> = None;
    let mut auth_count = 0usize;
    let mut offered = false;
    for (name, value) in headers {
        if name.eq_ignore_ascii_case("authorization") {
            auth_count += 1;
            auth = Some(value);
        } else if name.eq_ignore_ascii_case("sec-websocket-protocol") {
            offered |= value
                .split(|&b| b == b',')
                .any(|p| p.trim_ascii() == SUBPROTOCOL.as_bytes());
        }
    }
    if let Some(secret) = secret {
        let unauthorized = Refusal {
            status: 401,
            reason: "missing or wrong Authorization: Bearer secret",
        };
        let (Some(value), 1) = (auth, auth_count) else {
            return Err(unauthorized);
        };
        let value = value.trim_ascii();
        if value.len() < 7 || !value[..7].eq_ignore_ascii_case(b"bearer ") {
            return Err(unauthorized);
        }
        let given = Sha256::digest(value[7..].trim_ascii());
        let want = Sha256::digest(secret.as_bytes());
        if !bool::from(given.as_slice().ct_eq(want.as_slice())) {
            return Err(unauthorized);
        }
    }
    if !offered {
        return Err(Refusal {
            status: 400,
            reason: "the client does not offer subprotocol harness.jambonz.org",
        });
    }
    Ok(Accept {
        subprotocol: SUBPROTOCOL,
    })
}

/// Why jambonz would not dial a harness URL.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum UrlRefusal {
    /// Not a `ws://` or `wss://` URL.
    #[error("not a WebSocket URL: {0}")]
    NotWebSocket(String),
    /// "Use wss://; ws:// is accepted only for a private address on the same network as
    /// jambonz."
    #[error("ws:// is accepted only for a private address; use wss:// for {0}")]
    PlainToPublic(String),
}

/// Checks a harness URL the way jambonz does before dialing: `wss://` anywhere; `ws://` only
/// to a private address (RFC 1918 and loopback IPv4, loopback and unique-local IPv6, or
/// `localhost`). A host name other than `localhost` is not resolved here (sans-IO), so
/// `ws://` to a name is refused.
///
/// ```
/// use harness_jambonz::upgrade::check_harness_url;
///
/// assert!(check_harness_url("wss://agent.example.com/harness").is_ok());
/// assert!(check_harness_url("ws://10.0.0.5:8080").is_ok());
/// assert!(check_harness_url("ws://203.0.113.7:8080").is_err());
/// ```
pub fn check_harness_url(url: &str) -> Result<(), UrlRefusal> {
    let lower = url.trim().to_ascii_lowercase();
    let rest = if lower.starts_with("wss://") {
        return Ok(());
    } else if let Some(r) = lower.strip_prefix("ws://") {
        r
    } else {
        return Err(UrlRefusal::NotWebSocket(url.to_owned()));
    };
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    let host_port = authority.rsplit('@').next().unwrap_or(authority);
    let host = if let Some(v6) = host_port.strip_prefix('[') {
        v6.split(']').next().unwrap_or("")
    } else {
        host_port.split(':').next().unwrap_or("")
    };
    let private = host == "localhost"
        || match host.parse::<std::net::IpAddr>() {
            Ok(std::net::IpAddr::V4(a)) => a.is_private() || a.is_loopback(),
            Ok(std::net::IpAddr::V6(a)) => a.is_loopback() || (a.segments()[0] & 0xfe00) == 0xfc00,
            Err(_) => false,
        };
    if private {
        Ok(())
    } else {
        Err(UrlRefusal::PlainToPublic(url.to_owned()))
    }
}
