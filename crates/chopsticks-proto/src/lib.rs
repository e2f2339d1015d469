//! Sans-IO implementation of the Chopsticks controller ↔ agent protocol, version 1.0.0.
//!
//! Chopsticks connects a controller (the main Discord bot) with music and assistant agents
//! (other bots) over one WebSocket per agent, JSON text frames. Agents announce themselves
//! with `hello` and `guilds` (and repeat both every ~30 s); the controller sends RPC-style
//! `req` messages that agents answer with `resp`; agents report joining and leaving voice
//! channels with `event` messages. The spec is `specs/chopsticks.md`; what the real Node
//! controller and agent do on the wire is `INTEROP.md` (chopsticks section).
//!
//! This crate never opens a socket or reads a clock: drive its machines with
//! `agentwire-tokio`, with the in-memory `agentwire_core::sim` harness, or with your own loop.
//!
//! # Roles
//!
//! - [`Controller`] (server role): owns every agent connection. Version negotiation, runner
//!   secret, hello deadline, connection caps, the live-agent registry, voice sessions, agent
//!   selection, requests with timeouts.
//! - [`Agent`] (client role): one connection at a time, surviving reconnects; `hello` +
//!   `guilds` on connect and every 30 s; requests surface as [`AgentEvent::Request`].
//!
//! Wire types: [`AgentMessage`] (agent → controller: [`Hello`], [`Guilds`], [`Event`],
//! [`Resp`]) and [`ControllerMessage`] (controller → agent: [`Req`], [`ErrorMessage`]), each
//! with `decode` and `encode`. They keep the wire's strings; the ids the controller reports
//! in events and keys its state by are newtypes: [`AgentId`], [`GuildId`], [`ChannelId`],
//! [`UserId`]. Every string the controller writes on the wire is in [`texts`].
//!
//! # A run loop
//!
//! The two machines talk in memory: every `Send` output of one is a `handle_frame` input of the
//! other. A real driver does exactly this with sockets in between.
//!
//! ```
//! use std::time::Instant;
//! use agentwire_core::{ConnId, Machine, Output, PeerInfo, SequentialIds};
//! use chopsticks_proto::{Agent, AgentConfig, AgentEvent, Controller, ControllerConfig, ControllerEvent};
//! use serde_json::json;
//!
//! # #[allow(clippy::disallowed_methods)]
//! let now = Instant::now(); // a driver's clock; the machines never read one
//! let mut controller = Controller::new(ControllerConfig::default(), SequentialIds::new(0));
//! let mut agent = Agent::new(AgentConfig::new("agent-1").with_guilds(["guild-1"]));
//! let (at_controller, at_agent) = (ConnId::new(1), ConnId::new(2));
//! controller.handle_connect(at_controller, &PeerInfo::new(None), now);
//! agent.handle_connect(at_agent, &PeerInfo::new(None), now);
//!
//! // Moves frames both ways until both machines are quiet; returns their events.
//! let mut pump = |controller: &mut Controller, agent: &mut Agent| {
//!     let (mut c_events, mut a_events) = (Vec::new(), Vec::new());
//!     loop {
//!         let mut moved = false;
//!         while let Some(out) = agent.poll_output() {
//!             moved = true;
//!             match out {
//!                 Output::Send { frame, .. } => controller.handle_frame(at_controller, frame.as_frame(), now),
//!                 Output::Event(e) => a_events.push(e),
//!                 Output::Close { .. } => {}
//!             }
//!         }
//!         while let Some(out) = controller.poll_output() {
//!             moved = true;
//!             match out {
//!                 Output::Send { frame, .. } => agent.handle_frame(at_agent, frame.as_frame(), now),
//!                 Output::Event(e) => c_events.push(e),
//!                 Output::Close { .. } => {}
//!             }
//!         }
//!         if !moved {
//!             return (c_events, a_events);
//!         }
//!     }
//! };
//!
//! // hello + guilds register the agent.
//! let (events, _) = pump(&mut controller, &mut agent);
//! assert!(matches!(events[1], ControllerEvent::AgentRegistered { .. }));
//! assert_eq!(controller.agent("agent-1").map(|a| a.guild_ids.len()), Some(1));
//!
//! // The controller picks an agent for a voice channel (binding it to that session) and
//! // sends it a request that starts the session; real agents want an acting user.
//! let data = json!({"guildId": "guild-1", "voiceChannelId": "voice-1", "query": "q", "actorUserId": "u1"});
//! let (chosen, id) = controller.request_for_session("guild-1", "voice-1", "play", data, now).unwrap();
//! assert_eq!(chosen, "agent-1");
//! let (_, agent_events) = pump(&mut controller, &mut agent);
//! let AgentEvent::Request(req) = &agent_events[0] else { panic!() };
//!
//! // ...the application answers through the agent, and the controller completes it.
//! agent.respond_ok(req.id.clone(), json!({"playing": false}), now).unwrap();
//! let (events, _) = pump(&mut controller, &mut agent);
//! let ControllerEvent::RequestCompleted { id: done, resp, .. } = &events[0] else { panic!() };
//! assert_eq!(*done, id);
//! assert_eq!(resp.result(), Ok(r#"{"playing":false}"#));
//!
//! // Nothing else is due until the agent's 30 s heartbeat.
//! assert!(agent.poll_timeout().is_some_and(|t| t > now));
//! ```
//!
//! # Method kinds
//!
//! `handle_*` feed input (frames, connects, disconnects, time); `poll_output` and
//! `poll_timeout` give output and must be drained after every mutation; commands are verbs
//! ([`Controller::request`], [`Controller::request_for_session`],
//! [`Controller::select_agent`], [`Agent::respond`],
//! [`Agent::send_add`], [`Agent::leave`], ...) that return at once, with outcomes arriving later as events
//! ([`ControllerEvent`], [`AgentEvent`]); getters are nouns ([`Controller::agents`],
//! [`Controller::sessions`]).
//!
//! # Limits
//!
//! | limit | default | on excess |
//! |---|---|---|
//! | [`Limits::max_frame_bytes`] | 65,536 B | `error "Frame too large"`, frame dropped, socket open |
//! | [`Limits::max_connections_per_ip`] | 20 | close 1008 `too-many-connections` |
//! | [`Limits::max_connections`] | 200 | close 1008 `server-full` |
//! | [`Limits::max_messages_per_second`] | 100 per connection | excess dropped silently |
//! | [`Limits::max_pending_per_agent`] | 256 | `request` → [`CommandError::TooManyPending`] |
//! | [`Limits::max_guilds_per_agent`] | 10,000 | list truncated, violation event |
//! | [`Limits::max_sessions`] | 10,000 | `add` dropped, violation event; selection for a new session → [`CommandError::TooManySessions`] |
//! | [`ControllerConfig::hello_timeout`] | 8 s | close 1008 `hello-required` |
//! | [`ControllerConfig::request_timeout`] | 30 s | [`ControllerEvent::RequestTimedOut`] |
//! | [`ControllerConfig::stale_after`] | 45 s | close 1008 `stale`, agent dropped |
//! | [`AgentConfig::heartbeat_interval`] | 30 s | — |
//! | JSON nesting | 128 levels (serde_json) | `error "Invalid JSON"` |
//!
//! # Spec decisions
//!
//! Each choice below is pinned by the named test (in `tests/`).
//!
//! 1. **Version aliases.** `hello` is accepted with the version under `protocolVersion`,
//!    `protocol_version`, `protocolversion` or `version` (first present wins, in that order);
//!    encoding always writes `protocolVersion`. An empty version counts as missing.
//!    (`handshake::version_aliases_are_accepted`, codec unit tests)
//! 2. **Check order** (the real controller's). Every `hello` (also the periodic ones) runs:
//!    `agentId`, then version, then the other fields' types (22), then runner secret. A `hello` without `agentId` is ignored
//!    before anything else is checked (no reply, no close, even with a wrong or missing
//!    version) and does not cancel the hello deadline.
//!    (`handshake::a_hello_without_agent_id_is_ignored_before_the_version_is_checked`,
//!    `handshake::version_is_checked_before_the_secret`, `an_ignored_hello_does_not_cancel_the_deadline`)
//! 3. **Empty secrets never match.** A configured `""` secret rejects every agent rather
//!    than disabling the check. (`handshake::an_empty_configured_secret_never_matches`)
//! 4. **Lenient `hello`.** Missing `ready`, `guildIds`, `poolId` decode as `false`, `[]`, `""`;
//!    missing `botUserId`/`tag` as `null`. Unknown fields (`runnerId`, `agentId` on every
//!    message) are ignored or kept where the type has a field for them.
//! 5. **Binary frames** carrying UTF-8 JSON are accepted like text (the real controller
//!    does); non-UTF-8 bytes get `error "Invalid JSON"`.
//!    (`hostile::binary_frames_carry_json_and_binary_garbage_is_invalid_json`)
//! 6. **"Unknown type"** covers a missing or non-string `type` and valid JSON that is not an
//!    object: before registration `error "Unknown message type"` + close 1008
//!    `protocol-error`; after, ignored. (`hostile::unknown_types_close_before_hello_and_are_ignored_after`)
//! 7. **Wrong or missing fields** in a known type other than `hello`: ignored silently, as the
//!    spec's error table says. (`registry::wrong_typed_fields_are_ignored_silently`) A
//!    `hello` is different: see 22.
//! 8. **Before `hello`**, `guilds`, `event` and `resp` are ignored (no reply, no close).
//! 9. **Rate limit**: a fixed one-second window per connection, starting at the first message
//!    of the window; messages past 100 are dropped and reported once per window.
//!    (`registry::more_than_100_messages_per_second_are_dropped`)
//! 10. **A second socket for the same `agentId`** replaces the first: the old socket is closed
//!     with 1000 `replaced by a newer connection`, requests sent on it fail at once with
//!     `agent-offline`, and its later disconnect cannot remove the new registration.
//!     (`registry::a_second_socket_replaces_the_first_without_the_stale_close_race`)
//! 11. **Staleness** counts messages and WebSocket pongs, as the real controller does: the
//!     driver's pongs reach `Machine::handle_pong`, which refreshes `lastSeen` (as
//!     [`Controller::touch`] does for a caller with its own signal). A stale agent is closed
//!     with 1008 `stale`. (`registry::websocket_pongs_keep_an_agent_alive_and_their_absence_drops_it`)
//! 12. **Responses** resolve a request only from the connection the `req` went out on; a
//!     `resp` from another agent is a violation event and the request keeps waiting;
//!     unknown and late ids are dropped silently. (`requests::a_resp_from_another_agent_does_not_resolve_the_request`)
//! 13. **`released` is trusted by connection**, not by the payload's `agentId`, and frees a
//!     session only when its sender is the bound agent. Any other `released` (another
//!     agent's session, or none) is ignored as the real controller ignores it: no reply, no
//!     violation, just a [`ControllerEvent::ReleaseIgnored`] for a debug log.
//!     (`sessions::released_frees_the_session_only_from_the_bound_agent`,
//!     `sessions::a_released_for_a_session_the_sender_is_not_bound_to_is_ignored_not_a_violation`)
//! 14. **Selection**: "idle" means bound to no session (music or assistant) in that guild;
//!     candidates are taken in agent-id order, round-robin per guild.
//!     (`sessions::selection_round_robins_idle_ready_agents_in_id_order`)
//! 15. **Request timeout** defaults to the spec's 30 s (the real controller uses 20 s).
//! 16. **Caps**: the per-IP cap is checked before the total cap; a refused connection is
//!     closed at once and never counted.
//! 17. **`add.channelId`** missing decodes as `""`; [`Agent::send_add`] fills it from
//!     `voiceChannelId`.
//! 18. **Binding at selection.** Real agents never send `add`, so, as the real controller
//!     does, [`Controller::select_agent`]/[`Controller::select_agent_for`] bind the agent
//!     they pick to the session at once, and later selections for that session return it
//!     while it is live and ready (if it is not ready, the binding moves to the new pick).
//!     The ops that start a session, and so select, are [`ops::MUSIC_START_OPS`] (`play`,
//!     `search`) and [`ops::ASSISTANT_START_OPS`] (`assistantJoin`, `assistantStart`,
//!     `assistantListen`, `assistantSay`); [`Controller::request_for_session`] sends every
//!     other op to the agent already bound, or refuses it with `no-session`. An `add` with
//!     `ok: true` confirms the binding or moves it to its sender; `released` from the bound
//!     agent frees it. (`sessions::repeated_plays_for_one_channel_stick_to_the_agent_selected_first`,
//!     `real_agent::two_real_agents_stick_to_one_channel_until_it_releases`,
//!     `sessions::add_from_another_agent_moves_the_binding`,
//!     `sessions::ops_that_do_not_start_a_session_go_to_the_bound_agent_or_fail_with_no_session`)
//! 19. **The controller frees sessions itself** when their agent leaves the registry
//!     (disconnect, stale, rejected hello: [`FreeReason::AgentDropped`]); when the request
//!     that bound an agent by selection fails (error answer such as `missing-actor`,
//!     timeout, `agent-offline`) before any `add` confirmed the session
//!     ([`FreeReason::StartFailed`]: the agent never joined, and would otherwise stay busy
//!     in that guild until it disconnects, a leak the real controller has); and when the
//!     bound agent reports `add` with `ok: false` ([`FreeReason::JoinFailed`]). A session
//!     already started (a start op answered `ok`, or an `add`) survives later failed ops.
//!     (`sessions::an_agent_that_disconnects_frees_its_sessions`,
//!     `sessions::a_start_request_that_fails_frees_the_binding_it_made`,
//!     `sessions::a_start_request_that_times_out_frees_the_binding_it_made`,
//!     `sessions::a_started_session_survives_later_failed_ops`,
//!     `sessions::a_failed_add_from_the_bound_agent_frees_its_session`,
//!     `real_agent::a_real_agent_refuses_ops_without_an_acting_user_and_stays_free`)
//! 20. **The version-mismatch error names this controller's accepted set**
//!     ([`ControllerConfig::supported_versions`]), not a fixed constant: "Controller expects
//!     2.0.0.", "Controller expects 1.0.0 or 2.0.0." (the real controller's exact text for
//!     the default set). (`handshake::the_version_error_names_the_versions_this_controller_accepts`)
//! 21. **Acting user.** The real agent refuses every op but `discordSend` without an acting
//!     user in `data` (`missing-actor`); this crate never edits `data`, so a controller
//!     driving real agents adds one ([`ops`] lists what real agents require per op).
//!     (`real_agent::a_real_agent_refuses_ops_without_an_acting_user_and_stays_free`)
//! 22. **A `hello` field of the wrong type is answered at once**, with `error` and close
//!     1008, never left to the 8 s `hello-required` deadline; `null` counts as absent. The
//!     check order of 2 holds: a wrong-typed `agentId` is refused (it is present, so not
//!     ignored); a missing `agentId` is ignored whatever else is wrong; a version that is
//!     not a string (under the first version key present) is an incompatible version,
//!     `Incompatible protocol version 1. Controller expects 1.0.0.` (the real controller's
//!     `SUPPORTED_VERSIONS.has(1)` reading, its JSON text cut to 64 bytes); then a missing or
//!     unaccepted version as usual; then the first other wrong-typed field in the spec's
//!     order (`botUserId`, `tag`, `ready`, `guildIds`, `poolId`, `runnerSecret`) gets
//!     [`texts::err_invalid_hello`] (`Invalid hello: ready must be a boolean.`) and close
//!     1008 `Invalid hello`; the secret is checked last. `runnerId`, not a spec field, is
//!     dropped when it is not a string. This holds for every `hello`, so a registered agent
//!     whose heartbeat `hello` is wrongly typed is dropped.
//!     (`handshake::a_version_that_is_not_a_string_is_an_incompatible_version_at_once`,
//!     `handshake::a_hello_with_a_wrongly_typed_field_gets_invalid_hello_and_close_1008`,
//!     `handshake::a_wrongly_typed_hello_is_rejected_at_once_not_by_the_hello_deadline`,
//!     `handshake::wrongly_typed_hellos_keep_the_check_order`,
//!     `handshake::a_registered_agent_whose_heartbeat_hello_is_wrongly_typed_is_dropped`)
//! 23. **Graceful disconnect** (the spec's lifecycle 5) is [`Agent::leave`]: `released` for
//!     every session the agent is in, in (kind, guild, channel) order, with the caller's
//!     `reason`, then close 1000 [`texts::CLOSE_AGENT_LEAVING`]; nothing is sent or
//!     handled on that connection afterwards. The agent knows its sessions from its own
//!     reports: [`Agent::send_add`] with `ok: true` enters one, `ok: false` or
//!     [`Agent::send_released`] leaves it (real agents never send `add`; their sessions are
//!     what they join). The controller frees each session on its `released`, before the
//!     close drops the agent, so the guild is free for another agent, or the same one
//!     restarted, at once. The reference agent leaves on Ctrl-C and SIGTERM.
//!     (`agent_leave::leave_releases_every_session_before_it_closes_and_the_controller_frees_them_on_released`,
//!     `agent_leave::after_leave_a_restarted_agent_and_a_new_agent_get_the_guilds_next_requests`,
//!     `agent_leave::the_leave_close_is_1000_and_nothing_follows_it_on_that_connection`,
//!     root `tests/chopsticks_e2e.rs`)
//! 24. **Runner secrets rotate** without a restart: [`Controller::rotate_runner_secrets`]
//!     replaces the accepted set at `now`; a secret no longer listed is still accepted for
//!     the overlap given, then refused like a wrong one (error and close 1008), also at the
//!     heartbeat `hello` of an agent that registered with it. Several secrets may be valid
//!     at once ([`ControllerConfig::runner_secrets`]); once one is required, rotating to
//!     none refuses every agent after the overlap instead of turning the check off.
//!     (`handshake::a_rotated_secret_is_accepted_and_the_retired_one_refused_after_the_overlap`)
//!
//! # Feature flags
//!
//! - `fuzzing`: `#[doc(hidden)]` entry points for the cargo-fuzz targets in `fuzz/`.
#![forbid(unsafe_code)]
#![deny(missing_docs)]

mod agent;
mod codec;
mod config;
mod controller;
mod error;
mod event;
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub mod fuzzing;
mod id;
pub mod message;
pub mod ops;
pub mod texts;

pub use agent::Agent;
pub use config::{AgentConfig, ControllerConfig, Limits};
pub use controller::{Controller, LiveAgent, Session, SessionKey, TimerKind};
pub use error::{CommandError, DecodeError, InvalidHello, ProtocolError};
pub use event::{AgentEvent, BindSource, ControllerEvent, DropReason, FreeReason};
pub use id::{AgentId, ChannelId, GuildId, UserId};
pub use message::{
    Add, AgentMessage, ControllerMessage, ErrorMessage, Event, Guilds, Hello, RawJson, Released,
    Req, Resp, SessionKind, PROTOCOL_VERSION,
};
pub use texts::{AGENT_OFFLINE, AGENT_TIMEOUT, ERR_UNAUTHORIZED, ERR_VERSION_REQUIRED};

/// The README's example, compiled and run as a doctest.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
