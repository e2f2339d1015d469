//! Where a reference server's machine is served: on a listener of its own (`start`, the
//! example commands) or on a route of a shared listener (`mount`, `agentwire serve`).
//!
//! Each app (`bus::server_app`, `relay::server_app`, ...) has one body that builds its
//! machine, transport settings and event task and hands the machine to a [`Place`]; what it
//! gets back, an [`Endpoint`], gives the address, URL and shutdown the same way for both.

use std::io;
use std::net::SocketAddr;
use std::sync::{Arc, OnceLock};

use agentwire::core::{DatagramMachine, Machine};
use agentwire::tokio::{Events, Handle, Router, Server, ServerConfig, UdpStats};
use tokio::net::UdpSocket;

/// The address of a listener that may not be bound yet: routes are added to a
/// [`Router`] before it binds, and learn its address once it has.
#[derive(Debug, Clone, Default)]
pub struct BoundAddr(Arc<OnceLock<SocketAddr>>);

impl BoundAddr {
    /// An address not known yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// An address already known.
    pub fn known(addr: SocketAddr) -> Self {
        let cell = OnceLock::new();
        let _ = cell.set(addr);
        Self(Arc::new(cell))
    }

    /// Records the bound address (the first call wins).
    pub fn set(&self, addr: SocketAddr) {
        let _ = self.0.set(addr);
    }

    /// The bound address, once the listener is bound.
    pub fn get(&self) -> Option<SocketAddr> {
        self.0.get().copied()
    }
}

/// A route on a shared listener: the router, the path, and what the endpoint needs to
/// know about the listener (its configured address, its bound address once bound, TLS).
#[derive(Debug)]
pub struct Mount<'a> {
    /// The listener's router; the machine is added to it.
    pub router: &'a mut Router,
    /// The exact request path (e.g. `/bus`).
    pub path: &'a str,
    /// The listener's configured address (`127.0.0.1:8080`): a machine that needs a UDP
    /// socket beside it (llmrtc with WebRTC) binds it on this IP.
    pub listen: &'a str,
    /// Filled in once the router is bound.
    pub addr: BoundAddr,
    /// Whether the listener serves `wss://`.
    pub tls: bool,
}

/// Where an app's machine goes: a listener of its own at an address, or a route.
#[derive(Debug)]
pub enum Place<'a> {
    /// Bind a [`Server`] of its own at this address, serving every path.
    Bind(&'a str),
    /// A route of a shared listener.
    Route(Mount<'a>),
}

impl Place<'_> {
    /// The address (as configured) the machine will be reached on: a UDP socket that
    /// serves beside the WebSocket binds on its IP.
    pub fn listen(&self) -> &str {
        match self {
            Self::Bind(addr) => addr,
            Self::Route(m) => m.listen,
        }
    }

    /// The path the machine is served at, or `None` for a listener of its own (any path
    /// reaches it).
    pub fn path(&self) -> Option<&str> {
        match self {
            Self::Bind(_) => None,
            Self::Route(m) => Some(m.path),
        }
    }

    /// Starts driving `machine` with `config` here and returns its endpoint and events.
    ///
    /// A route's `config` must not carry TLS (the listener does it); a bad path or a TLS
    /// route is an [`io::ErrorKind::InvalidInput`] error.
    pub async fn serve<M>(
        self,
        machine: M,
        config: ServerConfig,
    ) -> io::Result<(Endpoint<M>, Events<M::Event>)>
    where
        M: Machine + Send + 'static,
        M::Event: Send + 'static,
    {
        match self {
            Self::Bind(addr) => {
                let tls = config.is_tls();
                let (server, events) = Server::bind(addr, machine, config).await?;
                Ok((Endpoint::of_server(&server, tls), events))
            }
            Self::Route(m) => {
                let (handle, events) = m
                    .router
                    .route(m.path, machine, config)
                    .map_err(invalid_input)?;
                Ok((
                    Endpoint::routed(handle, m.addr, m.path, m.tls, None),
                    events,
                ))
            }
        }
    }

    /// As [`serve`](Self::serve), and the owner task also drives `udp`
    /// ([`Server::bind_with_udp`] or [`Router::route_with_udp`]).
    pub async fn serve_with_udp<M>(
        self,
        udp: UdpSocket,
        machine: M,
        config: ServerConfig,
    ) -> io::Result<(Endpoint<M>, Events<M::Event>)>
    where
        M: DatagramMachine + Send + 'static,
        M::Event: Send + 'static,
    {
        match self {
            Self::Bind(addr) => {
                let tls = config.is_tls();
                let (server, events) = Server::bind_with_udp(addr, udp, machine, config).await?;
                Ok((Endpoint::of_server(&server, tls), events))
            }
            Self::Route(m) => {
                let udp_addr = udp.local_addr()?;
                let (handle, events) = m
                    .router
                    .route_with_udp(m.path, udp, machine, config)
                    .map_err(invalid_input)?;
                let endpoint = Endpoint::routed(handle, m.addr, m.path, m.tls, Some(udp_addr));
                Ok((endpoint, events))
            }
        }
    }
}

fn invalid_input(e: impl std::error::Error + Send + Sync + 'static) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, e)
}

/// A served machine: its address and URL, its handle, and its shutdown, the same whether
/// it has a listener of its own or a route of a shared one.
pub struct Endpoint<M> {
    handle: Handle<M>,
    addr: BoundAddr,
    udp_addr: Option<SocketAddr>,
    /// The route's path; `None` on a listener of its own.
    path: Option<String>,
    tls: bool,
}

impl<M> std::fmt::Debug for Endpoint<M> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Endpoint")
            .field("addr", &self.addr.get())
            .field("udp_addr", &self.udp_addr)
            .field("path", &self.path)
            .field("tls", &self.tls)
            .finish()
    }
}

impl<M> Endpoint<M>
where
    M: Machine + Send + 'static,
    M::Event: Send + 'static,
{
    /// The endpoint of a bound server.
    fn of_server(server: &Server<M>, tls: bool) -> Self {
        Self {
            handle: server.handle(),
            addr: BoundAddr::known(server.local_addr()),
            udp_addr: server.udp_local_addr(),
            path: None,
            tls,
        }
    }
}

impl<M> Endpoint<M> {
    /// The endpoint of a route at `path`.
    fn routed(
        handle: Handle<M>,
        addr: BoundAddr,
        path: &str,
        tls: bool,
        udp_addr: Option<SocketAddr>,
    ) -> Self {
        Self {
            handle,
            addr,
            udp_addr,
            path: Some(path.to_owned()),
            tls,
        }
    }

    /// The listener's bound address (with the real port when bound to port 0); the
    /// unspecified address `0.0.0.0:0` for a route whose listener is not bound yet.
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
            .get()
            .unwrap_or_else(|| SocketAddr::from(([0, 0, 0, 0], 0)))
    }

    /// The local address of the UDP socket, for a machine that has one.
    pub fn udp_local_addr(&self) -> Option<SocketAddr> {
        self.udp_addr
    }

    /// The counters of the UDP socket (see [`Handle::udp_stats`]).
    pub fn udp_stats(&self) -> Option<UdpStats> {
        self.handle.udp_stats()
    }

    /// The route's path, or `None` on a listener of its own.
    pub fn path(&self) -> Option<&str> {
        self.path.as_deref()
    }

    /// `ws://ADDR` + the route's path (or `default_path` on a listener of its own);
    /// `wss://` when the listener serves TLS.
    pub fn url(&self, default_path: &str) -> String {
        let scheme = if self.tls { "wss" } else { "ws" };
        let path = self.path.as_deref().unwrap_or(default_path);
        format!("{scheme}://{}{path}", self.local_addr())
    }

    /// A handle to run commands on the machine.
    pub fn handle(&self) -> Handle<M> {
        self.handle.clone()
    }

    /// Stops the machine's driver: every open connection is closed with 1001 "going away"
    /// and reported with `handle_disconnect`; waits until it has stopped. On a listener of
    /// its own, accepting stops too; on a route, its path answers 404 from then on.
    pub async fn shutdown(self) {
        self.handle.shutdown().await;
    }
}
