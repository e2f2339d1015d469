//! Sans-IO JSON-RPC 2.0 pub/sub agent bus with an interceptor chain.
//!
//! Agents connect to a bus over WebSocket and speak JSON-RPC 2.0: they `initialize`,
//! `subscribe` to topic patterns, and publish with `sendMessage`. The bus delivers each
//! message to the matching subscribers **one at a time, as requests**, so that a subscriber
//! can stop the chain by answering `stopPropagation: true` (authentication, deduplication,
//! rate limiting...). The spec is `specs/jsonrpc-bus.md`; what the reference Python bus does on
//! the wire, and which of its bugs we refuse (it deadlocks in three ways), is `INTEROP.md`
//! (jsonrpc-bus section).
//!
//! This crate never opens a socket or reads a clock: drive its machines with
//! `agentwire-tokio`, with the in-memory `agentwire_core::sim` harness, or with your own loop.
//!
//! # Roles
//!
//! - [`Bus`] (server role): owns every connection, subscription and in-flight delivery.
//! - [`BusClient`] (client role): one connection at a time; initializes on every connect,
//!   restores its subscriptions after a reconnect, and surfaces deliveries as
//!   [`ClientEvent::Delivery`], answered automatically or by the application
//!   ([`ClientConfig::intercept`]).
//!
//! The crate's parts: [`message`] (wire types: the JSON-RPC envelope, ids, error codes and
//! every method's params and result), [`codec`] (the borrowed decoder that splits and
//! classifies bodies, and the writers), the error enums ([`DecodeError`], [`ProtocolError`],
//! [`CommandError`], [`RequestError`]), the configuration ([`BusConfig`], [`ClientConfig`],
//! [`Limits`]), one module per role ([`Bus`], [`BusClient`]), and [`topic`] (patterns and
//! the index that matches them).
//!
//! # A run loop
//!
//! A bus and a client in memory: every `Send` output of one is a `handle_frame` input of the
//! other. A real driver does exactly this with sockets in between.
//!
//! ```
//! use std::time::Instant;
//! use agentwire_core::{ConnId, Machine, Output, PeerInfo, SequentialIds};
//! use jsonrpc_bus_proto::{Bus, BusClient, BusConfig, ClientConfig, ClientEvent};
//! use serde_json::json;
//!
//! # #[allow(clippy::disallowed_methods)]
//! let now = Instant::now(); // a driver's clock; the machines never read one
//! let unix_ms = 1_739_534_400_000; // the wall clock at `now`, for `ping`
//! let mut bus = Bus::new(BusConfig::default(), SequentialIds::new(0), now, unix_ms);
//! let mut client = BusClient::new(ClientConfig::new("agent-1"), SequentialIds::new(1));
//! let (at_bus, at_client) = (ConnId::new(1), ConnId::new(2));
//! bus.handle_connect(at_bus, &PeerInfo::new(None), now);
//! client.handle_connect(at_client, &PeerInfo::new(None), now); // sends `initialize`
//!
//! // Moves frames both ways until both machines are quiet; returns the client's events.
//! let mut pump = |bus: &mut Bus, client: &mut BusClient| {
//!     let mut events = Vec::new();
//!     loop {
//!         let mut moved = false;
//!         while let Some(out) = client.poll_output() {
//!             moved = true;
//!             match out {
//!                 Output::Send { frame, .. } => bus.handle_frame(at_bus, frame.as_frame(), now),
//!                 Output::Event(e) => events.push(e),
//!                 Output::Close { .. } => {}
//!             }
//!         }
//!         while let Some(out) = bus.poll_output() {
//!             moved = true;
//!             if let Output::Send { frame, .. } = out {
//!                 client.handle_frame(at_client, frame.as_frame(), now);
//!             }
//!         }
//!         if !moved {
//!             return events;
//!         }
//!     }
//! };
//! let events = pump(&mut bus, &mut client);
//! assert!(matches!(&events[0], ClientEvent::Initialized(r) if r.server_info.name == "bub-bus"));
//!
//! // Subscribe, then publish to our own topic: the bus asks us (we answer at once,
//! // `stopPropagation: false`) and then answers our publish with the chain's result.
//! client.subscribe("agent:*", now).unwrap();
//! let publish = client.publish("agent:spawn", &json!({"agent": "a-7"}), now).unwrap();
//! let events = pump(&mut bus, &mut client);
//! assert!(events.iter().any(|e| matches!(e,
//!     ClientEvent::Delivery { topic, .. } if topic == "agent:spawn")));
//! assert!(events.iter().any(|e| matches!(e,
//!     ClientEvent::Published { request, result } if *request == publish
//!         && !result.stop_propagation && result.delivered == Some(1))));
//! ```
//!
//! # Method kinds
//!
//! As in quinn: `handle_*` feed input (network or time), `poll_*` drain output, verbs are
//! commands that return at once (`Bus::publish`, `BusClient::subscribe`, `BusClient::answer`,
//! ...; outcomes arrive as events), nouns are getters.
//!
//! # Limits
//!
//! Every collection a peer can grow is bounded; exceeding a limit is answered with
//! [`ErrorCode::LIMIT_EXCEEDED`] (-32005, `data` names the limit).
//!
//! | limit ([`Limits`]) | default | beyond it |
//! |---|---|---|
//! | `max_connections` | 1,024 | -32005 (`id: null`), close 1013 `server-full` |
//! | `max_message_bytes` | 1 MiB | -32005 (`id: null`), checked before parsing |
//! | `max_batch_len` | 100 | one -32005 for the whole batch |
//! | `max_subscriptions_per_conn` | 256 | -32005 |
//! | `max_topic_bytes` | 1,024 | -32005 |
//! | `max_pending_per_subscriber` | 1,024 | that subscriber is skipped, counted `overloaded`, reported as [`BusEvent::Dropped`] |
//! | `max_backlog_per_publisher` | 64 | flow control: the bus stops reading that connection until half of them ended |
//! | `max_pending_per_publisher` | 256 | -32005 (a notification: dropped, reported as [`BusEvent::Dropped`]) |
//! | `max_payload_depth` | 128 | -32005 `max_payload_depth`, never forwarded |
//! | [`BusConfig::delivery_timeout`] | 30 s | the subscriber is skipped, counted `timeouts` |
//! | [`BusConfig::max_in_flight_per_subscriber`] | 8 | later deliveries wait their turn |
//! | [`BusConfig::initialize_timeout`] | 30 s | close 1008 `initialize-required` |
//! | [`BusConfig::payload`] | [`PayloadRule::Object`] | -32602 for a payload that is not an object |
//! | [`BusConfig::drop_report_interval`] | 1 s | [`BusEvent::Dropped`] at most once per reason per interval |
//! | [`ClientConfig::request_timeout`] | 30 s | [`RequestError::TimedOut`] |
//! | [`ClientConfig::max_payload_depth`] | 128 | a deeper delivery is answered -32005, never surfaced |
//!
//! # Spec decisions
//!
//! Each is pinned by the test named after it (in `tests/`).
//!
//! 1. **Before `initialize`**, `subscribe`/`unsubscribe`/`sendMessage`/`ping` get **-32000
//!    "Not initialized"** (ours). The reference answers -32001, which the spec assigns to
//!    "Already initialized"; we keep the two apart. Unknown methods are -32601 in any state;
//!    notifications get nothing. (`methods_before_initialize_get_not_initialized_32000`)
//! 2. A **second `initialize`** is -32001 and a **duplicate `subscribe`** -32003, as the spec
//!    says (the reference allows both). (`second_initialize_is_32001`,
//!    `subscribe_returns_a_subscription_id_and_rejects_duplicates`)
//! 3. **`clientInfo`** may be absent or `null` (INTEROP); otherwise it must be an object whose
//!    `name` and `version`, when present, are strings, else -32002.
//!    (`client_info_null_is_valid_and_invalid_client_info_is_32002`)
//! 4. A **missing or empty `topic`** is -32600, as the spec's table says for `subscribe`
//!    (the reference answers -32603), for every method taking a topic; a topic of the wrong
//!    type is -32602. (`missing_or_empty_topic_is_32600_and_wrong_type_32602`)
//! 5. **Matching** is the reference's anchored, case-sensitive glob (`fnmatchcase`) by
//!    default; [`MatchMode::GlobOrPrefix`] adds the spec's prefix rule (`inbound:chat-`
//!    matches `inbound:chat-1`). (`glob_mode_is_the_default_and_prefix_mode_is_the_spec_rule`,
//!    `tests/topic.rs`)
//! 6. **Subscription order** across connections is the order of each connection's earliest
//!    matching subscription; a connection matching through several patterns gets one delivery.
//!    (`chain_runs_in_subscription_order_one_at_a_time`,
//!    `one_delivery_per_connection_however_many_patterns_match`)
//! 7. **A publisher subscribed to its own topic** receives its message like any subscriber
//!    (our machines are event-driven, so this cannot deadlock);
//!    [`BusConfig::deliver_to_publisher`] `= false` skips it.
//!    (`publisher_subscribed_to_its_own_topic_gets_it_without_deadlock`)
//! 8. **Skips are counted**: the publisher's result keeps `success` and `stopPropagation` and
//!    adds `delivered`, `errors`, `timeouts`, `disconnected` and `overloaded`. A malformed
//!    result from a subscriber (not an object, no boolean `stopPropagation`) counts as
//!    delivered and not stopped. (`error_reply_skips_to_the_next_and_is_counted`,
//!    `malformed_subscriber_results_count_as_continue`, `full_subscriber_queue_is_skipped_as_overloaded`)
//! 9. **The delivery timeout** runs from the moment it is that subscriber's turn, including
//!    any wait behind its in-flight window, so each hop is bounded.
//!    (`a_silent_subscriber_times_out_and_the_chain_goes_on`)
//! 10. **The chain is fixed at publish time**: subscribers that arrive later are not added,
//!     ones that leave are skipped. A publisher that disconnects does not stop its chain.
//!     (`connects_and_disconnects_during_a_delivery_are_safe`,
//!     `the_publisher_disconnecting_does_not_stop_the_chain`)
//! 11. **Order**: a subscriber may hold up to `max_in_flight_per_subscriber` deliveries, but
//!     never one that an earlier message of the same publisher has not yet passed, so each
//!     publisher's messages reach each subscriber in publish order.
//!     (`many_deliveries_in_flight_and_each_publishers_order_is_kept`)
//! 12. **Notifications** are executed and never answered; a `sendMessage` notification is a
//!     fire-and-forget publish. One the bus refuses (bad topic or payload) is reported as
//!     [`ProtocolError::NotificationRefused`], since its sender cannot be told.
//!     (`notifications_run_but_are_never_answered`,
//!     `a_payload_that_is_not_an_object_is_32602_by_default`)
//! 13. **Batches**: answered as one array in request order, notifications left out, nothing
//!     for an all-notification batch, one -32600 for `[]`; a `sendMessage` inside a batch is
//!     answered when its chain ends. (`batches_answer_in_order_and_skip_notifications`,
//!     `a_batch_with_a_publish_waits_for_its_chain`)
//! 14. **Params by position** (`["inbound:*"]`), which JSON-RPC 2.0 allows, are accepted
//!     beside the spec's named params. (`params_by_position_are_accepted_as_json_rpc_allows`)
//! 15. **A payload must be a JSON object** by default ([`PayloadRule::Object`]): the spec's
//!     shape, and what the reference requires (it validates `payload` as a dict, and its
//!     subscribers type deliveries the same way, so a bus that forwards a list breaks them).
//!     Anything else, a missing or `null` payload included, is **-32602** with the message
//!     `Invalid params: payload must be a JSON object` and `data` naming what came (`got an
//!     array`, ...); the reference answers -32603. [`PayloadRule::Any`] accepts any JSON value
//!     and forwards a missing one as `null`. Either way a payload is forwarded byte for byte,
//!     never parsed into a tree. (`a_payload_that_is_not_an_object_is_32602_by_default`,
//!     `payload_rule_any_accepts_every_json_value`,
//!     `a_missing_payload_is_forwarded_as_null_under_payload_rule_any`,
//!     `a_payload_is_forwarded_byte_for_byte`)
//! 16. **Bus-originated request ids** are UUID strings, as the reference's; responses from a
//!     connection other than the one asked, or to unknown ids, are dropped (and reported).
//!     (`unknown_and_misrouted_responses_are_dropped`)
//! 17. **Binary frames** are read as UTF-8 JSON, as the reference does.
//!     (`non_utf8_binary_is_a_parse_error_and_utf8_binary_json_works`)
//! 18. **`ping`** answers with second precision, `2025-02-14T12:00:00Z`, the spec's form.
//!     (`ping_answers_with_the_wall_clock_in_rfc3339_utc`)
//! 19. **An initialize deadline** (30 s, configurable, `None` = the reference's none) closes
//!     idle sockets with 1008. (`initialize_deadline_closes_1008`)
//! 20. **The client never publishes twice**: a publish in flight when the connection drops
//!     fails with [`RequestError::Disconnected`]; subscriptions, by contrast, are restored.
//!     (`a_publish_in_flight_fails_on_disconnect_and_is_not_resent`,
//!     `reconnect_reinitializes_and_resubscribes`)
//! 21. **Interceptors that publish before answering** work (the bus is event-driven), within
//!     the in-flight window: if two of them each hold `max_in_flight_per_subscriber`
//!     deliveries of the other's messages while awaiting their own publishes, the cycle lasts
//!     until the delivery timeout skips one of them. Nothing hangs; raise the window or answer
//!     before awaiting. (`an_interceptor_may_publish_and_await_before_it_answers`, end to end)
//! 22. **Payload depth**: a payload nested deeper than [`Limits::max_payload_depth`] (128,
//!     [`agentwire_core::DEFAULT_MAX_JSON_DEPTH`]) is refused with -32005 (`data`:
//!     `max_payload_depth`) and never forwarded: the bus does not parse payloads, so without
//!     this a 100,000-deep one reached subscribers and killed Python ones. The check is one
//!     allocation-free pass, skipped for payloads too short to be that deep; the application's
//!     own [`Bus::publish`] obeys the same rules.
//!     (`a_payload_nested_deeper_than_the_limit_is_refused_never_forwarded`,
//!     `the_applications_own_publish_follows_the_same_payload_rules`)
//! 23. **Backpressure before loss**: a connection with
//!     [`Limits::max_backlog_per_publisher`] (64) publishes whose chains have not ended is
//!     no longer read ([`agentwire_core::Flow::PauseReading`]; agentwire-tokio then stops
//!     reading its socket, so TCP slows the publisher down) until half of them have ended.
//!     A connection is never paused while a hop awaits its reply (an interceptor that also
//!     publishes, a publisher subscribed to its own topic): it is resumed when a hop is sent
//!     to it, so no chain ever waits on a paused connection; such a connection is held to
//!     `max_pending_per_publisher` alone. An unpaced burst of 8,000 notifications reaches each
//!     of 10 subscribers in full, with at most 64 deliveries in flight. While paused, the
//!     publisher's own WebSocket pings wait unread too: a pause ends when half of its chains
//!     have, and the delivery timeout bounds each hop of them (30 s by default), so a client
//!     keepalive shorter than a stuck chain may give up; raise it or lower the timeout.
//!     (`an_unpaced_burst_of_8000_notifications_reaches_each_of_10_subscribers_in_full`,
//!     `a_publisher_is_paused_at_its_backlog_and_resumed_at_half`,
//!     `a_connection_awaited_as_a_subscriber_is_never_left_paused`, end to end:
//!     `an_unpaced_burst_reaches_every_subscriber_in_full_over_the_wire`)
//! 24. **No silent loss**: where a delivery must still be dropped (a subscriber whose queue
//!     is full; a publish over `max_pending_per_publisher`, for a driver that ignores flow
//!     control or a connection that cannot be paused), it is counted per [`DropReason`] in
//!     [`BusStats`], reported as [`BusEvent::Dropped`] (the first at once, the rest summed
//!     once per [`BusConfig::drop_report_interval`], so a log of it is rate-limited), and
//!     answered where the protocol can: the publisher's result counts `overloaded`, a
//!     request over the publisher limit gets -32005.
//!     (`drops_are_counted_reported_rate_limited_and_answered`,
//!     `a_publish_over_the_publisher_limit_is_refused_counted_and_reported`)
//! 25. **The client bounds what it surfaces too**: a delivery whose payload nests deeper
//!     than [`ClientConfig::max_payload_depth`] (128), which a bus that forwards anything
//!     (the reference) may send, is answered -32005 `max_payload_depth` (the bus skips to the
//!     next subscriber) and reported as [`ProtocolError::PayloadTooDeep`], never handed to
//!     the application. (`a_client_refuses_a_delivered_payload_deeper_than_its_limit`)
//!
//! # How messages are read
//!
//! Every message is read by one general path: [`codec::classify`] keeps `params`,
//! `result` and `error` raw until the method is known, then the method's params are read,
//! and a publish's payload is forwarded as sent, never parsed into a tree. In front of it
//! stands one hand-written reader for the message a busy bus gets most, a subscriber's
//! success reply to a hop (one per subscriber per publish): in its plain shape (members in
//! any order, any JSON whitespace, no escape in the strings it reads, no extra member) it
//! is read in one pass; anything else falls back to the general path, which gives the same
//! answer. It takes about 30% off a publish through 10 subscribers (`bus/read_path/10`).
//! Proptests and the `bus_decode` fuzz target hold the two readers together, and
//! `plain_and_general_shapes_give_the_same_frames_and_events` runs the whole bus on both.
//!
//! # Feature flags
//!
//! - `fuzzing`: `#[doc(hidden)] pub mod fuzzing`, the entry points of the cargo-fuzz targets.
#![forbid(unsafe_code)]
#![deny(missing_docs)]

mod bus;
mod client;
pub mod codec;
mod config;
mod error;
mod event;
mod fast;
pub mod message;
mod texts;
pub mod topic;

#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub mod fuzzing;

pub use bus::{Bus, BusStats};
pub use client::BusClient;
pub use config::{BusConfig, ClientConfig, Limits, PayloadRule};
pub use error::{CommandError, DecodeError, ProtocolError, RequestError};
pub use event::{
    BusEvent, ClientEvent, DeliveryId, DropReason, HopOutcome, IncomingId, RequestId, RequestKind,
};
pub use message::{ClientId, ErrorCode, ErrorObject, Id, JsonRpc2, SubscriptionId};
pub use topic::MatchMode;

/// The README's example, compiled and run as a doctest.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
