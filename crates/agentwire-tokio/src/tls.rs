//! rustls configurations from PEM, always with the ring provider passed explicitly (no
//! process-wide default provider is needed).

use std::sync::Arc;

use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

use crate::TlsError;

/// The crypto provider every configuration here uses.
fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn certs(pem: &[u8]) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let certs = CertificateDer::pem_slice_iter(pem).collect::<Result<Vec<_>, _>>()?;
    if certs.is_empty() {
        return Err(TlsError::NoCertificate);
    }
    Ok(certs)
}

/// A server configuration from a PEM certificate chain (leaf first) and a PEM private key,
/// offering ALPN `http/1.1`. Pass it to [`ServerConfig::with_tls`](crate::ServerConfig::with_tls).
pub fn server_config(
    cert_chain_pem: &[u8],
    key_pem: &[u8],
) -> Result<Arc<rustls::ServerConfig>, TlsError> {
    let chain = certs(cert_chain_pem)?;
    let key = PrivateKeyDer::from_pem_slice(key_pem)?;
    let mut cfg = rustls::ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()?
        .with_no_client_auth()
        .with_single_cert(chain, key)?;
    cfg.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(cfg))
}

/// A client configuration that trusts only the CA certificate(s) in `ca_pem` (e.g. a
/// self-signed server certificate). Pass it to
/// [`ClientConfig::with_tls`](crate::ClientConfig::with_tls).
pub fn client_config_trusting(ca_pem: &[u8]) -> Result<Arc<rustls::ClientConfig>, TlsError> {
    let mut roots = rustls::RootCertStore::empty();
    for cert in certs(ca_pem)? {
        roots.add(cert)?;
    }
    client_config_with_roots(roots)
}

/// A client configuration trusting the Mozilla roots from `webpki-roots` (the default for
/// `wss://` URLs).
pub fn client_config_webpki_roots() -> Result<Arc<rustls::ClientConfig>, TlsError> {
    let mut roots = rustls::RootCertStore::empty();
    roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
    client_config_with_roots(roots)
}

fn client_config_with_roots(
    roots: rustls::RootCertStore,
) -> Result<Arc<rustls::ClientConfig>, TlsError> {
    let mut cfg = rustls::ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()?
        .with_root_certificates(roots)
        .with_no_client_auth();
    cfg.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(cfg))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn garbage_pem_is_an_error() {
        assert!(matches!(
            client_config_trusting(b"not pem"),
            Err(TlsError::NoCertificate)
        ));
        assert!(server_config(b"", b"").is_err());
        assert!(client_config_webpki_roots().is_ok());
    }
}
