//! Rotation of the MCPW API keys and the Chopsticks runner secrets: the key files are read
//! every `[keys] reload_secs` and on SIGHUP, and each changed set goes to the sans-IO
//! policy that checks it (the MCPW [`UpgradePolicy`], the Chopsticks [`Controller`]), which
//! keeps a removed key valid for `[keys] overlap_secs` and refuses it after.
//!
//! A set is the keys written in the configuration (`[mcpw] api_keys`, `[chopsticks]
//! runner_secret`), fixed for the life of the process, plus those of the key file
//! (`api_keys_file`, `runner_secrets_file`): one key per line, surrounding blanks trimmed,
//! blank lines and lines starting with `#` skipped. Rotate by editing the file. A file
//! that cannot be read is logged and the current set stays. Once keys are required they
//! stay required: an emptied file refuses everyone after the overlap.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use agentwire::chopsticks::Controller;
use agentwire::core::Observed;
use agentwire::mcpw::orchestrator::UpgradePolicy;
use agentwire::tokio::Handle;

use super::tls::read;
use super::watch::Watcher;
use super::SecurityError;
use crate::config::{ChopsticksSection, Keys, McpwSection};

/// The keys of a key file: one per line, trimmed; blank lines and `#` comments skipped.
pub fn parse_key_file(text: &str) -> Vec<String> {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(str::to_owned)
        .collect()
}

/// Where one credential set comes from: keys written in the configuration and an optional
/// key file.
#[derive(Clone, PartialEq, Eq)]
pub struct KeySource {
    what: &'static str,
    inline: Vec<String>,
    file: Option<PathBuf>,
}

impl std::fmt::Debug for KeySource {
    /// Counts and the file only: keys never reach a log.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeySource")
            .field("what", &self.what)
            .field("inline", &self.inline.len())
            .field("file", &self.file)
            .finish()
    }
}

impl KeySource {
    /// A set named `what` in logs (`"API keys"`), of `inline` keys and those of `file`.
    pub fn new(what: &'static str, inline: Vec<String>, file: Option<PathBuf>) -> Self {
        Self { what, inline, file }
    }

    /// `[mcpw] api_keys` and `api_keys_file`.
    pub fn api_keys(mcpw: &McpwSection) -> Self {
        Self::new(
            "MCPW API keys",
            mcpw.api_keys.clone(),
            mcpw.api_keys_file.clone(),
        )
    }

    /// `[chopsticks] runner_secret` and `runner_secrets_file`.
    pub fn runner_secrets(chopsticks: &ChopsticksSection) -> Self {
        Self::new(
            "Chopsticks runner secrets",
            chopsticks.runner_secret.iter().cloned().collect(),
            chopsticks.runner_secrets_file.clone(),
        )
    }

    /// The key file, if any.
    pub fn file(&self) -> Option<&Path> {
        self.file.as_deref()
    }

    /// The set now: the inline keys, then the file's (each once). Start the policy with it
    /// (`UpgradeConfig::with_api_keys`, `ControllerConfig::with_runner_secrets`) before
    /// serving, so no connection is ever checked against a partial set.
    pub fn load(&self) -> Result<Vec<String>, SecurityError> {
        let mut keys = self.inline.clone();
        if let Some(path) = &self.file {
            let text = read(path)?;
            for k in parse_key_file(&String::from_utf8_lossy(&text)) {
                if !keys.contains(&k) {
                    keys.push(k);
                }
            }
        }
        Ok(keys)
    }
}

/// Where reloaded sets go.
#[derive(Default)]
pub struct KeyTargets {
    api_keys: Option<(KeySource, Arc<Mutex<UpgradePolicy>>)>,
    runner_secrets: Option<(KeySource, Handle<Observed<Controller>>)>,
}

impl std::fmt::Debug for KeyTargets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeyTargets")
            .field("api_keys", &self.api_keys.as_ref().map(|(s, _)| s))
            .field(
                "runner_secrets",
                &self.runner_secrets.as_ref().map(|(s, _)| s),
            )
            .finish()
    }
}

impl KeyTargets {
    /// No targets yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Feeds `source` to the MCPW upgrade `policy` (the one its upgrade hook checks).
    pub fn with_api_keys(mut self, source: KeySource, policy: Arc<Mutex<UpgradePolicy>>) -> Self {
        self.api_keys = Some((source, policy));
        self
    }

    /// Feeds `source` to the Chopsticks controller behind `handle`.
    pub fn with_runner_secrets(
        mut self,
        source: KeySource,
        handle: Handle<Observed<Controller>>,
    ) -> Self {
        self.runner_secrets = Some((source, handle));
        self
    }

    /// Whether any target has a key file to watch.
    pub fn has_files(&self) -> bool {
        self.api_keys
            .as_ref()
            .is_some_and(|(s, _)| s.file.is_some())
            || self
                .runner_secrets
                .as_ref()
                .is_some_and(|(s, _)| s.file.is_some())
    }
}

/// The last set applied to a target, so an unchanged file changes nothing, and the last
/// error, so a file that stays unreadable is reported once (and again on SIGHUP).
#[derive(Default)]
struct Last(Option<Vec<String>>, Option<String>);

impl Last {
    /// Loads `source`; `Some(keys)` when they differ from the last set applied (or on
    /// `force`), logging an unreadable file.
    fn changed(&mut self, source: &KeySource, force: bool) -> Option<Vec<String>> {
        match source.load() {
            Ok(keys) => {
                self.1 = None;
                if !force && self.0.as_ref() == Some(&keys) {
                    return None;
                }
                self.0 = Some(keys.clone());
                Some(keys)
            }
            Err(e) => {
                let text = e.to_string();
                if force || self.1.as_ref() != Some(&text) {
                    tracing::error!(what = source.what, error = %text, "keys not reloaded; the current ones stay");
                }
                self.1 = Some(text);
                None
            }
        }
    }
}

/// Starts watching the targets' key files: every `[keys] reload_secs` (0: only on SIGHUP)
/// and on SIGHUP, a changed set is rotated in with `[keys] overlap_secs` of overlap. The
/// sets the targets started with count as the first ones seen. With no key file at all the
/// watcher only answers SIGHUP (nothing to reload), so that SIGHUP, the usual "reload"
/// signal, never ends the server. Must be called inside a tokio runtime.
pub fn spawn(keys: &Keys, targets: KeyTargets) -> Watcher {
    if !targets.has_files() {
        return Watcher::spawn("keys", None, |_| async {
            tracing::debug!("SIGHUP: no key file to reload");
        });
    }
    let overlap = Duration::from_secs(keys.overlap_secs);
    let every = (keys.reload_secs > 0).then(|| Duration::from_secs(keys.reload_secs));
    let targets = Arc::new(targets);
    let last = Arc::new(Mutex::new((Last::default(), Last::default())));
    // What the targets started with.
    {
        let mut l = last.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some((s, _)) = &targets.api_keys {
            l.0 .0 = s.load().ok();
        }
        if let Some((s, _)) = &targets.runner_secrets {
            l.1 .0 = s.load().ok();
        }
    }
    Watcher::spawn("keys", every, move |force| {
        let targets = Arc::clone(&targets);
        let last = Arc::clone(&last);
        async move {
            let (api, runner) = {
                let t = Arc::clone(&targets);
                let last = Arc::clone(&last);
                let loaded = tokio::task::spawn_blocking(move || {
                    let mut l = last.lock().unwrap_or_else(PoisonError::into_inner);
                    let api = t.api_keys.as_ref().and_then(|(s, _)| l.0.changed(s, force));
                    let runner = t
                        .runner_secrets
                        .as_ref()
                        .and_then(|(s, _)| l.1.changed(s, force));
                    (api, runner)
                })
                .await;
                match loaded {
                    Ok(sets) => sets,
                    Err(e) => {
                        tracing::error!(error = %e, "key reload failed");
                        return;
                    }
                }
            };
            if let (Some(keys), Some((source, policy))) = (api, &targets.api_keys) {
                let n = keys.len();
                let now = crate::common::clocks().0;
                let mut p = policy.lock().unwrap_or_else(PoisonError::into_inner);
                p.rotate_api_keys(keys, overlap, now);
                let retiring = p.api_keys().retiring().count();
                tracing::info!(
                    what = source.what,
                    current = n,
                    retiring,
                    overlap_secs = overlap.as_secs(),
                    "keys reloaded"
                );
            }
            if let (Some(keys), Some((source, handle))) = (runner, &targets.runner_secrets) {
                let n = keys.len();
                let rotated = handle
                    .call(move |c, now| {
                        c.rotate_runner_secrets(keys, overlap, now);
                        c.runner_secrets().retiring().count()
                    })
                    .await;
                match rotated {
                    Ok(retiring) => tracing::info!(
                        what = source.what,
                        current = n,
                        retiring,
                        overlap_secs = overlap.as_secs(),
                        "keys reloaded"
                    ),
                    Err(_) => {
                        tracing::debug!(what = source.what, "controller stopped; keys not applied")
                    }
                }
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_files_hold_one_key_per_line_with_comments() {
        let text = "# rotated 2026-01-01\n  k1  \n\nk2\r\n#k3\n k 4\n";
        assert_eq!(parse_key_file(text), ["k1", "k2", "k 4"]);
        assert!(parse_key_file("").is_empty());
    }

    #[test]
    fn a_source_is_its_inline_keys_then_the_file_s_each_once() {
        let dir = std::env::temp_dir().join(format!("agentwire-keys-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("keys");
        std::fs::write(&file, "b\na\nc\n").unwrap();
        let s = KeySource::new("test keys", vec!["a".into()], Some(file.clone()));
        assert_eq!(s.load().unwrap(), ["a", "b", "c"]);
        assert!(!format!("{s:?}").contains("\"a\""));
        std::fs::remove_file(&file).unwrap();
        assert!(matches!(s.load(), Err(SecurityError::Read { .. })));
        let mut last = Last(Some(vec!["a".into()]), None);
        assert_eq!(
            last.changed(&s, false),
            None,
            "unreadable: the current set stays"
        );
        assert_eq!(last.0.as_deref(), Some(&["a".to_owned()][..]));
        assert!(
            last.1.is_some(),
            "the error is remembered, so it is logged once"
        );
    }
}
