//! `agentwire demo`: the five reference servers on one port in one process, and a scripted
//! client of each against them, with a readable transcript of each protocol's story.
//!
//! The servers are mounted on one listener on 127.0.0.1 (a free port) at the paths of the
//! default configuration (bus `/bus`, chopsticks `/chopsticks`, mcpw `/ws`, llmrtc `/llmrtc`,
//! relay `/agent/ws`), as `agentwire serve` serves them with no configuration file; the relay
//! writes its study log into a temporary folder, removed at exit unless `--log-dir` is
//! given. Each story is the one its demo command tells on a listener of its own
//! (`bus_demo`, `chopsticks_demo`, `mcpw_demo`, `llmrtc_demo`, `relay_demo`), from the same
//! code: each server with the demo's settings and event printer, then each script, in that
//! order. A story that does not go as expected stops the demo with exit code 1.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use agentwire::tokio::{ListenerConfig, Router};

use crate::config::Config;
use crate::endpoint::{BoundAddr, Mount, Place};
use crate::relay;

use super::relay_demo::{self, TempLogDir};
use super::script::DemoError;
use super::{bus_demo, chopsticks_demo, llmrtc_demo, mcpw_demo};

/// The longest the whole demo may take (it runs in CI: it must never hang).
pub const DEMO_TIMEOUT: Duration = Duration::from_secs(240);

/// Where the demo's listener binds: loopback, a free port.
const LISTEN: &str = "127.0.0.1:0";

/// `agentwire demo`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Keep the relay's study log in this folder (default: a temporary folder, removed at
    /// exit).
    #[arg(long)]
    log_dir: Option<PathBuf>,
}

/// Runs `agentwire demo` (logging is the caller's): exit code 0 when every story went as
/// expected, 1 otherwise.
pub async fn run(args: Args) -> ExitCode {
    let (log_dir, temp) = match args.log_dir {
        Some(dir) => (dir, None),
        None => {
            let temp = TempLogDir::new("agentwire-demo");
            (temp.path().to_owned(), Some(temp))
        }
    };
    let outcome = match tokio::time::timeout(DEMO_TIMEOUT, demo(log_dir, temp.is_some())).await {
        Ok(outcome) => outcome,
        Err(_) => Err(format!("did not finish within {DEMO_TIMEOUT:?}").into()),
    };
    match outcome {
        Ok(()) => {
            println!("\n== agentwire demo finished: all five stories as expected");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("agentwire demo: {e}");
            ExitCode::FAILURE
        }
    }
}

/// The paths of the five protocols in the default configuration.
struct Paths {
    bus: String,
    chopsticks: String,
    mcpw: String,
    llmrtc: String,
    relay: String,
}

impl Paths {
    fn of(config: &Config) -> Self {
        Self {
            bus: config.bus.path.clone(),
            chopsticks: config.chopsticks.path.clone(),
            mcpw: config.mcpw.path.clone(),
            llmrtc: config.llmrtc.path.clone(),
            relay: config.relay.path.clone(),
        }
    }
}

/// The route `path` of the demo's listener.
fn at<'a>(router: &'a mut Router, addr: &BoundAddr, path: &'a str) -> Place<'a> {
    Place::Route(Mount {
        router,
        path,
        listen: LISTEN,
        addr: addr.clone(),
        tls: false,
    })
}

async fn demo(log_dir: PathBuf, temporary_log: bool) -> Result<(), DemoError> {
    let paths = Paths::of(&Config::default());
    let mut router = Router::new(ListenerConfig::default());
    let addr = BoundAddr::new();
    let bus = bus_demo::server(at(&mut router, &addr, &paths.bus)).await?;
    let mut chopsticks = chopsticks_demo::server(at(&mut router, &addr, &paths.chopsticks)).await?;
    let mut mcpw = mcpw_demo::server(at(&mut router, &addr, &paths.mcpw)).await?;
    let llmrtc = llmrtc_demo::server(at(&mut router, &addr, &paths.llmrtc)).await?;
    let relay = relay::demo::server(at(&mut router, &addr, &paths.relay), &log_dir).await?;
    let listener = router.bind(LISTEN).await?;
    addr.set(listener.local_addr());
    println!(
        "== agentwire demo: five servers on one listener, {}",
        listener.local_addr()
    );
    for (protocol, url) in [
        ("bus", bus.url()),
        ("chopsticks", chopsticks.app.url()),
        ("mcpw", mcpw.app.url()),
        ("llmrtc", llmrtc.url()),
        ("relay", relay.url()),
    ] {
        println!("   {protocol:<10} {url}");
    }

    let stories = async {
        println!();
        bus_demo::script(&bus.url()).await?;
        println!();
        chopsticks_demo::script(&mut chopsticks).await?;
        println!();
        mcpw_demo::script(&mut mcpw).await?;
        println!();
        llmrtc_demo::script(&llmrtc).await?;
        println!(
            "\n== relay demo: movie host + booking agent through the relay, with its study log"
        );
        relay::demo::book(
            &relay.url(),
            &log_dir,
            &Default::default(),
            relay_demo::printer(),
        )
        .await
    }
    .await;

    println!("\n== stopping the five servers (open connections get 1001)");
    bus.server.shutdown().await;
    chopsticks.app.server.shutdown().await;
    mcpw.app.shutdown().await;
    llmrtc.shutdown().await;
    // The relay writes and syncs the study log as it stops; the log is checked after.
    relay.shutdown().await;
    listener.shutdown().await;
    let outcome = relay::demo::check(&log_dir, stories?)?;
    relay_demo::summary(&outcome, temporary_log)
}
