//! The study-log writer and its validator without sockets: file naming, `eventIndex`
//! continuity across reopen and restart, torn lines, failures, the checks of `relay_log`, and
//! the [`LoggingRelay`] ordering guarantee driven in memory.

#[path = "support/temp_dir.rs"]
mod temp_dir;

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use agentwire::agent_relay::{Direction, LogRecord, Relay, RelayConfig, SessionId};
use agentwire::core::{ConnId, Frame, Machine, Output, PeerInfo, SequentialIds, Utf8Bytes};
use agentwire_server::relay;
use relay::log_check::{check, is_iso8601_ms};
use relay::log_name::file_name;
use relay::log_writer::{LogFile, LogOp, OsStorage, Storage, StudyLog, SyncHandle, SyncPolicy};
use relay::logging_relay::{LoggingRelay, ServerEvent, LOG_WRITE_FAILED, MAX_HELD_PER_CONN};
use serde_json::Value;
use temp_dir::temp_dir;

fn record(session: &str, msg_type: &'static str, payload: &str) -> LogRecord {
    LogRecord {
        session_id: SessionId::new(session),
        relay_session: SessionId::new(session),
        direction: Direction::In,
        msg_type,
        payload: Utf8Bytes::copy_from_str(payload),
        at_unix_ms: 1_770_978_137_123,
    }
}

fn indexes(path: &Path) -> Vec<u64> {
    std::fs::read_to_string(path)
        .expect("log")
        .lines()
        .map(|l| {
            serde_json::from_str::<Value>(l).expect("json")["eventIndex"]
                .as_u64()
                .expect("index")
        })
        .collect()
}

// ---- file names ----------------------------------------------------------------------------

#[test]
fn file_names_are_readable_for_plain_ids_and_never_collide_or_escape() {
    assert_eq!(file_name("default"), "default.jsonl");
    assert_eq!(file_name("s-20260213-001"), "s-20260213-001.jsonl");
    assert_eq!(file_name("a.b_c"), "a.b_c.jsonl");
    assert_eq!(file_name("Study/1"), "%53tudy%2F1.jsonl");
    assert_eq!(file_name(".."), "%2E..jsonl");
    assert_eq!(file_name("%41"), "%2541.jsonl");
    let ids = [
        "a", "A", "a/b", "a_b", "a%2Fb", "a b", "..", ".", "/", "é", "E", "e", "%45",
    ];
    let names: std::collections::BTreeSet<String> =
        ids.iter().map(|i| file_name(i).to_lowercase()).collect();
    assert_eq!(names.len(), ids.len(), "distinct even case-insensitively");
    for id in ids {
        let name = file_name(id);
        assert!(!name.contains('/') && !name.starts_with('.'), "{name}");
    }
    // Long ids (the relay allows 256 bytes, 768 once encoded) are cut and hashed.
    let long_a = "A".repeat(256);
    let long_b = format!("{}B", "A".repeat(255));
    let (a, b) = (file_name(&long_a), file_name(&long_b));
    assert!(a.len() < 200 && b.len() < 200, "{a}");
    assert_ne!(a, b);
    assert!(a.contains('~'));
}

// ---- the writer ----------------------------------------------------------------------------

#[test]
fn indexes_start_at_zero_and_continue_across_close_and_a_new_writer() {
    let dir = temp_dir("continue");
    let mut log = StudyLog::open(&*dir, SyncPolicy::SessionEnd).expect("open");
    for _ in 0..3 {
        log.append(&record("s", "tool.call", "{}")).expect("append");
    }
    log.append(&record("t", "tool.call", "{}"))
        .expect("other session");
    log.close("s").expect("close");
    assert_eq!(log.next_index("s"), None);
    assert_eq!(
        log.append(&record("s", "tool.call", "{}"))
            .expect("reopen")
            .event_index,
        3
    );
    drop(log);
    // A restart: a new writer reads the last line back.
    let mut log = StudyLog::open(&*dir, SyncPolicy::SessionEnd).expect("open");
    let a = log
        .append(&record("s", "session.ended", "{}"))
        .expect("append");
    assert_eq!(a.event_index, 4);
    assert!(
        a.sync_due && !a.synced,
        "session.ended asks its caller for a sync"
    );
    log.sync("s").expect("sync");
    let b = log.append(&record("s", "tool.call", "{}")).expect("append");
    assert!(!b.synced && !b.sync_due);
    assert_eq!(indexes(&dir.join("s.jsonl")), [0, 1, 2, 3, 4, 5]);
    assert_eq!(indexes(&dir.join("t.jsonl")), [0]);
    assert!(log.close_all().is_empty());
}

#[test]
fn every_record_policy_syncs_every_line() {
    let dir = temp_dir("every");
    let mut log = StudyLog::open(&*dir, SyncPolicy::EveryRecord).expect("open");
    assert!(
        log.append(&record("s", "tool.call", "{}"))
            .expect("append")
            .synced
    );
}

#[test]
fn a_torn_tail_is_moved_aside_on_reopen_and_its_index_is_used_by_the_next_record() {
    let dir = temp_dir("torn");
    let mut log = StudyLog::open(&*dir, SyncPolicy::SessionEnd).expect("open");
    log.append(&record("s", "tool.call", "{}")).expect("append");
    log.append(&record("s", "tool.call", "{}")).expect("append");
    drop(log);
    let path = dir.join("s.jsonl");
    let mut bytes = std::fs::read(&path).expect("read");
    bytes.extend_from_slice(br#"{"sessionId":"s","eventIndex":2,"times"#);
    std::fs::write(&path, &bytes).expect("tear");

    let mut log = StudyLog::open(&*dir, SyncPolicy::SessionEnd).expect("open");
    let a = log.append(&record("s", "tool.call", "{}")).expect("append");
    assert_eq!(a.event_index, 2);
    let repair = a.repaired.expect("repaired");
    assert_eq!(repair.bytes, 38);
    assert_eq!(repair.aside, dir.join("s.jsonl.bad-1"));
    assert_eq!(
        std::fs::read(&repair.aside).expect("aside"),
        br#"{"sessionId":"s","eventIndex":2,"times"#
    );
    assert_eq!(indexes(&path), [0, 1, 2]);
    assert!(check(&std::fs::read(&path).expect("read"))
        .warnings
        .is_empty());
}

#[test]
fn a_file_of_another_session_or_of_garbage_is_moved_aside_and_restarts_at_zero() {
    let dir = temp_dir("foreign");
    let foreign = "{\"sessionId\":\"other\",\"eventIndex\":0}\n";
    std::fs::write(dir.join("s.jsonl"), foreign).expect("write");
    std::fs::write(dir.join("g.jsonl"), "not json\n").expect("write");
    let mut log = StudyLog::open(&*dir, SyncPolicy::SessionEnd).expect("open");
    for (s, old) in [("s", foreign), ("g", "not json\n")] {
        let a = log.append(&record(s, "tool.call", "{}")).expect(s);
        assert_eq!(a.event_index, 0);
        let repair = a.repaired.expect("repaired");
        assert_eq!(std::fs::read_to_string(&repair.aside).expect("aside"), old);
        assert_eq!(indexes(&dir.join(format!("{s}.jsonl"))), [0]);
    }
}

#[test]
fn a_directory_in_the_way_is_an_open_error_and_the_writer_recovers_when_it_is_gone() {
    let dir = temp_dir("collision");
    let blocker = dir.join(file_name("s"));
    std::fs::create_dir(&blocker).expect("dir");
    let mut log = StudyLog::open(&*dir, SyncPolicy::SessionEnd).expect("open");
    let e = log
        .append(&record("s", "tool.call", "{}"))
        .expect_err("blocked");
    assert_eq!(e.op, LogOp::Open);
    assert_eq!(e.path, blocker);
    assert!(e.to_string().starts_with("open "), "{e}");
    std::fs::remove_dir(&blocker).expect("rmdir");
    let a = log.append(&record("s", "tool.call", "{}")).expect("append");
    assert_eq!(a.event_index, 0, "the failed record used no index");
}

// ---- the validator -------------------------------------------------------------------------

fn line(session: &str, index: u64, ts: &str, direction: &str) -> String {
    format!(
        "{{\"sessionId\":\"{session}\",\"eventIndex\":{index},\"timestamp\":\"{ts}\",\
         \"direction\":\"{direction}\",\"type\":\"tool.call\",\"payload\":{{}}}}\n"
    )
}

const TS: &str = "2026-02-13T10:22:17.123Z";

#[test]
fn a_good_log_is_summarised() {
    let text = [
        line("s", 0, "2026-02-13T10:22:17.123Z", "in"),
        line("s", 1, "2026-02-13T10:22:17.124Z", "out"),
        line("s", 2, "2026-02-13T10:22:18.000Z", "internal"),
    ]
    .concat();
    let r = check(text.as_bytes());
    assert!(r.is_consistent(), "{}", r.render());
    assert!(r.warnings.is_empty());
    assert_eq!(r.lines, 3);
    assert_eq!(r.last_index, Some(2));
    assert_eq!(r.session_id.as_deref(), Some("s"));
    assert_eq!(r.by_type.get("tool.call"), Some(&3));
    assert_eq!(r.by_direction.get("out"), Some(&1));
    assert_eq!(
        r.first_timestamp.as_deref(),
        Some("2026-02-13T10:22:17.123Z")
    );
    assert_eq!(
        r.last_timestamp.as_deref(),
        Some("2026-02-13T10:22:18.000Z")
    );
    assert!(r.render().ends_with("OK"));
    assert!(check(b"").is_consistent());
}

#[test]
fn repeats_gaps_foreign_sessions_and_bad_fields_are_errors() {
    let cases: [(String, &str); 8] = [
        (
            [line("s", 0, TS, "in"), line("s", 0, TS, "in")].concat(),
            "repeats",
        ),
        (
            [line("s", 0, TS, "in"), line("s", 2, TS, "in")].concat(),
            "skips",
        ),
        (line("s", 1, TS, "in"), "skips"),
        (
            [line("s", 0, TS, "in"), line("t", 1, TS, "in")].concat(),
            "differs",
        ),
        (line("s", 0, TS, "sideways"), "direction"),
        (line("s", 0, "2026-02-13 10:22:17", "in"), "timestamp"),
        (
            [line("s", 0, TS, "in"), "\n".to_owned()].concat(),
            "empty line",
        ),
        (
            "{\"sessionId\":\"s\",\"eventIndex\":0}\n".to_owned(),
            "missing",
        ),
    ];
    for (text, what) in cases {
        let r = check(text.as_bytes());
        assert!(!r.is_consistent(), "{what}: {text}");
        assert!(
            r.errors.iter().any(|e| e.contains(what)),
            "{what}: {:?}",
            r.errors
        );
        assert!(r.render().contains("INCONSISTENT"));
    }
}

#[test]
fn a_torn_last_line_and_a_clock_set_back_are_warnings() {
    let mut text = [
        line("s", 0, "2026-02-13T10:22:17.123Z", "in"),
        line("s", 1, "2026-02-13T10:22:16.000Z", "in"),
    ]
    .concat();
    text.push_str("{\"sessionId\":\"s\",\"eventIn");
    let r = check(text.as_bytes());
    assert!(r.is_consistent(), "{}", r.render());
    assert_eq!(r.lines, 2);
    assert_eq!(r.torn_tail, Some(25));
    assert_eq!(r.warnings.len(), 2, "{:?}", r.warnings);
    // A file that is nothing but a torn line.
    assert!(check(b"{\"sess").is_consistent());
}

#[test]
fn timestamps_must_be_iso8601_utc_with_milliseconds() {
    assert!(is_iso8601_ms("2026-02-13T10:22:17.123Z"));
    for bad in [
        "2026-02-13T10:22:17Z",
        "2026-02-13T10:22:17.123+00:00",
        "2026-13-13T10:22:17.123Z",
        "2026-02-13T24:22:17.123Z",
        "2026-02-13t10:22:17.123Z",
        "",
    ] {
        assert!(!is_iso8601_ms(bad), "{bad}");
    }
}

#[test]
fn the_file_name_is_checked_against_the_session() {
    let dir = temp_dir("name");
    let path = dir.join("renamed.jsonl");
    std::fs::write(&path, line("s", 0, TS, "in")).expect("write");
    let r = relay::log_check::check_file(&path).expect("read");
    assert!(r.is_consistent());
    assert!(
        r.warnings.iter().any(|w| w.contains("s.jsonl")),
        "{:?}",
        r.warnings
    );
}

// ---- the LoggingRelay, in memory -----------------------------------------------------------

const HOST_JOIN: &str =
    r#"{"v":"mvp-0.2","type":"relay.join","id":"h","payload":{"role":"host","sessionId":"m"}}"#;
const AGENT_JOIN: &str =
    r#"{"v":"mvp-0.2","type":"relay.join","id":"a","payload":{"role":"agent","sessionId":"m"}}"#;
const CALL: &str = r#"{"v":"mvp-0.2","type":"tool.call","id":"req-003","payload":{"toolName":"select","params":{"itemId":"m1"},"reason":"Pick."}}"#;
const RESULT: &str = r#"{"v":"mvp-0.2","type":"tool.result","replyTo":"req-003","payload":{"ok":true,"toolName":"select"}}"#;
const ENDED: &str =
    r#"{"v":"mvp-0.2","type":"session.ended","payload":{"sessionId":"m","stateReset":true}}"#;

fn logging_relay(dir: &Path) -> (LoggingRelay, Instant) {
    #[allow(clippy::disallowed_methods)]
    let now = Instant::now();
    let relay = Relay::new(RelayConfig::default(), SequentialIds::new(0), now, 0);
    let log = StudyLog::open(dir, SyncPolicy::SessionEnd).expect("open");
    (LoggingRelay::new(relay, log), now)
}

/// Drains `m`; at each `Send` checks the file has as many lines as records were logged, so
/// the line of every forwarded message is in the file before the send is returned.
fn drain(m: &mut LoggingRelay, path: &Path, logged: &mut u64) -> Vec<Output<ServerEvent>> {
    let mut outs = Vec::new();
    while let Some(out) = m.poll_output() {
        match &out {
            Output::Event(ServerEvent::Logged { event_index, .. }) => {
                assert_eq!(*event_index, *logged);
                *logged += 1;
            }
            Output::Send { .. } if path.exists() => {
                assert_eq!(indexes(path).len() as u64, *logged);
            }
            _ => {}
        }
        outs.push(out);
    }
    outs
}

#[test]
fn the_logging_relay_writes_each_record_before_the_send_after_it() {
    let dir = temp_dir("machine");
    let path = dir.join("m.jsonl");
    let (mut m, now) = logging_relay(&dir);
    let (host, agent) = (ConnId::new(1), ConnId::new(2));
    let peer = PeerInfo::new(None).with_path("/agent/ws");
    let mut logged = 0;
    m.handle_connect(host, &peer, now);
    m.handle_connect(agent, &peer, now);
    for (conn, text) in [
        (host, HOST_JOIN),
        (agent, AGENT_JOIN),
        (agent, CALL),
        (host, RESULT),
        (host, ENDED),
    ] {
        m.handle_frame(conn, Frame::Text(text), now);
        let outs = drain(&mut m, &path, &mut logged);
        // The forwarded frame comes right after its `out` record.
        if text == CALL || text == RESULT {
            let at = outs
                .iter()
                .position(
                    |o| matches!(o, Output::Send { frame, .. } if frame.as_text() == Some(text)),
                )
                .expect("forwarded");
            assert!(matches!(
                &outs[at - 1],
                Output::Event(ServerEvent::Logged { record, .. }) if record.direction == Direction::Out
            ));
        }
        if text == ENDED {
            // Synced (inline: no sync worker) before it is forwarded.
            let synced = outs
                .iter()
                .position(|o| matches!(o, Output::Event(ServerEvent::Synced { .. })))
                .expect("synced");
            let sent = outs
                .iter()
                .position(
                    |o| matches!(o, Output::Send { frame, .. } if frame.as_text() == Some(text)),
                )
                .expect("forwarded");
            assert!(synced < sent);
        }
    }
    // Everyone leaves: the file is closed; a new host continues its indexes.
    m.handle_disconnect(agent, now);
    m.handle_disconnect(host, now);
    drain(&mut m, &path, &mut logged);
    assert_eq!(m.log().open_sessions().count(), 0);
    let host2 = ConnId::new(3);
    m.handle_connect(host2, &peer, now);
    m.handle_frame(host2, Frame::Text(HOST_JOIN), now);
    drain(&mut m, &path, &mut logged);
    assert_eq!(indexes(&path), (0..logged).collect::<Vec<_>>());
    assert!(check(&std::fs::read(&path).expect("read")).is_consistent());
}

#[test]
fn the_logging_relay_tells_the_host_once_per_step_and_reports_every_failure() {
    let dir = temp_dir("machine-fail");
    std::fs::create_dir(dir.join("m.jsonl")).expect("collision");
    let (mut m, now) = logging_relay(&dir);
    let (host, agent) = (ConnId::new(1), ConnId::new(2));
    let peer = PeerInfo::new(None).with_path("/agent/ws");
    m.handle_connect(host, &peer, now);
    m.handle_connect(agent, &peer, now);
    m.handle_frame(host, Frame::Text(HOST_JOIN), now);
    m.handle_frame(agent, Frame::Text(AGENT_JOIN), now);
    m.handle_frame(agent, Frame::Text(CALL), now);
    let mut outs = Vec::new();
    while let Some(o) = m.poll_output() {
        outs.push(o);
    }
    let failed = outs
        .iter()
        .filter(|o| matches!(o, Output::Event(ServerEvent::LogFailed { .. })))
        .count();
    assert!(
        failed >= 5,
        "join, joined, presence, join, joined, presence, in, out"
    );
    // The call is still forwarded to the host.
    assert!(outs.iter().any(
        |o| matches!(o, Output::Send { conn, frame } if *conn == host && frame.as_text() == Some(CALL))
    ));
    // One error to the host at the end of the step, counting every failure.
    let errors: Vec<Value> = outs
        .iter()
        .filter_map(|o| match o {
            Output::Send { conn, frame } if *conn == host => {
                serde_json::from_str::<Value>(frame.as_text()?).ok()
            }
            _ => None,
        })
        .filter(|v| v["type"] == "error")
        .collect();
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert_eq!(errors[0]["payload"]["code"], LOG_WRITE_FAILED);
    assert!(matches!(
        outs.last(),
        Some(Output::Event(ServerEvent::ReportedToHost { failures, .. })) if *failures == failed
    ));
    assert!(m.poll_output().is_none());
}

// ---- resume never loses later records --------------------------------------------------------

/// How a test damages the last line of a log before the relay reopens it.
#[derive(Debug, Clone)]
enum Damage {
    /// Cut the file `n` bytes before its end (inside or across the last line; a torn write).
    Truncate(usize),
    /// Overwrite the byte at `at` (from the start of the last line) with `byte`.
    Flip { at: usize, byte: u8 },
    /// Append bytes (garbage, maybe with a newline).
    Append(Vec<u8>, bool),
    /// Replace the last line with a record whose payload nests `depth` deep.
    Deep(usize),
    /// Replace the last line's eventIndex.
    Index(u64),
    /// Replace the last line's sessionId.
    Session(String),
}

fn damage(bytes: &mut Vec<u8>, d: &Damage) {
    let last_start = bytes[..bytes.len() - 1]
        .iter()
        .rposition(|&b| b == b'\n')
        .map_or(0, |p| p + 1);
    let replace_last = |bytes: &mut Vec<u8>, v: &mut Value| {
        bytes.truncate(last_start);
        bytes.extend_from_slice(v.to_string().as_bytes());
        bytes.push(b'\n');
    };
    let last: Value = serde_json::from_slice(&bytes[last_start..]).expect("record");
    match d {
        Damage::Truncate(n) => {
            let keep = bytes.len().saturating_sub(*n).max(last_start);
            bytes.truncate(keep);
        }
        Damage::Flip { at, byte } => {
            let i = last_start + at % (bytes.len() - last_start);
            bytes[i] = *byte;
        }
        Damage::Append(garbage, newline) => {
            bytes.extend_from_slice(garbage);
            if *newline {
                bytes.push(b'\n');
            }
        }
        Damage::Deep(depth) => {
            let text = bytes[last_start..].to_vec();
            let text = String::from_utf8(text).expect("utf8");
            let deep = format!("{}{}", "[".repeat(*depth), "]".repeat(*depth));
            let line = text.replacen(r#""payload":{"#, &format!(r#""payload":{{"x":{deep},"#), 1);
            bytes.truncate(last_start);
            bytes.extend_from_slice(line.as_bytes());
        }
        Damage::Index(i) => {
            let mut v = last;
            v["eventIndex"] = serde_json::json!(i);
            replace_last(bytes, &mut v);
        }
        Damage::Session(s) => {
            let mut v = last;
            v["sessionId"] = serde_json::json!(s);
            replace_last(bytes, &mut v);
        }
    }
}

fn damage_strategy() -> impl proptest::strategy::Strategy<Value = Damage> {
    use proptest::prelude::*;
    prop_oneof![
        (1usize..200).prop_map(Damage::Truncate),
        (any::<usize>(), any::<u8>()).prop_map(|(at, byte)| Damage::Flip { at, byte }),
        (proptest::collection::vec(any::<u8>(), 0..40), any::<bool>())
            .prop_map(|(g, n)| Damage::Append(g, n)),
        (120usize..400).prop_map(Damage::Deep),
        (0u64..20).prop_map(Damage::Index),
        "[a-z]{1,8}".prop_map(Damage::Session),
    ]
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(96))]

    /// Whatever happened to the last line, the reopened log keeps every byte (the file's
    /// good prefix plus the file moved aside is exactly what was there), `relay_log` accepts
    /// the file, and the new records continue the indexes of the last good one.
    #[test]
    fn resume_after_any_damage_to_the_last_line_loses_no_record(
        before in 1usize..6,
        after in 1usize..4,
        d in damage_strategy(),
    ) {
        let dir = temp_dir("damage");
        let path = dir.join("s.jsonl");
        let mut log = StudyLog::open(&*dir, SyncPolicy::SessionEnd).expect("open");
        for i in 0..before {
            log.append(&record("s", "tool.call", &format!(r#"{{"n":{i},"t":"é\"x"}}"#)))
                .expect("append");
        }
        drop(log);
        let mut bytes = std::fs::read(&path).expect("read");
        damage(&mut bytes, &d);
        std::fs::write(&path, &bytes).expect("damage");

        let mut log = StudyLog::open(&*dir, SyncPolicy::SessionEnd).expect("reopen");
        let mut repaired = None;
        let mut first = None;
        for _ in 0..after {
            let a = log.append(&record("s", "agent.message", "{}")).expect("append after");
            first.get_or_insert(a.event_index);
            if let Some(r) = a.repaired {
                repaired = Some(r);
            }
        }
        drop(log);
        let now = std::fs::read(&path).expect("read");
        let report = check(&now);
        proptest::prop_assert!(report.is_consistent(), "{}", report.render());
        proptest::prop_assert!(report.torn_tail.is_none());
        let kept = now.len() - after * std::fs::read_to_string(&path)
            .expect("text")
            .lines()
            .last()
            .map_or(0, |l| l.len() + 1);
        // What the file kept plus what went aside is byte for byte what was there.
        let mut whole = now[..kept].to_vec();
        if let Some(r) = &repaired {
            whole.extend_from_slice(&std::fs::read(&r.aside).expect("aside"));
        }
        proptest::prop_assert_eq!(&whole, &bytes, "{:?}", d);
        // The records kept are the first ones, unchanged, and the new ones follow them.
        let kept_lines = now[..kept].split(|&b| b == b'\n').filter(|l| !l.is_empty()).count();
        proptest::prop_assert!(kept_lines + 1 >= before, "lost more than the damaged line");
        proptest::prop_assert_eq!(first, Some(kept_lines as u64));
        proptest::prop_assert_eq!(report.lines as usize, kept_lines + after);
    }
}

// ---- session.end when the log is not saved -------------------------------------------------

const SESSION_END: &str =
    r#"{"v":"mvp-0.2","type":"session.end","id":"req-999","payload":{"reason":"study-complete"}}"#;
const SESSION_ENDED_REPLY: &str = r#"{"v":"mvp-0.2","type":"session.ended","replyTo":"req-999","payload":{"sessionId":"s-20260213-001","logFile":"logs/m.jsonl","stateReset":true}}"#;
const SESSION_START: &str = r#"{"v":"mvp-0.2","type":"session.start","id":"req-001","payload":{"studyId":"pilot-01","participantId":"P07"}}"#;
const SESSION_STARTED: &str = r#"{"v":"mvp-0.2","type":"session.started","replyTo":"req-001","payload":{"sessionId":"s-20260213-002"}}"#;
const RESET: &str =
    r#"{"v":"mvp-0.2","type":"state.updated","payload":{"source":"reset","messageHistory":[]}}"#;

/// Frames sent to `conn`, as JSON, in order.
fn sent_to(outs: &[Output<ServerEvent>], conn: ConnId) -> Vec<Value> {
    outs.iter()
        .filter_map(|o| match o {
            Output::Send { conn: c, frame } if *c == conn => {
                serde_json::from_str(frame.as_text()?).ok()
            }
            _ => None,
        })
        .collect()
}

fn drain_all(m: &mut LoggingRelay) -> Vec<Output<ServerEvent>> {
    std::iter::from_fn(|| m.poll_output()).collect()
}

/// Host and agent join session "m"; the agent's `session.end` reaches the host, which answers
/// `session.ended` and pushes the reset. Returns what the agent got after `session.end`.
fn end_a_session(m: &mut LoggingRelay, now: Instant) -> (ConnId, ConnId, Vec<Output<ServerEvent>>) {
    let (host, agent) = (ConnId::new(1), ConnId::new(2));
    let peer = PeerInfo::new(None).with_path("/agent/ws");
    m.handle_connect(host, &peer, now);
    m.handle_connect(agent, &peer, now);
    m.handle_frame(host, Frame::Text(HOST_JOIN), now);
    m.handle_frame(agent, Frame::Text(AGENT_JOIN), now);
    m.handle_frame(agent, Frame::Text(CALL), now);
    m.handle_frame(host, Frame::Text(RESULT), now);
    m.handle_frame(agent, Frame::Text(SESSION_END), now);
    drain_all(m);
    m.handle_frame(host, Frame::Text(SESSION_ENDED_REPLY), now);
    m.handle_frame(host, Frame::Text(RESET), now);
    (host, agent, drain_all(m))
}

fn assert_withheld(got: &[Value]) {
    assert_eq!(got.len(), 2, "{got:?}");
    assert_eq!(got[0]["type"], "error", "never a session.ended: {got:?}");
    assert_eq!(got[0]["payload"]["code"], "LOG_FLUSH_FAILED");
    assert_eq!(got[0]["replyTo"], "req-999");
    let text = got[0]["payload"]["message"].as_str().expect("text");
    assert!(text.contains("not saved"), "{text}");
    assert_eq!(
        got[1]["type"], "state.updated",
        "the push after it still arrives"
    );
}

#[test]
fn session_end_is_answered_with_log_flush_failed_when_a_directory_is_in_the_way() {
    let dir = temp_dir("end-blocked");
    std::fs::create_dir(dir.join("m.jsonl")).expect("collision");
    let (mut m, now) = logging_relay(&dir);
    let (host, agent, outs) = end_a_session(&mut m, now);
    assert_withheld(&sent_to(&outs, agent));
    assert!(outs.iter().any(|o| matches!(o,
        Output::Event(ServerEvent::SessionEndWithheld { agent: a, .. }) if *a == agent)));
    // The host is told its log failed, as for every failure.
    assert!(sent_to(&outs, host)
        .iter()
        .any(|v| v["payload"]["code"] == LOG_WRITE_FAILED));
    // Once the directory is gone the next study session ends cleanly.
    std::fs::remove_dir(dir.join("m.jsonl")).expect("rmdir");
    m.handle_frame(agent, Frame::Text(SESSION_START), now);
    m.handle_frame(host, Frame::Text(SESSION_STARTED), now);
    m.handle_frame(agent, Frame::Text(SESSION_END), now);
    drain_all(&mut m);
    m.handle_frame(host, Frame::Text(SESSION_ENDED_REPLY), now);
    let got = sent_to(&drain_all(&mut m), agent);
    assert_eq!(got[0]["type"], "session.ended", "{got:?}");
}

/// Files whose appends fail once `budget` bytes have been written in all (the part that
/// fits is written: a torn line, as a full disk leaves it).
struct FailAfter {
    budget: std::sync::Arc<AtomicU64>,
}

struct FailAfterFile {
    file: Box<dyn LogFile>,
    budget: std::sync::Arc<AtomicU64>,
}

impl LogFile for FailAfterFile {
    fn size(&mut self) -> std::io::Result<u64> {
        self.file.size()
    }
    fn read_exact_at(&mut self, offset: u64, buf: &mut [u8]) -> std::io::Result<()> {
        self.file.read_exact_at(offset, buf)
    }
    fn append(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        let left = self.budget.load(Ordering::Relaxed);
        let fits = usize::try_from(left).unwrap_or(usize::MAX).min(bytes.len());
        self.budget.fetch_sub(fits as u64, Ordering::Relaxed);
        self.file.append(&bytes[..fits])?;
        if fits < bytes.len() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::StorageFull,
                "no space left (test)",
            ));
        }
        Ok(())
    }
    fn set_len(&mut self, len: u64) -> std::io::Result<()> {
        self.file.set_len(len)
    }
    fn sync(&mut self) -> std::io::Result<()> {
        self.file.sync()
    }
    fn syncer(&self) -> std::io::Result<SyncHandle> {
        self.file.syncer()
    }
}

impl Storage for FailAfter {
    fn open(&mut self, path: &Path, create_new: bool) -> std::io::Result<Box<dyn LogFile>> {
        let file = OsStorage.open(path, create_new)?;
        Ok(Box::new(FailAfterFile {
            file,
            budget: self.budget.clone(),
        }))
    }
    fn create_with(&mut self, path: &Path, bytes: &[u8]) -> std::io::Result<()> {
        OsStorage.create_with(path, bytes)
    }
    fn rename(&mut self, from: &Path, to: &Path) -> std::io::Result<()> {
        OsStorage.rename(from, to)
    }
    fn exists(&mut self, path: &Path) -> bool {
        OsStorage.exists(path)
    }
    fn sync_dir(&mut self, dir: &Path) -> std::io::Result<()> {
        OsStorage.sync_dir(dir)
    }
}

#[test]
fn a_writer_that_fails_after_n_bytes_never_lets_a_clean_session_ended_through() {
    // The whole scripted session writes some 2 KB; fail it at every point along the way.
    let mut clean_at = None;
    for n in (0..2_600).step_by(97) {
        let dir = temp_dir("fail-after");
        #[allow(clippy::disallowed_methods)]
        let now = Instant::now();
        let relay = Relay::new(RelayConfig::default(), SequentialIds::new(0), now, 0);
        let budget = std::sync::Arc::new(AtomicU64::new(n));
        let storage = Box::new(FailAfter { budget });
        let log = StudyLog::with_storage(&*dir, SyncPolicy::SessionEnd, storage).expect("open");
        let mut m = LoggingRelay::new(relay, log);
        let (_, agent, outs) = end_a_session(&mut m, now);
        let got = sent_to(&outs, agent);
        let bytes = std::fs::read(dir.join("m.jsonl")).unwrap_or_default();
        let report = check(&bytes);
        assert!(report.is_consistent(), "n={n}: {}", report.render());
        assert!(
            report.torn_tail.is_none(),
            "n={n}: a failed write is rolled back"
        );
        if got[0]["type"] == "session.ended" {
            // Only when every record of the session is in the file.
            assert_eq!(report.by_type.get("session.ended"), Some(&2), "n={n}");
            assert_eq!(report.by_type.get("tool.call"), Some(&2), "n={n}");
            clean_at.get_or_insert(n);
        } else {
            assert_withheld(&got);
            assert!(
                clean_at.is_none(),
                "n={n}: failed after a larger budget passed"
            );
        }
    }
    assert!(clean_at.is_some(), "the budget never sufficed");
}

// ---- the fsync runs off the task that owns the relay ------------------------------------------

#[test]
fn the_session_end_sync_runs_on_the_worker_while_other_connections_go_on_in_order() {
    let dir = temp_dir("worker");
    #[allow(clippy::disallowed_methods)]
    let now = Instant::now();
    let relay = Relay::new(RelayConfig::default(), SequentialIds::new(0), now, 0);
    let log = StudyLog::open(&*dir, SyncPolicy::SessionEnd).expect("open");
    let (tx, mut jobs) = tokio::sync::mpsc::channel(4);
    let mut m = LoggingRelay::with_sync_worker(relay, log, tx);
    // A second session, "n", with its own host and agent.
    let peer = PeerInfo::new(None).with_path("/agent/ws");
    let (host_n, agent_n) = (ConnId::new(10), ConnId::new(11));
    m.handle_connect(host_n, &peer, now);
    m.handle_connect(agent_n, &peer, now);
    m.handle_frame(
        host_n,
        Frame::Text(&HOST_JOIN.replace("\"m\"", "\"n\"")),
        now,
    );
    m.handle_frame(
        agent_n,
        Frame::Text(&AGENT_JOIN.replace("\"m\"", "\"n\"")),
        now,
    );
    drain_all(&mut m);

    let (host, agent, outs) = end_a_session(&mut m, now);
    // Nothing for the agent yet: session.ended and the push after it wait for the sync.
    assert!(
        sent_to(&outs, agent).is_empty(),
        "{:?}",
        sent_to(&outs, agent)
    );
    assert_eq!(m.syncs_in_flight(), 1);
    assert_eq!(m.held_outputs(), 2);
    let job = jobs.try_recv().expect("a sync job");
    assert!(
        jobs.try_recv().is_err(),
        "one sync for the in and out records"
    );
    // Meanwhile the other session is served at once, and so is session "m"'s host.
    m.handle_frame(agent_n, Frame::Text(CALL), now);
    let outs = drain_all(&mut m);
    assert_eq!(sent_to(&outs, host_n).len(), 1);
    m.handle_frame(agent, Frame::Text(CALL), now);
    // ... but the agent's later replies stay behind its session.ended.
    m.handle_frame(host, Frame::Text(RESULT), now);
    let outs = drain_all(&mut m);
    assert_eq!(sent_to(&outs, host).len(), 1);
    assert!(sent_to(&outs, agent).is_empty());

    let (ticket, result) = job.run();
    assert!(result.is_ok());
    m.sync_done(ticket, result);
    let outs = drain_all(&mut m);
    let got: Vec<String> = sent_to(&outs, agent)
        .iter()
        .map(|v| v["type"].as_str().unwrap_or_default().to_owned())
        .collect();
    assert_eq!(
        got,
        ["session.ended", "state.updated", "tool.result"],
        "in order"
    );
    assert!(outs
        .iter()
        .any(|o| matches!(o, Output::Event(ServerEvent::Synced { off_task: true, .. }))));
    assert_eq!((m.syncs_in_flight(), m.held_outputs()), (0, 0));
}

#[test]
fn a_failed_sync_on_the_worker_withholds_session_ended() {
    let dir = temp_dir("worker-fail");
    #[allow(clippy::disallowed_methods)]
    let now = Instant::now();
    let relay = Relay::new(RelayConfig::default(), SequentialIds::new(0), now, 0);
    let log = StudyLog::open(&*dir, SyncPolicy::SessionEnd).expect("open");
    let (tx, mut jobs) = tokio::sync::mpsc::channel(4);
    let mut m = LoggingRelay::with_sync_worker(relay, log, tx);
    let (host, agent, _) = end_a_session(&mut m, now);
    let job = jobs.try_recv().expect("a sync job");
    m.sync_done(job.ticket, Err("I/O error (test)".into()));
    let outs = drain_all(&mut m);
    assert_withheld(&sent_to(&outs, agent));
    assert!(sent_to(&outs, host)
        .iter()
        .any(|v| v["payload"]["code"] == LOG_WRITE_FAILED));
}

#[test]
fn outputs_waiting_behind_a_stuck_sync_are_bounded_and_the_connection_closed() {
    let dir = temp_dir("worker-stuck");
    #[allow(clippy::disallowed_methods)]
    let now = Instant::now();
    let mut limits = agentwire::agent_relay::Limits::default();
    limits.rate = None;
    let config = RelayConfig::default().with_limits(limits);
    let relay = Relay::new(config, SequentialIds::new(0), now, 0);
    let log = StudyLog::open(&*dir, SyncPolicy::SessionEnd).expect("open");
    let (tx, _jobs) = tokio::sync::mpsc::channel(4);
    let mut m = LoggingRelay::with_sync_worker(relay, log, tx);
    let (host, agent, _) = end_a_session(&mut m, now);
    // The sync never finishes; the host keeps pushing.
    let mut closed = Vec::new();
    for _ in 0..(MAX_HELD_PER_CONN + 50) {
        m.handle_frame(host, Frame::Text(RESET), now);
        for o in drain_all(&mut m) {
            if let Output::Close { conn, code, .. } = o {
                closed.push((conn, code));
            }
        }
        assert!(m.held_outputs() <= MAX_HELD_PER_CONN);
    }
    assert_eq!(
        closed,
        [(agent, agentwire::core::CloseCode::TRY_AGAIN_LATER)]
    );
    assert_eq!(m.held_outputs(), 0);
}

/// With no good record among the last lines (more bad lines than resume looks back over), the
/// whole file goes aside byte for byte and the session starts again at `eventIndex` 0.
#[test]
fn a_log_with_no_good_record_near_its_end_goes_aside_whole() {
    let dir = temp_dir("whole-aside");
    let path = dir.join("s.jsonl");
    let mut log = StudyLog::open(&*dir, SyncPolicy::SessionEnd).expect("open");
    log.append(&record("s", "tool.call", "{}")).expect("append");
    drop(log);
    let mut bytes = std::fs::read(&path).expect("read");
    for _ in 0..100 {
        bytes.extend_from_slice(b"garbage, not a record\n");
    }
    std::fs::write(&path, &bytes).expect("damage");

    let mut log = StudyLog::open(&*dir, SyncPolicy::SessionEnd).expect("reopen");
    let a = log
        .append(&record("s", "agent.message", "{}"))
        .expect("append after");
    drop(log);
    let repair = a.repaired.expect("repaired");
    assert!(repair.whole_file, "{repair:?}");
    assert_eq!(repair.bytes, bytes.len() as u64);
    assert_eq!(std::fs::read(&repair.aside).expect("aside"), bytes);
    assert_eq!(a.event_index, 0);
    let report = check(&std::fs::read(&path).expect("read"));
    assert!(report.is_consistent(), "{}", report.render());
}

// ---- one file per study session ------------------------------------------------------------

#[test]
fn a_study_sessions_records_carry_its_id_and_live_in_the_file_named_after_it() {
    let dir = temp_dir("study-files");
    let (mut m, now) = logging_relay(&dir);
    let (host, agent) = (ConnId::new(1), ConnId::new(2));
    let peer = PeerInfo::new(None).with_path("/agent/ws");
    m.handle_connect(host, &peer, now);
    m.handle_connect(agent, &peer, now);
    const POLL: &str = r#"{"v":"mvp-0.2","type":"snapshot.get","id":"poll","payload":{}}"#;
    const STATE: &str = r#"{"v":"mvp-0.2","type":"snapshot.state","replyTo":"poll","payload":{"sessionId":"m","uiSpec":null,"messageHistory":[],"toolSchema":[]}}"#;
    const STARTED_1: &str = r#"{"v":"mvp-0.2","type":"session.started","replyTo":"req-001","payload":{"sessionId":"s-20260213-001"}}"#;
    const ENDED_1: &str = r#"{"v":"mvp-0.2","type":"session.ended","replyTo":"req-999","payload":{"sessionId":"s-20260213-001","logFile":"s-20260213-001.jsonl","stateReset":true}}"#;
    let steps = [
        (host, HOST_JOIN),
        (agent, AGENT_JOIN),
        (agent, POLL),
        (host, STATE),
        (agent, SESSION_START),
        (host, STARTED_1),
        (agent, CALL),
        (host, RESULT),
        (agent, SESSION_END),
        (host, ENDED_1),
        (host, RESET),
        (agent, POLL),
        (host, STATE),
    ];
    let mut forwarded_ended = false;
    for (conn, text) in steps {
        m.handle_frame(conn, Frame::Text(text), now);
        let outs = drain_all(&mut m);
        if text == ENDED_1 {
            forwarded_ended = sent_to(&outs, agent)
                .iter()
                .any(|v| v["type"] == "session.ended");
        }
    }
    assert!(
        forwarded_ended,
        "the study log was saved and session.ended forwarded"
    );
    // The study session's file is closed once it ended; the relay session's stays open.
    let open: Vec<String> = m
        .log()
        .open_sessions()
        .map(|s| s.as_str().to_owned())
        .collect();
    assert_eq!(open, ["m"]);

    let lines = |name: &str| -> Vec<Value> {
        std::fs::read_to_string(dir.join(name))
            .expect(name)
            .lines()
            .map(|l| serde_json::from_str(l).expect("record"))
            .collect()
    };
    let kinds = |log: &[Value]| -> Vec<String> {
        log.iter()
            .map(|r| {
                format!(
                    "{} {}",
                    r["direction"].as_str().unwrap(),
                    r["type"].as_str().unwrap()
                )
            })
            .collect()
    };
    let study = lines("s-20260213-001.jsonl");
    assert!(study.iter().all(|r| r["sessionId"] == "s-20260213-001"));
    assert_eq!(
        kinds(&study),
        [
            "in session.started",
            "out session.started",
            "in tool.call",
            "out tool.call",
            "in tool.result",
            "out tool.result",
            "in session.end",
            "out session.end",
            "in session.ended",
            "out session.ended",
        ]
    );
    let report = check(&std::fs::read(dir.join("s-20260213-001.jsonl")).expect("read"));
    assert!(report.is_consistent(), "{}", report.render());
    assert!(report.warnings.is_empty(), "{}", report.render());
    assert_eq!(report.first_type.as_deref(), Some("session.started"));
    assert_eq!(report.last_type.as_deref(), Some("session.ended"));
    // The rest (joins, polls before and after, the session.start request, the reset push
    // after the end) is the relay session's, in its own file.
    let relay = lines("m.jsonl");
    assert!(relay.iter().all(|r| r["sessionId"] == "m"));
    let relay_kinds = kinds(&relay);
    for k in [
        "internal relay.join",
        "in snapshot.get",
        "out snapshot.state",
        "in session.start",
        "out session.start",
        "in state.updated",
    ] {
        assert!(relay_kinds.iter().any(|x| x == k), "{k}: {relay_kinds:?}");
    }
    assert!(!relay_kinds
        .iter()
        .any(|x| x.contains("tool.call") || x.contains("session.ended")));
    assert_eq!(
        indexes(&dir.join("m.jsonl")),
        (0..relay.len() as u64).collect::<Vec<_>>()
    );

    // The next study session gets a file of its own.
    m.handle_frame(agent, Frame::Text(SESSION_START), now);
    m.handle_frame(host, Frame::Text(SESSION_STARTED), now);
    m.handle_frame(agent, Frame::Text(CALL), now);
    drain_all(&mut m);
    let second = lines("s-20260213-002.jsonl");
    assert_eq!(
        kinds(&second)[..2],
        ["in session.started", "out session.started"]
    );
    assert_eq!(indexes(&dir.join("s-20260213-002.jsonl")), [0, 1, 2, 3]);
    // relay_log tells a study session that has not ended (yet).
    let running = check(&std::fs::read(dir.join("s-20260213-002.jsonl")).expect("read"));
    assert!(running.is_consistent(), "{}", running.render());
    assert!(
        running
            .warnings
            .iter()
            .any(|w| w.contains("without its session.ended")),
        "{}",
        running.render()
    );
    assert_eq!(
        lines("s-20260213-001.jsonl").len(),
        study.len(),
        "the first is untouched"
    );
}
