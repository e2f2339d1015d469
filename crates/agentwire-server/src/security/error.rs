//! The errors of TLS, allowlists, key files and certificate pins.

use std::path::PathBuf;

/// What can go wrong setting up a listener's security or a client's TLS.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SecurityError {
    /// A file could not be read.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// A file is larger than any certificate, key or key file
    /// ([`MAX_FILE_BYTES`](super::MAX_FILE_BYTES)); it is not read further.
    #[error("{path} is larger than {max} bytes")]
    TooLarge {
        /// The file.
        path: PathBuf,
        /// The limit.
        max: u64,
    },
    /// A PEM file holds no certificate, or its certificates do not parse.
    #[error("{path}: no PEM certificate found")]
    NoCertificate {
        /// The file.
        path: PathBuf,
    },
    /// A PEM file holds no private key (PKCS#8, PKCS#1 or SEC1), or it does not parse.
    #[error("{path}: no PEM private key found ({reason})")]
    NoPrivateKey {
        /// The file.
        path: PathBuf,
        /// What the PEM reader said.
        reason: String,
    },
    /// rustls refused the certificate and key (unsupported key type, key not matching the
    /// certificate) or the protocol settings.
    #[error("TLS: {0}")]
    Tls(#[from] rustls::Error),
    /// The listener's settings are invalid (an `allow` entry that is not an IP or CIDR).
    #[error(transparent)]
    Config(#[from] crate::config::ConfigError),
    /// A certificate pin is not 64 hexadecimal digits (colons between bytes allowed).
    #[error("certificate pin {0:?} is not a SHA-256 in hex (64 hex digits, colons allowed)")]
    Pin(String),
}
