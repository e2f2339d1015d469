//! Several machines on one TCP listener, chosen by the request path.

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use agentwire_core::{DatagramMachine, Machine};
use tokio::net::{TcpListener, TcpStream, ToSocketAddrs, UdpSocket};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tracing::Instrument;

use crate::driver::Core;
use crate::handle::{handle_pair, Events, Handle, Stopper};
use crate::http::Head;
use crate::per_address::PerAddress;
use crate::server::{accept_loop, deliver, run, upgrade, AcceptShared, PendingCaps};
use crate::stats::{DropReason, TransportCounters, TransportStats};
use crate::stream::{Capped, ServerIo};
use crate::udp::Udp;
use crate::{ConfigError, ListenerConfig, ServerConfig};

/// One machine behind its path.
struct Route {
    path: String,
    shared: Arc<AcceptShared>,
    stopper: Stopper,
}

/// Routes of one listener: a machine per request path. Build it with
/// [`route`](Self::route), then [`bind`](Self::bind) it.
///
/// Each route is a whole driver of its own, exactly as under [`Server`](crate::Server):
/// its own owner task, [`ServerConfig`] (limits, connection caps, per-address cap and
/// refusal, hook, plain-HTTP body, events, wall clock), [`Handle`] and [`Events`]. The
/// listener only accepts sockets, does TLS, reads the request head and picks the route
/// whose path equals the request's path (the query aside): a plain HTTP request gets that
/// route's `426`, an upgrade goes through that route's caps and hook. A path no route
/// serves (or whose route was shut down) gets `404 Not Found` before any upgrade.
///
/// ```no_run
/// # use agentwire_core::Machine;
/// # async fn run<A, B>(a: A, b: B) -> Result<(), Box<dyn std::error::Error>>
/// # where A: Machine + Send + 'static, A::Event: Send + 'static,
/// #       B: Machine + Send + 'static, B::Event: Send + 'static {
/// use agentwire_tokio::{ListenerConfig, Router, ServerConfig};
/// let mut router = Router::new(ListenerConfig::default());
/// let (bus, _bus_events) = router.route("/bus", a, ServerConfig::default())?;
/// let (relay, _relay_events) = router.route("/agent/ws", b, ServerConfig::default())?;
/// let listener = router.bind("127.0.0.1:8080").await?;
/// println!("ws://{}/bus and ws://{}/agent/ws", listener.local_addr(), listener.local_addr());
/// bus.shutdown().await; // /bus now answers 404; /agent/ws serves on
/// listener.shutdown().await; // every remaining peer gets 1001 "going away"
/// # drop(relay);
/// # Ok(())
/// # }
/// ```
pub struct Router {
    config: ListenerConfig,
    routes: Vec<Route>,
}

impl std::fmt::Debug for Router {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Router")
            .field("config", &self.config)
            .field(
                "paths",
                &self.routes.iter().map(|r| &r.path).collect::<Vec<_>>(),
            )
            .finish()
    }
}

impl Router {
    /// No routes yet; the listener will use `config`.
    pub fn new(config: ListenerConfig) -> Self {
        Self {
            config,
            routes: Vec::new(),
        }
    }

    /// Serves `machine` at `path` (e.g. `/agent/ws`) with its own `config`, and starts its
    /// owner task (it sees connections once the router is [bound](Self::bind)). Must be
    /// called inside a tokio runtime. Returns the machine's handle and events.
    ///
    /// The path is matched exactly against the request path without its query. TLS, the
    /// address filter and the pending-handshake caps are the listener's
    /// ([`ListenerConfig`]), so `config` must not set TLS; its address filter and
    /// `max_pending_handshakes*` are not used.
    pub fn route<M>(
        &mut self,
        path: &str,
        machine: M,
        config: ServerConfig,
    ) -> Result<(Handle<M>, Events<M::Event>), ConfigError>
    where
        M: Machine + Send + 'static,
        M::Event: Send + 'static,
    {
        self.add(path, machine, config, None)
    }

    /// As [`route`](Self::route), and the route's owner task also drives `udp`, exactly
    /// as [`Server::bind_with_udp`](crate::Server::bind_with_udp) does (the route's
    /// [`ServerConfig::udp`] limits; [`Handle::udp_stats`] for its counters).
    pub fn route_with_udp<M>(
        &mut self,
        path: &str,
        udp: UdpSocket,
        machine: M,
        config: ServerConfig,
    ) -> Result<(Handle<M>, Events<M::Event>), ConfigError>
    where
        M: DatagramMachine + Send + 'static,
        M::Event: Send + 'static,
    {
        let udp = Udp::new(udp, &config.udp).map_err(ConfigError::Udp)?;
        self.add(path, machine, config, Some(udp))
    }

    /// Checks `path` and `config`, spawns the owner task and records the route.
    fn add<M>(
        &mut self,
        path: &str,
        machine: M,
        config: ServerConfig,
        udp: Option<Udp<M>>,
    ) -> Result<(Handle<M>, Events<M::Event>), ConfigError>
    where
        M: Machine + Send + 'static,
        M::Event: Send + 'static,
    {
        if !path.starts_with('/')
            || path.contains('?')
            || self.routes.iter().any(|r| r.path == path)
        {
            return Err(ConfigError::InvalidRoute(path.to_owned()));
        }
        if config.is_tls() {
            return Err(ConfigError::TlsOnRoute(path.to_owned()));
        }
        tokio::runtime::Handle::try_current().map_err(|_| ConfigError::NoRuntime)?;
        let (events_tx, events_rx) = mpsc::channel(config.event_capacity.max(1));
        let (mut handle, control) = handle_pair();
        if let Some(u) = &udp {
            handle.set_udp(u.counters());
        }
        let (accepted_tx, accepted_rx) = mpsc::channel(64);
        let shared = Arc::new(AcceptShared::new(&config, accepted_tx, handle.counters()));
        let mut core = Core::new(
            machine,
            config.limits,
            events_tx,
            control.stop.clone(),
            config.wall_clock,
            handle.counters(),
        );
        core.protocol = config.protocol;
        tokio::spawn(
            run(core, control, accepted_rx, None, udp)
                .instrument(tracing::info_span!("route", path = %path)),
        );
        self.routes.push(Route {
            path: path.to_owned(),
            shared,
            stopper: handle.stopper(),
        });
        Ok((handle, Events::new(events_rx)))
    }

    /// Binds `addr` and starts accepting for every route. If binding fails, every route's
    /// driver is stopped.
    pub async fn bind(mut self, addr: impl ToSocketAddrs) -> io::Result<Listener> {
        let listener = TcpListener::bind(addr).await?;
        let local_addr = listener.local_addr()?;
        let routes: Arc<[Route]> = std::mem::take(&mut self.routes).into();
        let stats = Arc::new(TransportCounters::default());
        let shared = Arc::new(ListenerShared {
            stats: Arc::clone(&stats),
            tls: self.config.tls.clone().map(tokio_rustls::TlsAcceptor::from),
            handshake_timeout: self.config.handshake_timeout,
            max_header_bytes: self.config.max_header_bytes,
            not_found_body: self.config.not_found_body.clone(),
            routes: Arc::clone(&routes),
        });
        let caps = PendingCaps {
            total: self.config.max_pending_handshakes,
            per_address: self.config.max_pending_handshakes_per_address,
            plain: self.config.tls.is_none(),
        };
        let pending = Arc::new(PerAddress::default());
        let filter = self.config.address_filter.clone();
        let accept_task = tokio::spawn(
            accept_loop(
                listener,
                pending,
                caps,
                filter,
                Arc::clone(&stats),
                move |tcp, addr| routed_handshake(tcp, addr, Arc::clone(&shared)),
            )
            .instrument(tracing::info_span!("listener", addr = %local_addr)),
        );
        Ok(Listener {
            local_addr,
            accept_task,
            routes,
            stats,
        })
    }
}

impl Drop for Router {
    /// Stops the drivers of routes that were never bound.
    fn drop(&mut self) {
        for route in &self.routes {
            route.stopper.request();
        }
    }
}

/// A bound [`Router`]: one TCP listener serving every route's machine by path.
///
/// Dropping it does not stop it: call [`shutdown`](Self::shutdown). Each route stops on
/// its own with its [`Handle::shutdown`]; its path then answers 404.
pub struct Listener {
    local_addr: SocketAddr,
    accept_task: JoinHandle<()>,
    routes: Arc<[Route]>,
    stats: Arc<TransportCounters>,
}

impl std::fmt::Debug for Listener {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Listener")
            .field("local_addr", &self.local_addr)
            .field("paths", &self.paths().collect::<Vec<_>>())
            .finish()
    }
}

impl Listener {
    /// The bound address (with the real port when bound to port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// The routed paths, in the order they were added.
    pub fn paths(&self) -> impl Iterator<Item = &str> {
        self.routes.iter().map(|r| r.path.as_str())
    }

    /// The listener's own transport counters: what happens before a route is chosen
    /// (sockets the address filter or the pending-handshake caps refuse, handshakes that
    /// time out or fail, 404s). Each route's connections, frames, closes and refusals are
    /// in its [`Handle::stats`].
    pub fn stats(&self) -> TransportStats {
        self.stats.snapshot()
    }

    /// Stops accepting (handshakes in progress are dropped), then stops every route's
    /// driver as [`Handle::shutdown`] does (each open connection closed with 1001 "going
    /// away" and reported with `handle_disconnect_with`), and waits until all have stopped.
    pub async fn shutdown(self) {
        self.accept_task.abort();
        for route in self.routes.iter() {
            route.stopper.request();
        }
        for route in self.routes.iter() {
            route.stopper.stopped().await;
        }
    }
}

/// What every handshake task of a listener shares.
struct ListenerShared {
    tls: Option<tokio_rustls::TlsAcceptor>,
    handshake_timeout: Duration,
    max_header_bytes: usize,
    not_found_body: String,
    routes: Arc<[Route]>,
    /// The listener's own counters ([`Listener::stats`]).
    stats: Arc<TransportCounters>,
}

impl ListenerShared {
    /// The live route serving the request whose head is `head`.
    fn route_for(&self, head: &[u8]) -> Option<&Route> {
        let path = crate::http::request_path(head)?;
        self.routes
            .iter()
            .find(|r| r.path == path && !r.shared.accepted.is_closed())
    }
}

/// TLS (if configured), the request head, the route, and the route's upgrade, under the
/// listener's `handshake_timeout`.
async fn routed_handshake(tcp: TcpStream, addr: SocketAddr, shared: Arc<ListenerShared>) {
    if let Err(e) = tcp.set_nodelay(true) {
        tracing::debug!(error = %e, "set_nodelay failed");
    }
    let work = async {
        let io = match &shared.tls {
            Some(acceptor) => ServerIo::Tls(Box::new(acceptor.accept(tcp).await?)),
            None => ServerIo::Plain(tcp),
        };
        let mut capped = Capped::new(io, shared.max_header_bytes);
        let (head, plain) = match crate::http::read_head(&mut capped).await? {
            Head::Upgrade(head) => (head, false),
            Head::Plain(head) => (head, true),
        };
        let Some(route) = shared.route_for(&head) else {
            shared.stats.dropped(DropReason::NotFound);
            tracing::debug!("no route for this path; answered 404");
            crate::http::answer_404(&mut capped, &shared.not_found_body).await?;
            return Ok(None);
        };
        let machine = Arc::clone(&route.shared);
        if plain {
            tracing::debug!(path = %route.path, "plain HTTP request; answered 426");
            crate::http::answer_426(&mut capped, &machine.plain_http_body).await?;
            return Ok(None);
        }
        let upgraded = upgrade(&machine, addr, head, capped).await?;
        Ok::<_, io::Error>(upgraded.map(|u| (machine, u)))
    };
    match tokio::time::timeout(shared.handshake_timeout, work).await {
        Ok(Ok(Some((machine, (ws, outcome))))) => deliver(&machine, ws, outcome).await,
        Ok(Ok(None)) => {}
        Ok(Err(e)) => {
            shared.stats.dropped(DropReason::HandshakeFailed);
            tracing::debug!(error = %e, "handshake failed");
        }
        Err(_) => {
            shared.stats.dropped(DropReason::HandshakeTimeout);
            tracing::debug!("handshake timed out");
        }
    }
}
