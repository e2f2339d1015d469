//! Client TLS: the Mozilla roots plus an optional CA file, and certificate pinning (the
//! MCPW spec's "Certificate Pinning").

use std::fmt;
use std::path::Path;
use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::crypto::CryptoProvider;
use rustls::{CertificateError, DigitallySignedStruct, SignatureScheme};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, ServerName, UnixTime};

use super::pin::sha256;
use super::tls::read;
use super::SecurityError;

/// A client configuration for `wss://`: trusts the Mozilla roots (`webpki-roots`) and the
/// certificates in `ca_file` (a PEM file, e.g. a private CA or a self-signed server
/// certificate), and with `pin_sha256` also requires the server's leaf certificate to have
/// that SHA-256, on top of the normal chain and name checks.
///
/// The pin is the SHA-256 of the whole leaf certificate (what `openssl x509 -noout
/// -fingerprint -sha256` prints), not of its public key: a renewed certificate needs the
/// new pin, even with the same key.
pub fn client_tls(
    ca_file: Option<&Path>,
    pin_sha256: Option<[u8; 32]>,
) -> Result<Arc<rustls::ClientConfig>, SecurityError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut roots = rustls::RootCertStore::empty();
    roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
    if let Some(path) = ca_file {
        let pem = read(path)?;
        let no_cert = || SecurityError::NoCertificate {
            path: path.to_owned(),
        };
        let certs = CertificateDer::pem_slice_iter(&pem)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|_| no_cert())?;
        if certs.is_empty() {
            return Err(no_cert());
        }
        for cert in certs {
            roots.add(cert)?;
        }
    }
    let webpki = WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider.clone())
        .build()
        .map_err(|e| SecurityError::Tls(rustls::Error::General(e.to_string())))?;
    let verifier = PinnedVerifier {
        chain: Some(webpki),
        pin: pin_sha256,
        provider: provider.clone(),
    };
    build(provider, verifier)
}

/// A client configuration that trusts exactly the server certificate whose SHA-256 is
/// `pin_sha256`, without chain or name checks (the handshake signatures are still
/// verified): the opt-out for a self-signed server whose certificate is known only by its
/// pin.
pub fn client_tls_pin_only(
    pin_sha256: [u8; 32],
) -> Result<Arc<rustls::ClientConfig>, SecurityError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let verifier = PinnedVerifier {
        chain: None,
        pin: Some(pin_sha256),
        provider: provider.clone(),
    };
    build(provider, verifier)
}

fn build(
    provider: Arc<CryptoProvider>,
    verifier: PinnedVerifier,
) -> Result<Arc<rustls::ClientConfig>, SecurityError> {
    let mut cfg = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(verifier))
        .with_no_client_auth();
    cfg.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(cfg))
}

/// The normal web PKI checks (unless `chain` is `None`), then the pin (if any).
struct PinnedVerifier {
    chain: Option<Arc<WebPkiServerVerifier>>,
    pin: Option<[u8; 32]>,
    provider: Arc<CryptoProvider>,
}

impl fmt::Debug for PinnedVerifier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PinnedVerifier")
            .field("chain", &self.chain.is_some())
            .field("pin", &self.pin.map(|p| super::pin::hex(&p)))
            .finish()
    }
}

impl ServerCertVerifier for PinnedVerifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        if let Some(chain) = &self.chain {
            chain.verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now)?;
        }
        if let Some(pin) = &self.pin {
            let seen = sha256(end_entity.as_ref());
            // Not secret (the certificate is public), so a plain compare.
            if &seen != pin {
                tracing::warn!(
                    expected = %super::pin::hex(pin),
                    got = %super::pin::hex(&seen),
                    "server certificate does not match the pinned SHA-256"
                );
                return Err(rustls::Error::InvalidCertificate(
                    CertificateError::ApplicationVerificationFailure,
                ));
            }
        }
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}
