//! Where a remote harness answers: the address forms agentsessionsd's `--harness name=address`
//! accepts, checked when the host starts.

use std::fmt;
use std::path::PathBuf;

/// A harness address (spec, "Running out of process": "The address is one of: host:port, or
/// dns:///host:port (dns://resolver/host:port names the DNS server to ask, as an IP address
/// or host name with an optional port); a unix socket path after unix: or unix://, absolute
/// (unix:///run/h.sock) or relative to the server's working directory (unix:h.sock,
/// unix://h.sock). Any other form ... stops the server at startup").
///
/// ```
/// use harness_sessions::connect::HarnessAddress;
///
/// assert!(matches!("127.0.0.1:8090".parse(), Ok(HarnessAddress::Tcp { port: 8090, .. })));
/// assert!("dns:///localhost:8090".parse::<HarnessAddress>().is_ok());
/// assert!("unix:///run/h.sock".parse::<HarnessAddress>().is_ok());
/// for refused in ["http://127.0.0.1:8090", "localhost", "unix://", "dns://%/127.0.0.1:9000", "passthrough:8080"] {
///     assert!(refused.parse::<HarnessAddress>().is_err(), "{refused}");
/// }
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum HarnessAddress {
    /// `host:port`, `dns:///host:port` or `dns://resolver/host:port`.
    Tcp {
        /// The host (a name, an IPv4 address, or an IPv6 address without its brackets).
        host: String,
        /// The port.
        port: u16,
        /// The DNS server named by `dns://resolver/…`, as written (this host resolves
        /// names with the system resolver: the named one is recorded, not consulted).
        resolver: Option<String>,
    },
    /// A unix socket: `unix:PATH` or `unix://PATH` (relative to the working directory) or an
    /// absolute `unix:/PATH`, `unix:///PATH`.
    Unix(PathBuf),
}

/// Why an address is refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("harness address {address:?}: {reason}")]
pub struct AddressError {
    /// The address as given.
    pub address: String,
    /// Why.
    pub reason: &'static str,
}

/// gRPC's registered resolver schemes: a bare `scheme:port` is a target for them, not a
/// host ("a host named like a gRPC resolver scheme (passthrough:8080; write
/// dns:///passthrough:8080)").
const RESOLVER_SCHEMES: [&str; 6] = [
    "dns",
    "passthrough",
    "unix",
    "unix-abstract",
    "xds",
    "google-c2p",
];

/// `host:port` (IPv6 in brackets), each part present, the port a number.
fn host_port(s: &str) -> Result<(String, u16), &'static str> {
    let (host, port) = if let Some(rest) = s.strip_prefix('[') {
        let (h, p) = rest.split_once(']').ok_or("an IPv6 host without its ']'")?;
        (h, p.strip_prefix(':').ok_or("no port")?)
    } else {
        s.rsplit_once(':').ok_or("no port")?
    };
    if host.is_empty() {
        return Err("no host");
    }
    if host.contains(['/', '%', '@', ' ', '?', '#']) || (!s.starts_with('[') && host.contains(':'))
    {
        return Err("not a host name or address");
    }
    let port = port
        .parse::<u16>()
        .map_err(|_| "the port is not a number from 0 to 65535")?;
    Ok((host.to_owned(), port))
}

impl std::str::FromStr for HarnessAddress {
    type Err = AddressError;

    fn from_str(s: &str) -> Result<Self, AddressError> {
        let refuse = |reason| AddressError {
            address: s.to_owned(),
            reason,
        };
        if let Some(rest) = s.strip_prefix("unix:") {
            let path = rest.strip_prefix("//").unwrap_or(rest);
            if path.is_empty() || path == "/" {
                return Err(refuse("a unix address with no socket path"));
            }
            return Ok(HarnessAddress::Unix(PathBuf::from(path)));
        }
        if let Some(rest) = s.strip_prefix("dns:") {
            let rest = rest.strip_prefix("//").ok_or_else(|| {
                refuse("a dns: address gRPC cannot parse (write dns:///host:port)")
            })?;
            let (authority, target) = rest
                .split_once('/')
                .ok_or_else(|| refuse("a dns: address gRPC cannot parse"))?;
            let resolver = if authority.is_empty() {
                None
            } else {
                // An IP address or host name with an optional port.
                let ok = host_port(authority).is_ok()
                    || (!authority.contains(':')
                        && !authority.is_empty()
                        && authority
                            .chars()
                            .all(|c| c.is_ascii_alphanumeric() || c == '.' || c == '-'));
                if !ok {
                    return Err(refuse("a dns: address gRPC cannot parse (its resolver)"));
                }
                Some(authority.to_owned())
            };
            let (host, port) = host_port(target).map_err(refuse)?;
            return Ok(HarnessAddress::Tcp {
                host,
                port,
                resolver,
            });
        }
        if s.contains("://") {
            return Err(refuse(
                "not a gRPC target (only host:port, dns: and unix: forms)",
            ));
        }
        let (host, port) = host_port(s).map_err(refuse)?;
        if RESOLVER_SCHEMES.contains(&host.to_ascii_lowercase().as_str()) {
            return Err(refuse(
                "a host named like a gRPC resolver scheme (write dns:///HOST:PORT)",
            ));
        }
        Ok(HarnessAddress::Tcp {
            host,
            port,
            resolver: None,
        })
    }
}

impl fmt::Display for HarnessAddress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HarnessAddress::Tcp { host, port, .. } if host.contains(':') => {
                write!(f, "[{host}]:{port}")
            }
            HarnessAddress::Tcp { host, port, .. } => write!(f, "{host}:{port}"),
            HarnessAddress::Unix(p) => write!(f, "unix:{}", p.display()),
        }
    }
}
