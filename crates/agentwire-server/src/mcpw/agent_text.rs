//! The reference agent's events in words: one sentence per [`AgentEvent`], as
//! `mcpw_agent` prints them.

use std::time::Duration;

use agentwire::mcpw;

use super::agent_app::AgentEvent;

/// Whether a failed connection attempt was refused with HTTP 426 Upgrade Required: the
/// reference server's answer when no protocol version offered is one it speaks.
pub(super) fn upgrade_required(ev: &mcpw::AgentEvent) -> bool {
    matches!(ev, mcpw::AgentEvent::ConnectFailed { reason, .. } if reason.contains("426"))
}

/// `mcp.v3, mcp.v2 and mcp.v1`.
fn versions(list: &[u8]) -> String {
    let names: Vec<String> = list.iter().map(|v| mcpw::subprotocol_of(*v)).collect();
    match names.as_slice() {
        [] => "none".to_owned(),
        [one] => one.clone(),
        [init @ .., last] => format!("{} and {last}", init.join(", ")),
    }
}

/// `1.5 s`, `500 ms`.
fn wait(d: Duration) -> String {
    if d >= Duration::from_secs(1) {
        format!("{:.1} s", d.as_secs_f64())
    } else {
        format!("{} ms", d.as_millis())
    }
}

/// What a request is, in words: `task.complete of task t-1`.
fn request_name(r: &mcpw::agent::Request) -> String {
    use mcpw::agent::Request;
    match r {
        Request::Register => "agent.register".to_owned(),
        Request::Complete { task_id } => format!("task.complete of task {task_id}"),
        Request::Progress { task_id } => format!("task.progress of task {task_id}"),
        Request::CapabilityUpdate { capability } => {
            format!("agent.capability.update of {capability}")
        }
        Request::Collaboration { task_id } => {
            format!("collaboration.request about task {task_id}")
        }
        Request::Shutdown => "agent.shutdown".to_owned(),
        _ => "a request".to_owned(),
    }
}

/// One line (a sentence, no Rust `Debug` dump) for an agent event.
pub fn describe(ev: &AgentEvent) -> String {
    let or_q = |s: &Option<String>| s.clone().unwrap_or_else(|| "?".to_owned());
    match ev {
        AgentEvent::Registered(c) => {
            let beat = c
                .heartbeat_interval_ms
                .map(|ms| format!(", heartbeat every {}", wait(Duration::from_millis(ms))))
                .unwrap_or_default();
            format!(
                "registered as {} (session {}{beat})",
                c.agent_id,
                or_q(&c.session_id)
            )
        }
        AgentEvent::TaskAssigned(t) => {
            format!("task {} ({}) assigned to me", t.task_id, or_q(&t.task_type))
        }
        AgentEvent::ProgressSent { task_id, progress } => {
            format!("task {task_id}: reported {:.0}% done", progress * 100.0)
        }
        AgentEvent::Completed { task_id } => format!("task {task_id}: sent task.complete"),
        AgentEvent::CompletionAccepted(a) => format!(
            "task {}: the server accepted the completion ({})",
            a.task_id,
            or_q(&a.status)
        ),
        AgentEvent::Collaborated(c) => format!(
            "voted on {}'s {} request on task {}",
            c.requesting_agent,
            or_q(&c.collaboration_type),
            c.task_id
        ),
        AgentEvent::Error(e) => {
            format!("the server answered with error {}: {}", e.code, e.message)
        }
        AgentEvent::CollaborationResult { task_id, result } => {
            match result["outcome"]["decision"].as_str() {
                Some(d) => format!(
                    "collaboration on task {task_id}: {d} ({} approve, {} reject)",
                    result["outcome"]["approve"], result["outcome"]["reject"]
                ),
                None => format!(
                    "collaboration on task {task_id}: {} answered",
                    result["responses"].as_object().map_or(0, |r| r.len())
                ),
            }
        }
        AgentEvent::StateUpdated {
            from,
            tasks_completed,
        } => match from {
            Some(a) => {
                format!("shared state: {a}'s sync applied ({tasks_completed} tasks completed)")
            }
            None => {
                format!("shared state: the server's full sync ({tasks_completed} tasks completed)")
            }
        },
        AgentEvent::Cancelled { task_id, reason } => {
            format!("task {task_id}: cancelled by the server ({reason}); stopped working on it")
        }
        AgentEvent::Retrying(mcpw::AgentEvent::Retrying {
            about,
            error,
            retry_in,
            ..
        }) => format!(
            "the server refused {} with error {} ({}); sending it again in {}",
            request_name(about),
            error.code,
            error.message,
            wait(*retry_in)
        ),
        AgentEvent::Retrying(_) => "retrying".to_owned(),
        AgentEvent::ShutdownAccepted => {
            "the server accepted the shutdown; closing once my tasks are done or handed over"
                .to_owned()
        }
        AgentEvent::Failed(why) => format!("skipped a message: {why}"),
        AgentEvent::BinaryMode { enabled: true } => {
            "the server switched this connection to its 12-byte binary form".to_owned()
        }
        AgentEvent::BinaryMode { enabled: false } => {
            "the server switched this connection back to JSON text".to_owned()
        }
        AgentEvent::Reconnecting(mcpw::AgentEvent::ConnectFailed {
            reason,
            failures,
            retry_in,
        }) => format!(
            "could not connect ({reason}); attempt {failures} failed, retrying in {}",
            wait(*retry_in)
        ),
        AgentEvent::Reconnecting(mcpw::AgentEvent::Disconnected { retry_in }) => {
            format!("disconnected; reconnecting in {}", wait(*retry_in))
        }
        AgentEvent::Reconnecting(_) => "reconnecting".to_owned(),
        AgentEvent::ProtocolSelected { version, offered } => format!(
            "connected: the server selected protocol version {version} ({}) of {} offered",
            mcpw::subprotocol_of(*version),
            versions(offered)
        ),
        AgentEvent::NoCommonVersion {
            offered,
            failed:
                mcpw::AgentEvent::ConnectFailed {
                    reason,
                    failures,
                    retry_in,
                },
        } => format!(
            "could not connect ({reason}): the server speaks none of the protocol versions offered ({}); attempt {failures} failed, retrying in {}",
            versions(offered),
            wait(*retry_in)
        ),
        AgentEvent::NoCommonVersion { offered, .. } => format!(
            "could not connect: the server speaks none of the protocol versions offered ({})",
            versions(offered)
        ),
        AgentEvent::Stopped => "stopped".to_owned(),
    }
}
