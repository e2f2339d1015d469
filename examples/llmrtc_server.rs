//! Reference llmrtc server with offline provider stand-ins.
//!
//! Serves the llmrtc protocol v1 on `--listen` (default 127.0.0.1:8787, the web client's
//! default signalling URL) with **stand-in providers, not real ones**: a scripted STT that
//! returns the next line of `--transcript` per utterance, after partial transcripts word by
//! word (default: the example script built
//! into the program, so it runs from anywhere), an LLM that echoes the transcript token by
//! token (and calls playbook tools whose name the user says), and a TTS that "speaks" in
//! PCM tones. `--playbook FILE` turns on playbook mode (stages and tools as JSON, see
//! `crates/agentwire-server/src/llmrtc/data/playbook.json`); `--example-playbook` uses that
//! file's built-in copy. `--no-streaming-tts` sends each reply's audio whole, in one `tts`
//! message (a WAV file), instead of `tts-chunk`s. Each client may send 50 messages and
//! 1 MiB a second (bursts of 100 and 16 MiB); beyond that it gets `error RATE_LIMITED`.
//! Events go to stderr as one sentence each (`RUST_LOG`).
//!
//! **WebRTC is on by default**: an `offer` gets a real answer (ICE-lite, DTLS, the `llmrtc`
//! data channel, Opus audio tracks), every peer on one UDP socket bound on the IP of
//! `--listen`, port `--udp-port` (default: any free port, printed at startup). Behind NAT,
//! `--public-ip IP` (repeatable) adds the address clients reach as a host candidate (forward
//! the UDP port to this machine); `--listen 0.0.0.0:...` without it offers only 127.0.0.1.
//! `--ice-server URL[,USERNAME,CREDENTIAL]` (repeatable) fills `ready.iceServers`.
//! `--no-webrtc` binds no UDP socket: every `offer` gets `error WEBRTC_UNAVAILABLE` and
//! sessions run over the WebSocket alone.
//!
//! ```text
//! cargo run --release --example llmrtc_server -- --listen 127.0.0.1:8787 --example-playbook
//! cargo run --release --example llmrtc_server -- --listen 0.0.0.0:8787 --udp-port 50000 --public-ip 203.0.113.7
//! ```

#[tokio::main]
async fn main() -> std::process::ExitCode {
    agentwire_server::cli::llmrtc_server::main().await
}
