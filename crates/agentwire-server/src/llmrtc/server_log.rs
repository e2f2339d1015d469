//! The reference server's log lines: one sentence per machine event, never a Rust `Debug`
//! dump (no `Some(..)`, no `Object {..}`).

use agentwire::llmrtc::{ProviderKind, ServerEvent, TurnOutcome};

/// The log line for `ev`, or `None` for events not worth a line (data-channel copies).
pub fn describe(ev: &ServerEvent) -> Option<String> {
    Some(match ev {
        ServerEvent::DataChannel { .. } => return None,
        ServerEvent::SessionStarted { conn, session } => {
            format!("connection {conn} opened session {session}")
        }
        ServerEvent::SessionResumed {
            conn,
            session,
            replaced,
        } => format!(
            "connection {conn} resumed session {session} with its history (session {replaced} \
             made at connect is dropped)"
        ),
        ServerEvent::ResumeFailed {
            conn,
            requested,
            expired,
        } => format!(
            "connection {conn} asked to resume session {requested}, which {}",
            if *expired {
                "has expired"
            } else {
                "this server does not know"
            }
        ),
        ServerEvent::SessionDetached { session } => {
            format!("session {session} lost its connection and waits for a reconnect")
        }
        ServerEvent::SessionExpired { session } => format!("session {session} expired"),
        ServerEvent::HeartbeatTimeout { conn } => {
            format!("connection {conn} sent no ping in time and was closed")
        }
        ServerEvent::Stt(r) => format!(
            "session {}: transcribing {} ms of speech",
            r.session,
            r.segment.duration_ms()
        ),
        ServerEvent::Llm(r) => {
            let mut line = format!(
                "session {}: asking the LLM with {} message(s) of history",
                r.session,
                r.history.len()
            );
            if let Some(stage) = &r.stage {
                line.push_str(&format!(" in stage {}", stage.name));
            }
            if !r.tool_results.is_empty() {
                line.push_str(&format!(" and {} tool result(s)", r.tool_results.len()));
            }
            if !r.attachments.is_empty() {
                line.push_str(&format!(" and {} image(s)", r.attachments.len()));
            }
            line
        }
        ServerEvent::Tts(r) => format!("session {}: speaking \"{}\"", r.session, r.text),
        ServerEvent::ToolCall(r) => format!(
            "session {}: running tool {} ({}) with {}",
            r.session,
            r.name,
            r.call_id,
            serde_json::Value::Object(r.arguments.clone())
        ),
        ServerEvent::Cancel { request, kind } => format!(
            "the {} request {} was withdrawn (barge-in, disconnect or timeout)",
            provider(*kind),
            request.0
        ),
        ServerEvent::Offer { session, .. } => {
            format!("session {session}: a WebRTC offer arrived")
        }
        ServerEvent::Ignored { conn, type_name } => {
            format!("connection {conn}: ignored a message of unknown type \"{type_name}\"")
        }
        ServerEvent::ErrorSent {
            conn,
            code,
            message,
        } => format!("connection {conn}: sent error {code}: {message}"),
        ServerEvent::TurnEnded { session, outcome } => format!(
            "session {session}: turn {}",
            match outcome {
                TurnOutcome::Completed => "completed".to_owned(),
                TurnOutcome::NothingHeard => "ended: the transcript was empty".to_owned(),
                TurnOutcome::Interrupted => "interrupted by the user (barge-in)".to_owned(),
                TurnOutcome::Failed(code) => format!("failed with {code}"),
                TurnOutcome::Abandoned => "abandoned: the connection ended".to_owned(),
                _ => "ended".to_owned(),
            }
        ),
        _ => "an event this program does not describe".to_owned(),
    })
}

fn provider(kind: ProviderKind) -> &'static str {
    match kind {
        ProviderKind::Stt => "STT",
        ProviderKind::Llm => "LLM",
        ProviderKind::Tts => "TTS",
        ProviderKind::Tool => "tool",
    }
}
