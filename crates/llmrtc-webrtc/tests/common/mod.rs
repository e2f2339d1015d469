//! An in-memory network for the WebRTC machines: one [`WebrtcServer`], some
//! [`WebrtcClient`]s, their WebSocket frames and UDP datagrams carried at once, simulated
//! time jumping from deadline to deadline.
#![allow(dead_code, unreachable_pub)]

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use agentwire_core::{
    ConnId, DatagramMachine, Dial, Dialer, FrameBuf, Machine, Output, PeerInfo, SequentialIds,
};
use llmrtc_proto::{
    ClientConfig, ClientEvent, FixedJitter, RequestId, ServerConfig, ServerEvent, ServerMessage,
};
use llmrtc_webrtc::{
    WebrtcClient, WebrtcClientEvent, WebrtcConfig, WebrtcServer, WebrtcServerEvent,
};

/// The server's UDP address.
pub const SERVER_UDP: SocketAddr = SocketAddr::new(
    std::net::IpAddr::V4(std::net::Ipv4Addr::new(127, 0, 0, 1)),
    40000,
);

/// The client side's conn id (each client has its own driver).
pub const CLIENT_CONN: ConnId = ConnId::new(1);

/// One client and what it saw.
pub struct Client {
    pub m: WebrtcClient,
    pub addr: SocketAddr,
    /// The server's conn id of its current WebSocket.
    pub server_conn: Option<ConnId>,
    pub events: Vec<WebrtcClientEvent>,
    /// Drop every datagram to and from this client.
    pub udp_blocked: bool,
}

/// The network.
pub struct Net {
    pub now: Instant,
    pub server: WebrtcServer,
    pub server_events: Vec<WebrtcServerEvent>,
    pub clients: Vec<Client>,
    next_conn: u64,
    /// Every datagram the server sent, in order (for replays).
    pub server_sent: Vec<(SocketAddr, Vec<u8>)>,
    /// Every datagram clients sent to the server, in order (for replays).
    pub client_sent: Vec<(SocketAddr, Vec<u8>)>,
    /// Every frame the server sent, with its connection, in order.
    pub server_frames: Vec<(ConnId, FrameBuf)>,
}

impl Net {
    /// A server with default settings.
    pub fn new() -> Self {
        Self::with(ServerConfig::default(), WebrtcConfig::new(SERVER_UDP))
    }

    /// A server with these settings.
    pub fn with(llmrtc: ServerConfig, webrtc: WebrtcConfig) -> Self {
        #[allow(clippy::disallowed_methods)]
        let now = Instant::now();
        Self {
            now,
            server: WebrtcServer::new(llmrtc, webrtc, SequentialIds::new(7)).unwrap(),
            server_events: Vec::new(),
            clients: Vec::new(),
            next_conn: 100,
            server_sent: Vec::new(),
            client_sent: Vec::new(),
            server_frames: Vec::new(),
        }
    }

    /// Adds a client at UDP port `port` and starts it.
    pub fn add_client(&mut self, port: u16) -> usize {
        let addr = SocketAddr::from(([127, 0, 0, 1], port));
        let mut m = WebrtcClient::new(
            ClientConfig::default(),
            FixedJitter(0),
            WebrtcConfig::new(addr),
        )
        .unwrap();
        m.llmrtc().start(self.now).unwrap();
        self.clients.push(Client {
            m,
            addr,
            server_conn: None,
            events: Vec::new(),
            udp_blocked: false,
        });
        self.clients.len() - 1
    }

    fn client_of(&self, conn: ConnId) -> Option<usize> {
        self.clients
            .iter()
            .position(|c| c.server_conn == Some(conn))
    }

    fn client_at(&self, addr: SocketAddr) -> Option<usize> {
        self.clients.iter().position(|c| c.addr == addr)
    }

    /// Carries everything until nothing moves.
    pub fn settle(&mut self) {
        for _ in 0..100_000 {
            if !self.step() {
                return;
            }
        }
        panic!("livelock");
    }

    fn step(&mut self) -> bool {
        let now = self.now;
        let mut moved = false;
        for i in 0..self.clients.len() {
            if self.clients[i].server_conn.is_none() && self.clients[i].m.poll_dial() == Dial::Now {
                let conn = ConnId::new(self.next_conn);
                self.next_conn += 1;
                self.clients[i].server_conn = Some(conn);
                self.server
                    .handle_connect(conn, &PeerInfo::new(Some(self.clients[i].addr)), now);
                self.clients[i]
                    .m
                    .handle_connect(CLIENT_CONN, &PeerInfo::new(None), now);
                moved = true;
            }
        }
        while let Some(o) = self.server.poll_output() {
            moved = true;
            match o {
                Output::Send { conn, frame } => {
                    self.server_frames.push((conn, frame.clone()));
                    if let Some(i) = self.client_of(conn) {
                        self.clients[i]
                            .m
                            .handle_frame(CLIENT_CONN, frame.as_frame(), now);
                    }
                }
                Output::Close { conn, .. } => {
                    self.server.handle_disconnect(conn, now);
                    if let Some(i) = self.client_of(conn) {
                        self.clients[i].server_conn = None;
                        self.clients[i].m.handle_disconnect(CLIENT_CONN, now);
                    }
                }
                Output::Event(e) => self.server_events.push(e),
            }
        }
        while let Some(t) = self.server.poll_transmit() {
            moved = true;
            self.server_sent.push((t.remote, t.contents.clone()));
            if let Some(i) = self.client_at(t.remote) {
                if !self.clients[i].udp_blocked {
                    self.clients[i]
                        .m
                        .handle_datagram(t.local, t.remote, &t.contents, now);
                }
            }
        }
        for i in 0..self.clients.len() {
            while let Some(o) = self.clients[i].m.poll_output() {
                moved = true;
                match o {
                    Output::Send { frame, .. } => {
                        if let Some(conn) = self.clients[i].server_conn {
                            self.server.handle_frame(conn, frame.as_frame(), now);
                        }
                    }
                    Output::Close { .. } => {
                        if let Some(conn) = self.clients[i].server_conn.take() {
                            self.server.handle_disconnect(conn, now);
                        }
                        self.clients[i].m.handle_disconnect(CLIENT_CONN, now);
                    }
                    Output::Event(e) => self.clients[i].events.push(e),
                }
            }
            while let Some(t) = self.clients[i].m.poll_transmit() {
                moved = true;
                self.client_sent
                    .push((self.clients[i].addr, t.contents.clone()));
                if !self.clients[i].udp_blocked && t.remote == SERVER_UDP {
                    self.server
                        .handle_datagram(self.clients[i].addr, SERVER_UDP, &t.contents, now);
                }
            }
        }
        moved
    }

    /// Runs for `d` of simulated time.
    pub fn run_for(&mut self, d: Duration) {
        let end = self.now + d;
        for _ in 0..1_000_000 {
            self.settle();
            let mut next = self.server.poll_timeout();
            for c in &self.clients {
                next = match (next, c.m.poll_timeout()) {
                    (Some(a), Some(b)) => Some(a.min(b)),
                    (a, b) => a.or(b),
                };
            }
            let Some(next) = next.filter(|t| *t <= end) else {
                self.now = end;
                self.settle();
                return;
            };
            self.now = self.now.max(next);
            let now = self.now;
            if self.server.poll_timeout().is_some_and(|t| t <= now) {
                self.server.handle_timeout(now);
            }
            for c in &mut self.clients {
                if c.m.poll_timeout().is_some_and(|t| t <= now) {
                    c.m.handle_timeout(now);
                }
            }
        }
        panic!("livelock in run_for");
    }

    /// Runs until `done` holds, at most `d` of simulated time (step by 10 ms).
    pub fn run_until(&mut self, d: Duration, mut done: impl FnMut(&Self) -> bool) -> bool {
        let end = self.now + d;
        while self.now < end {
            if done(self) {
                return true;
            }
            self.run_for(Duration::from_millis(10));
        }
        done(self)
    }

    /// Takes the server's events.
    pub fn take_server_events(&mut self) -> Vec<WebrtcServerEvent> {
        std::mem::take(&mut self.server_events)
    }

    /// Takes client `i`'s events.
    pub fn take_client_events(&mut self, i: usize) -> Vec<WebrtcClientEvent> {
        std::mem::take(&mut self.clients[i].events)
    }

    /// Client `i`'s llmrtc events.
    pub fn client_messages(&self, i: usize) -> Vec<&ClientEvent> {
        self.clients[i]
            .events
            .iter()
            .filter_map(|e| match e {
                WebrtcClientEvent::Llmrtc(e) => Some(e),
                _ => None,
            })
            .collect()
    }

    /// The llmrtc events the server passed to the application.
    pub fn server_llmrtc_events(&self) -> Vec<&ServerEvent> {
        self.server_events
            .iter()
            .filter_map(|e| match e {
                WebrtcServerEvent::Llmrtc(e) => Some(e),
                _ => None,
            })
            .collect()
    }

    /// Sends `frame` from client `i` on its WebSocket, as a raw frame.
    pub fn client_ws_send(&mut self, i: usize, frame: FrameBuf) {
        let conn = self.clients[i].server_conn.expect("connected");
        let now = self.now;
        self.server.handle_frame(conn, frame.as_frame(), now);
    }

    /// The codes of the `error`s client `i` got, in order.
    pub fn errors_seen(&self, i: usize) -> Vec<String> {
        self.client_messages(i)
            .into_iter()
            .filter_map(|e| match e {
                ClientEvent::Message(ServerMessage::Error(err)) => {
                    Some(err.code.as_str().to_owned())
                }
                _ => None,
            })
            .collect()
    }

    /// The latest provider request of `kind` (`"stt"`, `"llm"` or `"tts"`) the server made.
    pub fn latest_request(&self, kind: &str) -> RequestId {
        self.server_llmrtc_events()
            .into_iter()
            .filter_map(|e| match (kind, e) {
                ("stt", ServerEvent::Stt(r)) => Some(r.request),
                ("llm", ServerEvent::Llm(r)) => Some(r.request),
                ("tts", ServerEvent::Tts(r)) => Some(r.request),
                _ => None,
            })
            .last()
            .unwrap_or_else(|| panic!("no {kind} request"))
    }

    /// Answers the latest STT request with `heard` and the LLM with `reply`; returns the
    /// TTS request that follows.
    pub fn answer_up_to_tts(&mut self, heard: &str, reply: &str) -> RequestId {
        let now = self.now;
        let stt = self.latest_request("stt");
        self.server
            .llmrtc()
            .stt_result(stt, Ok(heard.into()), now)
            .unwrap();
        self.settle();
        let llm = self.latest_request("llm");
        self.server.llmrtc().llm_chunk(llm, reply, now).unwrap();
        self.server.llmrtc().llm_done(llm, now).unwrap();
        self.settle();
        self.latest_request("tts")
    }
}
