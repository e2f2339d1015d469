//! The simulated-time harness for `BusClient` against the `Bus`.

use std::time::Duration;

use agentwire_core::sim::{Sim, SimConfig};
use agentwire_core::SequentialIds;
use jsonrpc_bus_proto::{Bus, BusClient, BusConfig, ClientConfig, ClientEvent};

use super::t0;

/// The bus with `BusClient` clients in the simulator.
pub type BusSim = Sim<Bus, BusClient>;

/// A bus with `cfg` (its wall clock at 2025-02-14T12:00:00Z) and 1 ms links.
pub fn sim_with(cfg: BusConfig) -> BusSim {
    let start = t0();
    Sim::new(
        Bus::new(cfg, SequentialIds::new(1), start, 1_739_534_400_000),
        start,
        SimConfig::default().with_latency(Duration::from_millis(1)),
    )
}

/// Adds a client with `cfg` (its ids from `seed`), connects it and checks it initialized.
pub fn client(sim: &mut BusSim, cfg: ClientConfig, seed: u64) -> usize {
    let idx = sim.add_client(BusClient::new(cfg, SequentialIds::new(seed)));
    sim.connect(idx);
    sim.settle();
    let events = sim.take_client_events(idx);
    assert!(
        matches!(events.first(), Some(ClientEvent::Initialized(r)) if r.server_info.name == "bub-bus"),
        "{events:?}"
    );
    idx
}

/// Subscribes client `idx` to `pattern` and checks the bus confirmed it.
pub fn subscribe(sim: &mut BusSim, idx: usize, pattern: &str) {
    let id = sim
        .call_client(idx, |c, now| c.subscribe(pattern, now))
        .unwrap();
    sim.settle();
    let events = sim.take_client_events(idx);
    assert!(
        events.iter().any(|e| matches!(e, ClientEvent::Subscribed { request, subscription_id: Some(_), .. } if *request == id)),
        "{events:?}"
    );
}
