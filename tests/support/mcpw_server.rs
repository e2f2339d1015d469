//! The MCPW reference server started in the test's own process on 127.0.0.1, its events
//! copied to a channel the test reads.

use agentwire::mcpw::orchestrator::{OrchestratorConfig, OrchestratorEvent, UpgradeConfig};
use agentwire_server::mcpw::server_app::{self, ServerApp};
use tokio::sync::mpsc::{self, UnboundedReceiver};

/// Starts the reference server on port 0 with `config` and `upgrade` (and a `/metrics`
/// listener on port 0 when `metrics`); returns it and every event it emits.
pub(crate) async fn start(
    metrics: bool,
    config: OrchestratorConfig,
    upgrade: UpgradeConfig,
) -> (ServerApp, UnboundedReceiver<OrchestratorEvent>) {
    let (tx, rx) = mpsc::unbounded_channel();
    let app = server_app::start(
        "127.0.0.1:0",
        metrics.then_some("127.0.0.1:0"),
        config,
        upgrade,
        move |ev| {
            let _ = tx.send(ev.clone());
        },
    )
    .await
    .expect("bind");
    (app, rx)
}
