//! The `Agent` against this crate's `Orchestrator` in the simulator: registration,
//! heartbeats, tasks from assignment to completion, the 12-byte form, reconnects and
//! shutdown. No sockets, no clock: simulated time only.

mod common;

use std::time::Duration;

use agentwire_core::sim::{Sim, SimConfig};
use agentwire_core::{Dial, Dialer, Machine, SequentialIds};
use common::agent::{completion, config, progress};
use common::t0;
use mcpw_codec::agent::{AgentEvent, Request};
use mcpw_codec::orchestrator::{Orchestrator, OrchestratorConfig, OrchestratorEvent, TaskSpec};
use mcpw_codec::{Agent, AgentCommandError, Reconnect};

/// An orchestrator with the default config and one agent, connected and registered.
fn registered(binary: bool) -> Sim<Orchestrator, Agent> {
    let start = t0();
    let server = Orchestrator::new(
        OrchestratorConfig::default(),
        SequentialIds::new(1),
        start,
        1_735_140_600_000,
    );
    let mut sim = Sim::new(server, start, SimConfig::default());
    sim.add_client(Agent::new(config("agent-1", binary)));
    sim.run_dialing_for(Duration::from_millis(10), |_| true);
    assert!(sim.client(0).is_registered());
    sim
}

fn count<E>(events: &[E], pick: impl Fn(&E) -> bool) -> usize {
    events.iter().filter(|e| pick(e)).count()
}

/// Submits `task_id`, lets it reach the agent, reports progress, completes it; returns the
/// agent's and the server's events.
fn run_task(
    sim: &mut Sim<Orchestrator, Agent>,
    task_id: &str,
) -> (Vec<AgentEvent>, Vec<OrchestratorEvent>) {
    let spec = TaskSpec::new("code_review").with_id(task_id);
    sim.call_server(|o, now| o.submit_task(spec, now))
        .expect("submitted");
    sim.run_dialing_for(Duration::from_millis(10), |_| true);
    let mut agent_events = sim.take_client_events(0);
    assert!(
        agent_events
            .iter()
            .any(|e| matches!(e, AgentEvent::TaskAssigned(t) if t.task_id == task_id)),
        "{agent_events:?}"
    );
    assert_eq!(sim.client(0).tasks().collect::<Vec<_>>(), [task_id]);
    sim.call_client(0, |a, _| a.report_progress(progress(task_id, 0.5)))
        .expect("progress");
    sim.run_dialing_for(Duration::from_millis(10), |_| true);
    sim.call_client(0, |a, _| a.complete_task(completion(task_id)))
        .expect("complete");
    sim.run_dialing_for(Duration::from_millis(10), |_| true);
    agent_events.extend(sim.take_client_events(0));
    (agent_events, sim.take_server_events())
}

#[test]
fn the_agent_registers_with_its_config_on_connect() {
    let mut sim = registered(false);
    let events = sim.take_client_events(0);
    assert!(
        matches!(&events[..], [AgentEvent::Registered(c)] if c.agent_id == "agent-1"
            && c.session_id.is_some()
            && c.accepted_capabilities.as_deref() == Some(&["code_review".to_owned()][..])),
        "{events:?}"
    );
    let server = sim.take_server_events();
    assert_eq!(
        count(&server, |e| matches!(
            e,
            OrchestratorEvent::Registered { .. }
        )),
        1
    );
}

#[test]
fn heartbeats_keep_the_agent_registered_past_the_servers_removal_time() {
    let mut sim = registered(false);
    sim.take_server_events();
    // The orchestrator removes an agent after 3 silent periods of 30 s.
    sim.run_dialing_for(Duration::from_secs(300), |_| true);
    let server = sim.take_server_events();
    assert!(
        !server.iter().any(|e| matches!(
            e,
            OrchestratorEvent::Unhealthy { .. } | OrchestratorEvent::AgentRemoved { .. }
        )),
        "{server:?}"
    );
    assert!(sim.client(0).is_registered());
    assert!(sim.client(0).poll_timeout().is_some(), "the next heartbeat");
}

#[test]
fn a_task_goes_from_assignment_through_progress_to_an_accepted_completion() {
    for binary in [false, true] {
        let mut sim = registered(binary);
        sim.take_client_events(0);
        sim.take_server_events();
        let (agent, server) = run_task(&mut sim, "t-1");
        assert!(
            agent.contains(&AgentEvent::CompletionAccepted {
                task_id: "t-1".into(),
                status: Some("accepted".into()),
            }),
            "binary {binary}: {agent:?}"
        );
        assert_eq!(
            count(&server, |e| matches!(
                e,
                OrchestratorEvent::TaskProgress { progress, .. } if *progress == 0.5
            )),
            1,
            "{server:?}"
        );
        assert_eq!(
            count(&server, |e| matches!(
                e,
                OrchestratorEvent::TaskCompleted { .. }
            )),
            1,
            "{server:?}"
        );
        assert_eq!(sim.client(0).tasks().count(), 0, "let go of the task");
        assert!(sim.server().task("t-1").is_none(), "the task finished");
        // A task it no longer holds cannot be reported on.
        let again = sim.call_client(0, |a, _| a.complete_task(completion("t-1")));
        assert_eq!(again, Err(AgentCommandError::UnknownTask("t-1".into())));
    }
}

#[test]
fn set_binary_switches_both_sides_to_the_12_byte_form() {
    let mut sim = registered(false);
    sim.take_client_events(0);
    sim.call_client(0, |a, _| a.set_binary(true, Some(256)))
        .expect("set_binary");
    assert_eq!(
        sim.call_client(0, |a, _| a.set_binary(false, None)),
        Err(AgentCommandError::SetBinaryPending),
        "one at a time"
    );
    sim.run_dialing_for(Duration::from_millis(10), |_| true);
    assert!(sim.client(0).is_compact());
    assert_eq!(
        sim.take_client_events(0),
        [AgentEvent::BinaryMode { enabled: true }]
    );
    // Both sides read each other in the 12-byte form: a whole task goes through.
    let (agent, _) = run_task(&mut sim, "t-compact");
    assert!(
        agent
            .iter()
            .any(|e| matches!(e, AgentEvent::CompletionAccepted { .. })),
        "{agent:?}"
    );
    // And heartbeats keep it registered in that form.
    sim.run_dialing_for(Duration::from_secs(300), |_| true);
    assert!(!sim
        .take_server_events()
        .iter()
        .any(|e| matches!(e, OrchestratorEvent::AgentRemoved { .. })));
    sim.call_client(0, |a, _| a.set_binary(false, None))
        .expect("set_binary");
    sim.run_dialing_for(Duration::from_millis(10), |_| true);
    assert!(!sim.client(0).is_compact());
    assert!(sim
        .take_client_events(0)
        .contains(&AgentEvent::BinaryMode { enabled: false }));
}

#[test]
fn the_agent_registers_again_after_a_reconnect_and_starts_over_in_its_form() {
    let mut sim = registered(false);
    sim.call_client(0, |a, _| a.set_binary(true, None))
        .expect("set_binary");
    let spec = TaskSpec::new("code_review").with_id("t-held");
    sim.call_server(|o, now| o.submit_task(spec, now))
        .expect("submitted");
    sim.run_dialing_for(Duration::from_millis(10), |_| true);
    assert!(sim.client(0).is_compact());
    assert_eq!(sim.client(0).tasks().count(), 1);
    sim.take_client_events(0);
    sim.take_server_events();

    sim.disconnect(0);
    let events = sim.take_client_events(0);
    assert_eq!(
        events,
        [AgentEvent::Disconnected {
            retry_in: Duration::from_millis(500)
        }]
    );
    assert_eq!(sim.client(0).tasks().count(), 0, "held tasks are forgotten");
    assert!(
        !sim.client(0).is_compact(),
        "a new connection starts in JSON"
    );
    assert_eq!(sim.client(0).poll_dial(), Dial::Wait);

    sim.run_dialing_for(Duration::from_secs(1), |_| true);
    assert!(sim.client(0).is_registered());
    let events = sim.take_client_events(0);
    assert!(
        events
            .iter()
            .any(|e| matches!(e, AgentEvent::Registered(_))),
        "{events:?}"
    );
    let server = sim.take_server_events();
    assert_eq!(
        count(&server, |e| matches!(
            e,
            OrchestratorEvent::Registered { .. }
        )),
        1,
        "{server:?}"
    );
}

#[test]
fn unreachable_servers_are_retried_after_doubling_waits() {
    let start = t0();
    let server = Orchestrator::new(
        OrchestratorConfig::default(),
        SequentialIds::new(1),
        start,
        0,
    );
    let mut sim = Sim::new(server, start, SimConfig::default());
    let cfg = config("agent-1", false).with_reconnect(Reconnect::new(
        Duration::from_secs(1),
        Duration::from_secs(4),
    ));
    sim.add_client(Agent::new(cfg));
    // Unreachable for 10 s: attempts at 0, 1, 3, 7 s; then it connects at 11 s.
    let mut waits = Vec::new();
    for _ in 0..10 {
        sim.run_dialing_for(Duration::from_secs(1), |_| false);
        for e in sim.take_client_events(0) {
            if let AgentEvent::ConnectFailed { retry_in, .. } = e {
                waits.push(retry_in.as_secs());
            }
        }
    }
    assert_eq!(waits, [1, 2, 4, 4]);
    sim.run_dialing_for(Duration::from_secs(2), |_| true);
    assert!(sim.client(0).is_registered());
}

#[test]
fn shutdown_announces_itself_and_stops_dialing() {
    let mut sim = registered(false);
    let spec = TaskSpec::new("code_review").with_id("t-1");
    sim.call_server(|o, now| o.submit_task(spec, now))
        .expect("submitted");
    sim.run_dialing_for(Duration::from_millis(10), |_| true);
    sim.take_client_events(0);
    sim.take_server_events();
    sim.call_client(0, |a, now| a.shutdown("maintenance", true, now))
        .expect("shutdown");
    sim.run_dialing_for(Duration::from_secs(60), |_| true);
    let events = sim.take_client_events(0);
    assert_eq!(
        events,
        [AgentEvent::ShutdownAccepted, AgentEvent::Stopped],
        "{events:?}"
    );
    assert!(sim.client(0).is_stopped());
    assert_eq!(sim.client(0).poll_dial(), Dial::Stop);
    assert!(!sim.is_connected(0), "closed, and never dialled again");
    let server = sim.take_server_events();
    assert_eq!(
        count(&server, |e| matches!(
            e,
            OrchestratorEvent::ShutdownRequested { transferred: 1, .. }
        )),
        1,
        "{server:?}"
    );
    assert_eq!(
        sim.call_client(0, |a, now| a.shutdown("again", false, now)),
        Err(AgentCommandError::Stopped)
    );
}

#[test]
fn an_error_answer_names_the_request_it_refuses() {
    // 50 ms each way: the agent's completion leaves before the task's deadline and reaches
    // the orchestrator after it, which answers it 4006 (cancelled), naming the request.
    let start = t0();
    let server = Orchestrator::new(
        OrchestratorConfig::default(),
        SequentialIds::new(1),
        start,
        1_735_140_600_000,
    );
    let latency = SimConfig::default().with_latency(Duration::from_millis(50));
    let mut sim = Sim::new(server, start, latency);
    sim.add_client(Agent::new(config("agent-1", false)));
    sim.run_dialing_for(Duration::from_millis(500), |_| true);
    assert!(sim.client(0).is_registered());
    let spec = TaskSpec::new("code_review")
        .with_id("t-late")
        .with_deadline(Duration::from_secs(1));
    sim.call_server(|o, now| o.submit_task(spec, now))
        .expect("submitted");
    sim.run_dialing_for(Duration::from_millis(980), |_| true);
    assert_eq!(sim.client(0).tasks().collect::<Vec<_>>(), ["t-late"]);
    sim.take_client_events(0);
    sim.call_client(0, |a, _| a.complete_task(completion("t-late")))
        .expect("the agent still holds it");
    sim.run_dialing_for(Duration::from_millis(500), |_| true);
    let events = sim.take_client_events(0);
    assert!(
        events.iter().any(|e| matches!(
            e,
            AgentEvent::ErrorReceived { error, about: Some(Request::Complete { task_id }) }
                if task_id == "t-late" && error.code.0 == 4006
        )),
        "{events:?}"
    );
}

#[test]
fn commands_need_a_connection() {
    let mut agent = Agent::new(config("agent-1", false));
    assert_eq!(
        agent.set_binary(true, None),
        Err(AgentCommandError::NotConnected)
    );
    assert_eq!(
        agent.report_progress(progress("t", 0.1)),
        Err(AgentCommandError::NotConnected)
    );
    // Without a connection, a shutdown stops at once.
    agent.shutdown("bye", false, t0()).expect("shutdown");
    assert!(agent.is_stopped());
    assert_eq!(agent.poll_dial(), Dial::Stop);
}
