//! Relay + movie host + agent in one process, over 127.0.0.1: what `relay_demo` runs and
//! `tests/relay_booking.rs` checks.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use agentwire::agent_relay::{HostConfig, RelayConfig, DEFAULT_SESSION};

use super::agent_app::{self, Agent, Booked, Plan};
use super::host_app::{self, MovieHost};
use super::log_check::{self, Report};
use super::log_name::file_name;
use super::log_writer::SyncPolicy;
use super::server_app::{self, RelayApp};
use crate::endpoint::Place;

/// Where the demo's lines go (the three parts run in different tasks).
pub type Printer = Arc<dyn Fn(&str) + Send + Sync>;

/// What a demo run achieved.
#[derive(Debug)]
pub struct Outcome {
    /// The booking and `session.ended`.
    pub booked: Booked,
    /// The relay's study log of the study session (`<log dir>/<sessionId>.jsonl`).
    pub log_path: PathBuf,
    /// The log's check (`relay_log`'s).
    pub report: Report,
}

/// Why a demo run failed.
pub type DemoError = Box<dyn std::error::Error + Send + Sync>;

/// The path of the relay's log for `session` in `log_dir`: a study session's (`s-...`, as the
/// host reports it in `session.ended`) or, for the records outside a study session, a relay
/// session's.
pub fn log_path(log_dir: &Path, session: &str) -> PathBuf {
    log_dir.join(file_name(session))
}

/// Starts a relay on 127.0.0.1 (a free port) writing into `log_dir`, a movie host and an
/// agent, books a ticket following `plan` ([`book`]), stops everything and checks the log
/// ([`check`]).
pub async fn run(log_dir: &Path, plan: &Plan, print: Printer) -> Result<Outcome, DemoError> {
    let relay = server(Place::Bind("127.0.0.1:0"), log_dir).await?;
    print(&format!(
        "[relay] listening on {}, study log in {}",
        relay.url(),
        log_dir.display()
    ));
    let booked = book(&relay.url(), log_dir, plan, print).await;
    relay.shutdown().await;
    check(log_dir, booked?)
}

/// The demo's relay at `place` (its own listener, or a route of a shared one), writing its
/// study log into `log_dir` and syncing it at the end of each study session.
pub async fn server(place: Place<'_>, log_dir: &Path) -> std::io::Result<RelayApp> {
    let config = RelayConfig::default();
    let sync = SyncPolicy::SessionEnd;
    match place {
        Place::Bind(addr) => server_app::start(addr, config, log_dir, sync, |_| {}).await,
        Place::Route(at) => server_app::mount(at, config, log_dir, sync, |_| {}).await,
    }
}

/// A movie host and an agent join the relay at `url` (which writes its study log into
/// `log_dir`), and the agent books a ticket following `plan`; both leave. Prints the
/// conversation as the agent sees it (`agent ->`, `host  ->`, `relay ->`) and what the host
/// does (`[host]`).
pub async fn book(
    url: &str,
    log_dir: &Path,
    plan: &Plan,
    print: Printer,
) -> Result<Booked, DemoError> {
    let config = HostConfig::default();
    let dir = log_dir.to_owned();
    let host_print = Arc::clone(&print);
    let mut host = MovieHost::start(
        url,
        config,
        move |study_session| log_path(&dir, study_session).display().to_string(),
        move |ev| {
            if let Some(line) = host_app::describe(ev) {
                host_print(&format!("[host] {line}"));
            }
        },
    )?;
    if !host.wait_joined(Duration::from_secs(10)).await {
        host.shutdown().await;
        return Err("the movie host did not join the relay within 10 s".into());
    }

    let agent_print = Arc::clone(&print);
    let booked = async {
        let mut agent = Agent::connect(url, move |dir, v| {
            agent_print(&agent_app::describe(dir, v));
        })
        .await?;
        agent.join(DEFAULT_SESSION, "relay-agent").await?;
        let booked = agent_app::book_ticket(&mut agent, plan).await;
        agent.close().await;
        booked
    }
    .await;
    host.shutdown().await;
    Ok(booked?)
}

/// Checks the study log of the booking's study session in `log_dir` (`relay_log`'s check),
/// once the relay has stopped and written it.
pub fn check(log_dir: &Path, booked: Booked) -> Result<Outcome, DemoError> {
    let path = log_path(log_dir, &booked.session_id);
    let report = log_check::check_file(&path)?;
    Ok(Outcome {
        booked,
        log_path: path,
        report,
    })
}
