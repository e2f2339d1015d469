//! The `wss://` flags every client command takes: a CA to trust besides the Mozilla roots,
//! and (the MCPW agent) the server certificate's pin.

use std::path::PathBuf;

use crate::security::{self, SecurityError};

/// `--ca FILE`: TLS for `wss://` URLs.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct TlsFlags {
    /// A PEM file of certificates to trust for `wss://` besides the Mozilla roots (a private
    /// CA, or a self-signed server certificate).
    #[arg(long, value_name = "FILE")]
    pub ca: Option<PathBuf>,
}

impl TlsFlags {
    /// Installs the client TLS settings these flags and `pin_sha256` (a hex SHA-256 of the
    /// server's leaf certificate, checked on top of the normal verification) describe, for
    /// every client the command starts; nothing to install without either.
    pub fn install(&self, pin_sha256: Option<&str>) -> Result<(), SecurityError> {
        let pin = pin_sha256.map(security::parse_pin_sha256).transpose()?;
        if self.ca.is_some() || pin.is_some() {
            let tls = security::client_tls(self.ca.as_deref(), pin)?;
            crate::common::install_client_tls(tls);
        }
        Ok(())
    }
}
