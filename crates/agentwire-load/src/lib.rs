//! `agentwire-load`: a load generator that drives the agentwire server over real sockets on
//! 127.0.0.1, with NATS and Redis beside it in the same run and the same generator style.
//!
//! A run picks scenarios by name ([`registry::all`] lists them), starts each one's server on
//! a free loopback port (the agentwire server as `agentwire-load agentwire serve ...`, a
//! process of its own running agentwire-server's `agentwire` command tree, or an
//! `agentwire` binary given with `--agentwire-bin`; `nats-server` and `redis-server` from
//! PATH), drives it, and reports messages/s, deliveries/s, p50/p99/p99.9 latency and the
//! server's CPU per message and per delivery from `/proc/<pid>/stat` (user + system time of
//! every thread over the measuring window), its context switches per delivery (its wake-ups,
//! from each thread's `/proc/<pid>/task/<tid>/status`) and, with `--syscalls`, its syscalls
//! per delivery (`perf stat`). With `--server ADDRESS` it drives a server already running
//! instead; `--server-pid PID` then gives those figures.
//!
//! Every load loop is bounded by a count (`--messages`) and a time (`--duration-ms`): see
//! [`options::Budget`].
//!
//! Modules: [`options`] (what a run is asked), [`scenario`] (the [`scenario::Scenario`]
//! type, the context a scenario gets, the agentwire scenarios), [`registry`] (every scenario by
//! name), [`baseline`]
//! (NATS and Redis, spoken in their text protocols over tokio sockets), [`server`] (the
//! processes a run starts), [`runner`] (one run), [`report`] (figures and table), [`drive`] (what load loops share),
//! `window` (what the measuring window reads at its ends), [`threads`] (whose figures are
//! the server's), [`cpu`] (CPU time and memory from `/proc`), [`switches`] (context switches
//! from `/proc`), [`syscalls`] (`perf stat`), [`latency`] (HDR histogram and send stamps), [`payload`] (the padded JSON
//! payload), [`ws`] (WebSocket client helpers), [`cli`] (the command line), [`error`].

// The workspace's clippy.toml bans clocks and sleeps for the sans-IO crates; a load generator
// is made of them (deadlines, latencies, a server's start-up wait).
#![allow(
    clippy::disallowed_methods,
    reason = "a load generator reads the clock to bound and time its load"
)]

pub mod baseline;
pub mod cli;
pub mod cpu;
pub mod drive;
pub mod error;
pub mod in_process;
pub mod latency;
pub mod options;
pub mod payload;
pub mod registry;
pub mod report;
pub mod runner;
pub mod scenario;
pub mod server;
pub mod switches;
pub mod syscalls;
pub mod threads;
pub(crate) mod window;
pub mod ws;

pub use error::LoadError;
pub use options::{Budget, Options};
pub use report::Report;
pub use scenario::{Ctx, Outcome, Scenario};
