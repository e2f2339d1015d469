//! Entry points of the cargo-fuzz targets in `fuzz/` (feature `fuzzing`).
//!
//! `fuzz/fuzz_targets/llmrtc_webrtc_*.rs` only call these functions, so the bodies build and
//! run on stable Rust too: `tests/fuzz_seeds.rs` replays every committed seed through them.
//! Each panics on a broken invariant. The driver clock is
//! [`agentwire_core::fuzzing::FuzzClock`]. (str0m draws ICE credentials and DTLS keys from
//! the operating system, so a run's datagrams differ between runs; the steps the input
//! chooses do not.)

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::time::Duration;

use agentwire_core::fuzzing::FuzzClock;
use agentwire_core::json::RawJson;
use agentwire_core::{
    ConnId, DatagramMachine, Frame, FrameBuf, Machine, Output, PeerInfo, Rate, SequentialIds,
};
use arbitrary::Unstructured;
use llmrtc_proto::{ClientConfig, FixedJitter, ServerConfig};

use crate::client::{AudioOffer, WebrtcClient};
use crate::config::{Limits, WebrtcConfig};
use crate::server::WebrtcServer;

const SERVER_UDP: ([u8; 4], u16) = ([127, 0, 0, 1], 40000);
const CLIENT_UDP: ([u8; 4], u16) = ([127, 0, 0, 1], 50000);
const STRANGER_UDP: ([u8; 4], u16) = ([127, 0, 0, 1], 6666);
/// The server's connection of the real client.
const CLIENT_CONN: ConnId = ConnId::new(1);

/// The `llmrtc_webrtc_offer` target: the input as an offer's `signal` (JSON if it parses,
/// else the `sdp` of `{type: "offer"}`), answered by a fresh server. Checks: no panic; an
/// offer is answered with `signal` or refused with one `error`; the session stays usable
/// (a `ping` still gets its `pong`).
pub fn offer(data: &[u8]) {
    let mut clock = FuzzClock::new();
    let mut s = new_server(Limits::default());
    let conn = ConnId::new(7);
    s.handle_connect(conn, &PeerInfo::new(None), clock.t());
    drain_server(&mut s);
    let text = String::from_utf8_lossy(data);
    let signal = RawJson::from_text(&text).unwrap_or_else(|_| {
        RawJson::from_serialize(&serde_json::json!({"type": "offer", "sdp": text}))
            .expect("a JSON string")
    });
    let msg = format!(r#"{{"type":"offer","signal":{}}}"#, signal.get());
    s.handle_frame(conn, Frame::Text(&msg), clock.t());
    let types = drain_server(&mut s);
    let replies = types
        .iter()
        .filter(|t| *t == "signal" || *t == "error")
        .count();
    assert_eq!(replies, 1, "one signal or error for an offer: {types:?}");
    s.handle_frame(
        conn,
        Frame::Text(r#"{"type":"ping","timestamp":1}"#),
        clock.t(),
    );
    assert_eq!(drain_server(&mut s), vec!["pong".to_owned()]);
    s.handle_disconnect(conn, clock.t());
    drain_server(&mut s);
    assert_eq!(s.peers(), 0);
}

/// The `llmrtc_webrtc_server` target: a [`WebrtcServer`] with one real [`WebrtcClient`]
/// connected over an in-memory network, and input-chosen steps around it: raw WebSocket
/// connections and their disconnects, offers with fuzzer `signal`s and with a real offer's
/// SDP mutated line by line, datagrams of fuzzer bytes from the client's address and a
/// stranger's, replays (with a flipped bit) of the client's real datagrams, data-channel
/// messages from the client, and time.
///
/// Steps are read as `u8` op codes; new steps are only ever appended, so committed seeds
/// keep their meaning.
///
/// Checks: no panic; at most `max_peers` peers; every frame the server sends is a JSON
/// object with a string `type`; after every connection ends, no peer is left.
pub fn server(data: &[u8]) {
    let mut u = Unstructured::new(data);
    let mut clock = FuzzClock::new();
    let limits = Limits {
        max_peers: 3,
        offer_rate: Rate::per_second(4, 4),
        ..Limits::default()
    };
    let max_peers = limits.max_peers;
    let mut s = new_server(limits);
    let mut c = WebrtcClient::new(
        ClientConfig::default(),
        FixedJitter(0),
        WebrtcConfig::new(SocketAddr::from(CLIENT_UDP)),
    )
    .expect("client config");
    let mut net = Net::default();
    c.llmrtc().start(clock.t()).expect("start");
    net.client_up = true;
    s.handle_connect(CLIENT_CONN, &PeerInfo::new(None), clock.t());
    c.handle_connect(ConnId::new(1), &PeerInfo::new(None), clock.t());
    net.shuttle(&mut s, &mut c, &mut clock);
    let _ = c.offer(AudioOffer::SendRecv, clock.t());
    net.shuttle(&mut s, &mut c, &mut clock);
    assert!(
        c.is_channel_open(),
        "the real client connects before the steps"
    );
    let mut raw: BTreeSet<ConnId> = BTreeSet::new();
    let mut next = 100;
    for _ in 0..64 {
        let Ok(op) = u.int_in_range(0u8..=9) else {
            break;
        };
        let now = clock.t();
        match op {
            0 => {
                next += 1;
                let conn = ConnId::new(next);
                s.handle_connect(conn, &PeerInfo::new(None), now);
                raw.insert(conn);
            }
            1 => {
                if let Some(conn) = pick(&mut u, &raw) {
                    s.handle_disconnect(conn, now);
                    raw.remove(&conn);
                }
            }
            2 => {
                if let Some(conn) = pick(&mut u, &raw) {
                    let len = u.int_in_range(0usize..=512).unwrap_or(0);
                    let bytes = u.bytes(len).unwrap_or(&[]);
                    let text = String::from_utf8_lossy(bytes);
                    let msg = format!(r#"{{"type":"offer","signal":{text}}}"#);
                    s.handle_frame(conn, Frame::Text(&msg), now);
                }
            }
            3 => {
                if let (Some(conn), Some(sdp)) = (pick(&mut u, &raw), net.offer_sdp.clone()) {
                    let sdp = mutate_lines(&mut u, &sdp);
                    let msg = serde_json::json!({"type": "offer", "signal": {"type": "offer", "sdp": sdp}});
                    s.handle_frame(conn, Frame::Text(&msg.to_string()), now);
                }
            }
            4 => {
                let from = if u.arbitrary().unwrap_or(false) {
                    CLIENT_UDP
                } else {
                    STRANGER_UDP
                };
                let len = u.int_in_range(0usize..=3000).unwrap_or(0);
                let bytes = u.bytes(len).unwrap_or(&[]);
                s.handle_datagram(
                    SocketAddr::from(from),
                    SocketAddr::from(SERVER_UDP),
                    bytes,
                    now,
                );
            }
            5 => {
                if !net.client_sent.is_empty() {
                    let i = u.choose_index(net.client_sent.len()).unwrap_or(0);
                    let mut d = net.client_sent[i].clone();
                    if let (Ok(at), Ok(bit)) =
                        (u.choose_index(d.len().max(1)), u.int_in_range(0u8..=8))
                    {
                        if bit < 8 && at < d.len() {
                            d[at] ^= 1 << bit;
                        }
                    }
                    let from = if u.arbitrary().unwrap_or(true) {
                        CLIENT_UDP
                    } else {
                        STRANGER_UDP
                    };
                    s.handle_datagram(
                        SocketAddr::from(from),
                        SocketAddr::from(SERVER_UDP),
                        &d,
                        now,
                    );
                }
            }
            6 => {
                let ms = u.int_in_range(0u64..=15_000).unwrap_or(0);
                clock.advance(Duration::from_millis(ms));
                let now = clock.t();
                s.handle_timeout(now);
                c.handle_timeout(now);
            }
            7 => {
                if let Some(t) = s.poll_timeout() {
                    clock.jump_to(t);
                    s.handle_timeout(clock.t());
                }
            }
            8 => net.shuttle(&mut s, &mut c, &mut clock),
            _ => {
                let len = u.int_in_range(0usize..=256).unwrap_or(0);
                let bytes = u.bytes(len).unwrap_or(&[]);
                let text = String::from_utf8_lossy(bytes).into_owned();
                let _ = c.send_channel(FrameBuf::text(text), now);
                net.shuttle(&mut s, &mut c, &mut clock);
            }
        }
        drain_server_outputs(&mut s, &mut net.to_client);
        assert!(
            s.peers() <= max_peers,
            "peers {} over {max_peers}",
            s.peers()
        );
    }
    // Everything ends.
    let now = clock.t();
    for conn in raw {
        s.handle_disconnect(conn, now);
    }
    s.handle_disconnect(CLIENT_CONN, now);
    net.client_up = false;
    drain_server_outputs(&mut s, &mut net.to_client);
    while s.poll_transmit().is_some() {}
    assert_eq!(s.peers(), 0, "a peer outlived its connection");
}

/// A server for the bodies, with `limits`.
fn new_server(limits: Limits) -> WebrtcServer {
    let webrtc = WebrtcConfig::new(SocketAddr::from(SERVER_UDP))
        .with_connect_timeout(Duration::from_secs(2))
        .with_limits(limits);
    WebrtcServer::new(ServerConfig::default(), webrtc, SequentialIds::new(1)).expect("config")
}

/// One of `set`, chosen by the input.
fn pick(u: &mut Unstructured<'_>, set: &BTreeSet<ConnId>) -> Option<ConnId> {
    if set.is_empty() {
        return None;
    }
    let i = u.choose_index(set.len()).ok()?;
    set.iter().nth(i).copied()
}

/// `sdp` with one line replaced, dropped or duplicated, or fuzzer bytes inserted.
fn mutate_lines(u: &mut Unstructured<'_>, sdp: &str) -> String {
    let mut lines: Vec<String> = sdp.lines().map(str::to_owned).collect();
    let rounds = u.int_in_range(1u8..=4).unwrap_or(1);
    for _ in 0..rounds {
        if lines.is_empty() {
            break;
        }
        let i = u.choose_index(lines.len()).unwrap_or(0);
        match u.int_in_range(0u8..=3).unwrap_or(0) {
            0 => {
                lines.remove(i);
            }
            1 => {
                let l = lines[i].clone();
                lines.insert(i, l);
            }
            2 => {
                let len = u.int_in_range(0usize..=64).unwrap_or(0);
                let bytes = u.bytes(len).unwrap_or(&[]);
                lines[i] = String::from_utf8_lossy(bytes).into_owned();
            }
            _ => {
                let keep = lines[i].len();
                let cut = u.int_in_range(0..=keep).unwrap_or(keep);
                let cut = (0..=cut)
                    .rev()
                    .find(|k| lines[i].is_char_boundary(*k))
                    .unwrap_or(0);
                lines[i].truncate(cut);
            }
        }
    }
    let mut out = lines.join("\r\n");
    out.push_str("\r\n");
    out
}

/// Drains the server's frames; returns their `type`s (panics on a frame that is not a JSON
/// object with a string `type`).
fn drain_server(s: &mut WebrtcServer) -> Vec<String> {
    let mut ignored = Vec::new();
    drain_server_outputs(s, &mut ignored)
}

fn drain_server_outputs(s: &mut WebrtcServer, to_client: &mut Vec<FrameBuf>) -> Vec<String> {
    let mut types = Vec::new();
    while let Some(o) = s.poll_output() {
        if let Output::Send { conn, frame } = o {
            let v: serde_json::Value =
                serde_json::from_slice(frame.as_bytes()).expect("frames are JSON");
            let t = v
                .get("type")
                .and_then(|t| t.as_str())
                .expect("a string type");
            types.push(t.to_owned());
            if conn == CLIENT_CONN {
                to_client.push(frame);
            }
        }
    }
    types
}

/// The in-memory network between the server and the one real client.
#[derive(Default)]
struct Net {
    client_up: bool,
    to_client: Vec<FrameBuf>,
    client_sent: Vec<Vec<u8>>,
    offer_sdp: Option<String>,
}

impl Net {
    /// Carries frames and datagrams both ways, and runs the two machines' timers for up to
    /// 200 ms of simulated time.
    fn shuttle(&mut self, s: &mut WebrtcServer, c: &mut WebrtcClient, clock: &mut FuzzClock) {
        let end = clock.now() + Duration::from_millis(200);
        for _ in 0..200 {
            let now = clock.t();
            let mut moved = false;
            drain_server_outputs(s, &mut self.to_client);
            for f in self.to_client.drain(..) {
                if self.client_up {
                    c.handle_frame(ConnId::new(1), f.as_frame(), now);
                }
                moved = true;
            }
            while let Some(t) = s.poll_transmit() {
                moved = true;
                if t.remote == SocketAddr::from(CLIENT_UDP) {
                    c.handle_datagram(t.local, t.remote, &t.contents, now);
                }
            }
            while let Some(o) = c.poll_output() {
                if let Output::Send { frame, .. } = o {
                    moved = true;
                    if let Ok(v) = serde_json::from_slice::<serde_json::Value>(frame.as_bytes()) {
                        if let Some(sdp) = v.pointer("/signal/sdp").and_then(|s| s.as_str()) {
                            self.offer_sdp = Some(sdp.to_owned());
                        }
                    }
                    if self.client_up {
                        s.handle_frame(CLIENT_CONN, frame.as_frame(), now);
                    }
                }
            }
            while let Some(t) = c.poll_transmit() {
                moved = true;
                if self.client_sent.len() < 64 {
                    self.client_sent.push(t.contents.clone());
                }
                s.handle_datagram(
                    SocketAddr::from(CLIENT_UDP),
                    SocketAddr::from(SERVER_UDP),
                    &t.contents,
                    now,
                );
            }
            if !moved {
                let next = [s.poll_timeout(), c.poll_timeout()]
                    .into_iter()
                    .flatten()
                    .min();
                match next {
                    Some(t) if t <= end => {
                        clock.jump_to(t);
                        let now = clock.t();
                        s.handle_timeout(now);
                        c.handle_timeout(now);
                    }
                    _ => return,
                }
            }
        }
    }
}
