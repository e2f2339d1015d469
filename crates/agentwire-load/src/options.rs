//! What a run is asked to do ([`Options`]) and the bound every load loop checks ([`Budget`]).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::Serialize;

/// The shape and the bounds of one run; each scenario reads the fields it needs.
#[derive(Clone, Debug, clap::Args, Serialize)]
#[non_exhaustive]
pub struct Options {
    /// Connections of the scenarios with one kind of client (idle connections, agents,
    /// sessions).
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u64).range(1..=100_000))]
    pub connections: u64,
    /// Publishing connections (each one publish or request in flight, or a window of 64
    /// notifications).
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u64).range(1..=10_000))]
    pub publishers: u64,
    /// Subscribers of a fan-out.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..=10_000))]
    pub subscribers: u64,
    /// Hops of a request chain (interceptors answering each publish in turn).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..=1_000))]
    pub chain: u64,
    /// Time bound of the measured part of a run, in milliseconds.
    #[arg(long, default_value_t = 2_000, value_parser = clap::value_parser!(u64).range(1..=3_600_000))]
    pub duration_ms: u64,
    /// Count bound of the measured part: publishes (or requests) across all publishers.
    #[arg(long, default_value_t = 1_000_000, value_parser = clap::value_parser!(u64).range(1..=1_000_000_000))]
    pub messages: u64,
    /// Payload size in bytes (a JSON object padded to it).
    #[arg(long, default_value_t = 190, value_parser = clap::value_parser!(u64).range(32..=1_048_576))]
    pub size: u64,
    /// Counts the server's syscalls over the measuring window with `perf stat` (off by
    /// default: it needs `perf` and adds the tracepoint's cost to the server's CPU).
    #[arg(long)]
    pub syscalls: bool,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            connections: 100,
            publishers: 8,
            subscribers: 10,
            chain: 1,
            duration_ms: 2_000,
            messages: 1_000_000,
            size: 190,
            syscalls: false,
        }
    }
}

impl Options {
    /// The small bounded run of `--smoke` (and CI): 300 ms, at most 2,000 messages, 2
    /// publishers, 3 subscribers, a chain of 3, 20 connections.
    pub fn smoke() -> Self {
        Self {
            connections: 20,
            publishers: 2,
            subscribers: 3,
            chain: 3,
            duration_ms: 300,
            messages: 2_000,
            size: 190,
            syscalls: false,
        }
    }

    /// The time bound as a [`Duration`].
    pub fn duration(&self) -> Duration {
        Duration::from_millis(self.duration_ms)
    }

    /// The payload size as a `usize`.
    pub fn payload_size(&self) -> usize {
        usize::try_from(self.size).unwrap_or(usize::MAX)
    }
}

/// The shared bound of a run's load loops: a message may be sent while fewer than the
/// count bound have been taken and the deadline has not passed. Cheap to clone.
#[derive(Clone, Debug)]
pub struct Budget {
    taken: Arc<AtomicU64>,
    limit: u64,
    deadline: Instant,
}

impl Budget {
    /// A budget of `limit` messages until `deadline`.
    pub fn new(limit: u64, deadline: Instant) -> Self {
        Self {
            taken: Arc::new(AtomicU64::new(0)),
            limit,
            deadline,
        }
    }

    /// Takes one message: `false` once the count or the time is spent.
    pub fn take(&self) -> bool {
        if Instant::now() >= self.deadline {
            return false;
        }
        self.taken.fetch_add(1, Ordering::Relaxed) < self.limit
    }

    /// How many messages were taken (at most the limit).
    pub fn taken(&self) -> u64 {
        self.taken.load(Ordering::Relaxed).min(self.limit)
    }

    /// When the time bound ends.
    pub fn deadline(&self) -> Instant {
        self.deadline
    }
}
