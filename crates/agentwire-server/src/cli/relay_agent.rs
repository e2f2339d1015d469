//! The `relay_agent` command: its flags and its `main`. `examples/relay_agent.rs` is the binary,
//! and its documentation says what the command does and how to run it.

use std::process::ExitCode;

use crate::relay;
use agentwire::agent_relay::DEFAULT_SESSION;
use clap::Parser;
use relay::agent_app::{book_ticket, describe, Agent, Plan};

/// An agent that books movie tickets through an agent relay.
#[derive(Parser, Debug)]
#[command(name = "agentwire", version)]
pub struct Args {
    /// The relay's endpoint.
    #[arg(long, default_value = "ws://127.0.0.1:3000/agent/ws")]
    url: String,
    /// The relay session to join.
    #[arg(long, default_value = DEFAULT_SESSION)]
    session: String,
    /// The agent's name (`agentName` of `relay.join`).
    #[arg(long, default_value = "relay-agent")]
    name: String,
    /// `studyId` of `session.start`.
    #[arg(long, default_value = "pilot-01")]
    study_id: String,
    /// `participantId` of `session.start`.
    #[arg(long, default_value = "P07")]
    participant_id: String,
    /// Tickets (and seats) to book, 1 to 10.
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u64).range(1..=10))]
    tickets: u64,
    /// `wss://` settings.
    #[command(flatten)]
    tls: super::client_tls::TlsFlags,
}

/// Runs the `relay_agent` command, as `cargo run --example relay_agent` does.
pub async fn main() -> ExitCode {
    crate::common::init_tracing("warn");
    run(Args::parse()).await
}

/// Runs the command with `args`, as `main` does after parsing them (the `agentwire`
/// binary's subcommand calls it with the same flags); installs no tracing subscriber.
pub async fn run(args: Args) -> ExitCode {
    if let Err(e) = args.tls.install(None) {
        eprintln!("relay_agent: {e}");
        return ExitCode::FAILURE;
    }
    let plan = Plan {
        study_id: args.study_id,
        participant_id: args.participant_id,
        tickets: args.tickets,
    };
    let run = async {
        let mut agent =
            Agent::connect(&args.url, |dir, v| println!("{}", describe(dir, v))).await?;
        agent.join(&args.session, &args.name).await?;
        let booked = book_ticket(&mut agent, &plan).await;
        agent.close().await;
        booked
    };
    match run.await {
        Ok(b) => {
            println!(
                "\nbooked {} in session {} with {} tool call(s); study log: {}",
                b.reference,
                b.session_id,
                b.tool_calls,
                b.ended["logFile"].as_str().unwrap_or("?")
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("relay_agent failed: {e}");
            ExitCode::FAILURE
        }
    }
}
