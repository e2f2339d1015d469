//! Embedding MCPW: the `Orchestrator` machine of `mcpw-codec` served by `agentwire-tokio`'s
//! `Server` (an upgrade hook accepts the `mcp.v1` subprotocol), and an `Agent` machine
//! driven by its `Client` (the agent decides when to redial: `connect_dialer`). The agent
//! registers its capability, the orchestrator routes a task to it, the application behind
//! the agent does the work and completes it.
//!
//! ```text
//! cargo run --release --example embed_mcpw
//! ```

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use agentwire_core::UuidV4Ids;
use agentwire_tokio::{Accept, Client, ClientConfig, Events, Server, ServerConfig, UpgradeRequest};
use mcpw_codec::orchestrator::{Orchestrator, OrchestratorConfig, OrchestratorEvent, TaskSpec};
use mcpw_codec::{
    Agent, AgentConfig, AgentEvent, AgentRegister, Capability, TaskComplete, TaskResult,
};

type Error = Box<dyn std::error::Error>;

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Error> {
    // Machines read no clock: both are anchored to the transport's clock (tokio's) and told
    // the wall-clock time at that instant (task deadlines travel as wall-clock times).
    let now = tokio::time::Instant::now().into_std();
    #[allow(clippy::disallowed_methods)]
    let unix_ms = SystemTime::now().duration_since(UNIX_EPOCH)?.as_millis() as u64;
    let orchestrator = Orchestrator::new(OrchestratorConfig::default(), UuidV4Ids, now, unix_ms);
    // MCPW peers ask for the `mcp.v1` subprotocol; a real server also checks API keys here.
    let hook = |_: &UpgradeRequest<'_>| Ok(Accept::with_subprotocol("mcp.v1"));
    let config = ServerConfig::default().with_hook(hook);
    let (server, mut server_events) = Server::bind("127.0.0.1:0", orchestrator, config).await?;
    let url = format!("ws://{}/", server.local_addr());
    println!("orchestrator on {url}");

    let register = AgentRegister {
        agent_id: "agent-1".into(),
        agent_type: Some("code-analyzer".into()),
        capabilities: vec![Capability::new("code_review", 0.9)],
        model: None,
        resources: None,
        metadata: None,
    };
    let mut agent = Agent::new(AgentConfig::new(register));
    agent.set_wall_clock(now, unix_ms);
    let transport = ClientConfig::default().with_subprotocol("mcp.v1");
    let (agent, mut agent_events) = Client::connect_dialer(&url, agent, transport)?;
    until(&mut agent_events, |e| {
        matches!(e, AgentEvent::Registered(_))
    })
    .await?;
    println!("agent-1 registered (capability code_review)");

    // The orchestrator routes the task by capability; the agent is told with task.assigned.
    let spec = TaskSpec::new("code_review").with_deadline(Duration::from_secs(30));
    let task = server
        .handle()
        .call(move |o, now| o.submit_task(spec, now))
        .await??;
    println!("submitted {task}");
    if let AgentEvent::TaskAssigned(assigned) = until(&mut agent_events, |e| {
        matches!(e, AgentEvent::TaskAssigned(_))
    })
    .await?
    {
        println!("agent-1 <- task.assigned {}", assigned.task_id);
        let done = TaskComplete {
            task_id: assigned.task_id.clone(),
            agent_id: "agent-1".into(),
            status: Some("completed".into()),
            duration_ms: Some(5),
            result: Some(TaskResult {
                summary: Some("no findings".into()),
                ..TaskResult::default()
            }),
            resource_usage: None,
            idempotency_key: None,
        };
        agent.call(move |a, _| a.complete_task(done)).await??;
    }
    if let OrchestratorEvent::TaskCompleted {
        task_id,
        agent_id,
        status,
        result,
    } = until(&mut server_events, |e| {
        matches!(e, OrchestratorEvent::TaskCompleted { .. })
    })
    .await?
    {
        println!("orchestrator: {task_id} {status} by {agent_id}: {result}");
    }

    agent.shutdown().await;
    server.shutdown().await;
    Ok(())
}

/// The next event of `events` that `pick` wants (the others are skipped), within 10 s.
async fn until<E>(events: &mut Events<E>, pick: impl Fn(&E) -> bool) -> Result<E, Error> {
    let wait = async {
        while let Some(e) = events.recv().await {
            if pick(&e) {
                return Some(e);
            }
        }
        None
    };
    tokio::time::timeout(Duration::from_secs(10), wait)
        .await?
        .ok_or_else(|| "the driver stopped".into())
}
