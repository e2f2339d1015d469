//! The owner task's end of a connection: the frames of the current pass, the send-queue
//! bounds, close and kill, and the connection's slot.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use agentwire_core::{CloseCode, Disconnect, FrameBuf};
use tokio::task::JoinHandle;
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_tungstenite::tungstenite::Message;

use super::shared::Shared;
use super::{payload_len, to_message};
use crate::config::Limits;

/// One reserved connection slot of a server (and of its peer's address); released on drop.
pub(crate) struct ConnSlot(Arc<AtomicUsize>, Option<crate::per_address::Slot>);

impl ConnSlot {
    /// Takes a slot if fewer than `max` are taken.
    pub(crate) fn reserve(count: &Arc<AtomicUsize>, max: usize) -> Option<Self> {
        count
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < max).then_some(n + 1)
            })
            .ok()
            .map(|_| Self(Arc::clone(count), None))
    }

    /// Also holds `slot` (the peer address's count) until the connection ends.
    pub(crate) fn with_address(mut self, slot: crate::per_address::Slot) -> Self {
        self.1 = Some(slot);
        self
    }
}

impl Drop for ConnSlot {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Why a frame could not be queued.
pub(crate) enum SendError {
    /// The queue is over its frame or byte bound: a slow reader.
    Slow,
}

/// The owner task's end of one connection.
pub(crate) struct ConnTx {
    shared: Arc<Shared>,
    /// Frames queued during the current pass, moved to the outbox by
    /// [`flush`](Self::flush).
    pending: Vec<Message>,
    pending_bytes: usize,
    /// The shared counts when this pass's first frame was queued.
    base: (usize, usize),
    max_frames: usize,
    max_bytes: usize,
    task: Option<JoinHandle<()>>,
    closing: bool,
    _slot: Option<ConnSlot>,
    /// Frames read after the machine paused this connection (they were already on their
    /// way), handed over after the resume. Bounded by the inbound channel: a paused
    /// connection reads nothing more.
    held: VecDeque<Message>,
}

impl ConnTx {
    /// The owner's end of a connection whose task is `task`, with `limits`' send-queue
    /// bounds; holds `slot` until the connection ends.
    pub(super) fn new(
        shared: Arc<Shared>,
        task: JoinHandle<()>,
        limits: &Limits,
        slot: Option<ConnSlot>,
    ) -> Self {
        Self {
            shared,
            pending: Vec::new(),
            pending_bytes: 0,
            base: (0, 0),
            max_frames: limits.send_queue_frames.max(1),
            max_bytes: limits.send_queue_bytes,
            task: Some(task),
            closing: false,
            _slot: slot,
            held: VecDeque::new(),
        }
    }

    /// Whether the machine has paused reading this connection.
    pub(crate) fn is_paused(&self) -> bool {
        self.shared.paused.load(Ordering::Relaxed)
    }

    /// Pauses or resumes reading. While paused the pong timeout does not count (no pong can
    /// be read); a resume starts it afresh.
    pub(crate) fn set_paused(&mut self, paused: bool) {
        if self.is_paused() != paused {
            self.shared.paused.store(paused, Ordering::Relaxed);
            self.shared.waker.wake();
        }
    }

    /// Keeps a frame that arrived while paused.
    pub(crate) fn hold(&mut self, msg: Message) {
        self.held.push_back(msg);
    }

    /// The oldest held frame.
    pub(crate) fn take_held(&mut self) -> Option<Message> {
        self.held.pop_front()
    }

    /// Whether frames are held.
    pub(crate) fn has_held(&self) -> bool {
        !self.held.is_empty()
    }

    /// Queues a frame for the end of this pass; dropped silently once the connection is
    /// closing. Returns whether it is the pass's first frame for this connection (the
    /// caller then lists the connection for [`flush`](Self::flush)).
    pub(crate) fn send(&mut self, frame: FrameBuf) -> Result<bool, SendError> {
        if self.closing {
            return Ok(false);
        }
        let msg = to_message(frame);
        let first = self.pending.is_empty();
        if first {
            self.base = (
                self.shared.queued_frames.load(Ordering::Acquire),
                self.shared.queued_bytes.load(Ordering::Acquire),
            );
        }
        let len = payload_len(&msg);
        let frames = self.base.0 + self.pending.len();
        let bytes = self.base.1 + self.pending_bytes;
        // A single frame larger than the byte bound still goes into an empty queue.
        if frames + 1 > self.max_frames || (bytes > 0 && bytes + len > self.max_bytes) {
            return Err(SendError::Slow);
        }
        self.pending.push(msg);
        self.pending_bytes += len;
        Ok(first)
    }

    /// Moves this pass's frames into the outbox and wakes the task (once).
    pub(crate) fn flush(&mut self) {
        if self.pending.is_empty() {
            return;
        }
        self.shared
            .queued_frames
            .fetch_add(self.pending.len(), Ordering::AcqRel);
        self.shared
            .queued_bytes
            .fetch_add(self.pending_bytes, Ordering::AcqRel);
        self.pending_bytes = 0;
        self.shared.outbox().frames.extend(self.pending.drain(..));
        self.shared.waker.wake();
    }

    /// How the connection ended, as far as its task and the owner saw: the first close
    /// frame either side sent, or a driver close; [`Disconnect::Ended`] without one.
    pub(crate) fn disconnect(&self) -> Disconnect {
        self.shared.end.get().cloned().unwrap_or(Disconnect::Ended)
    }

    /// Queues a close frame after the frames already queued; later sends are dropped.
    pub(crate) fn close(&mut self, frame: CloseFrame) -> Result<(), SendError> {
        if self.closing {
            return Ok(());
        }
        self.closing = true;
        self.shared.ended(Disconnect::local(
            CloseCode(frame.code.into()),
            &frame.reason,
        ));
        self.flush();
        self.shared.outbox().close = Some(frame);
        self.shared.waker.wake();
        Ok(())
    }

    /// Ends the connection now: reading stops, the queue is dropped, and the task tries to
    /// send `frame` within `close_timeout`. `how` is how it ended unless an end was already
    /// seen (a peer's close frame on its way to the owner, a close already queued). Returns
    /// the task's handle and how the connection ended.
    pub(crate) fn kill(
        mut self,
        frame: CloseFrame,
        how: Disconnect,
    ) -> (Option<JoinHandle<()>>, Disconnect) {
        self.shared.ended(how);
        let how = self.disconnect();
        self.pending.clear();
        {
            let mut outbox = self.shared.outbox();
            outbox.frames.clear();
            outbox.kill = Some(frame);
        }
        self.shared.waker.wake();
        (self.task.take(), how)
    }

    /// The task reported the end of reading: returns its handle (to await, if the caller
    /// must know the socket is gone).
    pub(crate) fn ended(mut self) -> Option<JoinHandle<()>> {
        self.task.take()
    }
}

impl Drop for ConnTx {
    fn drop(&mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_are_bounded_and_released() {
        let count = Arc::new(AtomicUsize::new(0));
        let a = ConnSlot::reserve(&count, 2);
        let b = ConnSlot::reserve(&count, 2);
        assert!(a.is_some() && b.is_some());
        assert!(ConnSlot::reserve(&count, 2).is_none());
        drop(a);
        assert!(ConnSlot::reserve(&count, 2).is_some());
        drop(b);
        assert_eq!(count.load(Ordering::Acquire), 0);
    }
}
