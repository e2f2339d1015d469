//! Library code of the JSON-RPC bus reference programs, shared by the examples
//! (`bus_server`, `bus_client`, `bus_demo`) and the end-to-end tests (`tests/bus_e2e.rs`).

pub mod client_app;
pub mod server_app;
