//! Every bus scenario and every baseline runs a short bounded load against a server the tool
//! starts (the agentwire server from this crate's binary, `nats-server`, `redis-server`) and
//! delivers exactly the expected count, with the server's CPU and context switches measured.
//! Under `CI=true` a missing `nats-server` or `redis-server` fails the test; elsewhere those
//! scenarios are skipped with a message. Syscalls are counted only where `perf` works (it is
//! optional and `.ci/run` does not install it): elsewhere that test says so and passes.

use agentwire_load::registry::find;
use agentwire_load::runner::{run, Target};
use agentwire_load::server::{find_program, AgentwireProgram};
use agentwire_load::{LoadError, Options, Report};

fn target() -> Target {
    Target::Spawn(AgentwireProgram::Load(
        env!("CARGO_BIN_EXE_agentwire-load").into(),
    ))
}

/// Runs `name` with the smoke options, or `None` when its server program is missing
/// outside CI.
async fn smoke(name: &str) -> Option<Report> {
    let scenario = find(name).expect("registered");
    match run(&scenario, &Options::smoke(), &target()).await {
        Ok(r) => Some(r),
        Err(e @ LoadError::MissingProgram { .. })
            if std::env::var("CI").as_deref() != Ok("true") =>
        {
            eprintln!("skipping {name}: {e}");
            None
        }
        Err(e) => panic!("{name}: {e}"),
    }
}

/// A load run: something was sent, every delivery arrived, no error, latencies recorded.
fn delivered_all(r: &Report, receivers: u64) {
    assert!(r.messages > 0, "{}: nothing sent", r.scenario);
    assert!(
        r.messages <= Options::smoke().messages,
        "{}: over the bound",
        r.scenario
    );
    assert_eq!(
        r.deliveries,
        r.messages * receivers,
        "{}: deliveries",
        r.scenario
    );
    assert_eq!(r.lost, Some(0), "{}", r.scenario);
    assert_eq!(r.errors, 0, "{}: errors", r.scenario);
    assert!(
        r.p50_us.is_some() && r.p999_us >= r.p50_us,
        "{}: latency",
        r.scenario
    );
    assert!(
        r.cpu_us_per_message.is_some(),
        "{}: the server's CPU",
        r.scenario
    );
    // The server woke to deliver: its context switches were read and are not zero.
    assert!(
        r.context_switches.is_some_and(|s| s.total() > 0)
            && r.ctx_switches_per_delivery.is_some_and(|c| c > 0.0),
        "{}: the server's context switches",
        r.scenario
    );
    assert_eq!(r.syscalls, None, "{}: not asked for", r.scenario);
}

/// An idle run: every connection opened, memory per connection measured.
fn idle(r: &Report) {
    assert_eq!(r.messages, Options::smoke().connections, "{}", r.scenario);
    assert!(r.rss_per_connection.is_some(), "{}: rss", r.scenario);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bus_chain_delivers_every_hop() {
    let r = smoke("bus-chain")
        .await
        .expect("the agentwire server always runs");
    delivered_all(&r, Options::smoke().chain);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bus_fanout_reaches_every_subscriber() {
    let r = smoke("bus-fanout")
        .await
        .expect("the agentwire server always runs");
    delivered_all(&r, Options::smoke().subscribers);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bus_idle_reports_memory_per_connection() {
    idle(
        &smoke("bus-idle")
            .await
            .expect("the agentwire server always runs"),
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nats_chain_delivers_every_hop() {
    if let Some(r) = smoke("nats-chain").await {
        delivered_all(&r, Options::smoke().chain);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nats_fanout_reaches_every_subscriber() {
    if let Some(r) = smoke("nats-fanout").await {
        delivered_all(&r, Options::smoke().subscribers);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nats_idle_reports_memory_per_connection() {
    if let Some(r) = smoke("nats-idle").await {
        idle(&r);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_fanout_reaches_every_subscriber() {
    if let Some(r) = smoke("redis-fanout").await {
        delivered_all(&r, Options::smoke().subscribers);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_idle_reports_memory_per_connection() {
    if let Some(r) = smoke("redis-idle").await {
        idle(&r);
    }
}

/// With `--syscalls`, the bus and the NATS fan-outs report syscalls per delivery (only where
/// perf works; a missing `nats-server` skips its half as above).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fanouts_count_the_servers_syscalls_when_perf_works() {
    if agentwire_load::syscalls::usable().is_none() {
        eprintln!("skipping: perf cannot count syscalls here");
        return;
    }
    let mut options = Options::smoke();
    options.syscalls = true;
    let mut reports = Vec::new();
    for name in ["bus-fanout", "nats-fanout"] {
        let scenario = find(name).expect("registered");
        match run(&scenario, &options, &target()).await {
            Ok(r) => reports.push(r),
            Err(e @ LoadError::MissingProgram { .. })
                if std::env::var("CI").as_deref() != Ok("true") =>
            {
                eprintln!("skipping {name}: {e}");
            }
            Err(e) => panic!("{name}: {e}"),
        }
    }
    for r in &reports {
        assert_eq!(r.lost, Some(0), "{}", r.scenario);
        // Each delivery is written to a socket: at least one syscall per write batch.
        assert!(
            r.syscalls.is_some_and(|n| n > 0) && r.syscalls_per_delivery.is_some_and(|s| s > 0.0),
            "{}: syscalls {:?}",
            r.scenario,
            r.syscalls
        );
    }
    assert!(agentwire_load::report::table(&reports).contains("syscalls/deliv"));
}

#[test]
fn a_missing_server_program_names_its_debian_package() {
    let e = find_program("agentwire-no-such-server", "agentwire-no-such-package").unwrap_err();
    let text = e.to_string();
    assert!(
        text.contains("apt-get install agentwire-no-such-package"),
        "{text}"
    );
}

#[test]
fn the_binary_runs_the_smoke_of_a_scenario_and_prints_json() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_agentwire-load"))
        .args(["bus-chain", "--smoke", "--json"])
        .output()
        .expect("runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let line = String::from_utf8(out.stdout).unwrap();
    let v: serde_json::Value = serde_json::from_str(line.trim()).expect("one JSON object");
    assert_eq!(v["scenario"], "bus-chain");
    assert_eq!(v["lost"], 0);
    assert!(v["ctx_switches_per_delivery"].as_f64().is_some(), "{v}");
    assert!(v["syscalls_per_delivery"].is_null(), "{v}");
    let unknown = std::process::Command::new(env!("CARGO_BIN_EXE_agentwire-load"))
        .arg("no-such-scenario")
        .output()
        .expect("runs");
    assert_eq!(unknown.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&unknown.stderr).contains("unknown scenario"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_running_server_is_driven_by_address_and_its_cpu_read_by_pid() {
    let kind = find("bus-chain").expect("registered").server;
    let program = AgentwireProgram::Load(env!("CARGO_BIN_EXE_agentwire-load").into());
    let server = agentwire_load::server::ServerProcess::start(&kind, &program).expect("starts");
    let given = |pid| Target::Given {
        address: server.address().to_owned(),
        pid,
    };
    let scenario = find("bus-chain").expect("registered");
    let r = run(&scenario, &Options::smoke(), &given(Some(server.pid())))
        .await
        .expect("runs");
    delivered_all(&r, Options::smoke().chain);
    let r = run(&scenario, &Options::smoke(), &given(None))
        .await
        .expect("runs");
    assert_eq!(r.lost, Some(0));
    assert_eq!(r.cpu_us_per_message, None, "no pid, no CPU figure");
    assert_eq!(
        r.ctx_switches_per_delivery, None,
        "no pid, no context switches"
    );
}
