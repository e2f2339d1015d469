//! What keeps the server's listeners and clients safe: `wss://` with certificates reloaded
//! without a restart, per-listener IP allowlists, API keys and runner secrets that rotate
//! with an overlap, and client TLS with certificate pinning.
//!
//! - [`listener_config`] turns a `[[listener]]` into the transport's
//!   [`ListenerConfig`]: TLS (when `[listener.tls]` is
//!   set) whose certificate is reloaded every `reload_secs` and on SIGHUP, and the
//!   allowlist as the accept filter.
//! - [`keys`] watches the API-key and runner-secret files and feeds every change to the
//!   MCPW upgrade policy and the Chopsticks controller, which keep a removed key valid for
//!   `[keys] overlap_secs`.
//! - [`client_tls`] builds the clients' rustls configuration (`--ca`, `--pin-sha256`).
//!
//! # Decisions
//!
//! - **MCPW's TLS.** A listener that serves MCPW speaks TLS 1.3 only, with the spec's two
//!   cipher suites, `TLS13_AES_256_GCM_SHA384` then `TLS13_CHACHA20_POLY1305_SHA256`, the
//!   server's order winning (the spec's `PreferServerCipherSuites`). rustls also offers
//!   `TLS13_AES_128_GCM_SHA256`, left out because the spec lists two suites. A TLS 1.2
//!   client fails the handshake. Listeners without MCPW keep rustls' defaults (TLS 1.2 and
//!   1.3). (`tests/tls.rs`: `tls_1_2_is_refused_on_the_mcpw_listener_and_accepted_on_another`)
//! - **Certificate reload.** Both PEM files are read every `reload_secs` and on SIGHUP; when
//!   either changed, the pair is parsed and checked (the key must be the certificate's),
//!   and new handshakes get it while open connections keep theirs. A bad pair is logged
//!   once and the current certificate stays. A client that resumes a TLS session it made
//!   before the reload is not shown a certificate again (TLS 1.3 resumption), so it keeps
//!   connecting; new sessions see the new one.
//!   (`a_reloaded_certificate_serves_new_connections_while_old_ones_stay_up`,
//!   `a_bad_pair_is_refused_and_the_current_certificate_stays`)
//! - **Key rotation.** API keys and runner secrets are the configuration's keys plus the
//!   key file's; the files are read every `[keys] reload_secs` and on SIGHUP, and a key
//!   that leaves the file stays valid for `[keys] overlap_secs`, then is refused (MCPW at
//!   the upgrade, Chopsticks at the agent's next `hello`). Keys written in the
//!   configuration file are fixed for the life of the process. An emptied file never turns
//!   authentication off. SIGHUP never ends the server, even with nothing to reload.
//!   (`a_rotated_key_is_accepted_and_the_retired_one_stays_valid_during_the_overlap`,
//!   `a_rotated_key_is_accepted_and_the_retired_one_refused_after_the_overlap`,
//!   `sighup_reloads_the_certificate_and_the_key_files_and_the_server_serves_on`)
//! - **Allowlists** are checked at accept, before TLS and before any HTTP: a refused
//!   address gets its TCP connection closed, is counted, and is logged at most once a
//!   minute. An empty list serves everyone. (`an_address_outside_the_allowlist_is_refused`)
//! - **Pins** are the SHA-256 of the server's leaf certificate (openssl's `-fingerprint
//!   -sha256`), checked on top of the normal chain and name verification;
//!   [`client_tls_pin_only`] trusts a pinned certificate alone (self-signed servers).
//!   (`a_pinned_client_refuses_a_server_whose_certificate_does_not_match`)

mod allow;
mod client;
mod error;
pub mod keys;
mod pin;
mod tls;
mod watch;

use std::sync::Arc;
use std::time::Duration;

use agentwire::tokio::ListenerConfig;

pub use allow::{AllowFilter, Allowlist};
pub use client::{client_tls, client_tls_pin_only};
pub use error::SecurityError;
pub use pin::{hex, parse_pin_sha256, sha256};
pub use tls::{
    certified_key, server_config, CertFiles, CertReloader, CertStore, TlsProfile, MAX_FILE_BYTES,
};
pub use watch::Watcher;

use crate::config::Listener;

/// A listener's transport configuration, and what must stay alive while it serves.
#[derive(Debug)]
#[non_exhaustive]
pub struct Listening {
    /// What to bind the listener's [`Router`](agentwire::tokio::Router) with.
    pub config: ListenerConfig,
    /// The certificate reloader, when the listener serves `wss://`.
    pub tls: Option<Arc<CertReloader>>,
    /// The allowlist filter (its refusal count), when the listener has an allowlist.
    pub allow: Option<Arc<AllowFilter>>,
    /// The reload task of the certificate; dropping it stops the reloads.
    pub watcher: Option<Watcher>,
}

/// The transport configuration of `listener`: its handshake settings, TLS under the MCPW
/// profile when `serves_mcpw` (else rustls' defaults) with the certificate reloaded every
/// `reload_secs` and on SIGHUP, and its allowlist as the accept filter. Must be called
/// inside a tokio runtime when the listener has TLS (the reload task is spawned).
pub fn listener_config(listener: &Listener, serves_mcpw: bool) -> Result<Listening, SecurityError> {
    let mut config = listener.listener_config();
    let nets = listener.allowlist()?;
    let allow = (!nets.is_empty()).then(|| {
        Arc::new(AllowFilter::new(
            listener.name.clone(),
            Allowlist::new(nets),
        ))
    });
    if let Some(filter) = &allow {
        let filter = Arc::clone(filter);
        config = config.with_address_filter(move |peer| filter.check(peer));
    }
    let (tls, watcher) = match &listener.tls {
        Some(t) => {
            let profile = if serves_mcpw {
                TlsProfile::Mcpw
            } else {
                TlsProfile::Default
            };
            let files = CertFiles {
                cert: t.cert.clone(),
                key: t.key.clone(),
            };
            let reloader = Arc::new(CertReloader::load(files, profile)?);
            config = config.with_tls(server_config(reloader.store(), profile)?);
            let every = (t.reload_secs > 0).then(|| Duration::from_secs(t.reload_secs));
            let watcher = reloader.watch(every);
            (Some(reloader), Some(watcher))
        }
        None => (None, None),
    };
    Ok(Listening {
        config,
        tls,
        allow,
        watcher,
    })
}
