//! A server run in the load generator's own process, for the scenarios whose load starts in
//! the server's application (the Chopsticks controller's requests, MCPW task submissions),
//! which `agentwire serve` has no way to take from outside: a multi-thread tokio runtime of
//! its own, with two workers (as `agentwire serve` on this 2-core machine) named after the
//! scenario, whose CPU time is the server's ([`threads_cpu_time`], from `/proc/self/task`).

use std::future::Future;
use std::io;
use std::time::Duration;

use crate::error::LoadError;

/// Worker threads of an in-process server's runtime.
const WORKERS: usize = 2;

/// The runtime an in-process server runs on; [`stop`](Self::stop) ends it.
#[derive(Debug)]
pub struct InProcess {
    runtime: tokio::runtime::Runtime,
}

impl InProcess {
    /// A runtime whose threads are all named `threads` (at most 15 bytes: Linux keeps that
    /// much of a thread's name, and the name is how its CPU time is found).
    pub fn new(threads: &'static str) -> Result<Self, LoadError> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(WORKERS)
            .thread_name(threads)
            .enable_all()
            .build()
            .map_err(|e| LoadError::io("starting the in-process server's runtime", e))?;
        Ok(Self { runtime })
    }

    /// Runs `fut` on the server's runtime and waits for its result.
    pub async fn spawn<T: Send + 'static>(
        &self,
        fut: impl Future<Output = T> + Send + 'static,
    ) -> Result<T, LoadError> {
        self.runtime
            .spawn(fut)
            .await
            .map_err(|e| LoadError::Protocol(format!("the in-process server failed: {e}")))
    }

    /// Ends the runtime without waiting for its tasks (callable from async code).
    pub fn stop(self) {
        self.runtime.shutdown_background();
    }
}

/// Raises the per-address connection and handshake caps of the reference servers this
/// process starts (`agentwire_server::common::AddressLimits`) to the values the load
/// generator gives `agentwire serve`: every load connection comes from 127.0.0.1.
pub fn lift_address_limits() {
    agentwire_server::common::AddressLimits {
        max_connections_per_address: 200_000,
        max_pending_handshakes_per_address: 100_000,
    }
    .install();
}

/// User plus system CPU time of this process's threads named `name` (`/proc/self/task/*/comm`).
pub fn threads_cpu_time(name: &'static str) -> io::Result<Duration> {
    let mut total = Duration::ZERO;
    for thread in crate::threads::Subject::Threads(name).threads()? {
        // A thread may end between the listing and this read: skip it.
        if let Ok(stat) = std::fs::read_to_string(thread.dir.join("stat")) {
            total += crate::cpu::stat_cpu_time(&stat)?;
        }
    }
    Ok(total)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_named_threads_are_counted() {
        let server = InProcess::new("aw-test-cpu").unwrap();
        let spin = || {
            let mut x = 0u64;
            for i in 0..30_000_000u64 {
                x = x.wrapping_mul(31).wrapping_add(i);
            }
            x
        };
        let before = threads_cpu_time("aw-test-cpu").unwrap();
        let x = server
            .runtime
            .block_on(async move { tokio::task::spawn(async move { spin() }).await.unwrap() });
        assert!(x != 1);
        let busy = threads_cpu_time("aw-test-cpu").unwrap();
        assert!(busy >= before);
        assert_eq!(threads_cpu_time("no-such-thread").unwrap(), Duration::ZERO);
        server.stop();
    }
}
