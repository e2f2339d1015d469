//! The External Agent Protocol end to end in one process: the relay on 127.0.0.1 (a free
//! port), the movie host and an agent that books two tickets, over real sockets. Prints the
//! conversation as the agent sees it, what the host does, and the path and summary of the
//! study log the relay wrote. Exits 0 when the booking was made and the log checks out.
//!
//! ```text
//! cargo run --release --example relay_demo      # log in a temp directory, removed at exit
//! cargo run --release --example relay_demo -- --log-dir ./relay-logs   # kept
//! ```

#[tokio::main]
async fn main() -> std::process::ExitCode {
    agentwire_server::cli::relay_demo::main().await
}
