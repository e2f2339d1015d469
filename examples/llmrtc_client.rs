//! Reference llmrtc client.
//!
//! Connects to `--url` (default ws://127.0.0.1:8787/), sends `--wav FILE` (or a generated
//! utterance) as `audio` `--turns` times, prints one sentence per event, shows the LLM reply
//! as it streams, sums up each reply's TTS audio in one line, and writes that audio to
//! `--out` (a WAV file per turn: `reply-1.wav`, ...). `--drop-after N` drops the connection
//! after turn N to show a reconnect that recovers the session's history.
//!
//! ```text
//! cargo run --release --example llmrtc_server &
//! cargo run --release --example llmrtc_client -- --turns 2 --drop-after 1
//! ```

#[tokio::main]
async fn main() -> std::process::ExitCode {
    agentwire_apps::cli::llmrtc_client::main().await
}
