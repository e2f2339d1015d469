//! A connection's task: it reads the socket and hands what it read to the owner in batches,
//! writes what the owner queued (every frame of a pass, then one flush), pings, watches for
//! pongs, holds the first frames, and runs the close handshake.

use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use agentwire_core::{CloseCode, ConnId, Disconnect};
use futures_util::task::{ArcWake, AtomicWaker};
use futures_util::{Sink, Stream};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_tungstenite::tungstenite::{self, Message};
use tokio_tungstenite::WebSocketStream;

use super::shared::Shared;
use super::{close_frame, payload_len, Inbound};
use crate::clock;
use crate::config::Limits;
use crate::stats::{DropReason, TransportCounters};

/// The close frame to send after a read error, if the error is the peer's fault. A socket
/// that ended without a close handshake gets none: it is gone, not misbehaving.
fn error_close(e: &tungstenite::Error) -> Option<CloseFrame> {
    use tungstenite::error::ProtocolError;
    match e {
        tungstenite::Error::Protocol(ProtocolError::ResetWithoutClosingHandshake) => None,
        tungstenite::Error::Capacity(_) => Some(close_frame(CloseCode::TOO_BIG, "message too big")),
        tungstenite::Error::Utf8(_) => {
            Some(close_frame(CloseCode::INVALID_PAYLOAD, "invalid utf-8"))
        }
        tungstenite::Error::Protocol(_) => {
            Some(close_frame(CloseCode::PROTOCOL_ERROR, "protocol error"))
        }
        _ => None,
    }
}

/// How a connection ends when the peer's close frame (`None`: one without a payload)
/// arrives first.
fn peer_close(frame: Option<&CloseFrame>) -> Disconnect {
    match frame {
        Some(f) => Disconnect::peer(CloseCode(f.code.into()), &f.reason),
        None => Disconnect::peer(CloseCode::NO_STATUS, ""),
    }
}

/// Timers and bounds the task needs.
#[derive(Clone, Copy)]
struct TaskLimits {
    ping_interval: Option<Duration>,
    pong_timeout: Duration,
    close_timeout: Duration,
}

/// Messages read in one pass at most before they go to the owner.
const BATCH_MESSAGES: usize = 64;
/// Bytes read in one pass at most before they go to the owner (a larger message still
/// travels alone).
const BATCH_BYTES: usize = 64 << 10;

/// Batches read in one poll of a connection's task at most before it yields.
const READ_BATCHES_PER_POLL: usize = 4;

/// A pending reservation of room in the owner's inbound channel.
type Reserve = Pin<
    Box<dyn Future<Output = Result<mpsc::OwnedPermit<Inbound>, mpsc::error::SendError<()>>> + Send>,
>;

/// The waker a connection's socket reads register: it records that the socket woke the
/// task for reading, then wakes the task.
struct ReadWake {
    woken: AtomicBool,
    task: AtomicWaker,
}

impl ArcWake for ReadWake {
    fn wake_by_ref(arc_self: &Arc<Self>) {
        arc_self.woken.store(true, Ordering::Release);
        arc_self.task.wake();
    }
}

/// What a pass of [`Task::poll_step`] ended with.
enum Step {
    /// Send this close frame (bounded by `close_timeout`), then wait for the peer's.
    Close(CloseFrame),
    /// Killed by the owner: send this close frame (bounded) and stop without a report.
    Kill(CloseFrame),
    /// A write failed: no close frame can go out; wait (bounded) for reading to end.
    WriteFailed,
    /// Reading is over (the peer closed, the socket failed, or the close wait ran out).
    Ended,
    /// The owner is gone.
    OwnerGone,
}

/// A connection's task: the socket, the frames being written, the batch being handed
/// over, and the ping, pong and first-frame timers.
pub(super) struct Task<S> {
    conn: ConnId,
    ws: WebSocketStream<S>,
    shared: Arc<Shared>,
    inbound: mpsc::Sender<Inbound>,
    /// Waiting for room in the inbound channel (reading waits meanwhile).
    reserving: Option<Reserve>,
    /// The batch that waits for that room.
    handoff: Option<Inbound>,
    /// Frames taken from the outbox, not yet handed to the WebSocket.
    writing: VecDeque<Message>,
    /// Frames were handed to the WebSocket since its last flush.
    unflushed: bool,
    /// The close frame to send once `writing` is empty.
    close: Option<CloseFrame>,
    /// Until when queued frames wait
    /// ([`Limits::first_frame_delay`](crate::Limits::first_frame_delay)); `None` once passed.
    hold: Option<Pin<Box<tokio::time::Sleep>>>,
    ping: Option<tokio::time::Interval>,
    /// The pong deadline, moved forward only when it fires.
    watchdog: Option<Pin<Box<tokio::time::Sleep>>>,
    /// When the peer was last heard from (or reading last resumed).
    heard: Instant,
    was_paused: bool,
    /// The last read found nothing: the next one waits for [`ReadWake`].
    read_idle: bool,
    read_wake: Arc<ReadWake>,
    /// Wakes through `read_wake`: the waker the socket's reads register.
    read_waker: Waker,
    limits: TaskLimits,
    stats: Arc<TransportCounters>,
}

impl<S> Task<S>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    /// The task of socket `ws`, sharing `shared` with the owner, with `limits`' timers.
    pub(super) fn new(
        conn: ConnId,
        ws: WebSocketStream<S>,
        shared: Arc<Shared>,
        inbound: mpsc::Sender<Inbound>,
        limits: &Limits,
        stats: Arc<TransportCounters>,
    ) -> Self {
        let t = TaskLimits {
            ping_interval: limits.ping_interval.filter(|d| !d.is_zero()),
            pong_timeout: limits.pong_timeout,
            close_timeout: limits.close_timeout,
        };
        let now = clock::now();
        let hold = (!limits.first_frame_delay.is_zero()).then(|| {
            Box::pin(tokio::time::sleep_until(clock::to_tokio(
                now + limits.first_frame_delay,
            )))
        });
        let ping = t.ping_interval.map(|every| {
            let mut i = tokio::time::interval_at(clock::to_tokio(now + every), every);
            i.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            i
        });
        let watchdog = t.ping_interval.map(|_| {
            Box::pin(tokio::time::sleep_until(clock::to_tokio(
                now + t.pong_timeout,
            )))
        });
        let read_wake = Arc::new(ReadWake {
            woken: AtomicBool::new(false),
            task: AtomicWaker::new(),
        });
        Self {
            conn,
            ws,
            shared,
            inbound,
            reserving: None,
            handoff: None,
            writing: VecDeque::new(),
            unflushed: false,
            close: None,
            hold,
            ping,
            watchdog,
            heard: now,
            was_paused: false,
            read_idle: false,
            read_waker: futures_util::task::waker(Arc::clone(&read_wake)),
            read_wake,
            limits: t,
            stats,
        }
    }

    /// Runs the connection until it ends (see [`Step`]).
    pub(super) async fn run(mut self) {
        let step = std::future::poll_fn(|cx| self.poll_step(cx, None)).await;
        let close = match step {
            Step::Kill(frame) => {
                self.writing.clear();
                self.send_close(frame).await;
                return; // the owner has forgotten the connection: no report
            }
            Step::Close(frame) => Some(frame),
            Step::WriteFailed => None,
            Step::Ended => {
                self.report_end().await;
                return;
            }
            Step::OwnerGone => return,
        };
        if let Some(frame) = close {
            self.send_close(frame).await;
        }
        // Read on until the peer's close, bounded by the close timeout.
        let mut deadline = Box::pin(tokio::time::sleep(self.limits.close_timeout));
        let step = std::future::poll_fn(|cx| self.poll_step(cx, Some(&mut deadline))).await;
        if let Step::Kill(_) | Step::OwnerGone = step {
            return;
        }
        self.report_end().await;
    }

    /// Tells the owner reading is over, after whatever was read before the end.
    async fn report_end(&mut self) {
        if let Some(input) = self.handoff.take() {
            if self.inbound.send(input).await.is_err() {
                return;
            }
        }
        let _ = self.inbound.send(Inbound::Ended(self.conn)).await;
    }

    /// Sends `frame` after anything already handed to the WebSocket, within
    /// `close_timeout`.
    async fn send_close(&mut self, frame: CloseFrame) {
        self.stats.close_sent(frame.code.into());
        let send = futures_util::SinkExt::send(&mut self.ws, Message::Close(Some(frame)));
        if tokio::time::timeout(self.limits.close_timeout, send)
            .await
            .is_err()
        {
            tracing::debug!("close frame not sent in time");
        }
    }

    /// One pass over everything the connection waits for: the owner's kill and frames, the
    /// writes, the timers, the hand-off and the reads. `closing` is the deadline of the
    /// wait for the peer's close: once set, nothing more is written.
    fn poll_step(
        &mut self,
        cx: &mut Context<'_>,
        mut closing: Option<&mut Pin<Box<tokio::time::Sleep>>>,
    ) -> Poll<Step> {
        // Registered first, so a wake between the checks below and the return is not lost.
        self.shared.waker.register(cx.waker());
        if let Some(frame) = self.shared.outbox().kill.take() {
            return Poll::Ready(Step::Kill(frame));
        }
        if closing.is_none() {
            if let Some(step) = self.poll_write(cx) {
                return Poll::Ready(step);
            }
            if let Some(step) = self.poll_timers(cx) {
                return Poll::Ready(step);
            }
        } else if let Some(d) = closing.as_mut() {
            if d.as_mut().poll(cx).is_ready() {
                tracing::debug!("peer did not answer the close in time");
                return Poll::Ready(Step::Ended);
            }
        }
        self.poll_read(cx)
    }

    /// Takes the owner's frames (after the first-frame hold) and writes them: every frame
    /// handed to the WebSocket, then one flush. Returns a step when the connection must
    /// close (a queued close is due) or end (the socket failed).
    fn poll_write(&mut self, cx: &mut Context<'_>) -> Option<Step> {
        if let Some(hold) = self.hold.as_mut() {
            if hold.as_mut().poll(cx).is_pending() {
                return None;
            }
            self.hold = None;
        }
        if self.close.is_none() {
            let mut outbox = self.shared.outbox();
            if self.writing.is_empty() {
                std::mem::swap(&mut self.writing, &mut outbox.frames);
            } else {
                self.writing.extend(outbox.frames.drain(..));
            }
            self.close = outbox.close.take();
        }
        let (mut frames, mut bytes) = (0usize, 0usize);
        while !self.writing.is_empty() {
            match Pin::new(&mut self.ws).poll_ready(cx) {
                Poll::Ready(Ok(())) => {}
                Poll::Ready(Err(e)) => return Some(self.write_failed(&e, frames, bytes)),
                Poll::Pending => break,
            }
            let Some(msg) = self.writing.pop_front() else {
                break;
            };
            let len = payload_len(&msg);
            if let Err(e) = Pin::new(&mut self.ws).start_send(msg) {
                return Some(self.write_failed(&e, frames + 1, bytes + len));
            }
            frames += 1;
            bytes += len;
            self.unflushed = true;
        }
        self.written(frames, bytes);
        if self.unflushed {
            match Pin::new(&mut self.ws).poll_flush(cx) {
                Poll::Ready(Ok(())) => self.unflushed = false,
                Poll::Ready(Err(e)) => return Some(self.write_failed(&e, 0, 0)),
                Poll::Pending => {}
            }
        }
        if self.writing.is_empty() && !self.unflushed {
            if let Some(frame) = self.close.take() {
                return Some(Step::Close(frame));
            }
        }
        None
    }

    /// Counts frames handed to the WebSocket and frees their place in the send queue.
    fn written(&self, frames: usize, bytes: usize) {
        if frames > 0 {
            self.shared
                .queued_frames
                .fetch_sub(frames, Ordering::AcqRel);
            self.shared.queued_bytes.fetch_sub(bytes, Ordering::AcqRel);
            self.stats.sent(frames as u64, bytes as u64);
        }
    }

    /// A write failed: the socket is gone; wait (bounded) for reading to end too.
    fn write_failed(&mut self, e: &tungstenite::Error, frames: usize, bytes: usize) -> Step {
        tracing::debug!(error = %e, "write failed");
        self.written(frames, bytes);
        self.writing.clear();
        self.unflushed = false;
        Step::WriteFailed
    }

    /// The ping period and the pong deadline.
    fn poll_timers(&mut self, cx: &mut Context<'_>) -> Option<Step> {
        if let Some(ping) = self.ping.as_mut() {
            if ping.poll_tick(cx).is_ready() {
                // Behind the frames already handed over; flushed with them.
                self.writing.push_back(Message::Ping(Default::default()));
                self.shared.queued_frames.fetch_add(1, Ordering::AcqRel);
                cx.waker().wake_by_ref();
            }
        }
        let paused = self.shared.paused.load(Ordering::Relaxed);
        if paused != self.was_paused {
            // A pause or a resume counts as the last sign of life: the peer gets a full
            // pong timeout after the resume.
            self.was_paused = paused;
            self.heard = clock::now();
        }
        let watchdog = self.watchdog.as_mut()?;
        if watchdog.as_mut().poll(cx).is_pending() {
            return None;
        }
        let now = clock::now();
        if paused {
            self.heard = now;
        }
        let due = self.heard + self.limits.pong_timeout;
        if now >= due {
            tracing::debug!("pong timeout");
            self.stats.dropped(DropReason::PongTimeout);
            self.shared.ended(Disconnect::PongTimeout);
            return Some(Step::Close(close_frame(CloseCode::POLICY, "pong timeout")));
        }
        watchdog.as_mut().reset(clock::to_tokio(due));
        let _ = watchdog.as_mut().poll(cx); // registers the new deadline
        None
    }

    /// Hands the last batch to the owner if there is room, then reads every message
    /// already readable (up to a batch) unless paused, and hands that over.
    fn poll_read(&mut self, cx: &mut Context<'_>) -> Poll<Step> {
        for _ in 0..READ_BATCHES_PER_POLL {
            if let Some(step) = self.poll_handoff(cx) {
                return Poll::Ready(step);
            }
            if self.handoff.is_some() {
                return Poll::Pending;
            }
            if self.shared.paused.load(Ordering::Relaxed) {
                // Frames may wait in the WebSocket's buffer: read again after the resume.
                self.read_idle = false;
                return Poll::Pending;
            }
            // A wake-up for the owner's frames or a timer is not one for the socket: after a
            // read found nothing, read again only once the socket said it is readable (a
            // read costs the WebSocket a clear of its whole read buffer).
            self.read_wake.task.register(cx.waker());
            if !self.read_wake.woken.swap(false, Ordering::AcqRel) && self.read_idle {
                return Poll::Pending;
            }
            // Reading now; only a read that finds nothing makes the next one wait.
            self.read_idle = false;
            let read_waker = self.read_waker.clone();
            let mut rcx = Context::from_waker(&read_waker);
            let mut batch: Vec<Message> = Vec::new();
            let mut one: Option<Message> = None;
            let mut bytes = 0usize;
            let mut end = None;
            loop {
                match Pin::new(&mut self.ws).poll_next(&mut rcx) {
                    Poll::Pending => {
                        self.read_idle = true;
                        break;
                    }
                    Poll::Ready(None) => {
                        end = Some(Step::Ended);
                        break;
                    }
                    Poll::Ready(Some(Err(e))) => {
                        tracing::debug!(error = %e, "read failed");
                        end = Some(match error_close(&e) {
                            Some(frame) => {
                                self.stats.dropped(DropReason::BadFrame);
                                self.shared.ended(Disconnect::BadFrame {
                                    code: CloseCode(frame.code.into()),
                                });
                                Step::Close(frame)
                            }
                            None => Step::Ended,
                        });
                        break;
                    }
                    Poll::Ready(Some(Ok(msg))) => {
                        if let Message::Close(frame) = &msg {
                            self.shared.ended(peer_close(frame.as_ref()));
                        }
                        if matches!(
                            msg,
                            Message::Text(_) | Message::Binary(_) | Message::Pong(_)
                        ) {
                            bytes += msg.len();
                            match one.take() {
                                None if batch.is_empty() => one = Some(msg),
                                first => {
                                    if let Some(first) = first {
                                        batch.reserve(BATCH_MESSAGES);
                                        batch.push(first);
                                    }
                                    batch.push(msg);
                                }
                            }
                            if bytes >= BATCH_BYTES || batch.len() >= BATCH_MESSAGES {
                                break;
                            }
                        }
                        if self.shared.paused.load(Ordering::Relaxed) {
                            break; // paused: read nothing more
                        }
                    }
                }
            }
            let read_any = one.is_some() || !batch.is_empty();
            if read_any {
                self.heard = clock::now();
                self.handoff = Some(match one {
                    Some(msg) => Inbound::Frame(self.conn, msg),
                    None => Inbound::Frames(self.conn, batch),
                });
            }
            if let Some(step) = end {
                // The batch (if any) goes to the owner before the end (see `run`).
                if let Step::Close(_) = step {
                    if let Some(step) = self.poll_handoff(cx) {
                        return Poll::Ready(step);
                    }
                }
                return Poll::Ready(step);
            }
            if !read_any {
                return Poll::Pending;
            }
        }
        // More may be readable: come back after the other tasks had their turn.
        cx.waker().wake_by_ref();
        Poll::Pending
    }

    /// Hands the waiting batch to the owner: at once when the channel has room, else
    /// through a reservation polled until it has. `Some` when the owner is gone.
    fn poll_handoff(&mut self, cx: &mut Context<'_>) -> Option<Step> {
        let input = self.handoff.take()?;
        if self.reserving.is_none() {
            match self.inbound.try_send(input) {
                Ok(()) => return None,
                Err(mpsc::error::TrySendError::Closed(_)) => return Some(Step::OwnerGone),
                Err(mpsc::error::TrySendError::Full(input)) => {
                    self.handoff = Some(input);
                    self.reserving = Some(Box::pin(self.inbound.clone().reserve_owned()));
                }
            }
        } else {
            self.handoff = Some(input);
        }
        let reserving = self.reserving.as_mut()?;
        match reserving.as_mut().poll(cx) {
            Poll::Pending => None,
            Poll::Ready(Err(_)) => Some(Step::OwnerGone),
            Poll::Ready(Ok(permit)) => {
                self.reserving = None;
                if let Some(input) = self.handoff.take() {
                    permit.send(input);
                }
                None
            }
        }
    }
}
