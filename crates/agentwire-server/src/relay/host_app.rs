//! The movie host as a program: a [`Host`] serving [`MovieTools`], driven by agentwire-tokio's
//! client against the relay's `/agent/ws`, joining as `host` and rejoining after a drop.
//!
//! The host writes no study log of its own: the relay records every message of the session,
//! writes each line before it forwards the message, and syncs the session's file before it
//! forwards `session.ended`. So the host confirms a session end's log flush at once, with the
//! path of the relay's file for the session ([`MovieHost::start`]'s `log_file`); by the time
//! an agent reads that path in `session.ended`, the file is on stable storage.

use std::path::Path;
use std::time::Duration;

use agentwire::agent_relay::{Host, HostConfig, HostEvent, ToolOutcome, Tools};
use agentwire::tokio::{Backoff, Client, ClientConfig, ConfigError, Handle};
use serde_json::Value;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use super::movie::MovieTools;
use super::participant::{describe_screen, Command, HELP};

/// The movie host's machine.
pub type MovieHostMachine = Host<MovieTools>;

/// A running movie host.
pub struct MovieHost {
    /// Commands to the host machine (`user_message`, `tools_mut`, `end_session`, ...).
    pub handle: Handle<MovieHostMachine>,
    joined: watch::Receiver<bool>,
    events_task: JoinHandle<()>,
}

/// The transport settings: the host's message limit, reconnects within 50 ms .. 2 s.
pub fn client_config(config: &HostConfig) -> ClientConfig {
    crate::common::client_transport(ClientConfig::default())
        .with_limits(crate::common::message_limits(
            config.limits.max_message_bytes,
        ))
        .with_backoff(
            Backoff::new(Duration::from_millis(50), Duration::from_secs(2))
                .with_jitter(Duration::from_millis(50)),
        )
}

impl MovieHost {
    /// Connects a movie host to the relay at `url` (`ws://HOST:PORT/agent/ws`). `log_file`
    /// gives the path reported in `session.ended` for a study session id; `on_event` sees
    /// every [`HostEvent`] (in the event task: keep it quick).
    pub fn start(
        url: &str,
        config: HostConfig,
        log_file: impl Fn(&str) -> String + Send + 'static,
        on_event: impl FnMut(&HostEvent) + Send + 'static,
    ) -> Result<Self, ConfigError> {
        Self::start_resuming(url, config, None, log_file, on_event)
    }

    /// [`start`](Self::start), numbering the day's study sessions after `last_session` (the
    /// newest id an earlier run gave out, e.g. from [`newest_study_session`]), so a restarted
    /// host never gives out an id whose log file already exists.
    pub fn start_resuming(
        url: &str,
        config: HostConfig,
        last_session: Option<&str>,
        log_file: impl Fn(&str) -> String + Send + 'static,
        mut on_event: impl FnMut(&HostEvent) + Send + 'static,
    ) -> Result<Self, ConfigError> {
        let transport = client_config(&config);
        let (now, unix_ms) = crate::common::clocks();
        let mut machine = Host::new(config, MovieTools::new(), now, unix_ms);
        if let Some(last) = last_session {
            if let Err(e) = machine.resume_numbering(last) {
                tracing::warn!("not numbering after {last:?}: {e}");
            }
        }
        let (handle, mut events) = Client::connect(url, machine, transport)?;
        let (joined_tx, joined) = watch::channel(false);
        let confirmer = handle.clone();
        let events_task = tokio::spawn(async move {
            while let Some(ev) = events.recv().await {
                on_event(&ev);
                match ev {
                    HostEvent::Joined { .. } => {
                        joined_tx.send_replace(true);
                    }
                    HostEvent::Disconnected | HostEvent::JoinTimedOut | HostEvent::Replaced => {
                        joined_tx.send_replace(false);
                    }
                    HostEvent::SessionEnding {
                        session_id, ticket, ..
                    } => {
                        // The relay has synced every line so far and syncs session.ended
                        // before forwarding it: confirm now. In its own task, as the driver
                        // may be waiting for this one to take events.
                        let path = log_file(&session_id);
                        let h = confirmer.clone();
                        tokio::spawn(async move {
                            let done = h.call(move |m, now| m.confirm_flush(ticket, &path, now));
                            if let Ok(Err(e)) = done.await {
                                tracing::warn!("session end of {session_id}: {e}");
                            }
                        });
                    }
                    _ => {}
                }
            }
        });
        Ok(Self {
            handle,
            joined,
            events_task,
        })
    }

    /// The participant acts on the UI: `tool` of the current stage with `params`
    /// ([`Host::user_action`]); the agents get `state.updated` with `source: "user"`. `Err`
    /// holds the refusal as text (also when the host has stopped).
    pub async fn act(&self, tool: &str, params: Value) -> Result<ToolOutcome, String> {
        let tool = tool.to_owned();
        match self
            .handle
            .call(move |h, now| h.user_action(&tool, &params, now))
            .await
        {
            Ok(done) => done.map_err(|e| e.to_string()),
            Err(_) => Err("the host has stopped".to_owned()),
        }
    }

    /// The participant types `text` in the chat: `user.message` to the agents.
    pub async fn say(&self, text: &str) -> Result<(), String> {
        let text = text.to_owned();
        match self
            .handle
            .call(move |h, now| h.user_message(&text, now))
            .await
        {
            Ok(done) => done.map_err(|e| e.to_string()),
            Err(_) => Err("the host has stopped".to_owned()),
        }
    }

    /// The visible UI state (`uiSpec`, `null` without a screen), as agents see it.
    pub async fn screen(&self) -> Value {
        let ui = self.handle.call(|h, _| h.tools().ui_spec()).await;
        ui.ok()
            .flatten()
            .and_then(|raw| raw.parse().ok())
            .unwrap_or(Value::Null)
    }

    /// Carries out one participant [`Command`]; returns what to show the participant.
    pub async fn run(&self, command: Command) -> String {
        match command {
            Command::Say(text) => match self.say(&text).await {
                Ok(()) => "user.message sent".to_owned(),
                Err(e) => format!("user.message refused: {e}"),
            },
            Command::Act { tool, params } => match self.act(tool, params).await {
                Ok(ToolOutcome::Applied) => {
                    format!(
                        "{tool}: done (state.updated sent)\n{}",
                        describe_screen(&self.screen().await)
                    )
                }
                Ok(_) => format!("{tool}: nothing changed"),
                Err(e) => format!("{tool} refused: {e}"),
            },
            Command::Show => describe_screen(&self.screen().await),
            Command::Help => HELP.to_owned(),
        }
    }

    /// Waits until the relay has accepted the host's join (at most `timeout`); whether it did.
    pub async fn wait_joined(&mut self, timeout: Duration) -> bool {
        let wait = self.joined.wait_for(|j| *j);
        matches!(tokio::time::timeout(timeout, wait).await, Ok(Ok(_)))
    }

    /// Stops the host: closes its connection (1001) and ends the event task.
    pub async fn shutdown(self) {
        self.handle.shutdown().await;
        let _ = self.events_task.await;
    }
}

/// One line describing a host event, for the demo's transcript.
pub fn describe(ev: &HostEvent) -> Option<String> {
    Some(match ev {
        HostEvent::Joined { relay_session } => {
            format!("joined relay session {:?}", relay_session.as_str())
        }
        HostEvent::Disconnected => "disconnected from the relay".to_owned(),
        HostEvent::SessionStarted {
            session_id,
            study_id,
            participant_id,
        } => {
            format!("session {session_id} started (study {study_id}, participant {participant_id})")
        }
        HostEvent::ToolApplied { tool_name, reason } => {
            format!("applied {tool_name} (reason: {reason:?})")
        }
        HostEvent::AgentMessage { text } => format!("chat, agent: {text:?}"),
        HostEvent::Refused {
            msg_type, error, ..
        } => format!("refused {msg_type}: {} {:?}", error.code, error.message),
        HostEvent::SessionEnding { session_id, .. } => {
            format!("session {session_id} ending: confirming the log flush")
        }
        HostEvent::SessionEnded {
            session_id,
            log_file,
        } => format!("session {session_id} ended, state reset, log {log_file}"),
        HostEvent::Presence(p) => format!("{} agent(s) present", p.agent_count),
        HostEvent::UserAction { tool_name, applied } => {
            format!("participant action {tool_name} (changed: {applied})")
        }
        _ => return None,
    })
}

/// The newest study session id (`s-YYYYMMDD-NNN`) with a log file (`<id>.jsonl`) in
/// `log_dir`, if any: what [`MovieHost::start_resuming`] numbers after.
pub fn newest_study_session(log_dir: &Path) -> Option<String> {
    let entries = std::fs::read_dir(log_dir).ok()?;
    entries
        .filter_map(|e| {
            let name = e.ok()?.file_name().into_string().ok()?;
            let id = name.strip_suffix(".jsonl")?;
            let (date, n) = study_id_parts(id)?;
            Some((date.to_owned(), n, id.to_owned()))
        })
        .max_by(|a, b| (&a.0, a.1).cmp(&(&b.0, b.1)))
        .map(|(_, _, id)| id)
}

/// The date and number of `s-YYYYMMDD-NNN`.
fn study_id_parts(id: &str) -> Option<(&str, u32)> {
    let (date, n) = id.strip_prefix("s-")?.split_once('-')?;
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    if date.len() != 8 || !digits(date) || !digits(n) || n.len() > 9 {
        return None;
    }
    Some((date, n.parse().ok()?))
}
