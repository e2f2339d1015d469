//! The study-log writer: one JSONL file per relay session (spec §6), in a log directory.
//!
//! Guarantees, and how:
//!
//! - **One file per session**, named by [`file_name`]: the session id percent-encoded so that
//!   different ids never share a file (even on a case-insensitive file system) and no id can
//!   leave the directory (`..`, `/`). `default` → `default.jsonl`,
//!   `s-20260213-001` → `s-20260213-001.jsonl`, `Study/1` → `%53tudy%2F1.jsonl`.
//! - **`eventIndex` starts at 0 and never repeats or skips within a file**: the counter
//!   belongs to the file, not to a connection or to the session's lifetime in the relay. It
//!   survives host reconnects and replacements, a session that empties and fills again (its
//!   file is closed when it empties and reopened later), and a restart of the relay: opening
//!   an existing file reads its last complete line and continues from that `eventIndex + 1`.
//!   A failed write does not use its index.
//! - **Each line is written, whole, with one `write` call to a file opened for appending, and
//!   nothing is buffered in the process**: once [`StudyLog::append`] returns, the line is in
//!   the kernel and survives a crash of the relay. A crash while writing loses at most that
//!   line, left torn (no trailing newline); the reader reports a torn last line as a warning,
//!   and the writer, reopening the file, trims the torn bytes before appending (the record
//!   was never complete, and the message it recorded was never forwarded).
//! - **`fsync`** (`sync_data`) after every `session.ended` record, so the session's log is on
//!   stable storage before the relay forwards `session.ended`; after every record with
//!   [`SyncPolicy::EveryRecord`]; and when a file is closed.
//! - **Failures are returned**, never swallowed: [`LogError`] says which session, file and
//!   operation. After a failed write the file is dropped, so the next record reopens it
//!   (trimming whatever part of the failed line reached the file).
//!
//! One relay writes a log directory at a time: two writers appending to one file would
//! interleave their indexes.

use std::collections::btree_map::Entry;
use std::collections::BTreeMap;
use std::fmt::{self, Write as _};
use std::fs::{File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use agentwire::agent_relay::message::types;
use agentwire::agent_relay::{LogRecord, SessionId};

/// The default log directory of `relay_server`.
pub const DEFAULT_LOG_DIR: &str = "./relay-logs";

/// Longest file-name stem kept as is; a longer encoded session id is cut and given a hash of
/// the whole id, so names stay under the usual 255-byte limit.
const MAX_STEM: usize = 160;

/// Longest last line read back when a file is reopened (a record holds at most one message,
/// 1 MiB by default, plus a few escapes).
const MAX_RESUME_LINE: u64 = 16 << 20;

/// When the writer calls `fsync`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum SyncPolicy {
    /// After each `session.ended` record (before it is forwarded) and when a file is closed.
    /// Between those a power loss may lose lines the kernel had not written back yet; a crash
    /// of the relay loses at most the line being written.
    #[default]
    SessionEnd,
    /// After every record as well (slower: one `fsync` per message).
    EveryRecord,
}

/// What [`StudyLog`] was doing when it failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogOp {
    /// Creating or opening the session's file (or syncing the directory after creating it).
    Open,
    /// Reading the existing file's last record to continue its `eventIndex`, or trimming a
    /// torn last line.
    Resume,
    /// Appending a line.
    Write,
    /// `fsync`.
    Sync,
}

impl fmt::Display for LogOp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Open => "open",
            Self::Resume => "resume",
            Self::Write => "write",
            Self::Sync => "sync",
        })
    }
}

/// A study-log failure: the record (if any) was not written, or not synced.
#[derive(Debug)]
pub struct LogError {
    /// The session whose file failed.
    pub session: SessionId,
    /// The file.
    pub path: PathBuf,
    /// What failed.
    pub op: LogOp,
    /// Why.
    pub error: io::Error,
}

impl fmt::Display for LogError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}: {}", self.op, self.path.display(), self.error)
    }
}

impl std::error::Error for LogError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.error)
    }
}

/// A record that was written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Appended {
    /// Its `eventIndex`.
    pub event_index: u64,
    /// Whether the file was `fsync`ed after it.
    pub synced: bool,
    /// Bytes of a torn last line trimmed when the file was (re)opened for this record.
    pub trimmed: u64,
}

/// The file name of `session`'s log: the id with every byte outside `a-z 0-9 - _ .` (and a
/// leading `.`) written `%XX` (upper-case hex), then `.jsonl`.
///
/// Injective: `%` itself is encoded, and since letters are only ever lower-case and hex
/// digits upper-case, two ids never map to names that differ only in case. An encoded id
/// longer than 160 bytes is cut there and ends in `~` and a 64-bit FNV-1a hash of the whole
/// id (`~` never appears otherwise); the writer also checks, when it reopens a file, that its
/// last record is of the same session.
pub fn file_name(session: &str) -> String {
    let mut stem = String::with_capacity(session.len() + 6);
    for (i, b) in session.bytes().enumerate() {
        let keep = b.is_ascii_lowercase()
            || b.is_ascii_digit()
            || b == b'-'
            || b == b'_'
            || (b == b'.' && i > 0);
        if keep {
            stem.push(char::from(b));
        } else {
            let _ = write!(stem, "%{b:02X}");
        }
    }
    if stem.len() > MAX_STEM {
        let mut cut = MAX_STEM;
        // Never split a `%XX` escape (the stem is ASCII, so every index is a boundary).
        if let Some(p) = stem[..cut].rfind('%') {
            if p + 3 > cut {
                cut = p;
            }
        }
        stem.truncate(cut);
        let _ = write!(stem, "~{:016x}", fnv1a64(session.as_bytes()));
    }
    stem.push_str(".jsonl");
    stem
}

fn fnv1a64(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// One open session file.
#[derive(Debug)]
struct SessionFile {
    file: File,
    /// Bytes of whole lines in the file (where a failed write is rolled back to).
    len: u64,
    next_index: u64,
}

/// The study-log writer: session files in one directory, each with its own `eventIndex`.
#[derive(Debug)]
pub struct StudyLog {
    dir: PathBuf,
    sync: SyncPolicy,
    files: BTreeMap<SessionId, SessionFile>,
    /// Reused for every line.
    line: Vec<u8>,
}

impl StudyLog {
    /// A writer into `dir`, created if missing.
    pub fn open(dir: impl Into<PathBuf>, sync: SyncPolicy) -> io::Result<Self> {
        let dir = dir.into();
        std::fs::create_dir_all(&dir)?;
        Ok(Self {
            dir,
            sync,
            files: BTreeMap::new(),
            line: Vec::with_capacity(1024),
        })
    }

    /// The log directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The sync policy.
    pub fn sync_policy(&self) -> SyncPolicy {
        self.sync
    }

    /// The file `session`'s records go to.
    pub fn path_of(&self, session: &str) -> PathBuf {
        self.dir.join(file_name(session))
    }

    /// Sessions whose file is open, in id order.
    pub fn open_sessions(&self) -> impl Iterator<Item = &SessionId> {
        self.files.keys()
    }

    /// The `eventIndex` the next record of `session` gets, if its file is open.
    pub fn next_index(&self, session: &str) -> Option<u64> {
        self.files.get(session).map(|f| f.next_index)
    }

    /// Writes `record` as the next line of its session's file (opening or reopening the file
    /// first) and syncs it when it is a `session.ended` record or the policy says so. When
    /// this returns `Ok`, the line is in the kernel: the message it records may be sent.
    pub fn append(&mut self, record: &LogRecord) -> Result<Appended, LogError> {
        let session = &record.session_id;
        let (f, trimmed) = match self.files.entry(session.clone()) {
            Entry::Occupied(e) => (e.into_mut(), 0),
            Entry::Vacant(v) => {
                let path = self.dir.join(file_name(session.as_str()));
                let (file, trimmed) =
                    SessionFile::open(&self.dir, &path, session).map_err(|(op, error)| {
                        LogError {
                            session: session.clone(),
                            path,
                            op,
                            error,
                        }
                    })?;
                (v.insert(file), trimmed)
            }
        };
        self.line.clear();
        record.write_jsonl(f.next_index, &mut self.line);
        self.line.push(b'\n');
        if let Err(error) = f.file.write_all(&self.line) {
            // Part of the line may be in the file: roll it back now if we can; either way
            // the file is dropped and reopened for the next record, which trims a torn tail.
            let _ = f.file.set_len(f.len);
            self.files.remove(session);
            return Err(self.error(session, LogOp::Write, error));
        }
        f.len += self.line.len() as u64;
        let event_index = f.next_index;
        f.next_index += 1;
        let synced =
            self.sync == SyncPolicy::EveryRecord || record.msg_type == types::SESSION_ENDED;
        if synced {
            if let Err(error) = f.file.sync_data() {
                // The line is written but may not be durable; reopening re-reads the index.
                self.files.remove(session);
                return Err(self.error(session, LogOp::Sync, error));
            }
        }
        Ok(Appended {
            event_index,
            synced,
            trimmed,
        })
    }

    /// Syncs and closes `session`'s file (it is reopened, continuing its indexes, by the
    /// session's next record). `Ok` if it was not open.
    pub fn close(&mut self, session: &str) -> Result<(), LogError> {
        let Some((id, f)) = self.files.remove_entry(session) else {
            return Ok(());
        };
        f.file
            .sync_data()
            .map_err(|error| self.error(&id, LogOp::Sync, error))
    }

    /// Syncs and closes every file; returns the failures.
    pub fn close_all(&mut self) -> Vec<LogError> {
        let ids: Vec<SessionId> = self.files.keys().cloned().collect();
        ids.iter()
            .filter_map(|s| self.close(s.as_str()).err())
            .collect()
    }

    fn error(&self, session: &SessionId, op: LogOp, error: io::Error) -> LogError {
        LogError {
            session: session.clone(),
            path: self.path_of(session.as_str()),
            op,
            error,
        }
    }
}

impl SessionFile {
    /// Opens (creating if needed) `path` for appending and finds the next `eventIndex`: 0 for
    /// a new or empty file, else the last complete record's + 1 (after trimming a torn last
    /// line). Returns the file and the bytes trimmed.
    fn open(
        dir: &Path,
        path: &Path,
        session: &SessionId,
    ) -> Result<(Self, u64), (LogOp, io::Error)> {
        let open = |create_new: bool| {
            OpenOptions::new()
                .read(true)
                .append(true)
                .create_new(create_new)
                .open(path)
        };
        let mut file = match open(true) {
            Ok(file) => {
                // Make the new directory entry durable too.
                sync_dir(dir).map_err(|e| (LogOp::Open, e))?;
                return Ok((
                    Self {
                        file,
                        len: 0,
                        next_index: 0,
                    },
                    0,
                ));
            }
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                open(false).map_err(|e| (LogOp::Open, e))?
            }
            Err(e) => return Err((LogOp::Open, e)),
        };
        let resume = |e| (LogOp::Resume, e);
        let len = file.metadata().map_err(resume)?.len();
        let (good, last) = last_line(&mut file, len).map_err(resume)?;
        let trimmed = len - good;
        if trimmed > 0 {
            file.set_len(good).map_err(resume)?;
            file.sync_data().map_err(resume)?;
        }
        let next_index = match last {
            None => 0,
            Some(line) => last_index(&line, session).map_err(resume)? + 1,
        };
        Ok((
            Self {
                file,
                len: good,
                next_index,
            },
            trimmed,
        ))
    }
}

/// `eventIndex` of `line`, which must be a record of `session`.
fn last_index(line: &[u8], session: &SessionId) -> io::Result<u64> {
    let bad = |why: String| io::Error::new(io::ErrorKind::InvalidData, why);
    let v: serde_json::Value = serde_json::from_slice(line)
        .map_err(|e| bad(format!("the last line is not a JSON record ({e})")))?;
    match v.get("sessionId").and_then(|s| s.as_str()) {
        Some(s) if s == session.as_str() => {}
        other => {
            return Err(bad(format!(
                "the last record is of session {other:?}, not {:?}",
                session.as_str()
            )))
        }
    }
    v.get("eventIndex")
        .and_then(serde_json::Value::as_u64)
        .ok_or_else(|| bad("the last record has no integer eventIndex".into()))
}

/// The length of the file's whole lines, and its last whole line (without the newline).
fn last_line(file: &mut File, len: u64) -> io::Result<(u64, Option<Vec<u8>>)> {
    let Some(end) = rfind_newline(file, len)? else {
        return Ok((0, None));
    };
    let start = rfind_newline(file, end)?.map_or(0, |p| p + 1);
    if end - start > MAX_RESUME_LINE {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "the last line is too long to be a record",
        ));
    }
    let mut line = vec![0; usize::try_from(end - start).unwrap_or(usize::MAX)];
    file.seek(SeekFrom::Start(start))?;
    file.read_exact(&mut line)?;
    Ok((end + 1, Some(line)))
}

/// Offset of the last `\n` before `end`, reading backwards in 64 KiB chunks.
fn rfind_newline(file: &mut File, end: u64) -> io::Result<Option<u64>> {
    const CHUNK: u64 = 64 << 10;
    let mut buf = vec![0; CHUNK as usize];
    let mut hi = end;
    while hi > 0 {
        let lo = hi.saturating_sub(CHUNK);
        let chunk = &mut buf[..usize::try_from(hi - lo).unwrap_or(0)];
        file.seek(SeekFrom::Start(lo))?;
        file.read_exact(chunk)?;
        if let Some(i) = chunk.iter().rposition(|&b| b == b'\n') {
            return Ok(Some(lo + i as u64));
        }
        hi = lo;
    }
    Ok(None)
}

/// `fsync` of a directory, so a file created in it survives a power loss.
fn sync_dir(dir: &Path) -> io::Result<()> {
    #[cfg(unix)]
    {
        File::open(dir)?.sync_all()
    }
    #[cfg(not(unix))]
    {
        let _ = dir;
        Ok(())
    }
}
