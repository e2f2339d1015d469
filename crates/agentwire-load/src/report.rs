//! The result of one run ([`Report`]) and the readable table of several.

use std::fmt::Write as _;

use serde::Serialize;

use crate::options::Options;
use crate::scenario::Outcome;
use crate::switches::ContextSwitches;
use crate::window::Marks;

/// One scenario's figures; `--json` prints these, one object per line.
#[derive(Clone, Debug, Serialize)]
#[non_exhaustive]
pub struct Report {
    /// The scenario's name.
    pub scenario: String,
    /// The server driven (`agentwire`, `nats-server`, `redis-server`).
    pub server: String,
    /// The options of the run.
    pub options: Options,
    /// Length of the measuring window, in seconds.
    pub seconds: f64,
    /// Messages sent inside the window.
    pub messages: u64,
    /// Messages received inside the window.
    pub deliveries: u64,
    /// Deliveries expected but not received (when the scenario knows the expected count).
    pub lost: Option<u64>,
    /// Errors and unexpected answers.
    pub errors: u64,
    /// Messages per second.
    pub messages_per_sec: f64,
    /// Deliveries per second.
    pub deliveries_per_sec: f64,
    /// Median latency in microseconds.
    pub p50_us: Option<f64>,
    /// 99th percentile latency in microseconds.
    pub p99_us: Option<f64>,
    /// 99.9th percentile latency in microseconds.
    pub p999_us: Option<f64>,
    /// Server CPU (user + system, all threads) over the window, in % of one core.
    pub server_cpu_percent: Option<f64>,
    /// Server CPU per message, in microseconds.
    pub cpu_us_per_message: Option<f64>,
    /// Server CPU per delivery, in microseconds.
    pub cpu_us_per_delivery: Option<f64>,
    /// The server's context switches over the window, summed over its threads (those that
    /// ended inside the window are missing).
    pub context_switches: Option<ContextSwitches>,
    /// Context switches (voluntary + involuntary) per delivery: the server's wake-ups.
    pub ctx_switches_per_delivery: Option<f64>,
    /// The server's syscalls over the window (`--syscalls`, when perf could count them).
    pub syscalls: Option<u64>,
    /// Syscalls per delivery.
    pub syscalls_per_delivery: Option<f64>,
    /// Server memory per idle connection, in bytes (idle scenarios).
    pub rss_per_connection: Option<f64>,
}

impl Report {
    /// The report of `outcome` measured over `window` (`fallback`, the run's start and end,
    /// for a scenario that did not open or close it).
    pub(crate) fn new(
        scenario: &str,
        server: &str,
        options: &Options,
        outcome: &Outcome,
        window: Marks,
        fallback: (std::time::Instant, std::time::Instant),
    ) -> Self {
        let t0 = window.start.map_or(fallback.0, |m| m.at);
        let t1 = window.stop.map_or(fallback.1, |m| m.at);
        let seconds = t1.saturating_duration_since(t0).as_secs_f64().max(1e-9);
        let cpu = window.cpu();
        let per = |n: u64| {
            cpu.filter(|_| n > 0)
                .map(|c| c.as_secs_f64() * 1e6 / n as f64)
        };
        let per_delivery = |count: Option<u64>| {
            count
                .filter(|_| outcome.deliveries > 0)
                .map(|c| c as f64 / outcome.deliveries as f64)
        };
        let switches = window.switches();
        let us = |q: f64| outcome.latency.quantile(q).map(|d| d.as_secs_f64() * 1e6);
        Self {
            scenario: scenario.to_owned(),
            server: server.to_owned(),
            options: options.clone(),
            seconds,
            messages: outcome.messages,
            deliveries: outcome.deliveries,
            lost: outcome
                .expected_deliveries
                .map(|e| e.saturating_sub(outcome.deliveries)),
            errors: outcome.errors,
            messages_per_sec: outcome.messages as f64 / seconds,
            deliveries_per_sec: outcome.deliveries as f64 / seconds,
            p50_us: us(0.5),
            p99_us: us(0.99),
            p999_us: us(0.999),
            server_cpu_percent: cpu.map(|c| c.as_secs_f64() * 100.0 / seconds),
            cpu_us_per_message: per(outcome.messages),
            cpu_us_per_delivery: per(outcome.deliveries),
            context_switches: switches,
            ctx_switches_per_delivery: per_delivery(switches.map(|s| s.total())),
            syscalls: window.syscalls,
            syscalls_per_delivery: per_delivery(window.syscalls),
            rss_per_connection: outcome.rss_per_connection,
        }
    }

    /// One JSON object.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("a report serializes")
    }
}

/// The scenario whose CPU per message the others are compared with: a bus publish through a
/// request chain (`--chain 1`: one hop, the bus's request/response).
pub const BUS_REFERENCE: &str = "bus-chain";

/// `report`'s server CPU per message over that of the [`BUS_REFERENCE`] report among
/// `reports` (the same run), when both were measured.
pub fn cpu_vs_bus(report: &Report, reports: &[Report]) -> Option<f64> {
    let bus = reports
        .iter()
        .find(|r| r.scenario == BUS_REFERENCE)?
        .cpu_us_per_message
        .filter(|c| *c > 0.0)?;
    report.cpu_us_per_message.map(|c| c / bus)
}

/// The readable table of `reports`, one row each; with a [`BUS_REFERENCE`] row among them,
/// the column `vs bus` is each row's CPU per message over the bus's.
pub fn table(reports: &[Report]) -> String {
    let head = [
        "scenario",
        "server",
        "shape",
        "msgs",
        "msg/s",
        "deliv/s",
        "lost",
        "err",
        "p50 us",
        "p99 us",
        "p99.9 us",
        "cpu %",
        "cpu us/msg",
        "cpu us/deliv",
        "vs bus",
        "ctxsw/deliv",
        "syscalls/deliv",
        "rss B/conn",
    ];
    let opt = |v: Option<f64>, prec: usize| v.map_or("-".to_owned(), |v| format!("{v:.prec$}"));
    let rows: Vec<Vec<String>> = reports
        .iter()
        .map(|r| {
            let o = &r.options;
            vec![
                r.scenario.clone(),
                r.server.clone(),
                format!(
                    "P{} S{} K{} C{} {}B",
                    o.publishers, o.subscribers, o.chain, o.connections, o.size
                ),
                r.messages.to_string(),
                format!("{:.0}", r.messages_per_sec),
                format!("{:.0}", r.deliveries_per_sec),
                r.lost.map_or("-".to_owned(), |l| l.to_string()),
                r.errors.to_string(),
                opt(r.p50_us, 1),
                opt(r.p99_us, 1),
                opt(r.p999_us, 1),
                opt(r.server_cpu_percent, 0),
                opt(r.cpu_us_per_message, 2),
                opt(r.cpu_us_per_delivery, 2),
                opt(cpu_vs_bus(r, reports), 2),
                // A broker's figures are hundredths of a wake-up or a syscall per delivery.
                opt(r.ctx_switches_per_delivery, 3),
                opt(r.syscalls_per_delivery, 3),
                opt(r.rss_per_connection, 0),
            ]
        })
        .collect();
    let widths: Vec<usize> = (0..head.len())
        .map(|i| {
            rows.iter()
                .map(|r| r[i].len())
                .chain([head[i].len()])
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    let mut line = |cells: &[String]| {
        for (i, c) in cells.iter().enumerate() {
            let _ = write!(out, "{c:>w$}  ", w = widths[i]);
        }
        out.truncate(out.trim_end().len());
        out.push('\n');
    };
    line(&head.map(str::to_owned));
    for r in &rows {
        line(r);
    }
    out
}
