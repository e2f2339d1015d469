//! Sans-IO relay for the **External Agent Protocol (MVP v0.2)**.
//!
//! The protocol lets external agent servers drive a study prototype's movie-booking UI: the
//! UI (the *host*) and the agents each open one WebSocket to a relay at `/agent/ws`, join a
//! relay session with `relay.join`, and then talk through the relay in JSON envelopes
//! `{"v":"mvp-0.2","type":..,"id"?:..,"replyTo"?:..,"payload":{..}}`. Agents read the UI
//! (`snapshot.get`), act on it (`tool.call`), post to its chat (`agent.message`) and start and
//! end study sessions; the host answers each request and pushes `state.updated` and the
//! participant's `user.message`. Every message is kept in a JSONL study log. The spec is
//! `specs/agent-relay.md`; what the reference TypeScript relay and browser host do on the wire,
//! and which of their gaps we close, is `INTEROP.md` (agent-relay section).
//!
//! This crate never opens a socket or reads a clock: drive the [`Relay`] and the [`Host`]
//! with `agentwire-tokio`, with the in-memory `agentwire_core::sim` harness, or your own loop.
//!
//! # Roles
//!
//! - [`Relay`] (server role): owns every connection at [`ENDPOINT_PATH`]; one host and any
//!   number of agents per session; forwards agent → host and host → agents without parsing
//!   payloads; emits one study-log [`LogRecord`] per message, before the message is sent.
//! - [`Host`] (client role): the UI side, for Rust hosts and for tests. One connection to the
//!   relay at a time (it sends `relay.join` as `host` on every connect; a study session
//!   survives reconnects). It answers every agent request the spec lists: `session.start`
//!   (ids `s-YYYYMMDD-NNN`), `snapshot.get`, `tool.call` (checked against the current
//!   stage's tool schema with [`validate_params`], then run through the application's
//!   [`Tools`]), `agent.message` (appended to the chat [`History`]) and `session.end`
//!   (the application flushes the study log, then [`Host::confirm_flush`] resets the state
//!   and answers `session.ended`). It pushes `state.updated` on every visible change and the
//!   participant's `user.message` ([`Host::user_message`]). It writes no log: the relay
//!   emits the records, the application's writer persists them.
//! - The agent is a peer of the relay with no machine here; the messages of all three are
//!   the wire types of [`message`]: [`AgentMessage`], [`HostMessage`] and [`RelayMessage`]
//!   (one enum per sender) inside an [`Envelope`]. [`Route`] is the borrowed envelope the
//!   relay routes by.
//!
//! # A run loop
//!
//! A host and an agent join, the agent calls a tool, the host answers. A real driver does the
//! same with sockets: feed input, then drain every output in order. It writes each
//! [`RelayEvent::Log`] record as it meets it, so the study log has every line before the
//! message it records is forwarded.
//!
//! ```
//! use std::time::Instant;
//! use agentwire_core::{ConnId, Frame, Machine, Output, PeerInfo, SequentialIds};
//! use agent_relay_proto::{Relay, RelayConfig, RelayEvent, ENDPOINT_PATH};
//!
//! # #[allow(clippy::disallowed_methods)]
//! let now = Instant::now(); // a driver's clock; the machine never reads one
//! let unix_ms = 1_770_978_137_123; // the wall clock at `now`, for the log's timestamps
//! let mut relay = Relay::new(RelayConfig::default(), SequentialIds::new(0), now, unix_ms);
//! let (host, agent) = (ConnId::new(1), ConnId::new(2));
//! let peer = PeerInfo::new(None).with_path(ENDPOINT_PATH);
//! relay.handle_connect(host, &peer, now); // each gets `relay.hello`
//! relay.handle_connect(agent, &peer, now);
//!
//! // Drains the relay: returns what it sent, appends log lines (numbered) as they come.
//! let mut log: Vec<String> = Vec::new();
//! let mut drain = |relay: &mut Relay| {
//!     let mut sent = Vec::new();
//!     while let Some(out) = relay.poll_output() {
//!         match out {
//!             Output::Send { conn, frame } => sent.push((conn, frame.as_text().unwrap().to_owned())),
//!             Output::Event(RelayEvent::Log(record)) => {
//!                 let mut line = Vec::new();
//!                 record.write_jsonl(log.len() as u64, &mut line);
//!                 log.push(String::from_utf8(line).unwrap());
//!             }
//!             Output::Event(_) | Output::Close { .. } => {}
//!         }
//!     }
//!     sent
//! };
//!
//! relay.handle_frame(host, Frame::Text(r#"{"v":"mvp-0.2","type":"relay.join","id":"h-1","payload":{"role":"host"}}"#), now);
//! relay.handle_frame(agent, Frame::Text(r#"{"v":"mvp-0.2","type":"relay.join","id":"join-001","payload":{"role":"agent","sessionId":"default"}}"#), now);
//! let sent = drain(&mut relay);
//! assert!(sent.iter().any(|(c, m)| *c == agent && m.contains(r#""type":"relay.joined","replyTo":"join-001""#)));
//!
//! // The agent's request reaches the host byte for byte...
//! let call = r#"{"v":"mvp-0.2","type":"tool.call","id":"req-003","payload":{"toolName":"select","params":{"itemId":"m1"},"reason":"Pick the first movie."}}"#;
//! relay.handle_frame(agent, Frame::Text(call), now);
//! assert_eq!(drain(&mut relay), [(host, call.to_owned())]);
//!
//! // ...and the host's reply reaches only the agent that asked.
//! let result = r#"{"v":"mvp-0.2","type":"tool.result","replyTo":"req-003","payload":{"ok":true,"toolName":"select"}}"#;
//! relay.handle_frame(host, Frame::Text(result), now);
//! assert_eq!(drain(&mut relay), [(agent, result.to_owned())]);
//!
//! assert!(log.iter().any(|l| l.contains(r#""direction":"in","type":"tool.call""#)));
//! assert!(log[0].starts_with(r#"{"sessionId":"default","eventIndex":0,"timestamp":"2026-02-13T10:22:17.123Z""#));
//! assert_eq!(relay.poll_timeout(), None); // joined, nothing outstanding: no deadline
//! ```
//!
//! # Method kinds
//!
//! As in quinn: `handle_*` feed input (network or time), `poll_*` drain output, verbs are
//! commands that return at once ([`Relay::close`], [`Relay::set_wall_clock`]), nouns are
//! getters ([`Relay::host_of`], [`Relay::agents_of`], [`Relay::pending_requests`], ...).
//! The [`Host`]'s commands are [`Host::user_message`], [`Host::user_action`],
//! [`Host::publish_state`],
//! [`Host::end_session`], [`Host::confirm_flush`], [`Host::fail_flush`],
//! [`Host::resume_numbering`] and [`Host::set_wall_clock`]; its outcomes arrive as
//! [`HostEvent`]s.
//! Wire types decode with [`Envelope::decode`] / [`Route::decode`] and encode with
//! [`Envelope::encode`].
//!
//! # Limits
//!
//! Every collection a peer can grow is bounded ([`Limits`], [`RelayConfig`]). A message over
//! a limit gets an `error` with code [`ErrorCode::LIMIT_EXCEEDED`] (ours; `replyTo` when it had
//! an `id`) and is dropped; the connection stays open.
//!
//! | limit | default | beyond it |
//! |---|---|---|
//! | `max_connections` | 1,024 | LIMIT_EXCEEDED, then close 1013 `server-full` |
//! | `max_sessions` | 256 | the join is refused |
//! | `max_agents_per_session` | 64 | the agent's join is refused |
//! | `max_message_bytes` | 1 MiB | refused, checked before parsing |
//! | `rate` (per connection) | 100/s, burst 200 | refused |
//! | `max_pending_per_agent` | 256 | the request is refused |
//! | `max_id_bytes` | 256 | refused |
//! | `max_session_id_bytes` | 256 | the join is refused |
//! | `max_name_bytes` | 128 | the agent's name is cut |
//! | `max_json_depth` | 127 (envelope = 1) | INVALID_MESSAGE; neither forwarded nor logged |
//! | `max_log_bytes_per_session` | 256 MiB per study session | refused; the relay's own records dropped and counted |
//! | [`RelayConfig::join_timeout`] | 30 s | close 1008 `join-required` |
//! | [`RelayConfig::pending_timeout`] | 60 s | the request is forgotten; a late reply is dropped |
//!
//! The [`Host`]'s ([`HostLimits`], [`HostConfig`]):
//!
//! | limit | default | beyond it |
//! |---|---|---|
//! | `max_message_bytes` | 1 MiB | the frame is dropped and reported, checked before parsing |
//! | `max_history_entries` | 1,000 | `agent.message` gets LIMIT_EXCEEDED; [`Host::user_message`] is refused |
//! | `max_queued_pushes` | 64 | [`Host::user_message`] is refused while not joined |
//! | [`HostConfig::join_timeout`] | 10 s | close 1000 `join-timeout`, the driver reconnects |
//! | [`HostConfig::flush_timeout`] | 10 s | the session end fails with LOG_FLUSH_FAILED |
//!
//! # Spec decisions
//!
//! Each is pinned by the test named after it (in `tests/`).
//!
//! 1. **`v` must be `"mvp-0.2"`**, and present (the spec: "always"); anything else is
//!    INVALID_MESSAGE "Unsupported protocol version: ...". The reference relay never checks
//!    `v`; [`RelayConfig::allow_missing_version`] accepts a missing one.
//!    (`v_is_required_unless_configured_otherwise_and_never_wrong`)
//! 2. **The envelope is checked, the payload is not**: `type` a string, `id`/`replyTo` strings
//!    when present (`null` = absent), `payload` an object, no duplicated field; unknown extra
//!    fields are ignored and forwarded. The relay never parses a payload (the host validates
//!    it), so it forwards the §3 example's placeholder `tool.call` payload `{}` as is.
//!    (`wrong_envelope_field_types_are_invalid_message_with_the_id_recovered`,
//!    `agent_messages_reach_the_host_byte_for_byte`,
//!    `the_envelope_example_routes_but_its_placeholder_payload_is_no_tool_call`)
//! 3. **Error texts are the reference relay's, word for word** ([`texts`]): unparseable
//!    input, before-join, no host, host replaced, bad role, and "Unsupported message type for
//!    agent role: X". Every error carries `replyTo` when the message had a string `id`.
//!    (`garbage_gets_invalid_message_with_the_reference_text_and_the_connection_stays`,
//!    `messages_before_join_get_session_not_active_with_the_exact_text`,
//!    `every_agent_type_is_forwarded_and_any_other_is_invalid_message`)
//! 4. **`relay.hello`** `{"message":"Send relay.join with role=host|agent"}` greets every
//!    connection, as the reference's; [`RelayConfig::hello`] turns it off.
//!    (`relay_hello_is_sent_on_connect_by_default_and_can_be_turned_off`)
//! 5. **`relay.join`**: `role` exactly `host` or `agent`; `sessionId` trimmed, and missing,
//!    `null` or blank means `"default"` (as the reference); a non-string `sessionId` is
//!    INVALID_MESSAGE (the reference silently uses `"default"`).
//!    (`session_id_defaults_to_default_and_is_trimmed`,
//!    `a_non_string_session_id_is_invalid_message`,
//!    `an_invalid_role_is_invalid_message_with_reply_to_and_the_connection_stays`)
//! 6. **Agent names** follow the reference: the first non-blank of `agentName`, `clientName`,
//!    `name`, else `agent-` and the end of the relay's id for it; `relay.joined` carries it as
//!    `clientName` (beyond the spec's example). (`an_agent_is_named_from_agent_name_client_name_or_name`,
//!    `the_join_example_is_answered_with_the_joined_example`)
//! 7. **A second join** to the same session in the same role is answered again and changes
//!    nothing; to another session or role it leaves the first, as the reference.
//!    (`a_repeated_join_is_answered_again_and_changes_nothing`,
//!    `joining_another_session_or_role_leaves_the_first`)
//! 8. **A newer host replaces the old one** exactly as the reference: SESSION_NOT_ACTIVE
//!    "Host connection replaced by a newer host." then close 1000. The old host's outstanding
//!    requests fail (decision 11). (`a_newer_host_replaces_the_old_one_which_gets_the_exact_error_then_close_1000`,
//!    `requests_outstanding_when_the_host_is_replaced_fail_with_reply_to`)
//! 9. **Routing is by `replyTo`**: a host message with `replyTo` goes only to the agent whose
//!    request it answers. Without `replyTo` only the pushes ([`message::types::PUSHES`]:
//!    `state.updated`, `user.message`, and `session.ended` when the host ends a session)
//!    go to every agent of the session (the reference sends everything to every agent); any
//!    other (`snapshot.state`, `tool.result`, `session.started`, `error`) answers a request,
//!    so it is dropped and reported as [`Undelivered::NoReplyTo`], never broadcast. A
//!    `replyTo` matching no outstanding request (answered, expired, asker gone) is dropped and
//!    reported as [`Undelivered::UnknownReplyTo`].
//!    (`a_reply_reaches_only_the_agent_that_asked`,
//!    `a_host_answer_without_reply_to_is_never_sent_to_every_agent`,
//!    `pushes_reach_every_agent_of_the_session_and_no_other`,
//!    `an_agent_leaving_drops_its_requests_and_the_late_reply`)
//! 10. **Request ids are the agents'**, so two agents may both send `req-001`: replies to a
//!     shared id go to the askers in the order they asked. Frames with an `id` are forwarded
//!     unchanged; the relay never rewrites an agent's id.
//!     (`colliding_request_ids_are_answered_first_come_first_served`)
//! 11. **When the host leaves** (or is replaced), every outstanding request is answered at once
//!     with SESSION_NOT_ACTIVE "Host disconnected before replying." and its `replyTo` (the
//!     reference leaves agents to time out). Agents stay joined and a new host takes over the
//!     same session. (`the_host_leaving_fails_every_outstanding_request_with_reply_to`)
//! 12. **No host**: an agent message gets SESSION_NOT_ACTIVE "No active host connection for
//!     this session." with `replyTo`, as the reference. (`no_host_gives_session_not_active_with_reply_to_and_the_exact_text`)
//! 13. **Outstanding requests expire** after 60 s ([`RelayConfig::pending_timeout`]), so
//!     messages the host never answers (`agent.message` has no reply in the spec) cannot fill
//!     an agent's budget. (`pending_requests_expire_and_late_replies_are_dropped`)
//! 14. **Limits** are answered with LIMIT_EXCEEDED, a code of ours the spec lacks (see the
//!     table). (`the_rate_limit_answers_limit_exceeded_and_refills`,
//!     `an_agent_may_have_only_so_many_requests_pending`,
//!     `sessions_and_agents_per_session_are_bounded`,
//!     `one_connection_too_many_gets_an_error_and_close_1013`,
//!     `oversize_messages_are_limit_exceeded_before_parsing_and_the_limit_itself_passes`)
//! 15. **`relay.presence`** `{sessionId, agentCount, agents:[{id,name}]}` goes to the host
//!     when its agents change, as the reference's; [`RelayConfig::presence`] turns it off.
//!     (`the_host_gets_relay_presence_when_agents_come_and_go`)
//! 16. **A join deadline** (30 s, ours; the reference has none) closes idle sockets with 1008.
//!     (`no_join_within_the_deadline_closes_1008`)
//! 17. **Only `/agent/ws`**: [`accept_path`] is for the transport's upgrade hook, and the relay
//!     closes a connection on any other path with 1008 `unknown-path` as well.
//!     (`a_wrong_path_is_closed_1008_at_once`)
//! 18. **Study log**, directions as the reference's: `in` when an accepted message arrives,
//!     `out` once as it is forwarded (only if someone receives it), `internal` for what the
//!     relay itself says or does (`relay.join`, `relay.joined`, `relay.presence`,
//!     `relay.disconnect`, every `error` it sends). Refused messages (no host, not allowed,
//!     invalid, over a limit) are never `in` records: the one record of a refusal is the
//!     `error` answering it, whose logged payload adds `refusedType` (when known) and
//!     `refusedBytes`, never the refused payload (the reference logs a message before it
//!     knows a host is there). Every record precedes the send it records; `sessionId` is the
//!     study session's or the relay session's (decision 43), stable across host reconnects
//!     (the reference restarts its count when a session empties); `eventIndex` is the
//!     writer's. Payloads are slices of the frame.
//!     (`log_records_follow_the_reference_directions`,
//!     `every_record_comes_before_the_send_it_records`,
//!     `records_keep_their_session_across_host_reconnects_and_carry_wall_clock_time`,
//!     `refused_messages_are_recorded_as_one_internal_error_with_type_and_size_never_payload`)
//! 19. **Binary frames** holding UTF-8 JSON are accepted (as the reference) and forwarded as
//!     text. (`binary_utf8_json_is_accepted_and_forwarded_as_text`)
//! 20. **Depth**: the relay skips payloads without recursing, so deeply nested JSON costs it no
//!     stack, but what it forwards and logs must read back. A message nested deeper than
//!     [`Limits::max_json_depth`] is INVALID_MESSAGE (with `replyTo`), never forwarded or
//!     logged (`agentwire_core::check_json_depth`). The default is
//!     `DEFAULT_MAX_JSON_DEPTH - 1` = 127 with the envelope counted, because the log line
//!     nests exactly as deep as the message and serde_json reads at most 127 levels.
//!     (`messages_nested_deeper_than_the_limit_are_refused_never_forwarded_or_logged`,
//!     `a_message_at_the_depth_limit_is_forwarded_and_its_log_line_reads_back`)
//! 21. **The envelope's serde is written by hand**, not `#[serde(flatten)]` over an adjacently
//!     tagged enum: serde buffers such content and `RawValue` (for `uiSpec`,
//!     `messageHistory`, `params`) cannot be read back from the buffer. Encoding uses the
//!     spec's field order. (`every_agent_example_round_trips`, `tests/props.rs`)
//! 22. **No `backendData`** field exists in any snapshot type, so a host snapshot decoded from
//!     JSON that has one cannot carry it to an agent. (`backend_data_cannot_be_carried_through_a_snapshot_type`)
//! 23. **`tool.result`** `uiSpec`/`messageHistory` are optional (a failed tool may send
//!     neither); an explicit `null` is kept. (`host_messages_round_trip`)
//!
//! The [`Host`] (tests in `tests/host.rs`, the validator's beside it in `src/host/params.rs`):
//!
//! 24. **Two session ids.** The host joins the relay session [`HostConfig::relay_session`]
//!     (`"default"`, as the reference host and agents) on every connect, with `id`
//!     `host-join-N`; the *study* session id `s-YYYYMMDD-NNN` is a different thing that
//!     changes with every `session.start`. (`every_connect_sends_relay_join_as_host_for_its_relay_session`)
//! 25. **Session ids** are `s-` + the UTC date of the wall clock (anchored by [`Host::new`]
//!     like [`Relay::new`]; pass a shifted `unix_ms` for local dates) + `-` + a per-day
//!     counter from `001` (it widens past 999). It lives in memory:
//!     [`Host::resume_numbering`] continues after the newest id of an earlier run.
//!     (`session_start_answers_a_new_dated_id_counting_from_001_per_day`,
//!     `resume_numbering_continues_after_the_last_id_of_the_day`)
//! 26. **One session at a time.** `session.start` during a session with the same `studyId`
//!     and `participantId` is answered with the current id (a retry whose answer was lost
//!     with a connection); any other gets INVALID_MESSAGE "A session is already active: ID."
//!     (`a_repeated_session_start_gets_the_same_session_and_another_is_refused`,
//!     `a_host_reconnect_through_the_relay_keeps_the_session`)
//! 27. **Reads have no session gate; the rest has.** `snapshot.get` is answered
//!     `snapshot.state` in and outside a study session, as the real host does and as the
//!     reference agent expects (it polls every 2 s from the moment it joins, before
//!     `session.start`); outside a session its `sessionId` is the relay session's
//!     ([`HostConfig::relay_session`], `"default"`, what the real host reports), so it is
//!     always a string. Outside a session `tool.call`, `agent.message` and `session.end` get
//!     SESSION_NOT_ACTIVE ([`host_texts::NO_SESSION`]) with `replyTo`; while a session end
//!     awaits its log flush they get SESSION_NOT_ACTIVE [`host_texts::SESSION_ENDING`].
//!     Payloads that do not decode get INVALID_MESSAGE "Invalid T payload: ...".
//!     (`requests_outside_a_session_get_session_not_active`,
//!     `snapshot_get_is_answered_before_session_start_and_after_session_end`,
//!     `an_agent_polling_snapshots_from_its_join_gets_them_before_session_start`,
//!     `session_end_waits_for_the_flush_then_resets_and_answers_session_ended`)
//! 28. **Snapshots** carry exactly `sessionId`, `uiSpec`, `messageHistory`, `toolSchema`;
//!     `uiSpec` is `null` while [`Tools::ui_spec`] is `None`. Every `backendData` key in the
//!     application's `uiSpec`, at any depth (in nested objects and in arrays), is dropped
//!     from every message (spec §7); a `uiSpec` too deeply nested to read is sent as `null`.
//!     (`snapshot_state_carries_only_ui_spec_message_history_and_tool_schema`,
//!     `backend_data_never_reaches_an_agent`)
//! 29. **`tool.call` checks, in order**: session; `toolName` a string (INVALID_MESSAGE);
//!     `reason` a non-blank string (INVALID_PARAMS [`host_texts::REASON_REQUIRED`]; the
//!     reference does not check); a loaded spec (NO_ACTIVE_SPEC, before the tool lookup, as
//!     no stage means no tools); the tool in the current stage's [`Tools::tool_schema`]
//!     (UNKNOWN_TOOL "Unknown tool: X"); `params` an object fitting the tool's `parameters`
//!     (INVALID_PARAMS "TOOL requires PARAM ...", the spec's example text word for word;
//!     absent or `null` params mean `{}`); then the tool, whose [`ToolError`] is
//!     INVALID_PARAMS or TOOL_EXECUTION_FAILED. Every failure is an `error`; `tool.result`
//!     is only ever `ok: true`. (`reason_is_required_and_must_not_be_blank`,
//!     `no_loaded_spec_is_no_active_spec`,
//!     `an_unknown_tool_is_unknown_tool_and_each_stage_has_its_own_tools`,
//!     `bad_params_are_invalid_params_naming_the_parameter`,
//!     `the_tools_own_failures_are_tool_execution_failed_or_invalid_params`,
//!     `the_host_answers_the_spec_examples_word_for_word`)
//! 30. **The schema subset** ([`validate_params`]): `type`, `properties`, `required`,
//!     `additionalProperties: false`, `enum`, `minimum`, `maximum`, `items`; other keywords
//!     constrain nothing. `integer` means written without fraction or exponent (`2`, not
//!     `2.0`), so a tool can read it into an integer type. (`the_spec_example_message_comes_out_word_for_word`,
//!     `unknown_or_malformed_keywords_constrain_nothing`)
//! 31. **Every visible change is pushed once** as `state.updated` (no `replyTo`) with
//!     `source` `tool`, `agent`, `user`, `reset` ([`sources`]) or the application's own
//!     ([`Host::publish_state`]): after `tool.result`, after an `agent.message` (which gets
//!     no reply: the spec defines none), after a participant message, after a reset. A tool
//!     returning [`ToolOutcome::Unchanged`] without writing to the chat sends `tool.result`
//!     only. (`a_tool_call_is_answered_with_tool_result_then_state_updated`,
//!     `a_tool_that_changes_nothing_sends_no_state_updated`,
//!     `agent_message_is_appended_to_the_history_and_pushed`, `a_tool_may_write_to_the_chat`)
//! 32. **The host owns the chat**: `messageHistory` is `[{"role":"user"|"agent"|"system",
//!     "text":..}]`, bounded; `user.message` carries [`Tools::stage`] and is allowed outside a
//!     session (the participant may type before an agent starts one).
//!     (`user_message_is_pushed_with_the_stage_and_recorded`, `a_full_history_answers_limit_exceeded`)
//! 33. **`session.end` is two steps**, so the IO layer can fsync first:
//!     [`HostEvent::SessionEnding`] carries an [`EndTicket`]; [`Host::confirm_flush`] resets
//!     the tools and the chat and sends `session.ended` `{sessionId, logFile, stateReset:
//!     true}`, then `state.updated` (`reset`). [`Host::fail_flush`], or no confirmation
//!     within [`HostConfig::flush_timeout`], answers [`ErrorCode::LOG_FLUSH_FAILED`] (ours)
//!     and leaves the session active and unreset, so the agent may retry.
//!     (`session_end_waits_for_the_flush_then_resets_and_answers_session_ended`,
//!     `a_failed_or_late_flush_keeps_the_session_and_answers_log_flush_failed`,
//!     `the_application_can_end_the_session_and_agents_get_session_ended`)
//! 34. **Who owns the log file path.** The spec has the host save the log and report
//!     `logFile`; the reference relay writes it. Here the relay emits the records and the
//!     application's writer owns the files: the host reports exactly the path given to
//!     [`Host::confirm_flush`] and never makes one up ([`study_log_path`] gives the spec's
//!     `logs/study/<id>.jsonl`). Relay records of a study session carry its id (decision
//!     43), so a writer with one file per `sessionId` (the reference relay's) keeps one file
//!     per study session, and the reference movie host reports that file.
//!     (`an_agent_books_through_the_relay_with_a_real_host`)
//! 35. **Reconnects** keep the session, the chat and a pending end. Replies go only on the
//!     connection the request came on (the relay has failed the others, decision 11);
//!     pushes made while not joined wait (bounded) and follow `relay.joined` in order, state
//!     changes collapsed into one `state.updated`; a `session.ended` whose request came on
//!     an earlier connection is pushed without `replyTo`.
//!     (`a_session_survives_a_reconnect_and_pushes_wait_for_the_join`,
//!     `a_session_end_confirmed_after_a_reconnect_is_pushed_without_reply_to`,
//!     `user_message_is_refused_when_the_offline_queue_is_full`)
//! 36. **Join failures**: an `error` answering the join closes the connection (1000
//!     `join-refused`), no answer within [`HostConfig::join_timeout`] too (1000
//!     `join-timeout`), so the driver reconnects with backoff; the relay's
//!     [`texts::HOST_REPLACED`] becomes [`HostEvent::Replaced`] and the application decides
//!     whether to take the session back. (`the_relay_refusing_the_join_closes_the_connection`,
//!     `no_join_answer_within_the_deadline_closes_the_connection`,
//!     `relay_presence_errors_and_replacement_are_reported`)
//! 37. **The host never answers the relay**: an undecodable frame or a type a host never
//!     receives is reported ([`HostEvent::ProtocolViolation`]) and dropped, since an `error`
//!     without `replyTo` answers no request (the relay drops it, decision 9).
//!     (`garbage_from_the_relay_is_reported_and_never_answered`)
//!
//! The relay again:
//!
//! 38. **The study log has a cap per study session** ([`Limits::max_log_bytes_per_session`],
//!     256 MiB): the relay counts an upper bound of every line it emits for a relay session
//!     and starts again at each forwarded `session.ended` (one study session's log) and at
//!     its own start. A message whose `in` and `out` lines would pass it is refused with
//!     LIMIT_EXCEEDED [`texts::LOG_FULL`] (`replyTo` its `id`); a refused host reply also
//!     answers the agent that asked at once. `session.end` and `session.ended` always pass,
//!     so a study can end. The relay's own records beyond the cap are dropped and counted
//!     ([`RelayStats::log_records_dropped`]) rather than refused: nobody sent them.
//!     (`the_log_cap_refuses_what_would_pass_it_and_resets_at_session_ended`)
//!
//! The study-log writer of the reference relay (`agentwire-server`, `src/relay/`; tests in the workspace's
//! `tests/relay_log.rs` and `tests/relay_e2e.rs`), which drives this crate's [`Relay`]:
//!
//! 39. **A `session.ended` is never forwarded for a log that was not saved.** If a record of
//!     the study session (since its `session.started` or the last `session.ended`) could
//!     not be written, or the `fsync` before `session.ended` fails (a directory in the way,
//!     no permission, a full disk), each agent it was for gets `error`
//!     [`ErrorCode::LOG_FLUSH_FAILED`] "The study log of session ... was not saved (...);
//!     session.ended was withheld." with the `session.ended`'s `replyTo`, never a
//!     `session.ended` whose `logFile` is missing or incomplete. None of the spec's six
//!     codes means "log not saved"; LOG_FLUSH_FAILED is the code the [`Host`] already sends
//!     when its own flush fails (decision 33), so an agent has one way to handle both. The
//!     host also gets `LOG_WRITE_FAILED` as for every log failure.
//!     (`session_end_is_answered_with_log_flush_failed_when_a_directory_is_in_the_way`,
//!     `a_writer_that_fails_after_n_bytes_never_lets_a_clean_session_ended_through`,
//!     `a_failed_sync_on_the_worker_withholds_session_ended`)
//! 40. **The `fsync` before `session.ended` runs off the task that owns the relay**, on a
//!     sync worker: the `session.ended` frames, and every later output to the same
//!     connections, wait for it in order, while every other connection is served.
//!     (`the_session_end_sync_runs_on_the_worker_while_other_connections_go_on_in_order`,
//!     `session_ended_is_synced_before_it_is_forwarded`)
//! 41. **Resume never loses later records.** When a session's file is reopened and its last
//!     line is unreadable (torn, garbage, nested too deep, not a record of the session, an
//!     `eventIndex` that does not follow the line before), the good prefix stays, the bad
//!     tail moves to a sibling `<file>.bad-N`, a warning is logged, and `eventIndex`
//!     continues from the last good record (the reference, and our writer before, refused
//!     every later record). (`resume_after_any_damage_to_the_last_line_loses_no_record`,
//!     `a_torn_last_line_is_a_warning_and_is_moved_aside_when_the_relay_reopens_the_file`)
//!
//! The relay again:
//!
//! 42. **A request without `id` is answered to its sender only.** The spec makes `id`
//!     optional, and the host answers such a request without `replyTo`, which would reach
//!     every agent. So the relay forwards every agent message as a request: one without `id`
//!     is re-encoded (`v`, `type`, `id`, `payload`; other envelope fields are not kept) with
//!     an id of the relay's, `relay-N` (never one outstanding in the session), and the
//!     host's answer reaches that agent alone with the relay's `replyTo` taken out. Such
//!     requests count against `max_pending_per_agent` and expire like the others; when the
//!     host leaves, their agent gets SESSION_NOT_ACTIVE without `replyTo`. The study log
//!     records the payloads, which are unchanged.
//!     (`a_request_without_id_is_answered_to_its_sender_only`,
//!     `requests_without_id_are_answered_to_their_sender_only`,
//!     `an_agent_may_have_only_so_many_requests_pending`,
//!     `the_host_leaving_fails_every_outstanding_request_with_reply_to`)
//! 43. **Study-log records carry the study session's id** (spec §6's example record and
//!     `session.ended`'s `logFile` `logs/study/s-….jsonl`). The relay reads one payload, the
//!     `sessionId` of the host's `session.started` (a non-blank string of at most
//!     `max_session_id_bytes`; anything else changes nothing), and from that record through
//!     the `session.ended` records every record of the relay session (the agents', the
//!     host's and the relay's own) carries it ([`Relay::study_session_of`];
//!     [`LogRecord::relay_session`] still names the relay session). Records outside a study
//!     session (joins and presence, snapshots polled before `session.start`, the
//!     `session.start` request itself, the reset push after `session.ended`) carry the
//!     relay session's id: they belong to no participant's session, and most are written
//!     before the study session's id exists, so they go to the relay session's file (e.g.
//!     `default.jsonl`) and a study file holds exactly its session, `session.started` to
//!     `session.ended`. A study session survives host reconnects and its relay session
//!     emptying (the host keeps it, decision 35) until its `session.ended`, a newer
//!     `session.started`, or the relay forgetting the empty session. The real host's study
//!     id is `"default"`, so with it everything stays in `default.jsonl`. Two relay
//!     sessions whose hosts give out the same id would share its file (each line still
//!     numbered in order); the reference movie host numbers after the newest `s-…` file in
//!     the log directory, so a restart never reuses one.
//!     (`records_of_a_study_session_carry_its_id_and_the_others_the_relay_session`,
//!     `a_study_sessions_records_carry_its_id_and_live_in_the_file_named_after_it`,
//!     `the_host_refuses_bad_calls_over_the_wire_and_the_session_goes_on`,
//!     `the_spec_examples_join_and_are_forwarded_both_ways_byte_for_byte`)
//! 44. **The participant's actions are the stage's tools.** The spec pushes `state.updated`
//!     with `source: "user"` on a user action but defines no way for one to reach the host;
//!     [`Host::user_action`] runs the participant's click as the current stage's tool, with
//!     the same checks as an agent's `tool.call` (NO_ACTIVE_SPEC, UNKNOWN_TOOL,
//!     INVALID_PARAMS, the tool's own errors, as [`HostCommandError::ActionRefused`]), in or
//!     outside a study session (as [`Host::user_message`]), and pushes `state.updated`
//!     (`source: "user"`) to every agent when it changed the screen or the chat; nothing
//!     is pushed for a refusal or a no-op. The tool sees [`USER_ACTION_REASON`] as its
//!     reason. The reference movie host takes them as stdin commands (`/select`,
//!     `/filter`, `/next`, ..., listed by `help`).
//!     (`a_participant_action_runs_the_stages_tool_and_pushes_state_updated_from_user`,
//!     `a_participants_click_reaches_every_agent_as_state_updated_from_user`,
//!     `a_participants_actions_reach_the_agent_as_state_updated_from_user`,
//!     `movie_host_stdin_commands_reach_agents_as_state_updated_from_user`)
//!
//! # Feature flags
//!
//! - `fuzzing`: `#[doc(hidden)] pub mod fuzzing`, the bodies of the cargo-fuzz targets in
//!   `fuzz/` (`relay_envelope`, `relay_machine`, `relay_host`), replayed over the committed
//!   seeds by `tests/fuzz_seeds.rs`.
#![forbid(unsafe_code)]
#![deny(missing_docs)]

mod codec;
mod config;
mod error;
mod event;
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub mod fuzzing;
mod host;
mod id;
mod log;
pub mod message;
mod relay;
pub mod texts;

pub use agentwire_core::iso8601_ms;
pub use codec::{Route, VersionRule};
pub use config::{
    accept_path, HostConfig, HostLimits, Limits, RateLimit, RelayConfig, DEFAULT_SESSION,
    ENDPOINT_PATH,
};
pub use error::{
    CommandError, DecodeError, HistoryFull, HostCommandError, ParamError, ProtocolError, ToolError,
};
pub use event::{EndTicket, HostEvent, Refusal, RelayEvent, Undelivered};
pub use host::{
    study_log_path, validate_params, ChatEntry, ChatRole, History, Host, HostTimer, ToolContext,
    ToolOutcome, Tools, USER_ACTION_REASON,
};
pub use id::{ClientId, RequestId, SessionId, StudySessionId};
pub use log::{Direction, LogRecord};
pub use message::{
    AgentMessage, AgentText, Body, Envelope, ErrorCode, ErrorPayload, HostMessage, Mvp02,
    PresenceAgent, RawJson, RelayHello, RelayJoin, RelayJoined, RelayMessage, RelayPresence, Role,
    SessionEnd, SessionEnded, SessionStart, SessionStarted, SnapshotGet, SnapshotState,
    StateUpdated, ToolCall, ToolResult, ToolSchema, UserText, VERSION,
};
pub use relay::{Relay, RelayStats, TimerKind};
pub use texts::{host as host_texts, sources};

/// The README's example, compiled and run as a doctest.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
