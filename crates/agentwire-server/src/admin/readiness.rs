//! What `/readyz` checks: named checks the gateway registers, each evaluated at request
//! time.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

/// A check that is set from outside (a listener bound, a cluster link up): ready while it
/// holds `true`. Cheap to clone; every clone sets the same check.
#[derive(Debug, Clone, Default)]
pub struct ReadyFlag(Arc<AtomicBool>);

impl ReadyFlag {
    /// Sets the check's state.
    pub fn set(&self, ready: bool) {
        self.0.store(ready, Ordering::Release);
    }

    /// The check's state.
    pub fn get(&self) -> bool {
        self.0.load(Ordering::Acquire)
    }
}

/// How one check is evaluated.
enum Check {
    Flag(ReadyFlag),
    Probe(Box<dyn Fn() -> bool + Send + Sync>),
}

/// The named checks of `/readyz`. The server is ready when every check passes; with no
/// check at all it is ready.
///
/// A gateway registers a [`flag`](Self::flag) per listener (set once bound) and per
/// cluster link (set while up), and a [`writable_dir`](Self::writable_dir) for the relay's
/// study-log folder; each is evaluated when `/readyz` is asked, not cached.
#[derive(Default)]
pub struct Readiness {
    checks: Mutex<Vec<(String, Check)>>,
}

impl std::fmt::Debug for Readiness {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<String> = self.lock().iter().map(|(n, _)| n.clone()).collect();
        f.debug_struct("Readiness").field("checks", &names).finish()
    }
}

/// Distinguishes the probe files of concurrent checks in one process.
static PROBE: AtomicU64 = AtomicU64::new(0);

impl Readiness {
    /// No checks yet: ready.
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<(String, Check)>> {
        self.checks.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Adds the check `name`, not ready until the returned flag is set.
    pub fn flag(&self, name: &str) -> ReadyFlag {
        let flag = ReadyFlag::default();
        self.lock()
            .push((name.to_owned(), Check::Flag(flag.clone())));
        flag
    }

    /// Adds the check `name`, ready while `probe` returns true (called at every `/readyz`;
    /// it must be quick).
    pub fn probe(&self, name: &str, probe: impl Fn() -> bool + Send + Sync + 'static) {
        self.lock()
            .push((name.to_owned(), Check::Probe(Box::new(probe))));
    }

    /// Adds the check `name`, ready while a file can be created in the folder `dir` (one is
    /// created, written and removed at every `/readyz`): a missing folder, a path that is
    /// not a folder, a read-only folder or a full disk fail it. The folder is never created
    /// here.
    pub fn writable_dir(&self, name: &str, dir: impl Into<PathBuf>) {
        let dir = dir.into();
        self.probe(name, move || dir_is_writable(&dir));
    }

    /// `Ok` when every check passes, else the names of those that fail, in the order they
    /// were added.
    pub fn check(&self) -> Result<(), Vec<String>> {
        let failing: Vec<String> = self
            .lock()
            .iter()
            .filter(|(_, c)| match c {
                Check::Flag(f) => !f.get(),
                Check::Probe(p) => !p(),
            })
            .map(|(n, _)| n.clone())
            .collect();
        if failing.is_empty() {
            Ok(())
        } else {
            Err(failing)
        }
    }
}

/// Whether a file can be created, written and removed in `dir`.
fn dir_is_writable(dir: &std::path::Path) -> bool {
    use std::io::Write;
    if !dir.is_dir() {
        return false;
    }
    let n = PROBE.fetch_add(1, Ordering::Relaxed);
    let path = dir.join(format!(".agentwire-ready-{}-{n}", std::process::id()));
    let written = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&path)
        .and_then(|mut f| f.write_all(b"ok"));
    let _ = std::fs::remove_file(&path);
    written.is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ready_only_when_every_check_passes_and_names_the_failing_ones() {
        let r = Readiness::new();
        assert_eq!(r.check(), Ok(()));
        let main = r.flag("listener main");
        let tmp = std::env::temp_dir().join(format!("aw-ready-{}", std::process::id()));
        std::fs::create_dir_all(&tmp).expect("dir");
        r.writable_dir("relay log folder", &tmp);
        r.probe("cluster link", || true);
        assert_eq!(r.check(), Err(vec!["listener main".to_owned()]));
        main.set(true);
        assert_eq!(r.check(), Ok(()));
        std::fs::remove_dir_all(&tmp).expect("rm");
        // A plain file where the folder was: not writable, whoever runs the test.
        std::fs::write(&tmp, b"not a folder").expect("file");
        assert_eq!(r.check(), Err(vec!["relay log folder".to_owned()]));
        std::fs::remove_file(&tmp).expect("rm");
        assert_eq!(r.check(), Err(vec!["relay log folder".to_owned()]));
        assert!(!tmp.exists(), "the check created the folder");
    }
}
