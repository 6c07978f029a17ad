//! `wss://` (feature `tls`) on loopback, with a self-signed certificate made at test time: a
//! whole call over TLS, and a plain `ws://` client refused at the TLS handshake.
#![cfg(feature = "tls")]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::sync::Arc;

use common::server::{Running, assert_short_call_passed, short_call};
use harness_jambonz::client::{Caller, ClientError};
use harness_jambonz::server::tls::{TlsConfig, TlsError, rustls};
use harness_jambonz::server::{JambonzServer, JambonzServerConfig};
use rustls::pki_types::ServerName;
use tokio_rustls::TlsConnector;

/// A certificate for `localhost`, its PEM and its key's PEM.
fn self_signed() -> (rcgen::CertifiedKey<rcgen::KeyPair>, String, String) {
    let ck = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()]).unwrap();
    let (cert, key) = (ck.cert.pem(), ck.signing_key.serialize_pem());
    (ck, cert, key)
}

#[tokio::test]
async fn a_whole_call_over_wss() {
    let (ck, cert_pem, key_pem) = self_signed();
    let tls = TlsConfig::from_pem(cert_pem.as_bytes(), key_pem.as_bytes()).unwrap();
    let server =
        JambonzServer::new(JambonzServerConfig::default().with_secret("s3cret")).with_tls(tls);
    let server = Running::start_with(server).await;

    // The client trusts that one certificate.
    let mut roots = rustls::RootCertStore::empty();
    roots.add(ck.cert.der().clone()).unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    let tcp = tokio::net::TcpStream::connect(server.addr).await.unwrap();
    let name = ServerName::try_from("localhost").unwrap();
    let tls = TlsConnector::from(Arc::new(config))
        .connect(name, tcp)
        .await
        .unwrap();
    let url = format!("wss://localhost:{}", server.addr.port());
    let t = Caller::new()
        .with_secret("s3cret")
        .call_over(tls, &url, short_call())
        .await
        .unwrap();
    assert_short_call_passed(&t);

    // Plain ws:// to a wss:// server: the TLS handshake fails, no call.
    let plain = Caller::new()
        .with_secret("s3cret")
        .call(&server.url(), short_call())
        .await;
    assert!(matches!(plain, Err(ClientError::Connect(_))), "{plain:?}");
    let report = server.stop().await;
    assert_eq!(report.calls, 1);
    assert_eq!(report.handshake_failures, 1);
}

#[test]
fn bad_pem_is_refused() {
    let (_, cert, key) = self_signed();
    assert!(matches!(
        TlsConfig::from_pem(b"", key.as_bytes()),
        Err(TlsError::Certificates(_))
    ));
    assert!(matches!(
        TlsConfig::from_pem(cert.as_bytes(), b"not a key"),
        Err(TlsError::Key(_))
    ));
    let (_, _, other_key) = self_signed();
    assert!(matches!(
        TlsConfig::from_pem(cert.as_bytes(), other_key.as_bytes()),
        Err(TlsError::Config(_))
    ));
}
