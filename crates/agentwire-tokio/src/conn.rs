//! One socket: a reader task and a writer task, joined to the owner task by channels.

use std::collections::VecDeque;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use agentwire_core::{truncate_close_reason, CloseCode, ConnId, Disconnect, FrameBuf};
use futures_util::stream::{SplitSink, SplitStream};
use futures_util::{FutureExt, SinkExt, StreamExt};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::{mpsc, oneshot, watch};
use tokio::task::JoinHandle;
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_tungstenite::tungstenite::{self, Message};
use tokio_tungstenite::WebSocketStream;
use tracing::Instrument;

use crate::clock;
use crate::config::Limits;
use crate::stats::{DropReason, TransportCounters};

/// What reader tasks tell the owner task.
pub(crate) enum Inbound {
    /// A text, binary or pong message arrived.
    Frame(ConnId, Message),
    /// Several text, binary or pong messages arrived together (one channel send for a
    /// batch).
    Frames(ConnId, Vec<Message>),
    /// The socket is done reading; the owner calls `handle_disconnect_with`.
    Ended(ConnId),
}

impl Inbound {
    /// How many frames this carries (an end counts as one).
    pub(crate) fn frames(&self) -> usize {
        match self {
            Self::Frames(_, msgs) => msgs.len(),
            Self::Frame(..) | Self::Ended(_) => 1,
        }
    }
}

/// What the owner task tells a writer task.
pub(crate) enum Cmd {
    /// Send a text or binary message.
    Frame(Message),
    /// Send a close frame after the frames already queued, then stop.
    Close(CloseFrame),
}

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
    queue: mpsc::Sender<Cmd>,
    queued_bytes: Arc<AtomicUsize>,
    kill: Option<oneshot::Sender<CloseFrame>>,
    reader: tokio::task::AbortHandle,
    writer: Option<JoinHandle<()>>,
    closing: bool,
    _slot: Option<ConnSlot>,
    /// Tells the reader whether to read (rule 8 of the `Machine` contract).
    pause: watch::Sender<bool>,
    live: Arc<Liveness>,
    /// Frames read after the machine paused this connection (they were already on their
    /// way), handed over after the resume. Bounded by the inbound channel: a paused reader
    /// reads nothing more.
    held: VecDeque<Message>,
}

impl ConnTx {
    /// Whether the machine has paused reading this connection.
    pub(crate) fn is_paused(&self) -> bool {
        *self.pause.borrow()
    }

    /// Pauses or resumes the reader. While paused the writer's pong timeout does not count
    /// (the reader cannot see pongs); a resume starts it afresh.
    pub(crate) fn set_paused(&mut self, paused: bool) {
        if self.is_paused() != paused {
            self.live.set_paused(paused);
            self.pause.send_replace(paused);
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

    /// Queues a frame; dropped silently once the connection is closing or its writer stopped.
    pub(crate) fn send(&mut self, frame: FrameBuf, max_bytes: usize) -> Result<(), SendError> {
        if self.closing {
            return Ok(());
        }
        let Some(msg) = to_message(frame) else {
            return Ok(());
        };
        let len = msg.len();
        let before = self.queued_bytes.fetch_add(len, Ordering::AcqRel);
        if before > 0 && before + len > max_bytes {
            self.queued_bytes.fetch_sub(len, Ordering::AcqRel);
            return Err(SendError::Slow);
        }
        match self.queue.try_send(Cmd::Frame(msg)) {
            Ok(()) => Ok(()),
            Err(e) => {
                self.queued_bytes.fetch_sub(len, Ordering::AcqRel);
                match e {
                    mpsc::error::TrySendError::Full(_) => Err(SendError::Slow),
                    mpsc::error::TrySendError::Closed(_) => Ok(()),
                }
            }
        }
    }

    /// How the connection ended, as far as its tasks and the owner saw: the first close
    /// frame either side sent, or a driver close; [`Disconnect::Ended`] without one.
    pub(crate) fn disconnect(&self) -> Disconnect {
        self.live.end.get().cloned().unwrap_or(Disconnect::Ended)
    }

    /// Queues a close frame after the frames already queued; later sends are dropped.
    pub(crate) fn close(&mut self, frame: CloseFrame) -> Result<(), SendError> {
        if self.closing {
            return Ok(());
        }
        self.closing = true;
        self.live.ended(Disconnect::local(
            CloseCode(frame.code.into()),
            &frame.reason,
        ));
        match self.queue.try_send(Cmd::Close(frame)) {
            Ok(()) | Err(mpsc::error::TrySendError::Closed(_)) => Ok(()),
            Err(mpsc::error::TrySendError::Full(_)) => Err(SendError::Slow),
        }
    }

    /// Ends the connection now: the reader is aborted, the queue is dropped, and the writer
    /// tries to send `frame` within `close_timeout`. `how` is how it ended unless an end was
    /// already seen (a peer's close frame on its way to the owner, a close already queued).
    /// Returns the writer's handle and how the connection ended.
    pub(crate) fn kill(
        mut self,
        frame: CloseFrame,
        how: Disconnect,
    ) -> (Option<JoinHandle<()>>, Disconnect) {
        self.live.ended(how);
        let how = self.disconnect();
        self.reader.abort();
        if let Some(kill) = self.kill.take() {
            let _ = kill.send(frame);
        }
        (self.writer.take(), how)
    }

    /// The reader has ended: aborts the writer and returns its handle (to await, if the
    /// caller must know the socket is gone).
    pub(crate) fn ended(mut self) -> Option<JoinHandle<()>> {
        let writer = self.writer.take();
        if let Some(w) = &writer {
            w.abort();
        }
        writer
    }
}

impl Drop for ConnTx {
    fn drop(&mut self) {
        self.reader.abort();
        if let Some(w) = self.writer.take() {
            w.abort();
        }
    }
}

/// Converts a machine frame to a tungstenite message (no copy).
pub(crate) fn to_message(frame: FrameBuf) -> Option<Message> {
    match frame {
        FrameBuf::Binary(b) => Some(Message::Binary(b)),
        FrameBuf::Text(t) => match tungstenite::Utf8Bytes::try_from(t.into_bytes()) {
            Ok(u) => Some(Message::Text(u)),
            Err(e) => {
                tracing::warn!(error = %e, "dropping a text frame that is not UTF-8");
                None
            }
        },
    }
}

/// A close frame with `reason` cut to 123 bytes at a character boundary.
pub(crate) fn close_frame(code: CloseCode, reason: &str) -> CloseFrame {
    let code = if code.is_sendable() {
        code
    } else {
        CloseCode::NORMAL
    };
    CloseFrame {
        code: code.0.into(),
        reason: truncate_close_reason(reason).to_owned().into(),
    }
}

/// What the reader, the writer and the owner share about one socket: when it last
/// received anything (read by the writer's pong timeout) and how it ended.
struct Liveness {
    base: Instant,
    last_nanos: AtomicU64,
    /// Reading is paused by the machine: silence is ours, not the peer's.
    paused: AtomicBool,
    /// The first end seen: a close frame from the peer (reader), a close queued by the
    /// machine or the shutdown (owner), a pong timeout (writer), a refused frame
    /// (reader), a slow reader (owner). Later ones (the peer's reply to our close) do not
    /// replace it.
    end: OnceLock<Disconnect>,
}

impl Liveness {
    fn new() -> Self {
        Self {
            base: clock::now(),
            last_nanos: AtomicU64::new(0),
            paused: AtomicBool::new(false),
            end: OnceLock::new(),
        }
    }

    /// Records how the connection ended, unless an end was recorded first.
    fn ended(&self, how: Disconnect) {
        let _ = self.end.set(how);
    }

    fn set_paused(&self, paused: bool) {
        // A resume counts as the last sign of life: the peer gets a full pong timeout.
        self.touch();
        self.paused.store(paused, Ordering::Relaxed);
    }

    fn touch(&self) {
        let d = clock::now().saturating_duration_since(self.base);
        self.last_nanos.store(
            u64::try_from(d.as_nanos()).unwrap_or(u64::MAX),
            Ordering::Relaxed,
        );
    }

    /// When the peer was last heard from; now while reading is paused.
    fn last(&self) -> Instant {
        if self.paused.load(Ordering::Relaxed) {
            return clock::now();
        }
        self.base + Duration::from_nanos(self.last_nanos.load(Ordering::Relaxed))
    }
}

/// Timers and bounds the two tasks need.
#[derive(Clone, Copy)]
struct TaskLimits {
    ping_interval: Option<Duration>,
    pong_timeout: Duration,
    close_timeout: Duration,
}

/// Spawns the reader and writer tasks of an upgraded socket, inside `span`.
pub(crate) fn spawn<S>(
    conn: ConnId,
    ws: WebSocketStream<S>,
    limits: &Limits,
    inbound: mpsc::Sender<Inbound>,
    slot: Option<ConnSlot>,
    span: tracing::Span,
    stats: Arc<TransportCounters>,
) -> ConnTx
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let (sink, stream) = ws.split();
    let (queue_tx, queue_rx) = mpsc::channel(limits.send_queue_frames.max(1));
    let (kill_tx, kill_rx) = oneshot::channel();
    let (err_tx, err_rx) = oneshot::channel();
    let (done_tx, done_rx) = oneshot::channel::<()>();
    let (pause_tx, pause_rx) = watch::channel(false);
    let queued_bytes = Arc::new(AtomicUsize::new(0));
    let live = Arc::new(Liveness::new());
    let t = TaskLimits {
        ping_interval: limits.ping_interval.filter(|d| !d.is_zero()),
        pong_timeout: limits.pong_timeout,
        close_timeout: limits.close_timeout,
    };
    let hold = (!limits.first_frame_delay.is_zero())
        .then(|| clock::to_tokio(clock::now() + limits.first_frame_delay));
    let writer = tokio::spawn(
        Writer {
            sink,
            hold,
            queue: queue_rx,
            queued_bytes: Arc::clone(&queued_bytes),
            live: Arc::clone(&live),
            limits: t,
            stats: Arc::clone(&stats),
        }
        .run(kill_rx, err_rx, done_tx)
        .instrument(span.clone()),
    );
    let reader = tokio::spawn(
        read_loop(
            conn,
            stream,
            inbound,
            Arc::clone(&live),
            (err_tx, done_rx, pause_rx),
            t,
            stats,
        )
        .instrument(span),
    );
    ConnTx {
        queue: queue_tx,
        queued_bytes,
        kill: Some(kill_tx),
        reader: reader.abort_handle(),
        writer: Some(writer),
        closing: false,
        _slot: slot,
        pause: pause_tx,
        live,
        held: VecDeque::new(),
    }
}

/// Waits for a one-shot value once: `Some(v)` if sent, `None` if the sender was dropped;
/// afterwards (slot emptied) it never resolves, so a `select!` branch fires only once.
async fn signal<T>(slot: &mut Option<oneshot::Receiver<T>>) -> Option<T> {
    match slot.as_mut() {
        Some(rx) => {
            let v = rx.await.ok();
            *slot = None;
            v
        }
        None => std::future::pending().await,
    }
}

/// Sleeps until `at`, or forever when `None`.
async fn sleep_until_opt(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(clock::to_tokio(at)).await,
        None => std::future::pending().await,
    }
}

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

/// The reader's signals: a close frame to the writer after a read error, the writer's end,
/// and the owner's pause (`true`) or resume (`false`).
type ReaderSignals = (
    oneshot::Sender<CloseFrame>,
    oneshot::Receiver<()>,
    watch::Receiver<bool>,
);

/// Reads messages and hands text/binary ones to the owner; reports `Ended` once.
///
/// While the owner has paused it, it reads nothing (the socket's receive buffer and then the
/// peer's TCP window fill up, which slows the peer down); the writer and the close timeout
/// go on.
async fn read_loop<S>(
    conn: ConnId,
    mut stream: SplitStream<WebSocketStream<S>>,
    inbound: mpsc::Sender<Inbound>,
    live: Arc<Liveness>,
    (err_tx, done_rx, mut pause): ReaderSignals,
    t: TaskLimits,
    stats: Arc<TransportCounters>,
) where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let mut writer_done = Some(done_rx);
    let mut deadline: Option<Instant> = None;
    let mut batch = Batch::new(conn);
    'outer: loop {
        let paused = *pause.borrow_and_update();
        tokio::select! {
            // A dropped sender (the owner forgot the connection) disables this branch.
            Ok(()) = pause.changed() => {}
            first = stream.next(), if !paused => {
                // Take this message and every one already readable, and hand them to the
                // owner in as few channel sends as the batch bounds allow.
                let mut next = first;
                loop {
                    match next {
                        Some(Ok(msg)) => {
                            if let Message::Close(frame) = &msg {
                                live.ended(peer_close(frame.as_ref()));
                            }
                            if matches!(msg, Message::Text(_) | Message::Binary(_) | Message::Pong(_))
                                && batch.push(msg)
                                && !batch.flush(&inbound).await
                            {
                                break 'outer;
                            }
                        }
                        Some(Err(e)) => {
                            tracing::debug!(error = %e, "read failed");
                            if !batch.flush(&inbound).await {
                                break 'outer;
                            }
                            if let Some(frame) = error_close(&e) {
                                stats.dropped(DropReason::BadFrame);
                                live.ended(Disconnect::BadFrame {
                                    code: CloseCode(frame.code.into()),
                                });
                                if err_tx.send(frame).is_ok() {
                                    // Let the writer send the close frame (bounded by its own
                                    // timeout).
                                    let wait = t.close_timeout.saturating_mul(2);
                                    let _ =
                                        tokio::time::timeout(wait, signal(&mut writer_done)).await;
                                }
                            }
                            break 'outer;
                        }
                        None => {
                            batch.flush(&inbound).await;
                            break 'outer;
                        }
                    }
                    if *pause.borrow() {
                        break; // paused: read nothing more
                    }
                    match stream.next().now_or_never() {
                        Some(m) => next = m,
                        None => break,
                    }
                }
                if !batch.flush(&inbound).await {
                    break;
                }
                live.touch();
            }
            _ = signal(&mut writer_done) => {
                // The writer stopped (sent a close, or failed): wait a little for the peer's
                // close reply, then end.
                deadline = Some(clock::now() + t.close_timeout);
            }
            () = sleep_until_opt(deadline) => {
                tracing::debug!("peer did not answer the close in time");
                break;
            }
        }
    }
    let _ = inbound.send(Inbound::Ended(conn)).await;
}

/// Messages read together, on their way to the owner task.
struct Batch {
    conn: ConnId,
    one: Option<Message>,
    many: Vec<Message>,
    bytes: usize,
}

impl Batch {
    /// Messages per batch at most.
    const MAX_MESSAGES: usize = 64;
    /// Bytes per batch at most (a single larger message still travels alone).
    const MAX_BYTES: usize = 64 << 10;

    fn new(conn: ConnId) -> Self {
        Self {
            conn,
            one: None,
            many: Vec::new(),
            bytes: 0,
        }
    }

    /// Adds a message; returns whether the batch is full and must be flushed now.
    fn push(&mut self, msg: Message) -> bool {
        self.bytes += msg.len();
        if self.many.is_empty() && self.one.is_none() {
            self.one = Some(msg);
        } else {
            if let Some(first) = self.one.take() {
                self.many.reserve(Self::MAX_MESSAGES);
                self.many.push(first);
            }
            self.many.push(msg);
        }
        self.bytes >= Self::MAX_BYTES || self.many.len() >= Self::MAX_MESSAGES
    }

    /// Sends what is batched (one message alone, without allocating); false if the owner
    /// is gone.
    async fn flush(&mut self, inbound: &mpsc::Sender<Inbound>) -> bool {
        self.bytes = 0;
        let input = if let Some(msg) = self.one.take() {
            Inbound::Frame(self.conn, msg)
        } else if !self.many.is_empty() {
            Inbound::Frames(self.conn, std::mem::take(&mut self.many))
        } else {
            return true;
        };
        inbound.send(input).await.is_ok()
    }
}

/// What one writer step decided.
enum Step {
    Continue,
    Close(CloseFrame),
    Stop,
}

/// The writer task's state.
struct Writer<S> {
    sink: SplitSink<WebSocketStream<S>, Message>,
    /// Until when queued frames wait
    /// ([`Limits::first_frame_delay`](crate::Limits::first_frame_delay)); `None` once passed.
    hold: Option<tokio::time::Instant>,
    queue: mpsc::Receiver<Cmd>,
    queued_bytes: Arc<AtomicUsize>,
    live: Arc<Liveness>,
    limits: TaskLimits,
    /// Counts the frames and close frames written.
    stats: Arc<TransportCounters>,
}

impl<S> Writer<S>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    async fn run(
        mut self,
        kill: oneshot::Receiver<CloseFrame>,
        err: oneshot::Receiver<CloseFrame>,
        _done: oneshot::Sender<()>,
    ) {
        let mut kill = Some(kill);
        let mut err = Some(err);
        let mut ticker = self.limits.ping_interval.map(|every| {
            let mut i = tokio::time::interval_at(clock::to_tokio(clock::now() + every), every);
            i.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            i
        });
        // One timer for the pong deadline, moved forward only when it fires.
        let mut watchdog = self.limits.ping_interval.map(|_| {
            let due = self.live.last() + self.limits.pong_timeout;
            Box::pin(tokio::time::sleep_until(clock::to_tokio(due)))
        });
        let close = loop {
            tokio::select! {
                biased;
                k = signal(&mut kill) => {
                    // Killed (slow reader) or forgotten by the owner: free the queue now.
                    self.queue.close();
                    while self.queue.try_recv().is_ok() {}
                    break k;
                }
                Some(frame) = signal(&mut err) => break Some(frame),
                step = self.step(&mut ticker, &mut watchdog) => match step {
                    Step::Continue => {}
                    Step::Close(frame) => break Some(frame),
                    Step::Stop => break None,
                },
            }
        };
        if let Some(frame) = close {
            self.stats.close_sent(frame.code.into());
            let send = self.sink.send(Message::Close(Some(frame)));
            if tokio::time::timeout(self.limits.close_timeout, send)
                .await
                .is_err()
            {
                tracing::debug!("close frame not sent in time");
            }
        }
    }

    /// Waits for queued frames (feeds them all, then flushes once), a ping tick, or the
    /// pong deadline.
    async fn step(
        &mut self,
        ticker: &mut Option<tokio::time::Interval>,
        watchdog: &mut Option<Pin<Box<tokio::time::Sleep>>>,
    ) -> Step {
        tokio::select! {
            () = held(&mut self.hold) => Step::Continue,
            cmd = self.queue.recv(), if self.hold.is_none() => match cmd {
                None => Step::Stop,
                Some(Cmd::Close(frame)) => Step::Close(frame),
                Some(Cmd::Frame(msg)) => self.write_batch(msg).await,
            },
            _ = tick(ticker) => {
                if self.sink.send(Message::Ping(Default::default())).await.is_err() {
                    return Step::Stop;
                }
                Step::Continue
            }
            () = fired(watchdog) => {
                let due = self.live.last() + self.limits.pong_timeout;
                if clock::now() >= due {
                    tracing::debug!("pong timeout");
                    self.stats.dropped(DropReason::PongTimeout);
                    self.live.ended(Disconnect::PongTimeout);
                    return Step::Close(close_frame(CloseCode::POLICY, "pong timeout"));
                }
                if let Some(sleep) = watchdog.as_mut() {
                    sleep.as_mut().reset(clock::to_tokio(due));
                }
                Step::Continue
            }
        }
    }

    /// Feeds `first` and every frame already queued, then flushes once.
    async fn write_batch(&mut self, first: Message) -> Step {
        let mut next = Some(first);
        let mut close = None;
        let (mut frames, mut bytes) = (0u64, 0u64);
        while let Some(msg) = next.take() {
            let len = msg.len();
            if let Err(e) = self.sink.feed(msg).await {
                tracing::debug!(error = %e, "write failed");
                self.stats.sent(frames, bytes);
                return Step::Stop;
            }
            self.queued_bytes.fetch_sub(len, Ordering::AcqRel);
            frames += 1;
            bytes += len as u64;
            match self.queue.try_recv() {
                Ok(Cmd::Frame(m)) => next = Some(m),
                Ok(Cmd::Close(f)) => close = Some(f),
                Err(_) => {}
            }
        }
        self.stats.sent(frames, bytes);
        if let Err(e) = self.sink.flush().await {
            tracing::debug!(error = %e, "flush failed");
            return Step::Stop;
        }
        close.map_or(Step::Continue, Step::Close)
    }
}

/// Resolves (once) when the first-frame hold ends and clears it; never without one.
async fn held(hold: &mut Option<tokio::time::Instant>) {
    match *hold {
        Some(at) => {
            tokio::time::sleep_until(at).await;
            *hold = None;
        }
        None => std::future::pending().await,
    }
}

/// Resolves when the timer fires; never without one.
async fn fired(sleep: &mut Option<Pin<Box<tokio::time::Sleep>>>) {
    match sleep {
        Some(s) => s.as_mut().await,
        None => std::future::pending().await,
    }
}

/// The next ping tick, or never without pings.
async fn tick(ticker: &mut Option<tokio::time::Interval>) {
    match ticker {
        Some(i) => {
            i.tick().await;
        }
        None => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn close_reason_is_cut_at_a_char_boundary() {
        let reason = "é".repeat(100); // 200 bytes
        let f = close_frame(CloseCode::POLICY, &reason);
        assert_eq!(f.reason.len(), 122);
        assert_eq!(u16::from(f.code), 1008);
        let f = close_frame(CloseCode::ABNORMAL, "x");
        assert_eq!(u16::from(f.code), 1000);
    }

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
