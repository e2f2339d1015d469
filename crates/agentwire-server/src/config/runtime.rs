//! `[runtime]`: the tokio runtime `agentwire serve` runs on.

use serde::{Deserialize, Serialize};

use super::error::ConfigError;

/// The most worker threads `worker_threads` may ask for.
pub const MAX_WORKER_THREADS: usize = 1024;

/// Which tokio scheduler runs the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum RuntimeFlavor {
    /// A pool of worker threads that steal each other's tasks. Default.
    #[default]
    MultiThread,
    /// Every task on the one thread that runs the server: no wake-up crosses a core, and the
    /// server uses at most one core.
    CurrentThread,
}

impl RuntimeFlavor {
    /// The name the file uses: `multi-thread`, `current-thread`.
    pub fn name(self) -> &'static str {
        match self {
            Self::MultiThread => "multi-thread",
            Self::CurrentThread => "current-thread",
        }
    }
}

impl std::fmt::Display for RuntimeFlavor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// `[runtime]`: the tokio runtime of `agentwire serve` (the other subcommands always run on
/// the default multi-thread runtime).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
#[non_exhaustive]
pub struct Runtime {
    /// `"multi-thread"` or `"current-thread"`. Default `"multi-thread"`.
    pub flavor: RuntimeFlavor,
    /// Worker threads of the multi-thread runtime (0: one per core), at most
    /// [`MAX_WORKER_THREADS`]; must be 0 with `"current-thread"`, which has none. Default 0.
    pub worker_threads: usize,
}

impl Default for Runtime {
    fn default() -> Self {
        Self {
            flavor: RuntimeFlavor::MultiThread,
            worker_threads: 0,
        }
    }
}

impl Runtime {
    /// Builds the runtime these settings describe, with IO and timers enabled. Fails only
    /// when the operating system refuses what it needs (threads, an epoll instance).
    pub fn build(&self) -> std::io::Result<tokio::runtime::Runtime> {
        let mut builder = match self.flavor {
            RuntimeFlavor::MultiThread => {
                let mut b = tokio::runtime::Builder::new_multi_thread();
                if self.worker_threads > 0 {
                    b.worker_threads(self.worker_threads);
                }
                b
            }
            RuntimeFlavor::CurrentThread => tokio::runtime::Builder::new_current_thread(),
        };
        builder.enable_all().build()
    }

    /// The checks types cannot express (see [`worker_threads`](Self::worker_threads)).
    pub(crate) fn validate(&self) -> Result<(), ConfigError> {
        if self.flavor == RuntimeFlavor::CurrentThread && self.worker_threads != 0 {
            return Err(ConfigError::invalid(
                "runtime.worker_threads",
                format!(
                    "{} with flavor \"current-thread\", which runs on one thread: must be 0 \
                     (or use flavor \"multi-thread\")",
                    self.worker_threads
                ),
            ));
        }
        if self.worker_threads > MAX_WORKER_THREADS {
            return Err(ConfigError::invalid(
                "runtime.worker_threads",
                format!(
                    "{} is more than {MAX_WORKER_THREADS} (0: one per core)",
                    self.worker_threads
                ),
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::{Runtime, RuntimeFlavor, MAX_WORKER_THREADS};
    use crate::config::{Config, ConfigError};

    fn reject(text: &str) -> ConfigError {
        match Config::from_toml_str(text, "bad.toml") {
            Ok(c) => panic!("accepted: {:?}", c.runtime),
            Err(e) => e,
        }
    }

    #[test]
    fn the_default_is_a_multi_thread_runtime_with_one_worker_per_core() {
        let c = Config::from_toml_str("", "empty.toml").expect("parses");
        assert_eq!(c.runtime, Runtime::default());
        assert_eq!(c.runtime.flavor, RuntimeFlavor::MultiThread);
        assert_eq!(c.runtime.worker_threads, 0);
        let rt = c.runtime.build().expect("runtime");
        assert_eq!(
            rt.handle().runtime_flavor(),
            tokio::runtime::RuntimeFlavor::MultiThread
        );
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        assert_eq!(rt.metrics().num_workers(), cores);
    }

    #[test]
    fn the_section_is_applied_and_builds_that_runtime() {
        let c = Config::from_toml_str("[runtime]\nflavor = \"current-thread\"\n", "t.toml")
            .expect("parses");
        assert_eq!(c.runtime.flavor, RuntimeFlavor::CurrentThread);
        let rt = c.runtime.build().expect("runtime");
        assert_eq!(
            rt.handle().runtime_flavor(),
            tokio::runtime::RuntimeFlavor::CurrentThread
        );
        // It serves IO and timers.
        rt.block_on(async {
            let l = tokio::net::TcpListener::bind("127.0.0.1:0")
                .await
                .expect("bind");
            let addr = l.local_addr().expect("addr");
            let (_, accepted) = tokio::join!(tokio::net::TcpStream::connect(addr), l.accept());
            accepted.expect("accept");
            tokio::time::sleep(std::time::Duration::from_millis(1)).await;
        });

        let c = Config::from_toml_str(
            "[runtime]\nflavor = \"multi-thread\"\nworker_threads = 3\n",
            "t.toml",
        )
        .expect("parses");
        assert_eq!(c.runtime.worker_threads, 3);
        let rt = c.runtime.build().expect("runtime");
        assert_eq!(rt.metrics().num_workers(), 3);
    }

    #[test]
    fn overrides_set_the_runtime() {
        let c = Config::resolve(
            None,
            vec![("AGENTWIRE__RUNTIME__WORKER_THREADS".into(), "2".into())],
            &["runtime.flavor=current-thread".into()],
        );
        let e = c.expect_err("2 workers on a current-thread runtime");
        assert_eq!(e.key(), Some("runtime.worker_threads"), "{e}");
        assert!(
            e.to_string()
                .starts_with("environment variable AGENTWIRE__RUNTIME__WORKER_THREADS: "),
            "{e}"
        );
        let c = Config::resolve(
            None,
            vec![("AGENTWIRE__RUNTIME__FLAVOR".into(), "multi-thread".into())],
            &["runtime.flavor=current-thread".into()],
        )
        .expect("resolves");
        assert_eq!(c.runtime.flavor, RuntimeFlavor::CurrentThread, "flags win");
    }

    #[test]
    fn an_unknown_flavor_is_an_error_naming_the_key_and_the_choices() {
        let e = reject("[runtime]\nflavor = \"fast\"\n");
        assert_eq!(e.key(), Some("runtime.flavor"), "{e}");
        assert_eq!(e.line(), Some(2), "{e}");
        let shown = e.to_string();
        assert!(
            shown.starts_with("bad.toml:2: key `runtime.flavor`: "),
            "{shown}"
        );
        assert!(
            shown.contains("fast") && shown.contains("current-thread"),
            "{shown}"
        );
        let e = reject("[runtime]\nthreads = 2\n");
        assert_eq!(e.key(), Some("runtime.threads"), "{e}");
        let e = reject("[runtime]\nworker_threads = -1\n");
        assert_eq!(e.key(), Some("runtime.worker_threads"), "{e}");
    }

    #[test]
    fn workers_on_a_current_thread_runtime_or_too_many_are_an_error() {
        let e = reject("[runtime]\nflavor = \"current-thread\"\nworker_threads = 4\n");
        assert_eq!(e.key(), Some("runtime.worker_threads"), "{e}");
        assert_eq!(e.line(), Some(3), "{e}");
        assert!(e.to_string().contains("must be 0"), "{e}");
        let e = reject(&format!(
            "[runtime]\nworker_threads = {}\n",
            MAX_WORKER_THREADS + 1
        ));
        assert_eq!(e.key(), Some("runtime.worker_threads"), "{e}");
        assert!(e.to_string().contains("more than 1024"), "{e}");
        let at_most = format!("[runtime]\nworker_threads = {MAX_WORKER_THREADS}\n");
        Config::from_toml_str(&at_most, "ok.toml").expect("the maximum is accepted");
    }
}
