//! What a simulated connection is made of: its two ends, what travels on it, and the
//! client and raw-peer slots.

use std::net::SocketAddr;

use crate::{CloseCode, ConnId, FrameBuf, Machine};
#[derive(Debug, Clone, Copy)]
pub(super) enum Link {
    Client { idx: usize, conn: ConnId },
    Raw { idx: usize },
}

#[derive(Debug, Clone, Copy)]
pub(super) enum Dest {
    Server(ConnId),
    Client(usize, ConnId),
    Raw(usize),
}

/// A connection's receiving end, as a machine names it: the server's `ConnId`, or client
/// `idx`'s own `ConnId`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Reader {
    Server(ConnId),
    Client(usize, ConnId),
}

impl Reader {
    pub(super) fn of(dest: Dest) -> Option<Self> {
        match dest {
            Dest::Server(c) => Some(Self::Server(c)),
            Dest::Client(idx, c) => Some(Self::Client(idx, c)),
            Dest::Raw(_) => None,
        }
    }

    pub(super) fn dest(self) -> Dest {
        match self {
            Self::Server(c) => Dest::Server(c),
            Self::Client(idx, c) => Dest::Client(idx, c),
        }
    }
}

#[derive(Debug)]
pub(super) enum Payload {
    Frame(FrameBuf),
    /// A WebSocket pong.
    Pong,
    Close(CloseCode, String),
}

pub(super) struct ClientSlot<C: Machine> {
    pub(super) machine: C,
    /// (client-side conn, server-side conn) while connected.
    pub(super) link: Option<(ConnId, ConnId)>,
    pub(super) events: Vec<C::Event>,
    pub(super) addr: SocketAddr,
}

/// A raw peer: the test sends frames by hand and reads what the server sent back.
#[derive(Debug, Default)]
pub(super) struct RawSlot {
    pub(super) server_conn: Option<ConnId>,
    pub(super) received: Vec<FrameBuf>,
    pub(super) closed: Option<(CloseCode, String)>,
}
