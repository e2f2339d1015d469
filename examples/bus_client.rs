//! A command-line JSON-RPC bus client.
//!
//! - `subscribe PATTERN [--stop]`: prints each delivery as one JSON line
//!   `{"topic":..,"payload":..}` on stdout and answers it `stopPropagation: false` (or `true`
//!   with `--stop`); runs until Ctrl-C, reconnecting and re-subscribing if the bus goes away.
//! - `publish TOPIC JSON`: prints the bus's result, e.g.
//!   `{"success":true,"stopPropagation":false,"delivered":1,...}`.
//! - `ping`: prints the bus's timestamp.
//!
//! ```text
//! cargo run --example bus_client -- subscribe 'inbound:*'
//! cargo run --example bus_client -- publish inbound:chat-1 '{"text":"hello"}'
//! ```

#[tokio::main]
async fn main() -> std::process::ExitCode {
    agentwire_server::cli::bus_client::main().await
}
