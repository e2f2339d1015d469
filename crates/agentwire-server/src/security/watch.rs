//! The task that reloads a file-backed setting: on a period, on SIGHUP, and on demand.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Notify;
use tokio::task::JoinHandle;

/// A running reload task. Dropping it stops the task.
#[derive(Debug)]
pub struct Watcher {
    task: JoinHandle<()>,
    trigger: Arc<Notify>,
}

impl Watcher {
    /// Spawns the task: `step(false)` every `every` (if set), `step(true)` on each SIGHUP
    /// (on Unix) and on each [`trigger`](Self::trigger). `what` names it in logs. Must be
    /// called inside a tokio runtime.
    pub(crate) fn spawn<F, Fut>(what: &'static str, every: Option<Duration>, mut step: F) -> Self
    where
        F: FnMut(bool) -> Fut + Send + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        let trigger = Arc::new(Notify::new());
        let asked = Arc::clone(&trigger);
        let task = tokio::spawn(async move {
            let mut hup = Hangups::new(what);
            let mut ticks = every.filter(|d| !d.is_zero()).map(|d| {
                let mut i = tokio::time::interval_at(tokio::time::Instant::now() + d, d);
                i.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
                i
            });
            loop {
                let force = tokio::select! {
                    () = tick(&mut ticks) => false,
                    () = hup.recv() => true,
                    () = asked.notified() => true,
                };
                step(force).await;
            }
        });
        Self { task, trigger }
    }

    /// Reloads now, as a SIGHUP would (the files are read even if they look unchanged).
    pub fn trigger(&self) {
        self.trigger.notify_one();
    }
}

impl Drop for Watcher {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The next tick of `ticks`, or never without one.
async fn tick(ticks: &mut Option<tokio::time::Interval>) {
    match ticks {
        Some(t) => {
            t.tick().await;
        }
        None => std::future::pending().await,
    }
}

/// SIGHUP, where there is one.
struct Hangups {
    #[cfg(unix)]
    signal: Option<tokio::signal::unix::Signal>,
}

impl Hangups {
    fn new(what: &'static str) -> Self {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{signal, SignalKind};
            let signal = match signal(SignalKind::hangup()) {
                Ok(s) => Some(s),
                Err(e) => {
                    tracing::warn!(error = %e, "{what}: no SIGHUP reload");
                    None
                }
            };
            Self { signal }
        }
        #[cfg(not(unix))]
        {
            let _ = what;
            Self {}
        }
    }

    async fn recv(&mut self) {
        #[cfg(unix)]
        if let Some(s) = self.signal.as_mut() {
            if s.recv().await.is_some() {
                return;
            }
        }
        std::future::pending().await
    }
}
