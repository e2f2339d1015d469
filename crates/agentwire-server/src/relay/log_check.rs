//! The study-log validator behind `relay_log`: checks one JSONL file against the spec's
//! record shape and the writer's guarantees, and summarises it.
//!
//! Errors (a real inconsistency; `relay_log` exits non-zero): a line that is not a JSON
//! object with the six fields of the right types (`sessionId` string, `eventIndex` integer,
//! `timestamp` ISO 8601 UTC with milliseconds, `direction` `in`|`out`|`internal`, `type`
//! string, `payload` object), an empty line, a `sessionId` other than the first line's, or an
//! `eventIndex` that is not the line's number counted from 0 (a repeat or a gap).
//!
//! Warnings (reported, not failures): a torn last line (bytes after the last newline, what a
//! crash while writing leaves; it is not counted), a timestamp earlier than the one before it
//! (the wall clock was set back: between relay runs, or under a running relay, whose driver
//! re-anchors its wall clock after a correction), a file name that is not the one the
//! writer gives the session, and a study session's log (its first record `session.started`)
//! whose last record is not `session.ended` (still running, or the relay stopped).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

use serde_json::Value;

use super::log_name::file_name;

/// Errors listed one by one; beyond this they are only counted.
pub const MAX_LISTED: usize = 20;

/// What [`check`] found in one log.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Report {
    /// Complete lines (records and bad lines alike; a torn last line is not one).
    pub lines: u64,
    /// The first line's `sessionId`.
    pub session_id: Option<String>,
    /// Lines per `type`.
    pub by_type: BTreeMap<String, u64>,
    /// Lines per `direction`.
    pub by_direction: BTreeMap<String, u64>,
    /// The first line's `type`.
    pub first_type: Option<String>,
    /// The last line's `type`.
    pub last_type: Option<String>,
    /// The first line's timestamp.
    pub first_timestamp: Option<String>,
    /// The last line's timestamp.
    pub last_timestamp: Option<String>,
    /// The highest `eventIndex` seen.
    pub last_index: Option<u64>,
    /// Bytes of a torn last line, if any.
    pub torn_tail: Option<usize>,
    /// Warnings, in file order.
    pub warnings: Vec<String>,
    /// The first [`MAX_LISTED`] errors, in file order.
    pub errors: Vec<String>,
    /// All errors, listed or not.
    pub error_count: usize,
}

impl Report {
    /// No errors (warnings allowed).
    pub fn is_consistent(&self) -> bool {
        self.error_count == 0
    }

    fn error(&mut self, line: u64, text: impl AsRef<str>) {
        self.error_count += 1;
        if self.errors.len() < MAX_LISTED {
            self.errors.push(format!("line {line}: {}", text.as_ref()));
        }
    }

    /// A human-readable summary, several lines, ending with `OK` or `INCONSISTENT`.
    pub fn render(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(
            s,
            "session: {}",
            self.session_id.as_deref().unwrap_or("(none)")
        );
        let _ = match self.last_index {
            Some(last) => writeln!(s, "lines: {} (eventIndex 0..={last})", self.lines),
            None => writeln!(s, "lines: {}", self.lines),
        };
        if let (Some(first), Some(last)) = (&self.first_timestamp, &self.last_timestamp) {
            let _ = writeln!(s, "first: {first}\nlast:  {last}");
        }
        let counts = |m: &BTreeMap<String, u64>| {
            m.iter()
                .map(|(k, v)| format!("{k} {v}"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let _ = writeln!(s, "by direction: {}", counts(&self.by_direction));
        let _ = writeln!(s, "by type: {}", counts(&self.by_type));
        for w in &self.warnings {
            let _ = writeln!(s, "warning: {w}");
        }
        for e in &self.errors {
            let _ = writeln!(s, "error: {e}");
        }
        if self.error_count > self.errors.len() {
            let _ = writeln!(
                s,
                "error: ... and {} more",
                self.error_count - self.errors.len()
            );
        }
        if self.is_consistent() {
            s.push_str("OK");
        } else {
            let _ = write!(s, "INCONSISTENT: {} error(s)", self.error_count);
        }
        s
    }
}

/// Checks a log's bytes.
pub fn check(bytes: &[u8]) -> Report {
    let mut r = Report::default();
    let (whole, tail) = match bytes.iter().rposition(|&b| b == b'\n') {
        Some(p) => (&bytes[..p], &bytes[p + 1..]),
        None => (&bytes[..0], bytes),
    };
    let mut expected: u64 = 0;
    let mut prev_ts: Option<String> = None;
    if !bytes.is_empty() && bytes.len() > tail.len() {
        for (n, line) in whole.split(|&b| b == b'\n').enumerate() {
            let n = n as u64 + 1;
            r.lines += 1;
            check_line(&mut r, n, line, &mut expected, &mut prev_ts);
        }
    }
    if r.first_type.as_deref() == Some("session.started")
        && r.last_type.as_deref() != Some("session.ended")
    {
        // A study session's file runs from its session.started to its session.ended.
        r.warnings.push(
            "a study session's log without its session.ended at the end (the session is \
             still running, or the relay stopped before it ended)"
                .to_owned(),
        );
    }
    if !tail.is_empty() {
        r.torn_tail = Some(tail.len());
        r.warnings.push(format!(
            "torn last line ({} bytes without a newline, e.g. a crash while writing): ignored",
            tail.len()
        ));
    }
    r
}

/// Checks a log file; also warns when its name is not the writer's name for its session.
pub fn check_file(path: &Path) -> std::io::Result<Report> {
    let bytes = std::fs::read(path)?;
    let mut r = check(&bytes);
    if let (Some(id), Some(name)) = (&r.session_id, path.file_name()) {
        let want = file_name(id);
        if name.to_string_lossy() != want {
            r.warnings.push(format!(
                "the writer names session {id:?}'s file {want:?}, not {:?}",
                name.to_string_lossy()
            ));
        }
    }
    Ok(r)
}

/// The `sessionId` and `eventIndex` of one line (without its newline) if it is a record
/// [`check`] accepts (the six fields, of the right types), else the first fault.
pub fn record(line: &[u8]) -> Result<(String, u64), String> {
    let v: Value = serde_json::from_slice(line).map_err(|e| format!("not JSON: {e}"))?;
    let index = v
        .get("eventIndex")
        .and_then(Value::as_u64)
        .ok_or("eventIndex missing or not a non-negative integer")?;
    let mut r = Report::default();
    let mut expected = index;
    check_line(&mut r, 1, line, &mut expected, &mut None);
    if let Some(e) = r.errors.into_iter().next() {
        return Err(e.trim_start_matches("line 1: ").to_owned());
    }
    Ok((r.session_id.unwrap_or_default(), index))
}

fn check_line(r: &mut Report, n: u64, line: &[u8], expected: &mut u64, prev: &mut Option<String>) {
    if line.is_empty() {
        return r.error(n, "empty line");
    }
    let v: Value = match serde_json::from_slice(line) {
        Ok(v) => v,
        Err(e) => return r.error(n, format!("not JSON: {e}")),
    };
    let Some(obj) = v.as_object() else {
        return r.error(n, "not a JSON object");
    };
    let str_field = |name: &str| obj.get(name).and_then(Value::as_str);

    match str_field("sessionId") {
        None => r.error(n, "sessionId missing or not a string"),
        Some(id) => match &r.session_id {
            None => r.session_id = Some(id.to_owned()),
            Some(first) if first != id => {
                let text = format!("sessionId {id:?} differs from the file's {first:?}");
                r.error(n, text);
            }
            Some(_) => {}
        },
    }

    match obj.get("eventIndex").and_then(Value::as_u64) {
        None => r.error(n, "eventIndex missing or not a non-negative integer"),
        Some(i) => {
            if i != *expected {
                let what = if i < *expected { "repeats" } else { "skips" };
                let text = format!("eventIndex {i} {what}: expected {}", *expected);
                r.error(n, text);
            }
            // Continue from what the line says, so one fault is reported once.
            *expected = i.saturating_add(1);
            r.last_index = Some(r.last_index.map_or(i, |m| m.max(i)));
        }
    }

    match str_field("timestamp") {
        Some(ts) if is_iso8601_ms(ts) => {
            if let Some(p) = prev.as_deref() {
                if ts < p {
                    r.warnings
                        .push(format!("line {n}: timestamp {ts} is before {p}"));
                }
            }
            if r.first_timestamp.is_none() {
                r.first_timestamp = Some(ts.to_owned());
            }
            r.last_timestamp = Some(ts.to_owned());
            *prev = Some(ts.to_owned());
        }
        Some(ts) => r.error(
            n,
            format!("timestamp {ts:?} is not ISO 8601 UTC with milliseconds"),
        ),
        None => r.error(n, "timestamp missing or not a string"),
    }

    match str_field("direction") {
        Some(d @ ("in" | "out" | "internal")) => {
            *r.by_direction.entry(d.to_owned()).or_default() += 1;
        }
        Some(d) => r.error(n, format!("direction {d:?} is not in, out or internal")),
        None => r.error(n, "direction missing or not a string"),
    }

    match str_field("type") {
        Some(t) => {
            *r.by_type.entry(t.to_owned()).or_default() += 1;
            if r.first_type.is_none() {
                r.first_type = Some(t.to_owned());
            }
            r.last_type = Some(t.to_owned());
        }
        None => r.error(n, "type missing or not a string"),
    }

    if !obj.get("payload").is_some_and(Value::is_object) {
        r.error(n, "payload missing or not an object");
    }
}

/// `YYYY-MM-DDTHH:MM:SS.mmmZ`, with plausible field ranges.
pub fn is_iso8601_ms(s: &str) -> bool {
    let b = s.as_bytes();
    if b.len() != 24 {
        return false;
    }
    let digits = |r: std::ops::Range<usize>| b[r].iter().all(u8::is_ascii_digit);
    let num = |r: std::ops::Range<usize>| {
        std::str::from_utf8(&b[r])
            .ok()
            .and_then(|t| t.parse::<u32>().ok())
    };
    let shape = digits(0..4)
        && b[4] == b'-'
        && digits(5..7)
        && b[7] == b'-'
        && digits(8..10)
        && b[10] == b'T'
        && digits(11..13)
        && b[13] == b':'
        && digits(14..16)
        && b[16] == b':'
        && digits(17..19)
        && b[19] == b'.'
        && digits(20..23)
        && b[23] == b'Z';
    shape
        && num(5..7).is_some_and(|m| (1..=12).contains(&m))
        && num(8..10).is_some_and(|d| (1..=31).contains(&d))
        && num(11..13).is_some_and(|h| h < 24)
        && num(14..16).is_some_and(|m| m < 60)
        && num(17..19).is_some_and(|s| s < 61)
}
