//! Library code of the llmrtc reference programs, shared by the examples (`llmrtc_server`,
//! `llmrtc_client`, `llmrtc_demo`) and the end-to-end tests (`tests/llmrtc_e2e.rs`).

pub mod audio;
pub mod client_app;
pub mod machine;
pub mod providers;
pub mod server_app;
pub mod server_cli;
pub mod server_log;

/// The WebRTC machines the apps drive (`llmrtc-webrtc`), for the tests and programs that
/// build their own.
pub use llmrtc_webrtc as webrtc;
