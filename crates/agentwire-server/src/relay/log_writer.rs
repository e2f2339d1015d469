//! The study-log writer: one JSONL file per record `sessionId` (spec §6), in a log directory.
//! The relay gives a study session's records its id, so each study session has its own file,
//! `<dir>/s-YYYYMMDD-NNN.jsonl` (the spec's `logs/study/<sessionId>.jsonl` with `<dir>` for
//! `logs/study`), the path the movie host reports as `logFile`; the records outside a study
//! session (joins, polls before `session.start`, ...) go to the relay session's file,
//! `<dir>/default.jsonl`.
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
//!   an existing file reads its last good record and continues from that `eventIndex + 1`.
//!   A failed write does not use its index.
//! - **Resume never loses later records**: when the file's last line is unreadable (torn
//!   write, garbage, nested too deep, not a record of this session, an `eventIndex` that
//!   does not follow the line before), the writer keeps the good prefix, moves the bad tail
//!   aside to a sibling file `<name>.bad-N` (never a `*.jsonl`, so `relay_log` on the
//!   directory skips it) and continues after the last good record; the caller gets a
//!   [`Repair`] to log as a warning. If no good record is found in the last
//!   [`MAX_REPAIR_LINES`] lines, the whole file is renamed aside and the session starts a
//!   new file at 0.
//! - **Each line is written, whole, with one `write` call to a file opened for appending, and
//!   nothing is buffered in the process**: once [`StudyLog::append`] returns, the line is in
//!   the kernel and survives a crash of the relay. A crash while writing loses at most that
//!   line, left torn (no trailing newline); the reader reports a torn last line as a warning,
//!   and the writer, reopening the file, moves the torn bytes aside before appending (the
//!   record was never complete, and the message it recorded was never forwarded).
//! - **`fsync`** (`sync_data`): a `session.ended` record is reported `sync_due`, and the
//!   caller syncs the file ([`StudyLog::sync`] here, or [`StudyLog::syncer`] on another
//!   thread) before it forwards `session.ended`; after every record with
//!   [`SyncPolicy::EveryRecord`]; and when a file is closed.
//! - **All file access goes through [`Storage`]** ([`OsStorage`] by default), so tests can
//!   put a writer that fails after N bytes under it.
//! - **Failures are returned**, never swallowed: [`LogError`] says which session, file and
//!   operation. After a failed write the part of the line that reached the file is cut
//!   off at once if possible, and the file is dropped, so the next record reopens it (moving
//!   aside whatever torn bytes are left).
//!
//! One relay writes a log directory at a time: two writers appending to one file would
//! interleave their indexes.

use std::collections::btree_map::Entry;
use std::collections::BTreeMap;
use std::fmt;
use std::fs::{File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use agentwire::agent_relay::message::types;
use agentwire::agent_relay::{LogRecord, SessionId};

use super::log_name::file_name;

/// The default log directory of `relay_server`.
pub const DEFAULT_LOG_DIR: &str = "./relay-logs";

/// Longest last line read back when a file is reopened (a record holds at most one message,
/// 1 MiB by default, plus a few escapes).
const MAX_RESUME_LINE: u64 = 16 << 20;

/// Lines examined from the end of a reopened file for its last good record; beyond them the
/// whole file is moved aside.
pub const MAX_REPAIR_LINES: usize = 64;

/// An `fsync` of one file that can run on another thread.
pub type SyncHandle = Box<dyn FnOnce() -> io::Result<()> + Send>;

/// One open log file, as the writer uses it.
pub trait LogFile: Send {
    /// Its length in bytes.
    fn size(&mut self) -> io::Result<u64>;
    /// Fills `buf` from `offset`.
    fn read_exact_at(&mut self, offset: u64, buf: &mut [u8]) -> io::Result<()>;
    /// Appends `bytes` at the end, whole or with an error (part may have reached the file).
    fn append(&mut self, bytes: &[u8]) -> io::Result<()>;
    /// Cuts or extends it to `len` bytes.
    fn set_len(&mut self, len: u64) -> io::Result<()>;
    /// `fsync` (data).
    fn sync(&mut self) -> io::Result<()>;
    /// An `fsync` of this file for another thread.
    fn syncer(&self) -> io::Result<SyncHandle>;
}

/// Where log files live: the file system, or a test's stand-in.
pub trait Storage: Send {
    /// Opens `path` for reading and appending; `create_new` fails if it exists.
    fn open(&mut self, path: &Path, create_new: bool) -> io::Result<Box<dyn LogFile>>;
    /// Creates the new file `path` (failing if it exists) holding `bytes`, synced.
    fn create_with(&mut self, path: &Path, bytes: &[u8]) -> io::Result<()>;
    /// Renames `from` to `to` (which must not exist).
    fn rename(&mut self, from: &Path, to: &Path) -> io::Result<()>;
    /// Whether `path` exists.
    fn exists(&mut self, path: &Path) -> bool;
    /// `fsync` of a directory, so entries made in it survive a power loss.
    fn sync_dir(&mut self, dir: &Path) -> io::Result<()>;
}

/// [`Storage`] on the file system.
#[derive(Debug, Clone, Copy, Default)]
pub struct OsStorage;

impl LogFile for File {
    fn size(&mut self) -> io::Result<u64> {
        Ok(self.metadata()?.len())
    }

    fn read_exact_at(&mut self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        self.seek(SeekFrom::Start(offset))?;
        self.read_exact(buf)
    }

    fn append(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.write_all(bytes)
    }

    fn set_len(&mut self, len: u64) -> io::Result<()> {
        Self::set_len(self, len)
    }

    fn sync(&mut self) -> io::Result<()> {
        self.sync_data()
    }

    fn syncer(&self) -> io::Result<SyncHandle> {
        let f = self.try_clone()?;
        Ok(Box::new(move || f.sync_data()))
    }
}

impl Storage for OsStorage {
    fn open(&mut self, path: &Path, create_new: bool) -> io::Result<Box<dyn LogFile>> {
        let f = OpenOptions::new()
            .read(true)
            .append(true)
            .create_new(create_new)
            .open(path)?;
        Ok(Box::new(f))
    }

    fn create_with(&mut self, path: &Path, bytes: &[u8]) -> io::Result<()> {
        let mut f = OpenOptions::new().write(true).create_new(true).open(path)?;
        f.write_all(bytes)?;
        f.sync_data()
    }

    fn rename(&mut self, from: &Path, to: &Path) -> io::Result<()> {
        if to.exists() {
            return Err(io::Error::new(
                io::ErrorKind::AlreadyExists,
                "the rename target exists",
            ));
        }
        std::fs::rename(from, to)
    }

    fn exists(&mut self, path: &Path) -> bool {
        path.exists()
    }

    fn sync_dir(&mut self, dir: &Path) -> io::Result<()> {
        sync_dir(dir)
    }
}

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
    /// Reading the existing file's last record to continue its `eventIndex`, or moving a bad
    /// tail aside.
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
#[non_exhaustive]
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

/// A bad tail moved out of a session's file as it was reopened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Repair {
    /// The sibling file that now holds the bad bytes.
    pub aside: PathBuf,
    /// Bytes moved.
    pub bytes: u64,
    /// Why the tail was bad (the last line's fault).
    pub why: String,
    /// Whether the whole file was moved (no good record near its end).
    pub whole_file: bool,
}

/// A record that was written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Appended {
    /// Its `eventIndex`.
    pub event_index: u64,
    /// Whether the file was `fsync`ed after it.
    pub synced: bool,
    /// Whether the record asks for an `fsync` before the message it records is sent (a
    /// `session.ended` under [`SyncPolicy::SessionEnd`]); the caller runs it.
    pub sync_due: bool,
    /// A bad tail moved aside when the file was (re)opened for this record.
    pub repaired: Option<Repair>,
}

/// One open session file.
struct SessionFile {
    file: Box<dyn LogFile>,
    /// Bytes of whole lines in the file (where a failed write is rolled back to).
    len: u64,
    next_index: u64,
}

/// The study-log writer: session files (one per record `sessionId`) in one directory, each
/// with its own `eventIndex`.
pub struct StudyLog {
    dir: PathBuf,
    sync: SyncPolicy,
    storage: Box<dyn Storage>,
    files: BTreeMap<SessionId, SessionFile>,
    /// Reused for every line.
    line: Vec<u8>,
}

impl fmt::Debug for StudyLog {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StudyLog")
            .field("dir", &self.dir)
            .field("sync", &self.sync)
            .field("open", &self.files.len())
            .finish_non_exhaustive()
    }
}

impl StudyLog {
    /// A writer into `dir` on the file system, `dir` created if missing.
    pub fn open(dir: impl Into<PathBuf>, sync: SyncPolicy) -> io::Result<Self> {
        Self::with_storage(dir, sync, Box::new(OsStorage))
    }

    /// A writer into `dir` (created if missing) whose files go through `storage`.
    pub fn with_storage(
        dir: impl Into<PathBuf>,
        sync: SyncPolicy,
        storage: Box<dyn Storage>,
    ) -> io::Result<Self> {
        let dir = dir.into();
        std::fs::create_dir_all(&dir)?;
        Ok(Self {
            dir,
            sync,
            storage,
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
    /// first, moving a bad tail aside) and syncs it when the policy says every record. When
    /// this returns `Ok`, the line is in the kernel: the message it records may be sent,
    /// once the file is synced if [`Appended::sync_due`].
    pub fn append(&mut self, record: &LogRecord) -> Result<Appended, LogError> {
        let session = &record.session_id;
        let (f, repaired) = match self.files.entry(session.clone()) {
            Entry::Occupied(e) => (e.into_mut(), None),
            Entry::Vacant(v) => {
                let path = self.dir.join(file_name(session.as_str()));
                let (file, repaired) =
                    SessionFile::open(&mut *self.storage, &self.dir, &path, session).map_err(
                        |(op, error)| LogError {
                            session: session.clone(),
                            path,
                            op,
                            error,
                        },
                    )?;
                (v.insert(file), repaired)
            }
        };
        self.line.clear();
        record.write_jsonl(f.next_index, &mut self.line);
        self.line.push(b'\n');
        if let Err(error) = f.file.append(&self.line) {
            // Part of the line may be in the file: roll it back now if we can; either way
            // the file is dropped and reopened for the next record, which moves a torn tail
            // aside.
            let _ = f.file.set_len(f.len);
            self.files.remove(session);
            return Err(self.error(session, LogOp::Write, error));
        }
        f.len += self.line.len() as u64;
        let event_index = f.next_index;
        f.next_index += 1;
        let synced = self.sync == SyncPolicy::EveryRecord;
        if synced {
            if let Err(error) = f.file.sync() {
                // The line is written but may not be durable; reopening re-reads the index.
                self.files.remove(session);
                return Err(self.error(session, LogOp::Sync, error));
            }
        }
        Ok(Appended {
            event_index,
            synced,
            sync_due: !synced && record.msg_type == types::SESSION_ENDED,
            repaired,
        })
    }

    /// Syncs `session`'s open file now (in this thread).
    pub fn sync(&mut self, session: &str) -> Result<(), LogError> {
        let Some(f) = self.files.get_mut(session) else {
            return Ok(());
        };
        match f.file.sync() {
            Ok(()) => Ok(()),
            Err(error) => {
                let id = SessionId::new(session);
                self.files.remove(session);
                Err(self.error(&id, LogOp::Sync, error))
            }
        }
    }

    /// An `fsync` of `session`'s open file to run on another thread (the file's data written
    /// so far is durable once it returns `Ok`).
    pub fn syncer(&mut self, session: &str) -> Result<SyncHandle, LogError> {
        let id = SessionId::new(session);
        let Some(f) = self.files.get(session) else {
            let error = io::Error::new(io::ErrorKind::NotFound, "the file is not open");
            return Err(self.error(&id, LogOp::Sync, error));
        };
        f.file
            .syncer()
            .map_err(|error| self.error(&id, LogOp::Sync, error))
    }

    /// Syncs and closes `session`'s file (it is reopened, continuing its indexes, by the
    /// session's next record). `Ok` if it was not open.
    pub fn close(&mut self, session: &str) -> Result<(), LogError> {
        let Some((id, mut f)) = self.files.remove_entry(session) else {
            return Ok(());
        };
        f.file
            .sync()
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
    /// a new or empty file, else the last good record's + 1, after moving a bad tail aside.
    fn open(
        storage: &mut dyn Storage,
        dir: &Path,
        path: &Path,
        session: &SessionId,
    ) -> Result<(Self, Option<Repair>), (LogOp, io::Error)> {
        let mut file = match storage.open(path, true) {
            Ok(file) => {
                // Make the new directory entry durable too.
                storage.sync_dir(dir).map_err(|e| (LogOp::Open, e))?;
                return Ok((Self::fresh(file), None));
            }
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                storage.open(path, false).map_err(|e| (LogOp::Open, e))?
            }
            Err(e) => return Err((LogOp::Open, e)),
        };
        let resume = |e| (LogOp::Resume, e);
        let len = file.size().map_err(resume)?;
        let tail = good_tail(&mut *file, len, session).map_err(resume)?;
        let (good, next_index, why) = match tail {
            Tail::Good { end, next_index } => (end, next_index, None),
            Tail::Bad {
                end,
                next_index,
                why,
            } => (end, next_index, Some(why)),
            Tail::NoGoodRecord { why } => {
                // Nothing to continue from near the end: the whole file goes aside.
                drop(file);
                return Self::whole_file_aside(storage, dir, path, len, why);
            }
        };
        if why.is_some() && len - good > MAX_RESUME_LINE {
            // Too much to copy: the whole file goes aside, the good prefix with it.
            drop(file);
            return Self::whole_file_aside(storage, dir, path, len, why.unwrap_or_default());
        }
        let repair = match why {
            None => None,
            Some(why) => {
                let bytes = len - good;
                let mut moved = vec![0; usize::try_from(bytes).unwrap_or(usize::MAX)];
                file.read_exact_at(good, &mut moved).map_err(resume)?;
                let aside = aside_path(storage, path).map_err(resume)?;
                // First the copy, then the cut: a crash in between loses nothing.
                storage.create_with(&aside, &moved).map_err(resume)?;
                storage.sync_dir(dir).map_err(resume)?;
                file.set_len(good).map_err(resume)?;
                file.sync().map_err(resume)?;
                Some(Repair {
                    aside,
                    bytes,
                    why,
                    whole_file: false,
                })
            }
        };
        Ok((
            Self {
                file,
                len: good,
                next_index,
            },
            repair,
        ))
    }

    /// Moves the whole file at `path` (`len` bytes, closed by the caller) aside to a sibling
    /// and starts a new, empty one in its place.
    fn whole_file_aside(
        storage: &mut dyn Storage,
        dir: &Path,
        path: &Path,
        len: u64,
        why: String,
    ) -> Result<(Self, Option<Repair>), (LogOp, io::Error)> {
        let resume = |e| (LogOp::Resume, e);
        let aside = aside_path(storage, path).map_err(resume)?;
        storage.rename(path, &aside).map_err(resume)?;
        let file = storage.open(path, true).map_err(|e| (LogOp::Open, e))?;
        storage.sync_dir(dir).map_err(resume)?;
        let repair = Repair {
            aside,
            bytes: len,
            why,
            whole_file: true,
        };
        Ok((Self::fresh(file), Some(repair)))
    }

    fn fresh(file: Box<dyn LogFile>) -> Self {
        Self {
            file,
            len: 0,
            next_index: 0,
        }
    }
}

/// The first free `<path>.bad-N`, N from 1.
fn aside_path(storage: &mut dyn Storage, path: &Path) -> io::Result<PathBuf> {
    for n in 1..10_000u32 {
        let mut name = path.as_os_str().to_owned();
        name.push(format!(".bad-{n}"));
        let p = PathBuf::from(name);
        if !storage.exists(&p) {
            return Ok(p);
        }
    }
    Err(io::Error::new(
        io::ErrorKind::AlreadyExists,
        "too many files moved aside already",
    ))
}

/// What the end of a reopened file holds.
enum Tail {
    /// Every byte is whole good lines up to `end` (the file's length).
    Good { end: u64, next_index: u64 },
    /// Good lines up to `end`, then a bad tail.
    Bad {
        end: u64,
        next_index: u64,
        why: String,
    },
    /// No good record among the last [`MAX_REPAIR_LINES`] lines.
    NoGoodRecord { why: String },
}

/// Finds the last good record of `session` in the file: walking back from the end over at
/// most [`MAX_REPAIR_LINES`] lines, a line is good when `relay_log` accepts it as a record
/// of `session` and its `eventIndex` follows the line before it (when that one is a record
/// of `session` too) or is 0 on the first line.
fn good_tail(file: &mut dyn LogFile, len: u64, session: &SessionId) -> io::Result<Tail> {
    if len == 0 {
        return Ok(Tail::Good {
            end: 0,
            next_index: 0,
        });
    }
    // Bytes after the last newline are a torn line.
    let mut end = rfind_newline(file, len)?.map_or(0, |p| p + 1);
    let mut why = (end < len).then(|| format!("a torn last line of {} bytes", len - end));
    for _ in 0..MAX_REPAIR_LINES {
        if end == 0 {
            break;
        }
        let start = rfind_newline(file, end - 1)?.map_or(0, |p| p + 1);
        let verdict = match read_line(file, start, end - 1)? {
            None => Err("a line too long to be a record".to_owned()),
            Some(line) => match record_of(&line, session) {
                Err(e) => Err(e),
                Ok(index) if start == 0 && index != 0 => {
                    Err(format!("the first line has eventIndex {index}, not 0"))
                }
                Ok(index) if start == 0 => Ok(index),
                Ok(index) => {
                    let p_start = rfind_newline(file, start - 1)?.map_or(0, |p| p + 1);
                    let prev = read_line(file, p_start, start - 1)?
                        .and_then(|l| record_of(&l, session).ok());
                    match prev {
                        Some(p) if p.checked_add(1) != Some(index) => Err(format!(
                            "eventIndex {index} does not follow {p} on the line before"
                        )),
                        _ => Ok(index),
                    }
                }
            },
        };
        match verdict {
            Ok(index) => {
                let next_index = index + 1;
                return Ok(match why {
                    None => Tail::Good { end, next_index },
                    Some(why) => Tail::Bad {
                        end,
                        next_index,
                        why,
                    },
                });
            }
            Err(e) => {
                why.get_or_insert(e);
                end = start;
            }
        }
    }
    let why = why.unwrap_or_default();
    if end == 0 {
        // Every line was bad: keep nothing in place, but only after moving it aside.
        return Ok(Tail::Bad {
            end: 0,
            next_index: 0,
            why,
        });
    }
    Ok(Tail::NoGoodRecord { why })
}

/// The bytes `[start, end)` of the file, or `None` when longer than a record can be.
fn read_line(file: &mut dyn LogFile, start: u64, end: u64) -> io::Result<Option<Vec<u8>>> {
    if end - start > MAX_RESUME_LINE {
        return Ok(None);
    }
    let mut line = vec![0; usize::try_from(end - start).unwrap_or(usize::MAX)];
    file.read_exact_at(start, &mut line)?;
    Ok(Some(line))
}

/// `eventIndex` of `line` if `relay_log` accepts it as a record of `session`.
fn record_of(line: &[u8], session: &SessionId) -> Result<u64, String> {
    let (id, index) = super::log_check::record(line)?;
    if id != session.as_str() {
        return Err(format!(
            "a record of session {id:?}, not {:?}",
            session.as_str()
        ));
    }
    Ok(index)
}

/// Offset of the last `\n` before `end`, reading backwards in 64 KiB chunks.
fn rfind_newline(file: &mut dyn LogFile, end: u64) -> io::Result<Option<u64>> {
    const CHUNK: u64 = 64 << 10;
    let mut buf = vec![0; CHUNK as usize];
    let mut hi = end;
    while hi > 0 {
        let lo = hi.saturating_sub(CHUNK);
        let chunk = &mut buf[..usize::try_from(hi - lo).unwrap_or(0)];
        file.read_exact_at(lo, chunk)?;
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
