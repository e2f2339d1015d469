//! The `agentwire` binary: `agentwire --help` lists its subcommands; the code is
//! [`agentwire_server::cli::agentwire`].

#[tokio::main]
async fn main() -> std::process::ExitCode {
    agentwire_server::cli::agentwire::main().await
}
