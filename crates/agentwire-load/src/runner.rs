//! Runs a scenario: starts its server (or uses the one given), runs it, reports.

use std::time::Instant;

use crate::error::LoadError;
use crate::options::Options;
use crate::report::Report;
use crate::scenario::{Ctx, Scenario};
use crate::server::{AgentwireProgram, ServerKind, ServerProcess};

/// Which server a run drives.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub enum Target {
    /// Start the scenario's server for the run (killed at the end), the agentwire server with
    /// this program.
    Spawn(AgentwireProgram),
    /// A server already running at this address (a `ws://` URL for the agentwire server,
    /// `HOST:PORT` for NATS and Redis); `pid`, when given, is read in `/proc` for the CPU
    /// figures (without it they are left out).
    Given {
        /// Where the scenario connects.
        address: String,
        /// The server's process id, when it runs on this machine.
        pid: Option<u32>,
    },
}

/// Runs `scenario` once with `options` against `target`.
pub async fn run(
    scenario: &Scenario,
    options: &Options,
    target: &Target,
) -> Result<Report, LoadError> {
    let (server, ctx) = match (target, &scenario.server) {
        (_, ServerKind::InProcess { threads }) => (None, Ctx::in_process(options.clone(), threads)),
        (Target::Spawn(program), _) => {
            let kind = scenario.server.clone();
            let program = program.clone();
            let server = tokio::task::spawn_blocking(move || ServerProcess::start(&kind, &program))
                .await
                .map_err(|e| LoadError::Usage(format!("starting the server: {e}")))??;
            let ctx = Ctx::new(
                server.address().to_owned(),
                options.clone(),
                Some(server.pid()),
            );
            (Some(server), ctx)
        }
        (Target::Given { address, pid }, _) => {
            (None, Ctx::new(address.clone(), options.clone(), *pid))
        }
    };
    let began = Instant::now();
    let outcome = (scenario.run)(ctx.clone()).await?;
    let ended = Instant::now();
    let report = Report::new(
        scenario.name,
        scenario.server.name(),
        options,
        &outcome,
        ctx.window_marks(),
        (began, ended),
    );
    drop(server);
    Ok(report)
}
