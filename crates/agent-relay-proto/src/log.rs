//! Study-log records (spec §6): what the relay emits for every message, for a writer to
//! persist as JSONL.

use agentwire_core::{iso8601_ms, Utf8Bytes};
use serde::Serialize;

use crate::id::SessionId;

/// The `direction` of a log record, as the reference relay uses it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Direction {
    /// A message the relay received from a session member and accepted.
    In,
    /// That message, once, as the relay forwards it (written before it is sent).
    Out,
    /// What the relay itself says or does in the session: `relay.join`, `relay.joined`,
    /// `relay.presence`, `relay.disconnect`, and every `error` it sends.
    Internal,
}

impl Direction {
    /// `"in"`, `"out"` or `"internal"`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::In => "in",
            Self::Out => "out",
            Self::Internal => "internal",
        }
    }
}

/// One study-log record: one line of the session's JSONL log once a writer numbers it.
///
/// The relay emits each as [`RelayEvent::Log`](crate::RelayEvent::Log) *before* the output that
/// sends the message it records, so a driver that writes records as it drains outputs has
/// every line on disk before the message it records is forwarded. `eventIndex` is the
/// writer's to assign, one counter per `session_id` (one file per `session_id`, as the
/// spec's `logs/study/<sessionId>.jsonl`).
///
/// `session_id` is the study session's id (`s-YYYYMMDD-NNN`, the `sessionId` of the host's
/// `session.started`) for every record from that `session.started` through its
/// `session.ended`, and the relay session's id for records outside a study session (joins,
/// snapshots polled before `session.start`, the `session.start` request itself). Both stay
/// stable across host reconnects and replacements.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogRecord {
    /// The line's `sessionId`: the study session in progress, else the relay session.
    pub session_id: SessionId,
    /// The relay session the message belongs to (not written to the line).
    pub relay_session: SessionId,
    /// In, out or internal.
    pub direction: Direction,
    /// The message type, e.g. `"tool.call"`.
    pub msg_type: &'static str,
    /// The message's `payload`, raw JSON text (a slice of the frame: no copy).
    pub payload: Utf8Bytes,
    /// Wall-clock time of the record, Unix milliseconds (from the anchor given to
    /// [`Relay::new`](crate::Relay::new)).
    pub at_unix_ms: u64,
}

impl LogRecord {
    /// Appends the spec's JSONL line (without the newline):
    /// `{"sessionId":..,"eventIndex":..,"timestamp":"2026-02-13T10:22:17.123Z","direction":..,"type":..,"payload":..}`.
    pub fn write_jsonl(&self, event_index: u64, out: &mut Vec<u8>) {
        out.extend_from_slice(b"{\"sessionId\":");
        // Writing strings to a Vec cannot fail.
        let _ = serde_json::to_writer(&mut *out, self.session_id.as_str());
        out.extend_from_slice(b",\"eventIndex\":");
        out.extend_from_slice(event_index.to_string().as_bytes());
        out.extend_from_slice(b",\"timestamp\":\"");
        out.extend_from_slice(iso8601_ms(self.at_unix_ms).as_bytes());
        out.extend_from_slice(b"\",\"direction\":\"");
        out.extend_from_slice(self.direction.as_str().as_bytes());
        out.extend_from_slice(b"\",\"type\":");
        let _ = serde_json::to_writer(&mut *out, self.msg_type);
        out.extend_from_slice(b",\"payload\":");
        out.extend_from_slice(self.payload.as_bytes());
        out.push(b'}');
    }

    /// An upper bound of the length of the line [`write_jsonl`](Self::write_jsonl) writes,
    /// with its newline, whatever the `eventIndex`: what the relay counts against
    /// [`Limits::max_log_bytes_per_session`](crate::Limits::max_log_bytes_per_session).
    pub fn line_len_bound(&self) -> u64 {
        line_len_bound(self.session_id.as_str(), self.msg_type, self.payload.len())
    }
}

/// Bytes of a record line around its payload, with the longest `eventIndex` (20 digits),
/// the longest direction and the newline, not counting the session id and type strings.
const LINE_OVERHEAD: u64 =
    (r#"{"sessionId":,"eventIndex":,"timestamp":"","direction":"","type":,"payload":}"#.len()
        + 20
        + 24
        + "internal".len()
        + 1) as u64;

/// [`LogRecord::line_len_bound`] from the parts.
pub(crate) fn line_len_bound(session: &str, msg_type: &str, payload_len: usize) -> u64 {
    LINE_OVERHEAD + json_str_len(session) + json_str_len(msg_type) + payload_len as u64
}

/// Length of `s` as a JSON string written by serde_json, quotes included.
fn json_str_len(s: &str) -> u64 {
    let escaped: usize = s
        .bytes()
        .map(|b| match b {
            b'"' | b'\\' | b'\n' | b'\r' | b'\t' | 0x08 | 0x0c => 2,
            0..=0x1f => 6,
            _ => 1,
        })
        .sum();
    escaped as u64 + 2
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_match_the_spec_example() {
        assert_eq!(iso8601_ms(1_770_978_137_123), "2026-02-13T10:22:17.123Z");
        assert_eq!(iso8601_ms(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(iso8601_ms(951_782_400_000), "2000-02-29T00:00:00.000Z");
        assert_eq!(iso8601_ms(4_107_542_399_999), "2100-02-28T23:59:59.999Z");
    }

    #[test]
    fn jsonl_line_is_the_spec_shape() {
        let rec = LogRecord {
            session_id: SessionId::new("s-20260213-001"),
            relay_session: SessionId::default_session(),
            direction: Direction::In,
            msg_type: "tool.call",
            payload: Utf8Bytes::from_static(r#"{"toolName":"select"}"#),
            at_unix_ms: 1_770_978_137_123,
        };
        let mut out = Vec::new();
        rec.write_jsonl(12, &mut out);
        let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(
            v,
            serde_json::json!({
                "sessionId": "s-20260213-001",
                "eventIndex": 12,
                "timestamp": "2026-02-13T10:22:17.123Z",
                "direction": "in",
                "type": "tool.call",
                "payload": {"toolName": "select"}
            })
        );
    }

    #[test]
    fn the_line_length_bound_holds_for_any_index_and_escapes() {
        for (session, payload) in [("default", "{}"), ("a\"b\\c\n\u{1}é", r#"{"x":"\u0000"}"#)] {
            let rec = LogRecord {
                session_id: SessionId::new(session),
                relay_session: SessionId::new(session),
                direction: Direction::Internal,
                msg_type: "relay.disconnect",
                payload: Utf8Bytes::copy_from_str(payload),
                at_unix_ms: 1_770_978_137_123,
            };
            let mut out = Vec::new();
            rec.write_jsonl(u64::MAX, &mut out);
            out.push(b'\n');
            assert_eq!(out.len() as u64, rec.line_len_bound(), "{session:?}");
            out.clear();
            rec.write_jsonl(0, &mut out);
            assert!((out.len() as u64) < rec.line_len_bound());
        }
    }

    #[test]
    fn session_ids_compare_as_text() {
        let a = SessionId::new("default");
        assert_eq!(a, SessionId::default_session());
        let mut m = std::collections::BTreeMap::new();
        m.insert(a, 1);
        assert_eq!(m.get("default"), Some(&1));
    }
}
