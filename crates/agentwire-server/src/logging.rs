//! Logs through `tracing`, to stderr, one event per line: human-readable text (colours only
//! when stderr is a terminal and `NO_COLOR` is unset) or one JSON object per line.
//!
//! Every WebSocket connection a server accepts runs inside a `conn` span carrying its id,
//! the peer's address and its protocol (set by `agentwire-tokio`); a JSON line lists the
//! spans it was written in (`"spans": [..., {"name": "conn", "peer": ..., "protocol": ...}]`),
//! so one connection's lines can be picked out of a busy log.
//!
//! The filter is a `tracing` directive string (`info`, `info,agentwire_tokio=debug`);
//! `RUST_LOG`, when set and valid, wins.

use std::io::IsTerminal;

use tracing_subscriber::fmt::MakeWriter;
use tracing_subscriber::EnvFilter;

pub use crate::config::LogFormat;

/// Why logging could not be set up.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LogError {
    /// The level is not a valid `tracing` filter.
    #[error("invalid log level {level:?}: {reason}")]
    Level {
        /// The level given.
        level: String,
        /// What the filter parser said.
        reason: String,
    },
    /// A global subscriber was already installed in this process.
    #[error("logging was already set up in this process")]
    AlreadySet,
}

/// Installs the process's logger: `format` to stderr, filtered by `RUST_LOG` if set, else
/// by `level`. Call it once, at startup.
pub fn init(format: LogFormat, level: &str) -> Result<(), LogError> {
    let ansi = colour(std::io::stderr().is_terminal());
    let sub = build(format, level, std::io::stderr, ansi)?;
    tracing::subscriber::set_global_default(sub).map_err(|_| LogError::AlreadySet)
}

/// The subscriber [`init`] installs, writing to `writer` (colours only if `ansi`, and never
/// in JSON): for tests, and for programs that install it themselves.
pub fn build<W>(
    format: LogFormat,
    level: &str,
    writer: W,
    ansi: bool,
) -> Result<Box<dyn tracing::Subscriber + Send + Sync>, LogError>
where
    W: for<'w> MakeWriter<'w> + Send + Sync + 'static,
{
    let filter = filter(level)?;
    let builder = tracing_subscriber::fmt()
        .with_writer(writer)
        .with_env_filter(filter);
    Ok(match format {
        LogFormat::Json => Box::new(
            builder
                .json()
                .with_ansi(false)
                .with_current_span(true)
                .with_span_list(true)
                .finish(),
        ),
        _ => Box::new(builder.with_ansi(ansi).finish()),
    })
}

/// `RUST_LOG` if it is set and valid, else `level`.
fn filter(level: &str) -> Result<EnvFilter, LogError> {
    if let Ok(from_env) = EnvFilter::try_from_default_env() {
        return Ok(from_env);
    }
    EnvFilter::try_new(level).map_err(|e| LogError::Level {
        level: level.to_owned(),
        reason: e.to_string(),
    })
}

/// Logs text to stderr, filtered by `RUST_LOG` (else `default`), so stdout stays free for
/// output. Colours only when stderr is a terminal (and `NO_COLOR` is unset): a log file or
/// a pipe gets plain text, never ANSI escapes. (The example commands' logger.)
pub fn init_tracing(default: &str) {
    subscriber(
        default,
        std::io::stderr,
        colour(std::io::stderr().is_terminal()),
    )
    .init();
}

/// Whether to colour logs written to a stream that is (or is not) a terminal.
pub fn colour(is_terminal: bool) -> bool {
    is_terminal && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
}

/// The text subscriber [`init_tracing`] installs, writing to `writer`, with ANSI colours
/// only if `ansi`.
pub fn subscriber<W>(
    default: &str,
    writer: W,
    ansi: bool,
) -> tracing_subscriber::fmt::SubscriberBuilder<
    tracing_subscriber::fmt::format::DefaultFields,
    tracing_subscriber::fmt::format::Format,
    EnvFilter,
    W,
>
where
    W: for<'w> MakeWriter<'w> + Send + Sync + 'static,
{
    let default = default.to_owned();
    tracing_subscriber::fmt()
        .with_writer(writer)
        .with_ansi(ansi)
        .with_env_filter(EnvFilter::try_from_default_env().unwrap_or_else(|_| default.into()))
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use super::*;

    /// Lines written to a buffer, as they would be to a file or a pipe.
    #[derive(Clone, Default)]
    struct Capture(Arc<Mutex<Vec<u8>>>);

    impl std::io::Write for Capture {
        fn write(&mut self, data: &[u8]) -> std::io::Result<usize> {
            self.0.lock().expect("buffer").extend_from_slice(data);
            Ok(data.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    impl Capture {
        fn text(&self) -> String {
            String::from_utf8(self.0.lock().expect("buffer").clone()).expect("utf-8")
        }
    }

    fn logged(ansi: bool) -> String {
        let buf = Capture::default();
        let sink = buf.clone();
        let sub = subscriber("info", move || sink.clone(), ansi).finish();
        tracing::subscriber::with_default(sub, || {
            tracing::warn!(peer = "127.0.0.1:1", "could not connect");
        });
        buf.text()
    }

    #[test]
    fn logs_to_a_stream_that_is_not_a_terminal_carry_no_ansi_escapes() {
        assert!(!colour(false), "colour chosen for a pipe or file");
        let plain = logged(colour(false));
        assert!(plain.contains("WARN"), "{plain:?}");
        assert!(plain.contains("could not connect"), "{plain:?}");
        assert!(!plain.contains('\u{1b}'), "{plain:?}");
        // The same subscriber with colour on does write escapes: the check above can fail.
        assert!(logged(true).contains('\u{1b}'));
    }

    #[test]
    fn json_lines_are_one_object_each_with_the_spans_they_were_written_in() {
        let buf = Capture::default();
        let sink = buf.clone();
        let sub = build(LogFormat::Json, "info", move || sink.clone(), true).expect("build");
        tracing::subscriber::with_default(sub, || {
            let span = tracing::info_span!("conn", id = 7, peer = "127.0.0.1:9", protocol = "bus");
            let _in = span.enter();
            tracing::info!(bytes = 3, "first");
            tracing::warn!("second\nwith a newline");
        });
        let text = buf.text();
        assert!(!text.contains('\u{1b}'), "{text:?}");
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 2, "{text}");
        for line in lines {
            let v: serde_json::Value = serde_json::from_str(line).expect("a JSON object");
            assert_eq!(v["span"]["name"], "conn", "{line}");
            assert_eq!(v["spans"][0]["peer"], "127.0.0.1:9", "{line}");
            assert_eq!(v["spans"][0]["protocol"], "bus", "{line}");
        }
    }

    #[test]
    fn a_bad_level_is_a_clear_error() {
        if std::env::var_os("RUST_LOG").is_some() {
            return; // RUST_LOG wins over the level
        }
        let err = build(LogFormat::Text, "info,=[", std::io::sink, false).map(|_| ());
        assert!(matches!(err, Err(LogError::Level { .. })), "{err:?}");
    }
}
