//! Reference llmrtc client.
//!
//! Connects to `--url` (default ws://127.0.0.1:8787/), sends `--wav FILE` (or a generated
//! utterance) as `audio` `--turns` times, prints one sentence per event, shows the LLM reply
//! as it streams, sums up each reply's TTS audio in one line, and writes that audio to
//! `--out` (a WAV file per turn: `reply-1.wav`, ...; a whole reply in another format is
//! written as it came, `reply-1.mp3`). `--drop-after N` drops the connection after turn N to
//! show a reconnect that recovers the session's history. `--attach` (repeatable) sends
//! images with the first turn, in one `attachments` message: an image file
//! (.png/.jpg/.jpeg/.gif/.webp, at most 4 MiB, sent as a base64 data URI), or a `data:` URI
//! or `http(s)://` URL as given. `--webrtc` offers a WebRTC peer connection after `ready`
//! (and after every reconnect, with a new peer): transcripts, the streamed reply and TTS
//! then arrive on the data channel, each once. With `--webrtc --wav FILE` the peer also
//! has an Opus audio track each way: the WAV is spoken on the microphone track in real time
//! (followed by a second of silence, so the server's VAD hears the end), and the reply's
//! speech comes back on the server's track and is written to `--out` as a 48 kHz WAV.
//!
//! ```text
//! cargo run --release --example llmrtc_server &
//! cargo run --release --example llmrtc_client -- --turns 2 --drop-after 1
//! cargo run --release --example llmrtc_client -- --attach menu.png
//! cargo run --release --example llmrtc_client -- --webrtc --turns 2 --drop-after 1
//! espeak-ng -w hello.wav "hello there" && cargo run --release --example llmrtc_client -- --webrtc --wav hello.wav
//! ```

#[tokio::main]
async fn main() -> std::process::ExitCode {
    agentwire_server::cli::llmrtc_client::main().await
}
