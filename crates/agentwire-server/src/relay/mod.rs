//! Library code of the agent-relay reference programs, shared by the examples (`relay_server`,
//! `relay_log`, `movie_host`, `relay_agent`, `relay_demo`), the tests (`tests/relay_e2e.rs`,
//! `tests/relay_log.rs`, `tests/relay_booking.rs`, `tests/relay_movie.rs`) and `benches/relay.rs`.
//!
//! - [`log_writer`]: the study-log writer, one JSONL file per study session (and one per
//!   relay session for the records outside a study session), with the
//!   guarantees the study needs (indexes never repeat or skip within a file, every line on
//!   disk before the message it records is forwarded, `fsync` before `session.ended`, a bad
//!   last line moved aside on reopen so no later record is refused), over a
//!   [`Storage`](log_writer::Storage) tests can make fail.
//! - [`logging_relay`]: a [`Machine`](agentwire::core::Machine) wrapping the
//!   [`Relay`](agentwire::agent_relay::Relay) that writes each study-log record in the task
//!   that owns the machine, while the driver drains outputs, so the write happens before the
//!   send that follows it; the `fsync` before `session.ended` goes to a sync worker, and a
//!   `session.ended` whose log was not saved becomes `LOG_FLUSH_FAILED`.
//! - [`server_app`]: the relay served by agentwire-tokio at `/agent/ws`, with its event log.
//! - [`log_check`]: the validator behind `relay_log`.
//! - [`log_name`]: the file name of a session's log, which the writer and the validator share.
//! - [`movie`]: the movie-booking UI (stages, tools, in-memory catalogue) behind
//!   `movie_host`, as a [`Tools`](agentwire::agent_relay::Tools) implementation.
//! - [`host_app`]: the movie host program: the `Host` machine driven by agentwire-tokio.
//! - [`participant`]: the participant's commands of `movie_host` (UI actions, chat, `help`).
//! - [`agent_app`]: an external agent over a plain WebSocket and the booking it runs
//!   (`relay_agent`).
//! - [`demo`]: relay + movie host + agent in one process (`relay_demo`, `tests/relay_booking.rs`).

pub mod agent_app;
pub mod demo;
pub mod host_app;
pub mod log_check;
pub mod log_name;
pub mod log_writer;
pub mod logging_relay;
pub mod movie;
pub mod participant;
pub mod server_app;
