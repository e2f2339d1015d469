//! Scenarios: what a run does to a server. A [`Scenario`] names the server it needs
//! ([`ServerKind`]) and an async `run` that gets a [`Ctx`]: the server's address, the run's
//! [`Options`], and the measuring window. `run` connects and prepares everything first, then
//! calls [`Ctx::start`] (which opens the window and returns the [`Budget`] every load loop
//! checks), drives the load, waits for what it sent to arrive, calls [`Ctx::stop`], and
//! returns an [`Outcome`]; the runner turns what the window measured (clock, the server's CPU
//! time, context switches and syscalls) into the
//! [`Report`](crate::report::Report).
//!
//! [`crate::registry`] lists every scenario, baselines included; `--smoke` and the smoke
//! tests run each of them.

pub mod bus;
pub mod chopsticks;
pub mod llmrtc;
pub mod mcpw;
pub mod relay;

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};

use crate::error::LoadError;
use crate::latency::Latency;
use crate::options::{Budget, Options};
use crate::server::ServerKind;
use crate::threads::Subject;
use crate::window::{Marks, Window};

/// The future a scenario's `run` returns.
pub type RunFuture = Pin<Box<dyn Future<Output = Result<Outcome, LoadError>> + Send>>;

/// One scenario: its name on the command line, a line saying what it measures, the server it
/// drives and the code that drives it.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct Scenario {
    /// The name on the command line (`bus-chain`, `nats-fanout`, ...).
    pub name: &'static str,
    /// What one message is and what is counted.
    pub about: &'static str,
    /// The server it needs.
    pub server: ServerKind,
    /// Drives the server (see the module docs).
    pub run: fn(Ctx) -> RunFuture,
}

impl Scenario {
    /// A scenario.
    pub fn new(
        name: &'static str,
        about: &'static str,
        server: ServerKind,
        run: fn(Ctx) -> RunFuture,
    ) -> Self {
        Self {
            name,
            about,
            server,
            run,
        }
    }
}

/// What a scenario counted.
#[derive(Clone, Debug, Default)]
#[non_exhaustive]
pub struct Outcome {
    /// Messages sent inside the window (publishes, requests, frames).
    pub messages: u64,
    /// Messages received by the receivers inside the window (deliveries to subscribers,
    /// replies).
    pub deliveries: u64,
    /// The deliveries that should have arrived (`messages` × receivers), when the scenario
    /// knows it; a report shows the difference as lost.
    pub expected_deliveries: Option<u64>,
    /// Messages answered with an error, or answers that were not the expected one.
    pub errors: u64,
    /// Latencies (a request's round trip, or publish to delivery).
    pub latency: Latency,
    /// Server memory per idle connection, in bytes, for the idle scenarios.
    pub rss_per_connection: Option<f64>,
}

/// What a scenario gets: the server's address, the options and the measuring window.
/// Cheap to clone.
#[derive(Clone, Debug)]
pub struct Ctx {
    inner: Arc<CtxInner>,
}

#[derive(Debug)]
struct CtxInner {
    address: String,
    options: Options,
    pid: Option<u32>,
    /// The runtime threads of an in-process server, whose CPU is the server's.
    threads: Option<&'static str>,
    window: Mutex<Window>,
}

impl Ctx {
    /// A context for a server at `address` (process `pid` when known, for `/proc`).
    pub fn new(address: String, options: Options, pid: Option<u32>) -> Self {
        Self {
            inner: Arc::new(CtxInner {
                address,
                options,
                pid,
                threads: None,
                window: Mutex::new(Window::default()),
            }),
        }
    }

    /// A context for a server the scenario starts in this process on a runtime whose
    /// threads are named `threads` (see [`ServerKind::InProcess`]): no address, and the
    /// server's CPU is those threads'.
    pub fn in_process(options: Options, threads: &'static str) -> Self {
        Self {
            inner: Arc::new(CtxInner {
                address: String::new(),
                options,
                pid: None,
                threads: Some(threads),
                window: Mutex::new(Window::default()),
            }),
        }
    }

    /// Where to connect: the protocol's `ws://` URL for the agentwire server,
    /// `127.0.0.1:PORT` for `nats-server` and `redis-server`.
    pub fn address(&self) -> &str {
        &self.inner.address
    }

    /// The run's options.
    pub fn options(&self) -> &Options {
        &self.inner.options
    }

    /// Opens the measuring window (clock, server CPU and context switches; with
    /// `--syscalls`, perf attached first) and returns the run's budget: `--messages`
    /// messages until `--duration-ms` from now.
    pub fn start(&self) -> Budget {
        let now = self.window().open(self.subject(), self.options().syscalls);
        Budget::new(self.options().messages, now + self.options().duration())
    }

    /// Closes the measuring window.
    pub fn stop(&self) {
        self.window().close(self.subject());
    }

    /// The server's resident memory in bytes, when the load generator knows its process.
    pub fn server_rss(&self) -> Option<u64> {
        crate::cpu::rss_bytes(self.inner.pid?).ok()
    }

    /// Whose figures are the server's: the in-process server's threads, or the process.
    fn subject(&self) -> Option<Subject> {
        if let Some(threads) = self.inner.threads {
            return Some(Subject::Threads(threads));
        }
        self.inner.pid.map(Subject::Process)
    }

    fn window(&self) -> std::sync::MutexGuard<'_, Window> {
        self.inner
            .window
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    pub(crate) fn window_marks(&self) -> Marks {
        self.window().marks()
    }
}
