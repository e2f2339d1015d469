//! The wire strings the orchestrator writes: close reasons and the `status` and other fixed
//! values of its results.

/// Close reason (1008): no `agent.register` within the register timeout.
pub(crate) const CLOSE_REGISTER_REQUIRED: &str = "register-required";
/// Close reason (1008): no heartbeat for `remove_after` periods.
pub(crate) const CLOSE_HEARTBEAT_TIMEOUT: &str = "heartbeat-timeout";
/// Close reason (1008): the same agent id registered on another connection.
pub(crate) const CLOSE_REPLACED: &str = "replaced by a newer registration";
/// Close reason (1000): a shutting-down agent's grace period ended.
pub(crate) const CLOSE_SHUTDOWN: &str = "shutdown";
/// Close reason (1013): `max_connections` connections are open.
pub(crate) const CLOSE_SERVER_FULL: &str = "server-full";

/// `status` of `registration.confirmed`.
pub(crate) const STATUS_REGISTERED: &str = "registered";
/// `status` of the `agent.heartbeat` and `task.progress` results.
pub(crate) const STATUS_OK: &str = "ok";
/// `status` of the `task.complete` result.
pub(crate) const STATUS_ACCEPTED: &str = "accepted";
/// `status` of the `agent.shutdown` result.
pub(crate) const STATUS_SHUTTING_DOWN: &str = "shutting_down";
/// `status` of the `protocol.set_binary` result.
pub(crate) const STATUS_PROTOCOL_UPDATED: &str = "protocol_updated";
/// `routing_metadata.assigned_by` of `task.assigned`.
pub(crate) const ASSIGNED_BY: &str = "capability-router";
/// The 4006 a task's agent gets when the task fails for good.
pub(crate) const TASK_CANCELLED: &str = "task cancelled: deadline exceeded";
/// The 4006 a task's agent gets when the application cancels the task
/// ([`cancel_task`](super::Orchestrator::cancel_task)).
pub(crate) const TASK_CANCELLED_BY_SERVER: &str = "task cancelled";
