//! What the owner task and a connection's task share about one socket.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicUsize};
use std::sync::{Mutex, OnceLock};

use agentwire_core::Disconnect;
use futures_util::task::AtomicWaker;
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_tungstenite::tungstenite::Message;

/// What the owner hands the connection task, taken by the task in one swap.
#[derive(Default)]
pub(super) struct Outbox {
    pub(super) frames: VecDeque<Message>,
    /// Send this close frame once every frame before it is written, then stop writing.
    pub(super) close: Option<CloseFrame>,
    /// Killed: drop every queued frame, send this close frame (bounded) and stop.
    pub(super) kill: Option<CloseFrame>,
}

/// What the owner and the connection task share about one socket.
pub(super) struct Shared {
    pub(super) outbox: Mutex<Outbox>,
    /// The task's waker: the owner wakes it once per pass that queued something.
    pub(super) waker: AtomicWaker,
    /// Frames and bytes queued and not yet handed to the WebSocket (outbox and the task's
    /// own queue): the slow-reader bounds.
    pub(super) queued_frames: AtomicUsize,
    pub(super) queued_bytes: AtomicUsize,
    /// Reading is paused by the machine (rule 8 of the `Machine` contract).
    pub(super) paused: AtomicBool,
    /// The first end seen: a close frame from the peer, a close queued by the machine or
    /// the shutdown, a pong timeout, a refused frame, a slow reader. Later ones (the peer's
    /// reply to our close) do not replace it.
    pub(super) end: OnceLock<Disconnect>,
}

impl Shared {
    /// Records how the connection ended, unless an end was recorded first.
    pub(super) fn ended(&self, how: Disconnect) {
        let _ = self.end.set(how);
    }

    pub(super) fn outbox(&self) -> std::sync::MutexGuard<'_, Outbox> {
        // A panic while holding this lock leaves a consistent outbox: keep using it.
        self.outbox
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

impl Shared {
    /// A connection's shared state before anything was queued or read.
    pub(super) fn new() -> Self {
        Self {
            outbox: Mutex::new(Outbox::default()),
            waker: AtomicWaker::new(),
            queued_frames: AtomicUsize::new(0),
            queued_bytes: AtomicUsize::new(0),
            paused: AtomicBool::new(false),
            end: OnceLock::new(),
        }
    }
}
