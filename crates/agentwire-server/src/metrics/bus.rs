//! Bus events: subscriptions, deliveries in flight, hop and publish latency, errors, drops.

use std::collections::BTreeMap;
use std::time::Instant;

use agentwire::jsonrpc_bus::{BusEvent, DeliveryId, HopOutcome, ProtocolError};

use super::families::{set, Families, Handles};
use super::transport::TransportCollector;
use super::MAX_TRACKED;
use crate::config::Protocol;

const P: Protocol = Protocol::Bus;

/// What the bus observer remembers between events.
#[derive(Debug, Default)]
pub(super) struct State {
    subscriptions: usize,
    /// Each delivery in flight: when it was published and when its last hop ended.
    deliveries: BTreeMap<DeliveryId, (Instant, Instant)>,
    /// The hop and publish counters and histograms, looked up once.
    handles: Handles,
}

fn outcome(o: &HopOutcome) -> &'static str {
    match o {
        HopOutcome::Continued => "continued",
        HopOutcome::Stopped => "stopped",
        HopOutcome::Error(_) => "error",
        HopOutcome::TimedOut => "timed_out",
        HopOutcome::Disconnected => "disconnected",
        HopOutcome::Overloaded => "overloaded",
        _ => "other",
    }
}

/// The JSON-RPC code a violation was answered with, or the violation's kind.
fn violation_code(error: &ProtocolError) -> String {
    match error {
        ProtocolError::Decode(d) => d.code().0.to_string(),
        ProtocolError::ErrorReply(o) | ProtocolError::NotificationRefused(o) => {
            o.code.0.to_string()
        }
        ProtocolError::UnknownResponse => "unknown-response".to_owned(),
        ProtocolError::WrongResponder => "wrong-responder".to_owned(),
        ProtocolError::UnexpectedRequest { .. } => "unexpected-request".to_owned(),
        ProtocolError::InitializeTimeout => "initialize-timeout".to_owned(),
        ProtocolError::PayloadTooDeep { .. } => "payload-too-deep".to_owned(),
        _ => "other".to_owned(),
    }
}

pub(super) fn observe(
    f: &Families,
    t: &TransportCollector,
    s: &mut State,
    event: &BusEvent,
    now: Instant,
) {
    match event {
        BusEvent::Subscribed { .. } => s.subscriptions += 1,
        BusEvent::Unsubscribed { .. } => s.subscriptions = s.subscriptions.saturating_sub(1),
        BusEvent::Disconnected { subscriptions, .. } => {
            s.subscriptions = s.subscriptions.saturating_sub(*subscriptions);
        }
        BusEvent::Published { delivery, .. } => {
            if s.deliveries.len() >= MAX_TRACKED {
                s.deliveries.pop_first();
            }
            s.deliveries.insert(*delivery, (now, now));
        }
        BusEvent::Hop {
            delivery,
            outcome: o,
            ..
        } => {
            if let Some((_, last)) = s.deliveries.get_mut(delivery) {
                f.duration_via(
                    &mut s.handles,
                    P,
                    "hop",
                    now.saturating_duration_since(*last),
                );
                *last = now;
            }
            f.request_via(&mut s.handles, P, "hop", outcome(o));
            if let HopOutcome::Error(e) = o {
                f.error(P, e.code.0);
            }
        }
        BusEvent::Completed { delivery, .. } => {
            if let Some((start, _)) = s.deliveries.remove(delivery) {
                f.duration_via(
                    &mut s.handles,
                    P,
                    "publish",
                    now.saturating_duration_since(start),
                );
            }
            f.request_via(&mut s.handles, P, "publish", "completed");
        }
        BusEvent::ProtocolViolation { error, .. } => f.error(P, violation_code(error)),
        BusEvent::Dropped { reason, count, .. } => t.dropped(P, reason.as_str(), *count),
        _ => {}
    }
    set(&f.bus_subscriptions, s.subscriptions);
    set(&f.bus_deliveries, s.deliveries.len());
}
