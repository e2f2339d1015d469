//! Errors of the transport's setup functions.

/// A [`Client`](crate::Client) or a [`Router`](crate::Router)'s route could not be
/// configured.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// The URL does not parse, or has no host.
    #[error("invalid url {url:?}: {reason}")]
    InvalidUrl {
        /// The URL given.
        url: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The URL's scheme is neither `ws` nor `wss`.
    #[error("unsupported url scheme {0:?} (expected ws or wss)")]
    UnsupportedScheme(String),
    /// A configured header name or value, or a subprotocol, is not valid in HTTP.
    #[error("invalid header {0:?}")]
    InvalidHeader(String),
    /// The default TLS configuration could not be built.
    #[error("tls: {0}")]
    Tls(#[from] TlsError),
    /// Called outside a tokio runtime.
    #[error("no tokio runtime")]
    NoRuntime,
    /// The UDP socket given to the client could not be used (its descriptor could not be
    /// duplicated for sending, or its local address read).
    #[error("udp socket: {0}")]
    Udp(#[source] std::io::Error),
    /// A route's path does not start with `/`, or another route already has it.
    #[error("route path {0:?} is not a path, or already routed")]
    InvalidRoute(String),
    /// A route's [`ServerConfig`](crate::ServerConfig) sets TLS: on a shared listener TLS
    /// is the listener's ([`ListenerConfig::with_tls`](crate::ListenerConfig::with_tls)).
    #[error("route {0:?} sets TLS; set it on the listener")]
    TlsOnRoute(String),
}

/// A TLS configuration could not be built from the given PEM.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TlsError {
    /// The PEM did not parse, or holds no private key.
    #[error("pem: {0}")]
    Pem(#[from] rustls_pki_types::pem::Error),
    /// The PEM holds no certificate.
    #[error("no certificate in pem")]
    NoCertificate,
    /// rustls refused the certificates or key.
    #[error("rustls: {0}")]
    Rustls(#[from] rustls::Error),
}
