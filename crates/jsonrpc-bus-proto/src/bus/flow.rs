//! Publishers' backlogs and flow control, and the rate-limited reports of what had to be
//! dropped.

use std::time::{Duration, Instant};

use agentwire_core::{ConnId, ConnMap, Outbox};

use super::stats::BusStats;
use crate::config::Limits;
use crate::event::{BusEvent, DropReason};
use crate::message::{ErrorCode, ErrorObject};
use crate::texts;

/// One connection's publishes in their chains, and whether its reading is paused.
#[derive(Debug, Default)]
struct Backlog {
    /// This connection's publishes awaiting their result.
    publishing: usize,
    /// Whether the bus asked the driver to stop reading this connection.
    paused: bool,
}

impl Backlog {
    /// The flow-control change this connection needs now, recorded as made: `Some(true)` to
    /// pause (a publisher at its backlog, no reply awaited from it), `Some(false)` to resume
    /// (half its backlog ended, or a request to it is in flight: its reply must be read).
    #[inline]
    fn flow(&mut self, in_flight: impl FnOnce() -> usize, backlog: usize) -> Option<bool> {
        if self.paused {
            if self.publishing <= backlog / 2 || in_flight() > 0 {
                self.paused = false;
                return Some(false);
            }
        } else if self.publishing >= backlog && in_flight() == 0 {
            self.paused = true;
            return Some(true);
        }
        None
    }
}

/// Drops of one [`DropReason`] and their rate-limited reporting.
#[derive(Debug, Default)]
struct DropCount {
    total: u64,
    /// Drops not yet reported.
    unreported: u64,
    /// Until when a new drop is only summed (set by each report).
    quiet_until: Option<Instant>,
}

/// Every publisher's backlog (the application's own included), the pause/resume requests
/// of flow control, and the drop counters with their rate-limited reports.
#[derive(Debug)]
pub(super) struct Flow {
    backlogs: ConnMap<Backlog>,
    /// Publishes by the application itself awaiting their result.
    app_publishing: usize,
    /// Connections paused now (most often none: then nothing needs resuming).
    paused: usize,
    /// Connections with `backlog` publishes or more in their chains. With none paused and
    /// none full, no connection needs a flow-control change ([`Flow::update`] looks nothing
    /// up).
    full: usize,
    /// Publishes in their chains at which a connection is no longer read (at least 1).
    backlog: usize,
    /// Publishes awaiting their result per publisher.
    max_pending: usize,
    report_interval: Duration,
    /// Per [`DropReason`], in [`DropReason::ALL`] order.
    drops: [DropCount; 2],
}

impl Flow {
    pub(super) fn new(limits: &Limits, report_interval: Duration) -> Self {
        Self {
            backlogs: ConnMap::default(),
            app_publishing: 0,
            paused: 0,
            full: 0,
            backlog: limits.max_backlog_per_publisher.max(1),
            max_pending: limits.max_pending_per_publisher,
            report_interval,
            drops: Default::default(),
        }
    }

    pub(super) fn open(&mut self, conn: ConnId) {
        self.backlogs.insert(conn, Backlog::default());
    }

    pub(super) fn close(&mut self, conn: ConnId) {
        if let Some(b) = self.backlogs.remove(&conn) {
            if b.paused {
                self.paused -= 1;
            }
            if b.publishing >= self.backlog {
                self.full -= 1;
            }
        }
    }

    /// Counts one more publish of `publisher` (`None`: the application) in its chain, if
    /// its limit (`max_pending_per_publisher`) allows: -32005 otherwise, -32603 for a
    /// connection it does not know. One lookup for the check and the count.
    pub(super) fn start(&mut self, publisher: Option<ConnId>) -> Result<(), ErrorObject> {
        let full =
            || ErrorObject::with_data(ErrorCode::LIMIT_EXCEEDED, texts::MAX_PENDING_PER_PUBLISHER);
        let Some(conn) = publisher else {
            if self.app_publishing >= self.max_pending {
                return Err(full());
            }
            self.app_publishing += 1;
            return Ok(());
        };
        let Some(b) = self.backlogs.get_mut(&conn) else {
            return Err(ErrorObject::new(ErrorCode::INTERNAL_ERROR));
        };
        if b.publishing >= self.max_pending {
            return Err(full());
        }
        b.publishing += 1;
        if b.publishing == self.backlog {
            self.full += 1;
        }
        Ok(())
    }

    /// A publish of `publisher` ended; `in_flight` gives the requests awaited from it.
    pub(super) fn ended(
        &mut self,
        publisher: Option<ConnId>,
        in_flight: impl FnOnce() -> usize,
        out: &mut Outbox<BusEvent>,
        stats: &mut BusStats,
    ) {
        match publisher {
            Some(p) => {
                if let Some(b) = self.backlogs.get_mut(&p) {
                    if b.publishing == self.backlog {
                        self.full -= 1;
                    }
                    b.publishing = b.publishing.saturating_sub(1);
                    if let Some(pause) = b.flow(in_flight, self.backlog) {
                        self.paused = apply(p, pause, self.paused, out, stats);
                    }
                }
            }
            None => self.app_publishing = self.app_publishing.saturating_sub(1),
        }
    }

    /// Asks the driver to pause or resume reading `conn` if its state calls for it;
    /// `in_flight` gives the requests awaited from it (asked only when it matters).
    pub(super) fn update(
        &mut self,
        conn: ConnId,
        in_flight: impl FnOnce() -> usize,
        out: &mut Outbox<BusEvent>,
        stats: &mut BusStats,
    ) {
        // Neither paused nor full, no connection needs a change.
        if self.paused == 0 && self.full == 0 {
            return;
        }
        if let Some(pause) = self
            .backlogs
            .get_mut(&conn)
            .and_then(|b| b.flow(in_flight, self.backlog))
        {
            self.paused = apply(conn, pause, self.paused, out, stats);
        }
    }

    /// A request was sent to `conn`: its reply must be read, so a chain never waits on a
    /// paused connection.
    pub(super) fn awaited(&mut self, conn: ConnId, out: &mut Outbox<BusEvent>) {
        if self.paused == 0 {
            return;
        }
        if let Some(b) = self.backlogs.get_mut(&conn) {
            if b.paused {
                b.paused = false;
                self.paused -= 1;
                out.resume_reading(conn);
            }
        }
    }

    /// Counts one drop and reports it, rate-limited
    /// ([`BusConfig::drop_report_interval`](crate::BusConfig::drop_report_interval)).
    pub(super) fn dropped(
        &mut self,
        reason: DropReason,
        now: Instant,
        out: &mut Outbox<BusEvent>,
        stats: &mut BusStats,
    ) {
        let (i, stat) = match reason {
            DropReason::SubscriberOverloaded => (0, &mut stats.dropped_subscriber_overloaded),
            DropReason::PublisherOverloaded => (1, &mut stats.dropped_publisher_overloaded),
        };
        *stat += 1;
        let d = &mut self.drops[i];
        d.total += 1;
        d.unreported += 1;
        if d.quiet_until.is_none_or(|t| now >= t) {
            self.report(i, now, out);
        }
    }

    /// Reports the summed drops whose quiet interval ended by `now`.
    pub(super) fn report_due(&mut self, now: Instant, out: &mut Outbox<BusEvent>) {
        for i in 0..self.drops.len() {
            let d = &self.drops[i];
            if d.unreported > 0 && d.quiet_until.is_some_and(|t| now >= t) {
                self.report(i, now, out);
            }
        }
    }

    /// When summed drops are next due to be reported.
    pub(super) fn next_report(&self) -> Option<Instant> {
        self.drops
            .iter()
            .filter(|d| d.unreported > 0)
            .filter_map(|d| d.quiet_until)
            .min()
    }

    /// Reports the unreported drops of reason `i` and starts a quiet interval.
    fn report(&mut self, i: usize, now: Instant, out: &mut Outbox<BusEvent>) {
        let interval = self.report_interval;
        let d = &mut self.drops[i];
        let count = std::mem::take(&mut d.unreported);
        d.quiet_until = (!interval.is_zero()).then(|| now + interval);
        out.event(BusEvent::Dropped {
            reason: DropReason::ALL[i],
            count,
            total: d.total,
        });
    }
}

/// Asks the driver to pause or resume reading `conn`; returns the connections paused now.
#[cold]
fn apply(
    conn: ConnId,
    pause: bool,
    paused: usize,
    out: &mut Outbox<BusEvent>,
    stats: &mut BusStats,
) -> usize {
    if pause {
        stats.pauses += 1;
        out.pause_reading(conn);
        paused + 1
    } else {
        out.resume_reading(conn);
        paused - 1
    }
}
