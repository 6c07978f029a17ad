//! `wss://` (feature `tls`): TLS by rustls, through tokio-rustls, with the ring crypto
//! provider. "Use wss://; ws:// is accepted only for a private address on the same network
//! as jambonz."
//!
//! ```no_run
//! use harness_jambonz::server::tls::TlsConfig;
//! use harness_jambonz::server::{JambonzServer, JambonzServerConfig};
//!
//! # fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let cert = std::fs::read("/etc/harness/cert.pem")?; // the chain, leaf first
//! let key = std::fs::read("/etc/harness/key.pem")?;
//! let server = JambonzServer::new(JambonzServerConfig::default()).with_tls(TlsConfig::from_pem(&cert, &key)?);
//! # Ok(())
//! # }
//! ```

use std::fmt;
use std::sync::Arc;

use tokio_rustls::TlsAcceptor;
use tokio_rustls::rustls::ServerConfig;
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};

/// The rustls this crate uses, to build a [`ServerConfig`] of your own for
/// [`TlsConfig::new`].
pub use tokio_rustls::rustls;

/// The TLS side of a [`JambonzServer`](super::JambonzServer).
#[derive(Clone)]
pub struct TlsConfig(TlsAcceptor);

/// Why a [`TlsConfig`] could not be made.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TlsError {
    /// The certificate chain is not PEM, or holds no certificate.
    #[error("certificate chain: {0}")]
    Certificates(String),
    /// The private key is not a PEM PKCS#8, PKCS#1 or SEC1 key.
    #[error("private key: {0}")]
    Key(String),
    /// rustls refused the certificate and key (a key that does not match, an unsupported
    /// algorithm).
    #[error("TLS configuration: {0}")]
    Config(String),
}

impl fmt::Debug for TlsConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("TlsConfig(..)")
    }
}

impl TlsConfig {
    /// TLS with a rustls configuration of your own (client certificates, ALPN, a
    /// certificate resolver, …).
    pub fn new(config: Arc<ServerConfig>) -> Self {
        TlsConfig(TlsAcceptor::from(config))
    }

    /// TLS 1.2 and 1.3 with one certificate chain (PEM, leaf first) and its private key
    /// (PEM), the ring provider's safe defaults, no client certificates.
    pub fn from_pem(cert_chain: &[u8], key: &[u8]) -> Result<Self, TlsError> {
        let certs = CertificateDer::pem_slice_iter(cert_chain)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| TlsError::Certificates(e.to_string()))?;
        if certs.is_empty() {
            return Err(TlsError::Certificates("no certificate".into()));
        }
        let key = PrivateKeyDer::from_pem_slice(key).map_err(|e| TlsError::Key(e.to_string()))?;
        // The provider is named, not taken from the process default: that one panics when
        // several providers are compiled in and none was installed.
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .and_then(|b| b.with_no_client_auth().with_single_cert(certs, key))
            .map_err(|e| TlsError::Config(e.to_string()))?;
        Ok(Self::new(Arc::new(config)))
    }

    pub(super) fn acceptor(&self) -> &TlsAcceptor {
        &self.0
    }
}
