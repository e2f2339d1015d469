//! [`ConfigError`]: what is wrong with a configuration, and where.

use std::fmt;
use std::path::PathBuf;

/// Where a setting came from: a line of a file, an environment variable or a `--set` flag.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Source {
    /// Line `line` (1-based) of the file (or text) named `origin`.
    File {
        /// The file's path, or the name given to [`Config::from_toml_str`](super::Config::from_toml_str).
        origin: String,
        /// 1-based line number.
        line: usize,
    },
    /// The environment variable `name` (`AGENTWIRE__SECTION__KEY`).
    Env {
        /// The variable's name.
        name: String,
    },
    /// The flag `--set <arg>`.
    Flag {
        /// The flag's argument, `key=value`.
        arg: String,
    },
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::File { origin, line } => write!(f, "{origin}:{line}"),
            Self::Env { name } => write!(f, "environment variable {name}"),
            Self::Flag { arg } => write!(f, "--set {arg}"),
        }
    }
}

/// A configuration that cannot be used: unreadable, not TOML, a key of the wrong type or
/// unknown, or settings that contradict each other. The message names the key and where it
/// was set (file and line, environment variable or flag) when that is known.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// The file could not be read.
    #[error("{}: cannot read the configuration file: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The file is larger than any configuration needs ([`MAX_FILE_BYTES`](super::MAX_FILE_BYTES)).
    #[error("{}: the configuration file is larger than {max} bytes", path.display())]
    TooLarge {
        /// The file.
        path: PathBuf,
        /// The cap.
        max: u64,
    },
    /// The text is not valid TOML, or a key is unknown or has the wrong type.
    #[error("{}", located(where_.as_ref(), key.as_deref(), message))]
    Parse {
        /// Where the bad part is, when known.
        where_: Option<Source>,
        /// The key (`bus.max_message_bytes`, `listener[0].listen`), when known.
        key: Option<String>,
        /// What is wrong.
        message: String,
    },
    /// A value that parses but cannot be used (a listener that does not exist, a path used
    /// twice on one listener, a bad address or CIDR, a zero limit).
    #[error("{}", located(where_.as_ref(), Some(key), message))]
    Invalid {
        /// Where the key was set; `None` for a default value.
        where_: Option<Source>,
        /// The key.
        key: String,
        /// What is wrong.
        message: String,
    },
    /// A configuration built in code that TOML cannot hold (a path that is not UTF-8).
    #[error("the configuration cannot be written as TOML: {message}")]
    Unrepresentable {
        /// What cannot be written.
        message: String,
    },
    /// An environment variable or `--set` flag that is not of the form the override scheme
    /// expects.
    #[error("{source_}: {message}")]
    Override {
        /// The variable or flag.
        source_: Source,
        /// What is wrong.
        message: String,
    },
}

impl ConfigError {
    /// The key the error is about, when it names one.
    pub fn key(&self) -> Option<&str> {
        match self {
            Self::Parse { key, .. } => key.as_deref(),
            Self::Invalid { key, .. } => Some(key),
            _ => None,
        }
    }

    /// Where the offending setting came from, when known.
    pub fn source_of_setting(&self) -> Option<&Source> {
        match self {
            Self::Parse { where_, .. } | Self::Invalid { where_, .. } => where_.as_ref(),
            Self::Override { source_, .. } => Some(source_),
            Self::Read { .. } | Self::TooLarge { .. } | Self::Unrepresentable { .. } => None,
        }
    }

    /// The 1-based line of the file the error is about, when it is about a line of a file.
    pub fn line(&self) -> Option<usize> {
        match self.source_of_setting() {
            Some(Source::File { line, .. }) => Some(*line),
            _ => None,
        }
    }

    /// An [`Invalid`](Self::Invalid) error about `key` with no known source (the caller
    /// locates it).
    pub(crate) fn invalid(key: impl Into<String>, message: impl Into<String>) -> Self {
        Self::Invalid {
            where_: None,
            key: key.into(),
            message: message.into(),
        }
    }
}

/// `WHERE: key `KEY`: MESSAGE`, leaving out the parts that are unknown.
fn located(where_: Option<&Source>, key: Option<&str>, message: &str) -> String {
    let mut out = String::new();
    if let Some(w) = where_ {
        out.push_str(&w.to_string());
        out.push_str(": ");
    }
    if let Some(k) = key {
        out.push_str("key `");
        out.push_str(k);
        out.push_str("`: ");
    }
    out.push_str(message);
    out
}
