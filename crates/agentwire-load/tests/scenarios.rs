//! The Chopsticks, MCPW, llmrtc and relay scenarios each run a short bounded load (the smoke
//! options) over real sockets on 127.0.0.1, against `agentwire serve` started from this
//! crate's binary or, for the scenarios whose load starts in the server's application
//! (`chopsticks-req`, `mcpw-tasks`), the reference server in this process; every message
//! gets exactly its expected deliveries, nothing is an error, and the server's CPU per
//! message and context switches per delivery are measured (for the in-process server, its
//! named threads').

use agentwire_load::registry::find;
use agentwire_load::report::{cpu_vs_bus, table};
use agentwire_load::runner::{run, Target};
use agentwire_load::server::AgentwireProgram;
use agentwire_load::{Options, Report};

fn target() -> Target {
    Target::Spawn(AgentwireProgram::Load(
        env!("CARGO_BIN_EXE_agentwire-load").into(),
    ))
}

async fn smoke(name: &str) -> Report {
    let scenario = find(name).expect("registered");
    run(&scenario, &Options::smoke(), &target())
        .await
        .unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// Something was sent within the bound, no error, latencies and the server's CPU measured.
fn measured(r: &Report) {
    assert!(r.messages > 0, "{}: nothing sent", r.scenario);
    assert!(
        r.messages <= Options::smoke().messages,
        "{}: over the bound",
        r.scenario
    );
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
    assert!(
        r.ctx_switches_per_delivery.is_some_and(|c| c > 0.0),
        "{}: the server's context switches",
        r.scenario
    );
}

/// Every message got exactly `per_message` deliveries.
fn delivered_all(r: &Report, per_message: u64) {
    measured(r);
    assert_eq!(
        r.deliveries,
        r.messages * per_message,
        "{}: deliveries",
        r.scenario
    );
    assert_eq!(r.lost, Some(0), "{}", r.scenario);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chopsticks_every_req_is_answered_by_its_agent() {
    // The scenario itself fails when the agents' count of answered reqs differs from the
    // controller's outcomes.
    delivered_all(&smoke("chopsticks-req").await, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcpw_json_frames_are_each_answered() {
    delivered_all(&smoke("mcpw-json").await, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcpw_binary_frames_are_each_answered() {
    delivered_all(&smoke("mcpw-binary").await, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcpw_gzip_frames_are_each_answered() {
    delivered_all(&smoke("mcpw-gzip").await, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcpw_every_task_is_routed_and_completed() {
    // The scenario itself fails when the agents' count of completed tasks differs from the
    // orchestrator's `TaskCompleted` events.
    delivered_all(&smoke("mcpw-tasks").await, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn llmrtc_every_turn_ends_with_tts_complete() {
    let r = smoke("llmrtc-turns").await;
    measured(&r);
    // A turn is at least speech-start, speech-end, a transcript, an llm-chunk, llm,
    // tts-start, a tts-chunk and tts-complete.
    assert!(
        r.deliveries >= 8 * r.messages,
        "{} deliveries for {} turns",
        r.deliveries,
        r.messages
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn relay_every_tool_call_reaches_the_host_and_its_result_the_agent() {
    delivered_all(&smoke("relay-tools").await, 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_protocol_is_compared_with_the_bus_cpu_per_message() {
    let bus = smoke("bus-chain").await;
    let relay = smoke("relay-tools").await;
    let reports = [bus.clone(), relay.clone()];
    let (b, r) = (
        bus.cpu_us_per_message.expect("bus cpu"),
        relay.cpu_us_per_message.expect("relay cpu"),
    );
    if b > 0.0 {
        assert_eq!(cpu_vs_bus(&relay, &reports), Some(r / b));
        assert_eq!(cpu_vs_bus(&bus, &reports), Some(1.0));
        assert!(table(&reports).contains("vs bus"));
    }
    // Without a bus run there is nothing to compare with.
    assert_eq!(cpu_vs_bus(&relay, std::slice::from_ref(&relay)), None);
}
