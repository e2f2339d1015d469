//! What the `Agent` tests share: an agent's configuration and the reports it sends.

use std::time::Duration;

use mcpw_codec::{
    AgentConfig, AgentRegister, Capability, Resources, TaskComplete, TaskProgress, TaskResult,
};

/// An agent `agent_id` with one capability (`code_review`, 0.9) and four task slots, in
/// the 24-byte form when `binary`, heartbeating every 10 s.
pub fn config(agent_id: &str, binary: bool) -> AgentConfig {
    AgentConfig::new(AgentRegister {
        agent_id: agent_id.into(),
        agent_type: Some("tester".into()),
        capabilities: vec![Capability::new("code_review", 0.9)],
        model: None,
        resources: Some(Resources {
            max_concurrent_tasks: Some(4),
            ..Resources::default()
        }),
        metadata: None,
    })
    .with_binary(binary)
    .with_heartbeat_interval(Duration::from_secs(10))
}

/// A progress report on `task_id`, `done` of it done.
pub fn progress(task_id: &str, done: f64) -> TaskProgress {
    TaskProgress {
        task_id: task_id.into(),
        agent_id: String::new(),
        progress: Some(done),
        status: Some("analyzing".into()),
        current_step: None,
        steps_completed: None,
        estimated_completion: None,
        intermediate_results: None,
        idempotency_key: None,
    }
}

/// A successful completion of `task_id`.
pub fn completion(task_id: &str) -> TaskComplete {
    TaskComplete {
        task_id: task_id.into(),
        agent_id: String::new(),
        status: Some("completed".into()),
        duration_ms: Some(20),
        result: Some(TaskResult {
            summary: Some("fine".into()),
            ..TaskResult::default()
        }),
        resource_usage: None,
        idempotency_key: None,
    }
}
