//! The baselines: NATS core and Redis pub/sub, driven in the same style as the bus scenarios
//! (same payloads, same bounds, same windows). Their clients speak the servers' text
//! protocols directly over tokio sockets (a few dozen lines each), which keeps this crate
//! free of two client libraries and their runtimes.

mod line;
pub mod nats;
pub mod redis;

use crate::scenario::Scenario;

/// The baseline scenarios.
pub fn scenarios() -> Vec<Scenario> {
    let mut v = nats::scenarios();
    v.extend(redis::scenarios());
    v
}
