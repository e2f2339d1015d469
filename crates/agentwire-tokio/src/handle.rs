//! The application's side of a driver: commands in ([`Handle`]), events out ([`Events`]).

use std::fmt;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Instant;

use tokio::sync::{mpsc, oneshot, watch};

use crate::stats::{TransportCounters, TransportStats};
use crate::udp::{UdpCounters, UdpStats};

/// A command for the owner task: runs with the machine and the current time.
pub(crate) type Command<M> = Box<dyn FnOnce(&mut M, Instant) + Send>;

/// The driver has stopped: its machine is gone and commands cannot run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, thiserror::Error)]
#[error("the driver has stopped")]
pub struct Closed;

/// Runs commands on a driven machine and stops its driver. Cheap to clone.
///
/// Every method reaches the one task that owns the machine; there is no lock.
pub struct Handle<M> {
    commands: mpsc::Sender<Command<M>>,
    stop: Arc<watch::Sender<bool>>,
    done: watch::Receiver<bool>,
    /// The UDP socket's counters, when the driver has one.
    udp: Option<Arc<UdpCounters>>,
    /// The driver's transport counters.
    stats: Arc<TransportCounters>,
}

impl<M> Clone for Handle<M> {
    fn clone(&self) -> Self {
        Self {
            commands: self.commands.clone(),
            stop: Arc::clone(&self.stop),
            done: self.done.clone(),
            udp: self.udp.clone(),
            stats: Arc::clone(&self.stats),
        }
    }
}

impl<M> fmt::Debug for Handle<M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Handle")
            .field("closed", &self.is_closed())
            .finish()
    }
}

/// The owner task's ends of a [`Handle`].
pub(crate) struct Control<M> {
    pub(crate) commands: mpsc::Receiver<Command<M>>,
    pub(crate) stop: watch::Receiver<bool>,
    /// Keeps the stop channel open even when every handle is dropped.
    pub(crate) _stop_tx: Arc<watch::Sender<bool>>,
    pub(crate) done: watch::Sender<bool>,
}

impl<M> Control<M> {
    /// Whether stop was requested.
    pub(crate) fn stop_requested(&self) -> bool {
        *self.stop.borrow()
    }
}

/// Creates a handle and the owner task's ends.
pub(crate) fn handle_pair<M>() -> (Handle<M>, Control<M>) {
    let (cmd_tx, cmd_rx) = mpsc::channel(64);
    let (stop_tx, stop_rx) = watch::channel(false);
    let (done_tx, done_rx) = watch::channel(false);
    let stop_tx = Arc::new(stop_tx);
    (
        Handle {
            commands: cmd_tx,
            stop: Arc::clone(&stop_tx),
            done: done_rx,
            udp: None,
            stats: Arc::default(),
        },
        Control {
            commands: cmd_rx,
            stop: stop_rx,
            _stop_tx: stop_tx,
            done: done_tx,
        },
    )
}

impl<M: 'static> Handle<M> {
    /// Runs `f` with the machine and the current time in the task that owns the machine,
    /// and returns its result.
    ///
    /// After `f` the driver drains the machine's outputs as after any input, so frames a
    /// command queues (`m.publish(...)`) are on their way when this returns, with one
    /// exception: a command that runs while the driver waits for room in a full event
    /// channel (it keeps running commands then, so awaiting `call` in the task that reads
    /// [`Events`] cannot deadlock) returns first, and its frames follow once that event is
    /// delivered.
    pub async fn call<R: Send + 'static>(
        &self,
        f: impl FnOnce(&mut M, Instant) -> R + Send + 'static,
    ) -> Result<R, Closed> {
        let (tx, rx) = oneshot::channel();
        let cmd: Command<M> = Box::new(move |m, now| {
            let _ = tx.send(f(m, now));
        });
        self.commands.send(cmd).await.map_err(|_| Closed)?;
        rx.await.map_err(|_| Closed)
    }
}

impl<M> Handle<M> {
    /// Stops the driver gracefully and waits until it has stopped.
    ///
    /// Every open connection is closed with 1001 "going away" and reported to the machine
    /// with `handle_disconnect_with` (`Disconnect::Local`); then the event channel closes. Peers get
    /// 2 × [`close_timeout`](crate::Limits::close_timeout) to answer the close before their
    /// sockets are dropped. Calling it again, or on a stopped driver, returns at once.
    pub async fn shutdown(&self) {
        self.stop.send_replace(true);
        let mut done = self.done.clone();
        let _ = done.wait_for(|d| *d).await;
    }

    /// Whether the driver has stopped.
    pub fn is_closed(&self) -> bool {
        self.commands.is_closed()
    }

    /// The counters of the driver's UDP socket (datagrams received and sent, transmits
    /// dropped on a full send buffer, errors), or `None` for a driver without one. Reading
    /// them takes no lock and does not reach the owner task.
    pub fn udp_stats(&self) -> Option<UdpStats> {
        self.udp.as_ref().map(|c| c.snapshot())
    }

    /// The driver's transport counters: connections, frames and bytes each way, close
    /// frames by code, drops by reason (see [`TransportStats`]). Reading them takes no lock
    /// and does not reach the owner task.
    pub fn stats(&self) -> TransportStats {
        self.stats.snapshot()
    }

    /// The live counters behind [`stats`](Self::stats), for the tasks that write them.
    pub(crate) fn counters(&self) -> Arc<TransportCounters> {
        Arc::clone(&self.stats)
    }

    /// The machine-independent part that stops the driver and sees it stopped.
    pub(crate) fn stopper(&self) -> Stopper {
        Stopper {
            stop: Arc::clone(&self.stop),
            done: self.done.clone(),
        }
    }

    /// Attaches the UDP socket's counters.
    pub(crate) fn set_udp(&mut self, counters: Arc<UdpCounters>) {
        self.udp = Some(counters);
    }
}

/// Stops a driver without knowing its machine type (a [`Handle`]'s stop half).
#[derive(Clone)]
pub(crate) struct Stopper {
    stop: Arc<watch::Sender<bool>>,
    done: watch::Receiver<bool>,
}

impl Stopper {
    /// Asks the driver to stop, without waiting.
    pub(crate) fn request(&self) {
        self.stop.send_replace(true);
    }

    /// Waits until the driver has stopped.
    pub(crate) async fn stopped(&self) {
        let mut done = self.done.clone();
        let _ = done.wait_for(|d| *d).await;
    }
}

/// Machine events, in the order the machine produced them.
///
/// The channel is bounded ([`ServerConfig::event_capacity`](crate::ServerConfig::event_capacity)):
/// when it is full the driver waits, which slows every connection of that driver (so do
/// not wait on [`Handle::call`] in the task that should be reading the events). Drop the
/// `Events` to discard events instead. Once shutdown is requested, events that do not fit
/// are dropped. It ends (`None`) when the driver stops.
/// Also a [`futures_util::Stream`].
#[derive(Debug)]
pub struct Events<E> {
    rx: mpsc::Receiver<E>,
}

impl<E> Events<E> {
    pub(crate) fn new(rx: mpsc::Receiver<E>) -> Self {
        Self { rx }
    }

    /// The next event; `None` once the driver has stopped and every event was read.
    pub async fn recv(&mut self) -> Option<E> {
        self.rx.recv().await
    }

    /// The next event if one is ready.
    pub fn try_recv(&mut self) -> Option<E> {
        self.rx.try_recv().ok()
    }
}

impl<E> futures_util::Stream for Events<E> {
    type Item = E;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<E>> {
        self.rx.poll_recv(cx)
    }
}
