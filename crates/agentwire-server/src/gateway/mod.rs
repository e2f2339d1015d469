//! The runtime of `agentwire serve`: every `[[listener]]` bound, each enabled protocol
//! served on its listener at its path, the admin listener beside them, and a graceful stop.
//!
//! [`Gateway::start`] builds one [`Router`] per listener (its TLS and allowlist from
//! [`security::listener_config`](crate::security::listener_config)), mounts each enabled
//! protocol's reference app on its route (`bus::server_app::mount`, ...: the same machine,
//! hook and event handling as the protocol's own server), binds every listener, then starts the
//! admin listener ([`admin::serve`](crate::admin::serve): `/healthz`, `/readyz`,
//! `/metrics`). Each app's events are logged and counted in one [`Metrics`]; each driver's
//! and listener's transport counters are read at every scrape.
//!
//! On a listener, a request for a path no protocol serves gets `404`; a plain HTTP request
//! (no WebSocket upgrade) for a protocol's path gets `426 Upgrade Required` with a line
//! naming the protocol and path.
//!
//! # Stopping
//!
//! [`Gateway::shutdown`] makes `/readyz` answer 503, stops accepting on every listener,
//! closes every connection with 1001 "going away" (each protocol machine sees it as a
//! disconnect: relay sessions end and their study logs are written), waits for the relay's
//! queued `fsync`s, syncs and closes every study log still open, then stops the admin
//! listener. It returns within [`Gateway::shutdown_bound`]: twice the largest
//! `close_timeout_secs` of the enabled protocols (the time a peer has to answer the close,
//! and a close frame to go out) plus [`STUDY_LOG_GRACE`] for the study logs, 15 s with the
//! defaults. Peers that do not answer by then lose their sockets.
//!
//! [`run_until_signal`] serves until SIGINT or SIGTERM, then stops as above; a second
//! signal during the stop exits the process at once with 130 (SIGINT) or 143 (SIGTERM),
//! the shell's codes for a process killed by that signal.

mod error;
mod mount;
mod signals;

use std::net::SocketAddr;
use std::sync::{Arc, Weak};
use std::time::Duration;

use agentwire::tokio::{Listener, Router};

use crate::admin::{AdminServer, Readiness, ReadyFlag};
use crate::config::{Config, Protocol};
use crate::endpoint::{BoundAddr, Mount};
use crate::metrics::Metrics;
use crate::security::keys::{self, KeySource, KeyTargets};
use crate::security::{Listening, Watcher};

pub use self::error::StartError;
pub use self::signals::{run_until_signal, Signal};

use self::mount::{Apps, Context};

/// Time [`Gateway::shutdown`] allows, beyond the peers' close handshakes, for the relay's
/// study logs to be synced and closed.
pub const STUDY_LOG_GRACE: Duration = Duration::from_secs(5);

/// One bound `[[listener]]`.
struct Bound {
    name: String,
    addr: SocketAddr,
    tls: bool,
    /// The only strong reference: the metrics hold a weak one for the listener's counters.
    listener: Arc<Listener>,
    /// Keeps what the listener's security needs alive while it serves.
    _security: Listening,
    ready: ReadyFlag,
}

/// A listener whose routes are being mounted.
struct Pending {
    name: String,
    listen: String,
    router: Router,
    addr: BoundAddr,
    security: Listening,
    tls: bool,
}

/// The running server: every listener bound, every enabled protocol served, the admin
/// listener up. Stop it with [`shutdown`](Self::shutdown) (dropping it leaves everything
/// running until the runtime ends).
pub struct Gateway {
    listeners: Vec<Bound>,
    apps: Apps,
    admin: Option<AdminServer>,
    metrics: Arc<Metrics>,
    shutdown_bound: Duration,
    /// Rotates the MCPW API keys and Chopsticks runner secrets from their key files.
    _keys: Watcher,
}

impl std::fmt::Debug for Gateway {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gateway")
            .field(
                "listeners",
                &self
                    .listeners
                    .iter()
                    .map(|l| (&l.name, l.addr))
                    .collect::<Vec<_>>(),
            )
            .field("admin", &self.admin.as_ref().map(AdminServer::local_addr))
            .finish_non_exhaustive()
    }
}

impl Gateway {
    /// Validates `config`, binds every listener with every enabled protocol on its route,
    /// and starts the admin listener (when `[admin] enabled`). Must be called inside a
    /// tokio runtime. On an error nothing stays bound.
    pub async fn start(config: &Config) -> Result<Self, StartError> {
        config.validate()?;
        let metrics = Arc::new(Metrics::new());
        let readiness = Arc::new(Readiness::new());
        let mut pending = Vec::with_capacity(config.listener.len());
        for l in &config.listener {
            let serves_mcpw = config.mcpw.enabled && config.mcpw.listener == l.name;
            let (listener_config, security) = listening(l, serves_mcpw)?;
            pending.push(Pending {
                name: l.name.clone(),
                listen: l.listen.clone(),
                tls: listener_config.is_tls(),
                router: Router::new(listener_config),
                addr: BoundAddr::new(),
                security,
            });
        }
        let cx = Context {
            config,
            metrics: &metrics,
            readiness: &readiness,
        };
        let mut apps = Apps::default();
        let mounted = mount_all(config, &mut pending, &cx, &mut apps).await;
        let bound = match mounted {
            Ok(()) => bind_all(pending, &readiness, &metrics).await,
            Err(e) => Err(e),
        };
        let listeners = match bound {
            Ok(listeners) => listeners,
            Err(e) => {
                // Unbound routers stop their drivers when dropped (done above); what was
                // mounted ends with them.
                apps.finish().await;
                return Err(e);
            }
        };
        let key_watcher = keys::spawn(&config.keys, key_targets(config, &apps));
        let mut gateway = Self {
            listeners,
            apps,
            admin: None,
            metrics: Arc::clone(&metrics),
            shutdown_bound: shutdown_bound(config),
            _keys: key_watcher,
        };
        if config.admin.enabled {
            match crate::admin::serve(&config.admin.listen, metrics, readiness).await {
                Ok(admin) => {
                    tracing::info!(addr = %admin.local_addr(), "admin listening");
                    gateway.admin = Some(admin);
                }
                Err(source) => {
                    gateway.shutdown().await;
                    return Err(StartError::Admin {
                        addr: config.admin.listen.clone(),
                        source,
                    });
                }
            }
        }
        Ok(gateway)
    }

    /// The bound address of the listener `name` (with the real port when bound to port 0).
    pub fn local_addr(&self, name: &str) -> Option<SocketAddr> {
        self.listeners
            .iter()
            .find(|l| l.name == name)
            .map(|l| l.addr)
    }

    /// Every listener's name and bound address, in the configuration's order.
    pub fn listeners(&self) -> impl Iterator<Item = (&str, SocketAddr)> {
        self.listeners.iter().map(|l| (l.name.as_str(), l.addr))
    }

    /// The URL clients of `protocol` connect to (`ws://ADDR/PATH`, or `wss://` on a TLS
    /// listener), or `None` when it is not enabled.
    pub fn url(&self, protocol: Protocol) -> Option<String> {
        self.apps.url(protocol)
    }

    /// The admin listener's address, when it runs.
    pub fn admin_addr(&self) -> Option<SocketAddr> {
        self.admin.as_ref().map(AdminServer::local_addr)
    }

    /// The server's metrics (what the admin listener's `/metrics` renders).
    pub fn metrics(&self) -> &Arc<Metrics> {
        &self.metrics
    }

    /// How long [`shutdown`](Self::shutdown) may take at most (see the module docs).
    pub fn shutdown_bound(&self) -> Duration {
        self.shutdown_bound
    }

    /// One line per listener, protocol and the admin listener, for the operator and for
    /// scripts: `listening name=NAME addr=IP:PORT tls=BOOL`, `serving protocol=NAME
    /// url=URL`, `admin addr=IP:PORT`, in that order.
    pub fn announcement(&self) -> Vec<String> {
        let mut lines: Vec<String> = self
            .listeners
            .iter()
            .map(|l| format!("listening name={} addr={} tls={}", l.name, l.addr, l.tls))
            .collect();
        for protocol in Protocol::ALL {
            if let Some(url) = self.url(protocol) {
                lines.push(format!("serving protocol={protocol} url={url}"));
            }
        }
        if let Some(addr) = self.admin_addr() {
            lines.push(format!("admin addr={addr}"));
        }
        lines
    }

    /// Stops gracefully within [`shutdown_bound`](Self::shutdown_bound): `/readyz` fails,
    /// every listener stops accepting, every connection is closed with 1001, every study
    /// log is synced and closed, then the admin listener stops.
    pub async fn shutdown(self) {
        for l in &self.listeners {
            l.ready.set(false);
        }
        let bound = self.shutdown_bound;
        let listeners = self.listeners;
        let apps = self.apps;
        let work = async move {
            let stops = listeners.into_iter().map(|l| async move {
                if let Some(listener) = own(l.listener).await {
                    listener.shutdown().await;
                }
            });
            futures_util::future::join_all(stops).await;
            apps.finish().await;
        };
        if tokio::time::timeout(bound, work).await.is_err() {
            tracing::warn!(
                "graceful stop took longer than {}s; stopping the rest at once",
                bound.as_secs()
            );
        }
        if let Some(admin) = self.admin {
            admin.shutdown().await;
        }
    }
}

/// What `agentwire serve` runs once its configuration is resolved: starts a [`Gateway`],
/// prints its [`announcement`](Gateway::announcement) on stdout (flushed: scripts and tests
/// wait for the `serving` lines), serves until SIGINT or SIGTERM and stops gracefully
/// ([`run_until_signal`]; a second signal exits at once with 130 or 143).
pub async fn serve(config: &Config) -> Result<Signal, StartError> {
    let signals = signals::Signals::install().map_err(StartError::Signals)?;
    let gateway = Gateway::start(config).await?;
    {
        use std::io::Write as _;
        let mut out = std::io::stdout().lock();
        for line in gateway.announcement() {
            let _ = writeln!(out, "{line}");
        }
        let _ = out.flush();
    }
    Ok(signals::stop_on_signal(gateway, signals).await)
}

/// Takes the listener back from its `Arc` (the metrics hold only a weak reference; a
/// scrape in progress holds a strong one for a moment).
async fn own(mut listener: Arc<Listener>) -> Option<Listener> {
    for _ in 0..1000 {
        match Arc::try_unwrap(listener) {
            Ok(l) => return Some(l),
            Err(shared) => {
                listener = shared;
                tokio::task::yield_now().await;
            }
        }
    }
    None
}

/// Mounts every enabled protocol on its listener's router.
async fn mount_all(
    config: &Config,
    pending: &mut [Pending],
    cx: &Context<'_>,
    apps: &mut Apps,
) -> Result<(), StartError> {
    for endpoint in config.endpoints() {
        if !endpoint.enabled {
            continue;
        }
        let Some(p) = pending.iter_mut().find(|p| p.name == endpoint.listener) else {
            // validate() guarantees the listener exists.
            continue;
        };
        let at = Mount {
            router: &mut p.router,
            path: endpoint.path,
            listen: &p.listen,
            addr: p.addr.clone(),
            tls: p.tls,
        };
        mount::mount(endpoint.protocol, at, cx, apps).await?;
    }
    Ok(())
}

/// The transport configuration of `listener` (TLS, allowlist, handshake caps), and what
/// must live as long as it serves (certificate reloader, allowlist filter).
fn listening(
    listener: &crate::config::Listener,
    serves_mcpw: bool,
) -> Result<(agentwire::tokio::ListenerConfig, Listening), StartError> {
    let listening = crate::security::listener_config(listener, serves_mcpw).map_err(|source| {
        StartError::Security {
            listener: listener.name.clone(),
            source,
        }
    })?;
    Ok((listening.config.clone(), listening))
}

/// Binds every listener; on an error, the ones already bound are shut down.
async fn bind_all(
    pending: Vec<Pending>,
    readiness: &Readiness,
    metrics: &Metrics,
) -> Result<Vec<Bound>, StartError> {
    let mut bound: Vec<Bound> = Vec::with_capacity(pending.len());
    for p in pending {
        let ready = readiness.flag(&format!("listener {}", p.name));
        let tls = p.tls;
        match p.router.bind(p.listen.as_str()).await {
            Ok(listener) => {
                let addr = listener.local_addr();
                p.addr.set(addr);
                ready.set(true);
                tracing::info!(name = %p.name, %addr, tls, "listening");
                let listener = Arc::new(listener);
                let weak: Weak<Listener> = Arc::downgrade(&listener);
                metrics.register_listener(&p.name, move || {
                    weak.upgrade().map(|l| l.stats()).unwrap_or_default()
                });
                bound.push(Bound {
                    name: p.name,
                    addr,
                    tls,
                    listener,
                    _security: p.security,
                    ready,
                });
            }
            Err(source) => {
                for b in bound {
                    if let Some(l) = own(b.listener).await {
                        l.shutdown().await;
                    }
                }
                return Err(StartError::Bind {
                    listener: p.name,
                    addr: p.listen,
                    source,
                });
            }
        }
    }
    Ok(bound)
}

/// The key sets the key watcher rotates: the MCPW upgrade policy's API keys and the
/// Chopsticks controller's runner secrets, of the apps that run.
fn key_targets(config: &Config, apps: &Apps) -> KeyTargets {
    let mut targets = KeyTargets::new();
    if let Some(mcpw) = &apps.mcpw {
        targets =
            targets.with_api_keys(KeySource::api_keys(&config.mcpw), Arc::clone(&mcpw.policy));
    }
    if let Some(chopsticks) = &apps.chopsticks {
        targets = targets.with_runner_secrets(
            KeySource::runner_secrets(&config.chopsticks),
            chopsticks.handle.clone(),
        );
    }
    targets
}

/// Twice the largest `close_timeout_secs` of the enabled protocols, plus
/// [`STUDY_LOG_GRACE`].
fn shutdown_bound(config: &Config) -> Duration {
    let close = config
        .endpoints()
        .iter()
        .filter(|e| e.enabled)
        .map(|e| e.transport.close_timeout_secs)
        .max()
        .unwrap_or(0);
    Duration::from_secs(close.saturating_mul(2)).saturating_add(STUDY_LOG_GRACE)
}
