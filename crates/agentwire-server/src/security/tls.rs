//! Server TLS: a PEM certificate chain and key whose certificate can be swapped while the
//! listener serves, and the two protocol profiles (rustls defaults, and MCPW's TLS 1.3 with
//! the spec's cipher suites).

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::time::Duration;

use rustls::crypto::CryptoProvider;
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

use super::watch::Watcher;
use super::SecurityError;

/// Which TLS rules a listener follows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum TlsProfile {
    /// rustls' defaults: TLS 1.2 and 1.3 with rustls' safe cipher suites (every protocol
    /// but MCPW, whose specs say nothing about TLS).
    Default,
    /// The MCPW spec's `tls.Config`: TLS 1.3 only, with `TLS_AES_256_GCM_SHA384` and
    /// `TLS_CHACHA20_POLY1305_SHA256` in that order of preference, the server's order
    /// winning (`PreferServerCipherSuites`). rustls also offers `TLS13_AES_128_GCM_SHA256`;
    /// it is left out because the spec lists the two suites alone.
    Mcpw,
}

impl TlsProfile {
    /// The crypto provider (ring) with this profile's cipher suites.
    pub fn provider(self) -> CryptoProvider {
        let mut provider = rustls::crypto::ring::default_provider();
        if self == Self::Mcpw {
            use rustls::crypto::ring::cipher_suite;
            provider.cipher_suites = vec![
                cipher_suite::TLS13_AES_256_GCM_SHA384,
                cipher_suite::TLS13_CHACHA20_POLY1305_SHA256,
            ];
        }
        provider
    }

    /// The protocol versions this profile allows.
    pub fn versions(self) -> &'static [&'static rustls::SupportedProtocolVersion] {
        /// TLS 1.3 alone.
        static TLS13_ONLY: &[&rustls::SupportedProtocolVersion] = &[&rustls::version::TLS13];
        match self {
            Self::Default => rustls::DEFAULT_VERSIONS,
            Self::Mcpw => TLS13_ONLY,
        }
    }
}

/// The certificate and key file of a listener.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CertFiles {
    /// PEM certificate chain, leaf first.
    pub cert: PathBuf,
    /// PEM private key (PKCS#8, PKCS#1 or SEC1).
    pub key: PathBuf,
}

/// The largest certificate, key, CA or key file read: far above any real one (a long
/// chain is a few KiB), so a wrong path (a log, a disk image) costs no memory.
pub const MAX_FILE_BYTES: u64 = 1 << 20;

/// Reads `path` whole, refusing a file over [`MAX_FILE_BYTES`].
pub(crate) fn read(path: &Path) -> Result<Vec<u8>, SecurityError> {
    use std::io::Read;
    let failed = |source| SecurityError::Read {
        path: path.to_owned(),
        source,
    };
    let file = std::fs::File::open(path).map_err(failed)?;
    let mut bytes = Vec::new();
    file.take(MAX_FILE_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(failed)?;
    if bytes.len() as u64 > MAX_FILE_BYTES {
        return Err(SecurityError::TooLarge {
            path: path.to_owned(),
            max: MAX_FILE_BYTES,
        });
    }
    Ok(bytes)
}

/// Parses a PEM certificate chain and key into the form rustls serves, checking that the
/// key is the certificate's.
pub fn certified_key(
    files: &CertFiles,
    cert_pem: &[u8],
    key_pem: &[u8],
    provider: &CryptoProvider,
) -> Result<Arc<CertifiedKey>, SecurityError> {
    let no_cert = || SecurityError::NoCertificate {
        path: files.cert.clone(),
    };
    let chain = CertificateDer::pem_slice_iter(cert_pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|_| no_cert())?;
    if chain.is_empty() {
        return Err(no_cert());
    }
    let key = PrivateKeyDer::from_pem_slice(key_pem).map_err(|e| SecurityError::NoPrivateKey {
        path: files.key.clone(),
        reason: e.to_string(),
    })?;
    Ok(Arc::new(CertifiedKey::from_der(chain, key, provider)?))
}

/// The certificate a listener serves, swappable while it serves: each new TLS handshake
/// takes the current one, connections already up keep theirs.
pub struct CertStore {
    current: RwLock<Arc<CertifiedKey>>,
}

impl fmt::Debug for CertStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CertStore")
            .field("leaf_sha256", &super::pin::hex(&self.leaf_sha256()))
            .finish()
    }
}

impl CertStore {
    /// A store serving `key`.
    pub fn new(key: Arc<CertifiedKey>) -> Self {
        Self {
            current: RwLock::new(key),
        }
    }

    /// The certificate served now.
    pub fn current(&self) -> Arc<CertifiedKey> {
        Arc::clone(&self.current.read().unwrap_or_else(PoisonError::into_inner))
    }

    /// Serves `key` from the next handshake on.
    pub fn replace(&self, key: Arc<CertifiedKey>) {
        *self.current.write().unwrap_or_else(PoisonError::into_inner) = key;
    }

    /// The SHA-256 of the leaf certificate served now (what a pinned client compares).
    pub fn leaf_sha256(&self) -> [u8; 32] {
        let key = self.current();
        key.cert
            .first()
            .map(|c| super::pin::sha256(c.as_ref()))
            .unwrap_or_default()
    }
}

impl ResolvesServerCert for CertStore {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.current())
    }
}

/// A rustls server configuration that serves whatever `store` holds, under `profile`,
/// offering ALPN `http/1.1`.
pub fn server_config(
    store: Arc<CertStore>,
    profile: TlsProfile,
) -> Result<Arc<rustls::ServerConfig>, SecurityError> {
    let mut cfg = rustls::ServerConfig::builder_with_provider(Arc::new(profile.provider()))
        .with_protocol_versions(profile.versions())?
        .with_no_client_auth()
        .with_cert_resolver(store);
    cfg.alpn_protocols = vec![b"http/1.1".to_vec()];
    // The spec's PreferServerCipherSuites: our order, not the client's.
    cfg.ignore_client_order = profile == TlsProfile::Mcpw;
    Ok(Arc::new(cfg))
}

/// Reloads a listener's certificate from its files when they change.
pub struct CertReloader {
    files: CertFiles,
    provider: CryptoProvider,
    store: Arc<CertStore>,
    /// The file contents last looked at (loaded or refused), so an unchanged file is
    /// neither parsed again nor reported again.
    last: Mutex<(Vec<u8>, Vec<u8>)>,
}

impl fmt::Debug for CertReloader {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CertReloader")
            .field("files", &self.files)
            .field("store", &self.store)
            .finish()
    }
}

impl CertReloader {
    /// Loads `files` under `profile`: the reloader and the store that serves them.
    pub fn load(files: CertFiles, profile: TlsProfile) -> Result<Self, SecurityError> {
        let provider = profile.provider();
        let cert_pem = read(&files.cert)?;
        let key_pem = read(&files.key)?;
        let key = certified_key(&files, &cert_pem, &key_pem, &provider)?;
        Ok(Self {
            files,
            provider,
            store: Arc::new(CertStore::new(key)),
            last: Mutex::new((cert_pem, key_pem)),
        })
    }

    /// The store the listener's rustls configuration resolves from.
    pub fn store(&self) -> Arc<CertStore> {
        Arc::clone(&self.store)
    }

    /// The files it reloads.
    pub fn files(&self) -> &CertFiles {
        &self.files
    }

    /// Reads both files; if either changed since the last look (or `force`), parses them
    /// and serves the new certificate. `Ok(true)`: a new certificate is served; `Ok(false)`:
    /// nothing changed; `Err`: the files are unreadable or bad, and the current certificate
    /// stays.
    pub fn reload(&self, force: bool) -> Result<bool, SecurityError> {
        let cert_pem = read(&self.files.cert)?;
        let key_pem = read(&self.files.key)?;
        let mut last = self.last.lock().unwrap_or_else(PoisonError::into_inner);
        if !force && last.0 == cert_pem && last.1 == key_pem {
            return Ok(false);
        }
        let parsed = certified_key(&self.files, &cert_pem, &key_pem, &self.provider);
        *last = (cert_pem, key_pem);
        self.store.replace(parsed?);
        Ok(true)
    }

    /// Runs [`reload`](Self::reload) every `every` (if set) and on SIGHUP (`force`), logging
    /// each new certificate and each refused file once.
    pub fn watch(self: &Arc<Self>, every: Option<Duration>) -> Watcher {
        let me = Arc::clone(self);
        // The last error logged: a file that stays unreadable is reported once (and again
        // on SIGHUP).
        let last_error = Arc::new(Mutex::new(None::<String>));
        Watcher::spawn("certificate", every, move |force| {
            let me = Arc::clone(&me);
            let last_error = Arc::clone(&last_error);
            async move {
                let files = me.files.clone();
                let outcome = tokio::task::spawn_blocking(move || me.reload(force)).await;
                let mut last_error = last_error.lock().unwrap_or_else(PoisonError::into_inner);
                let repeated = match &outcome {
                    Ok(Err(e)) => {
                        let text = e.to_string();
                        let same = !force && last_error.as_ref() == Some(&text);
                        *last_error = Some(text);
                        same
                    }
                    _ => {
                        *last_error = None;
                        false
                    }
                };
                match outcome {
                    Ok(Ok(true)) => tracing::info!(
                        cert = %files.cert.display(),
                        "TLS certificate reloaded; new connections get it"
                    ),
                    Ok(Ok(false)) => {}
                    Ok(Err(_)) if repeated => {}
                    Ok(Err(e)) => tracing::error!(
                        cert = %files.cert.display(),
                        error = %e,
                        "TLS certificate not reloaded; the current one stays"
                    ),
                    Err(e) => tracing::error!(error = %e, "TLS certificate reload failed"),
                }
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A self-signed certificate for `name` and its key, as PEM.
    fn pair(name: &str) -> (Vec<u8>, Vec<u8>) {
        let ck = rcgen::generate_simple_self_signed(vec![name.to_owned()]).expect("cert");
        (
            ck.cert.pem().into_bytes(),
            ck.signing_key.serialize_pem().into_bytes(),
        )
    }

    fn dir(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("agentwire-tls-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).expect("dir");
        d
    }

    #[test]
    fn a_bad_pair_is_refused_and_the_current_certificate_stays() {
        let d = dir("bad-pair");
        let files = CertFiles {
            cert: d.join("live.crt"),
            key: d.join("live.key"),
        };
        let (cert_a, key_a) = pair("a.test");
        let (cert_b, key_b) = pair("b.test");
        std::fs::write(&files.cert, &cert_a).unwrap();
        std::fs::write(&files.key, &key_a).unwrap();
        let r = CertReloader::load(files.clone(), TlsProfile::Default).expect("load");
        let first = r.store().leaf_sha256();
        assert!(!r.reload(false).expect("unchanged"));

        // B's certificate with A's key: the key does not match, A stays.
        std::fs::write(&files.cert, &cert_b).unwrap();
        assert!(matches!(r.reload(false), Err(SecurityError::Tls(_))));
        assert_eq!(r.store().leaf_sha256(), first);
        // Garbage: refused, A stays; an unchanged bad file is not parsed (nor logged) again.
        std::fs::write(&files.cert, b"not a certificate").unwrap();
        assert!(matches!(
            r.reload(false),
            Err(SecurityError::NoCertificate { .. })
        ));
        assert!(!r.reload(false).expect("seen already"));
        assert_eq!(r.store().leaf_sha256(), first);
        // A file too large to be a certificate: refused unread past the limit, A stays.
        std::fs::write(&files.cert, vec![b'-'; MAX_FILE_BYTES as usize + 1]).unwrap();
        assert!(matches!(
            r.reload(false),
            Err(SecurityError::TooLarge { .. })
        ));
        assert_eq!(r.store().leaf_sha256(), first);
        // A missing file: refused, A stays.
        std::fs::write(&files.cert, &cert_b).unwrap();
        std::fs::remove_file(&files.key).unwrap();
        assert!(matches!(r.reload(true), Err(SecurityError::Read { .. })));
        // The whole new pair: served.
        std::fs::write(&files.cert, &cert_b).unwrap();
        std::fs::write(&files.key, &key_b).unwrap();
        assert!(r.reload(false).expect("new pair"));
        assert_ne!(r.store().leaf_sha256(), first);
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn the_mcpw_profile_is_tls_1_3_with_the_spec_s_two_suites() {
        let p = TlsProfile::Mcpw.provider();
        let names: Vec<_> = p.cipher_suites.iter().map(|s| s.suite()).collect();
        assert_eq!(
            names,
            [
                rustls::CipherSuite::TLS13_AES_256_GCM_SHA384,
                rustls::CipherSuite::TLS13_CHACHA20_POLY1305_SHA256
            ]
        );
        assert_eq!(TlsProfile::Mcpw.versions().len(), 1);
        assert_eq!(
            TlsProfile::Mcpw.versions()[0].version,
            rustls::ProtocolVersion::TLSv1_3
        );
        assert_eq!(TlsProfile::Default.versions().len(), 2);
    }
}
