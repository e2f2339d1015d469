//! The study-log writer and its validator without sockets: file naming, `eventIndex`
//! continuity across reopen and restart, torn lines, failures, the checks of `relay_log`, and
//! the [`LoggingRelay`] ordering guarantee driven in memory.

#[path = "../examples/relay/mod.rs"]
mod relay;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use agentwire::agent_relay::{Direction, LogRecord, Relay, RelayConfig, SessionId};
use agentwire::core::{ConnId, Frame, Machine, Output, PeerInfo, SequentialIds, Utf8Bytes};
use relay::log_check::{check, is_iso8601_ms};
use relay::log_writer::{file_name, LogOp, StudyLog, SyncPolicy};
use relay::logging_relay::{LoggingRelay, ServerEvent, LOG_WRITE_FAILED};
use serde_json::Value;

/// A fresh, empty directory for one test's logs, removed when dropped.
struct TempDir(PathBuf);

impl std::ops::Deref for TempDir {
    type Target = Path;
    fn deref(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn temp_dir(name: &str) -> TempDir {
    static N: AtomicU64 = AtomicU64::new(0);
    let dir = std::env::temp_dir().join(format!(
        "agentwire-relay-log-{}-{}-{name}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("temp dir");
    TempDir(dir)
}

fn record(session: &str, msg_type: &'static str, payload: &str) -> LogRecord {
    LogRecord {
        session_id: SessionId::new(session),
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
