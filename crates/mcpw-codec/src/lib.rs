//! Sans-IO codec for **MCPW**, the agent-orchestration WebSocket protocol of
//! `specs/mcpw.md` (in the project's shared docs), byte-compatible with its reference Go
//! implementation where the two differ on the wire (`INTEROP.md`, mcpw section: big-endian
//! header, gzip, the 1 MiB size limit, method codes 1-9).
//!
//! Agents and an orchestration server exchange the same messages in two forms: **binary**
//! frames (a 24-byte header, then the params' JSON, gzipped when that pays) and **JSON** text
//! frames (`{"id", "type", "method", "params"}`). This crate encodes and decodes both, never
//! opens a socket and never reads a clock. It works over WebSocket frames or over a plain
//! byte stream ([`Codec::decode_stream`], or `tokio_util` with the `tokio-util` feature).
//!
//! # API map
//!
//! | item | what it is |
//! |---|---|
//! | [`Header`], [`HeaderError`] | the 24-byte header: `parse` (checks magic, version, size, reserved) and `write` |
//! | [`MessageType`], [`Flags`], [`Method`] | open code spaces: unknown values survive a round trip |
//! | [`Message`], [`Body`], [`OtherCall`] | one message, the same value in both forms; typed body per method |
//! | [`params`] | typed params of every spec message (`AgentRegister`, `StateSync`, ...) and the orchestrator's typed results (`TaskAck`, `CollaborationResult`, ...; re-exported at the root) |
//! | [`AgentId`], [`TaskId`] | the ids that name agents and tasks in events and tables |
//! | [`ErrorBody`], [`ErrorCode`] | type-3 error messages, codes 4000-4008 as an open newtype |
//! | [`Codec`] | binary encode/decode with reused gzip state, raw frames, the streaming decoder, WebSocket frames |
//! | [`compact`], [`CompactHeader`], [`Form::Compact`] | the real server's 12-byte binary form (after `protocol.set_binary`) |
//! | [`BatchForm`] | a batch's body in a 24-byte frame: the spec's JSON or the real server's binary body |
//! | [`json`] | the JSON form as free functions (`json::decode`, `json::encode`) |
//! | [`Limits`], [`Compression`], [`CodecConfig`] | every limit and compression setting, with defaults |
//! | [`gzip`] | single-member gzip with a hard output cap and typed [`GzipError`]s |
//! | [`signing`] | HMAC-SHA256 signing and constant-time verification; [`signing::Signer::seal`] and [`signing::Signer::open`] carry the tag on frames (decision 37) |
//! | [`stream`] | streamed messages: `stream.part` params, how a message is cut, their errors (decision 50) |
//! | [`CompressionStats`] | bytes through gzip each way, behind the analytics' compression ratio |
//! | [`DecodeError`], [`EncodeError`] | typed errors; [`DecodeError::code`] is the spec code to answer with |
//! | [`orchestrator::Orchestrator`], [`OrchestratorConfig`], [`OrchestratorLimits`], [`orchestrator::OrchestratorEvent`] | the server role: registry and health, task routing, collaborations, the CRDT store, metrics, the upgrade policy |
//! | [`ProtocolError`], [`ParamError`], [`CommandError`] | why the orchestrator refused a message (with its code and `data`) or a command |
//! | [`Agent`], [`AgentConfig`], [`AgentEvent`], [`AgentCommandError`] | the agent role: a client machine that registers, heartbeats, takes tasks and survives reconnects |
//! | [`crdt`], [`crdt::StateSnapshot`] | the CRDTs of `state.sync`, the store and replica, its `merkle_root`, full syncs |
//! | [`CoordinationPattern`], [`VoteOutcome`] | collaboration patterns and the tally of a vote |
//!
//! # Example
//!
//! ```
//! use mcpw_codec::{AgentHeartbeat, Body, Codec, Form, Message, MessageType};
//!
//! let mut codec = Codec::default();
//! let beat = Message::new(
//!     MessageType::REQUEST,
//!     Body::AgentHeartbeat(AgentHeartbeat {
//!         agent_id: "agent-123".into(),
//!         status: Some("healthy".into()),
//!         metrics: None,
//!         workload: None,
//!     }),
//! )
//! .with_seq(1);
//!
//! // Binary form: 24-byte header + JSON params.
//! let mut frame = Vec::new();
//! let header = codec.encode(&beat, &mut frame).unwrap();
//! assert_eq!(&frame[..4], b"MCPW");
//! assert_eq!(header.method.as_str(), Some("agent.heartbeat"));
//! assert_eq!(codec.decode(&frame).unwrap(), beat);
//!
//! // JSON form, in a text frame.
//! let text = codec.encode_ws(&beat.clone().with_id("hb-1"), Form::Json).unwrap();
//! assert_eq!(
//!     text.as_text().unwrap(),
//!     r#"{"id":"hb-1","type":0,"method":"agent.heartbeat","params":{"agent_id":"agent-123","status":"healthy"}}"#
//! );
//! ```
//!
//! # The binary payload
//!
//! | message | header type / method | payload (JSON) |
//! |---|---|---|
//! | a spec method | its type / code 10-19 | the params |
//! | a reference method (codes 1-9) or an unknown code | its type / that code | the params (`null` if none) |
//! | a method without a code | its type / 0 | `{"method": name, "params": ...}` |
//! | an error | 3 / 0 | the error object |
//! | a batch | 6, flag `BATCH` / 0 | `{"messages": [JSON form, ...], "count": n}` ([`BatchForm::Json`], default), or u32 BE count then per message u32 BE length + JSON form ([`BatchForm::Binary`], the real server's) |
//!
//! Binary WebSocket messages come in a second form too, the real server's 12-byte form
//! ([`compact`], [`Form::Compact`]) that it switches to after `protocol.set_binary`: a
//! 12-byte header (version 1, flags, type u16, length u32, reserved) and the **whole**
//! message's JSON form. [`Codec::decode_ws`] tells the forms apart by the first byte (1, or
//! the `M` of the 24-byte magic).
//!
//! The payload is gzipped (flag `COMPRESSED`) when it is longer than the threshold and the
//! gzip member is smaller. Decoding checks the header before it allocates, inflates with a
//! hard cap, then parses the params straight into their type.
//!
//! # Limits
//!
//! | limit ([`Limits`]) | default | beyond it |
//! |---|---|---|
//! | `max_payload` | 1 MiB (exactly 1 MiB allowed) | [`HeaderError::PayloadTooLarge`], code 4007, before any allocation |
//! | `max_decompressed` | 10 MiB | [`GzipError::TooLarge`], code 4007, inflating stops at cap + 1 |
//! | `max_batch` | 100 messages | [`DecodeError::BatchTooLarge`], code 4007, counted while parsing |
//! | `max_text` | 1 MiB | [`DecodeError::TextTooLarge`], code 4007 |
//! | `reserved` | [`ReservedPolicy::Reject`] | [`HeaderError::ReservedNotZero`], code 4000 |
//! | `max_json_depth` | 128 levels of the JSON form | [`DecodeError::TooDeep`], code 4007, before anything is parsed |
//!
//! | compression ([`Compression`]) | default |
//! |---|---|
//! | `threshold` | 1024: only longer payloads are compressed, and only if gzip is smaller |
//! | `level` | 1 |
//! | `backend` | zlib-rs (feature `zlib-rs`, default), else miniz_oxide |
//! | `policy` | [`CompressPolicy::IfSmaller`]; [`CompressPolicy::SPEC_ENTROPY`] is the spec's `ShouldCompress` |
//!
//! # Spec decisions
//!
//! 1. **Byte order and compression follow the reference**: big-endian header, gzip (RFC
//!    1952) payloads, one member per payload. (`header::tests::go_test_vector`,
//!    `tests/gzip_interop.rs`, `tests/bomb.rs`)
//! 2. **Method codes**: 1-9 as the reference (`initialize` ... `pong`); the spec's agent
//!    methods get 10-19 ([`Method`] lists them); 0 means the name travels in the payload as
//!    `{"method": name, "params": ...}`. A code-0 payload of any other shape is taken as the
//!    params of an unnamed method, as the reference sends unknown methods. Batches and errors
//!    use 0. (`reference_methods_keep_codes_1_to_9_and_spec_methods_get_10_to_19`,
//!    `methods_without_a_code_travel_as_0_with_their_name_in_the_payload`)
//! 3. **24-byte payload = the params' JSON**, as the spec's `EncodeMessage` example writes
//!    it (`json.Marshal(msg.Params)`; an example in the spec, not what the real server sends:
//!    its wire code writes JSON text and, in binary mode, the 12-byte form of decision 24);
//!    an error frame's payload is the error object, a batch's is the spec's
//!    `{"messages": [JSON form...], "count": n}` (`BatchMessage`) or the real binary body
//!    (decision 4). The 24-byte form has no `id`, the JSON form no sequence id or flags.
//!    (`the_real_12_byte_frame_decodes_and_ours_is_byte_for_byte`)
//! 4. **Type and body agree**: type 3 is exactly [`Body::Error`], type 6 exactly
//!    [`Body::Batch`]; the encoder refuses anything else ([`EncodeError::KindMismatch`]),
//!    and so does the decoder ([`DecodeError::KindMismatch`], 4000: type 3 without an
//!    `error`, an `error` under another type, the `BATCH` flag on a type other than 6), so
//!    whatever decodes can be written back. The real server's `createBinaryBatch` sets
//!    **both** type 6 and flag `BATCH`, with a binary body (u32 BE count, then per message
//!    u32 BE length + its JSON); the spec's `BatchMessages` example sets only the type, with
//!    the JSON body. Type 6 is what makes a batch; both bodies are read (a `{` first means
//!    JSON), at most `max_batch` entries, counted before anything is allocated for them,
//!    each entry nested at most `max_json_depth` − 3 levels (its depth inside the JSON
//!    form, so an entry of a binary body can always be written in the JSON form); we
//!    write type and flag, with the body [`CodecConfig::batch`] chooses (default the spec's
//!    JSON). Batches do not nest.
//!    (`the_real_binary_batch_body_decodes_and_is_written_byte_for_byte_when_chosen`,
//!    `a_binary_batch_body_is_bounded_and_exact`, seed `real_binary_batch_deep_entry`,
//!    `a_type_that_does_not_fit_the_body_is_refused_by_the_decoder`,
//!    `a_spec_batch_with_only_the_type_set_decodes_and_ours_sets_type_and_flag`,
//!    `the_encoder_refuses_what_the_decoder_would_misread`, `batch_limits_and_shape`)
//! 5. **JSON `result`**: params are written under `params`; on decode, `result` is accepted
//!    when `params` is absent. (`json_result_is_read_as_params_and_errors_need_no_method`)
//! 6. **Reserved field**: written 0; a non-zero value is refused by default (the spec says
//!    "must be 0"), or kept with [`ReservedPolicy::Ignore`] (the reference ignores it).
//!    (`reserved_is_rejected_by_default_and_kept_when_ignored`)
//! 7. **Encrypted frames** (flag `ENCRYPTED`): the spec names no cipher, so the typed codec
//!    refuses them ([`DecodeError::Encrypted`]); [`Codec::decode_frame`] and
//!    [`Codec::encode_frame`] pass the bytes through, never compressing or inflating them.
//!    (`encrypted_frames_are_refused_by_the_typed_codec_and_passed_raw`)
//! 8. **gzip strictness**: truncated members, bad CRC-32, bad ISIZE, trailing garbage and a
//!    second member are each a [`GzipError`] (Go's reader would accept several members).
//!    (`gzip_edge_cases_each_have_a_typed_error`)
//! 9. **Params optionality**: the spec has one example per message; the ids a message is
//!    about and its essential lists are required, everything else optional (see [`params`]).
//!    `registration.confirmed` has no example: its fields are ours. Params that are not
//!    JSON are 4000; JSON of the wrong shape is 4005 with the field's path
//!    ([`DecodeError::field`], e.g. `capabilities[1].name`).
//!    (`tests/fixtures.rs`, `garbage_payloads_are_4000_and_bad_params_4005_naming_the_field`)
//! 10. **Signing** covers exactly the bytes given ([`signing::Signer::sign`]); where the
//!     orchestrator and the agent carry the tag is decision 37.
//! 11. **The stream decoder** consumes nothing on a bad header (the stream cannot be
//!     resynchronised: close it) and consumes the frame on a bad payload (answer and go on).
//!     (`a_stream_with_a_bad_frame_recovers_and_a_bad_header_stops`)
//! 12. **The compression threshold** is exclusive: exactly 1024 bytes are sent as they are,
//!     as in the reference (`len(payload) > 1024`).
//!     (`compression_only_above_1024_bytes_and_only_if_smaller`)
//! 13. **JSON `type` may be omitted** when a `method` is named: the message is a request
//!     (type 0), as orchestrator peers send it; with neither, the text is refused (4000).
//!     `agent.register` may omit `capabilities` (an agent with none yet).
//!     (`errors_4004_4005_4000_and_register_first`, `json_text_frames_are_checked_too`)
//!
//! The [`orchestrator`]'s decisions (the server role; tests in `tests/orchestrator_*.rs`,
//! named by behaviour):
//!
//! 14. **Frames**: one [`Codec`] shared by all connections (limits from
//!     [`OrchestratorLimits::max_message_bytes`], inflated payloads up to ten times that);
//!     every reply goes out in the form of the peer's latest frame, with the codec's method
//!     codes, gzip above 1 KiB, and type-3 [`ErrorBody`]s. A decode error is answered with
//!     [`DecodeError::code`] and, for bad params, `data: {"field", "reason"}`; the id (JSON)
//!     or sequence id (binary header) is recovered when readable.
//!     (`binary_frames_carry_the_codecs_method_codes_and_large_payloads_travel_gzipped`,
//!     `bad_frames_get_their_error_and_the_other_connection_keeps_working`)
//! 15. **Reply shapes**: a response (type 1) echoes its request's id / sequence id and
//!     names **no method** (so the codec reads its body as raw params, not as the request's
//!     type); the one exception is `registration.confirmed`, which is a response carrying
//!     [`RegistrationConfirmed`] (`agent_id`, `session_id`, `heartbeat_interval_ms`,
//!     `accepted_capabilities`; plus `status` and `server_time`). `task.assigned` is a
//!     notification with [`TaskAssigned`] params; a missed task deadline sends the agent a
//!     4006 error naming the `task_id`. (`register_is_confirmed_in_the_form_of_the_request`,
//!     `tasks_route_by_capability_and_flow_to_completion`)
//! 16. **Register first**: until `agent.register` succeeds, every other method (bad params
//!     included) gets 4001, `ping` excepted; unknown methods still get 4004. A connection
//!     that does not register within 30 s is closed 1008. Registering another `agent_id` on
//!     the same connection is 4008; the same `agent_id` on a new connection replaces the old
//!     one. (`errors_4004_4005_4000_and_register_first`,
//!     `unregistered_connections_are_closed_after_the_register_timeout`)
//! 17. **`state.sync` dedup**: a sync is identified by its sender's own entry in its
//!     `vector_clock` (required, non-zero, else 4005); a (sender, entry) seen before is
//!     answered `applied: false` and changes nothing; a key used as both a counter and a set
//!     is 4008. (`state_sync_merges_into_the_crdt_store_once`,
//!     `store_converges_whatever_the_order_and_repetition`)
//! 18. **OR-Set remove**: with a `unique_id` it tombstones exactly that add (even before
//!     the add arrives); without, every tag of the element observed so far. A concurrent add
//!     wins. (`add_wins_over_a_concurrent_remove`,
//!     `a_tombstone_before_its_add_keeps_the_element_out`)
//! 19. **Routing score**: `(0.5·confidence + 0.2·focus-share + 0.3·(1 − load)) / 1.0`
//!     over healthy agents with the task's capability and a free slot, where load is the
//!     larger of held/`max_concurrent_tasks` and the reported `workload.current_load`;
//!     ties go to the lower agent id; up to 3 runners-up in `alternative_agents`.
//!     (`capability_confidence_and_load_decide`, `specialties_count_and_ties_go_by_id`)
//! 20. **Heartbeats**: 30 s period; no heartbeat for 2 periods marks an agent unhealthy (no
//!     new tasks), for 3 removes it (tasks reassigned, connection closed 1008).
//!     (`missed_heartbeats_make_an_agent_unhealthy_then_remove_it`)
//! 21. **Rates**: 1000 messages/min per connection (burst 100; beyond: 4002); with API keys,
//!     60 new connections/min per key (burst 20; beyond: 429 before the upgrade).
//!     (`rate_limit_is_4002_after_the_burst_and_refills`,
//!     `new_connections_per_key_are_rate_limited`)
//!
//! What the real Go code writes (`tests/real_wire.rs`, `tests/orchestrator_wire.rs`):
//!
//! 22. **Batches** (type 6, any form and body): each entry is decoded and handled on its own,
//!     in order, as if it came alone (a bad entry gets its own error, named by its `id`;
//!     each entry after the first takes its own token from the rate limit); everything the
//!     orchestrator sends to that connection meanwhile (replies, errors, a `task.assigned`
//!     the registration made possible) goes back as **one batch** (split at `max_batch`)
//!     carrying the batch's id or sequence id, in the peer's form and, in 24-byte frames,
//!     with the body the peer used. Entries are messages in their JSON form, so their
//!     replies are matched by `id`; an answer that leaves later (a collaboration's result)
//!     goes alone, in the JSON form when the batch came in a 24-byte frame (which has no
//!     place for an id). (`a_batch_is_handled_entry_by_entry_and_answered_as_one_batch`,
//!     `a_real_binary_batch_gets_a_binary_batch_reply`,
//!     `batch_entries_each_take_a_token_from_the_rate_limit`,
//!     `a_deferred_answer_to_an_entry_of_a_24_byte_batch_keeps_its_id`)
//! 23. **`protocol.set_binary`** (the real server's request, allowed before
//!     `agent.register` like `ping`): params `{"enabled": bool, "compression": {"enabled":
//!     bool, "threshold": n}}`; empty, `null` or `{}` switch binary mode off; a missing
//!     threshold is 1024. The response `{"binary_enabled", "compression_enabled", "status":
//!     "protocol_updated"}` goes in the old form, then every reply to a text frame and every
//!     message the server starts goes in the 12-byte form, gzipped above the threshold only
//!     if compression was enabled (the reference keeps compressing at 1024 whatever was
//!     asked; we do what was asked). Bad params are 4005.
//!     (`set_binary_switches_the_connection_to_the_12_byte_form_after_its_reply`,
//!     `set_binary_without_compression_never_gzips_and_needs_no_registration`)
//! 24. **The 12-byte form** ([`compact`]): header checked before allocating (version 1, only
//!     the gzip and encrypted flags, type ≤ 255, length ≤ `max_payload`, reserved 0 by
//!     [`ReservedPolicy`]); no trailing bytes (one WebSocket message is one frame); the
//!     header's type overrides the JSON's; encrypted payloads are refused as in the 24-byte
//!     form. A connection answers in the form its peer chose: a 12-byte frame in 12 bytes, a
//!     24-byte frame in 24, a text frame in text unless binary mode is on. The byte-stream
//!     decoder ([`Codec::decode_stream`]) reads only the 24-byte form.
//!     (`the_12_byte_header_type_overrides_the_json_and_gzip_goes_over_the_threshold`,
//!     `the_12_byte_header_reads_back_and_refuses_in_order`)
//! 25. **Method codes on read**: a code-0 frame naming a method that has a code
//!     (`{"method": "task.assigned", "params": ...}`) decodes as if its code had been sent
//!     (typed body, 4005 for bad params); a non-zero code this side has no name for is
//!     answered 4004 with the request's sequence id, not 4000.
//!     (`a_code_0_frame_naming_a_typed_method_gets_its_typed_body`,
//!     `method_codes_name_or_miss_their_method`)
//!
//! Operations the real server has and peers rely on, and what no peer may do to us
//! (`tests/ops.rs` unless named):
//!
//! 26. **Credentials** ([`orchestrator::UpgradePolicy`]): with keys configured, a key is
//!     read from `Authorization: Bearer <key>` (scheme in any case), `Authorization: <key>`
//!     (one word, no scheme) and `X-API-Key: <key>`, as the reference server accepts them.
//!     Both headers are looked at (the reference reads `X-API-Key` only when
//!     `Authorization` is absent; we also take it beside an `Authorization` that names none
//!     of our keys, e.g. a proxy's). Every candidate is compared with every key in constant
//!     time. A refusal is 401 with the body `unauthorized` only; why
//!     ([`orchestrator::AuthFailure`]: missing, another scheme, unknown key) is for the
//!     server's log, which the reference server writes too.
//!     (`keys_are_read_from_bearer_bare_authorization_and_x_api_key`, and end to end
//!     `api_keys_are_read_from_all_three_headers_and_refusals_are_logged_with_their_reason`)
//! 27. **Ping replies** carry `{"pong": true, "timestamp": <unix ms>}`: a type-4 ping gets
//!     type 5, a `ping` request a type-1 response, each with the ping's id or sequence id.
//!     The machine reads no clock: the timestamp is the wall-clock time given to
//!     [`Orchestrator::new`](orchestrator::Orchestrator::new) plus the monotonic time since,
//!     as for `deadline` and `server_time`. Milliseconds, as `INTEROP.md` records; the
//!     reference's handlers at 6eb9cfa9 write `time.Now().Unix()`, seconds, under the same
//!     name. (`ping_reply_carries_pong_and_the_unix_ms_timestamp`)
//! 28. **Every error names its message**: the id (JSON form, 12-byte form) or sequence id
//!     (24-byte form) of the message that caused it, whenever it can be read, the rate
//!     limit's 4002 and the size limit's 4007 included, although those messages are not
//!     decoded: a text frame's `id` string is read on that error path only, a 24-byte
//!     frame's sequence id from header bytes 8-16. A message too broken to read has no id
//!     to name. (`every_error_reply_names_the_message_that_caused_it`,
//!     `size_and_decode_errors_name_the_message_too`)
//! 29. **The batch limit's error gives the real count** ("batch of 1000 messages exceeds
//!     100"): entries past `max_batch` are counted without being kept, so the count costs
//!     no memory. (`the_batch_limit_error_reports_the_real_count`)
//! 30. **Nesting depth**: a message whose JSON nests arrays and objects deeper than
//!     [`Limits::max_json_depth`] (default 128, [`agentwire_core::DEFAULT_MAX_JSON_DEPTH`],
//!     counted in the JSON form: the envelope is level 1, `params` level 2) is refused with
//!     4007 ([`DecodeError::TooDeep`]) before anything is parsed, so it is never forwarded
//!     (`collaboration.request`), stored (`state.sync`) or handed to the application. The
//!     check is [`agentwire_core::check_json_depth`] over the whole text (JSON and 12-byte
//!     forms), over a 24-byte frame's inflated payload at one level less (it sits under
//!     `params` or `error` in the JSON form, so what is accepted in one form can be
//!     forwarded in the other), and over each batch entry on its own (a binary batch body
//!     is not JSON). The orchestrator's [`OrchestratorLimits::max_json_depth`] sets it;
//!     [`submit_task`](orchestrator::Orchestrator::submit_task) refuses a `context` or
//!     `requirements` deeper than that minus 2, its level in `task.assigned`
//!     ([`orchestrator::CommandError::TooDeep`]), so every peer can read what we send. A
//!     collaboration answer goes on three levels down in the requester's result
//!     (`params.responses.<agent>`): one deeper than the bound allows there is not forwarded;
//!     its sender gets 4007 naming its reply, and the requester an `{"error": {"code":
//!     4007, ...}}` in its place.
//!     (`json_nested_deeper_than_the_limit_is_refused_with_4007`,
//!     `deep_params_are_never_forwarded_or_stored`,
//!     `task_payloads_deeper_than_task_assigned_allows_are_refused`,
//!     `a_collaboration_answer_too_deep_to_forward_is_refused_not_forwarded`)
//!
//! The [`Agent`]'s decisions (the client role; `tests/agent_sim.rs` and
//! `tests/agent_wire.rs`):
//!
//! 31. **Register on every connection**, in the form the agent speaks
//!     ([`AgentConfig::binary`]); nothing held survives a connection: held tasks and
//!     unanswered collaboration requests are forgotten (the orchestrator reassigns the
//!     tasks) and the 12-byte form is off again.
//!     (`the_agent_registers_again_after_a_reconnect_and_starts_over_in_its_form`)
//! 32. **Heartbeats start at `registration.confirmed`**, every `heartbeat_interval_ms`
//!     the server names there (decision 42), else every
//!     [`AgentConfig::heartbeat_interval`].
//!     (`heartbeats_keep_the_agent_registered_past_the_servers_removal_time`)
//! 33. **Ids**: in the JSON and 12-byte forms every message carries the id
//!     `<agent_id>-<n>`, in the 24-byte form the sequence id `n` (one counter); answers
//!     are matched on them, so an error names the request it refuses
//!     ([`AgentEvent::ErrorReceived`]'s `about`).
//!     (`an_error_answer_names_the_request_it_refuses`)
//! 34. **`protocol.set_binary`**: sent as a request `{"enabled", "compression":
//!     {"enabled", "threshold"}}`; the agent switches to the 12-byte form (gzip above the
//!     threshold it asked for, if any) when the server's answer says `binary_enabled`, and
//!     back when it does not. (`set_binary_switches_both_sides_to_the_12_byte_form`)
//! 35. **Requests the agent does not serve** get 4004 naming their id or sequence id; pings
//!     get `{"pong": true, "timestamp": <unix ms>}` as the orchestrator answers them
//!     (decision 27); frames that do not decode are reported
//!     ([`AgentEvent::ProtocolViolation`]) and skipped, the connection stays.
//!     (`pings_are_answered_and_unknown_requests_get_4004`)
//! 36. **Shutdown** sends `agent.shutdown` with `final_state` (completed and active tasks)
//!     and closes the connection (1000) once answered with no task left (decision 44), or
//!     after [`AgentConfig::shutdown_timeout`]; then the driver stops
//!     ([`Dial::Stop`](agentwire_core::Dial::Stop)).
//!     (`shutdown_announces_itself_and_stops_dialing`)
//!
//! Wire-level features of both roles (`tests/wire_orchestrator.rs`,
//! `tests/wire_agent.rs`):
//!
//! 37. **HMAC message authentication** ([`OrchestratorConfig::hmac`],
//!     [`AgentConfig::hmac`], a shared secret; off by default). The spec's `SignMessage`
//!     names neither the bytes nor where the tag travels: a binary frame (either header
//!     form) is followed by the 32-byte HMAC-SHA256 of every byte before it (the header's
//!     size still names the payload alone); a text frame starts with the member
//!     `"hmac":"<64 hex digits>",` and the tag covers every byte after that comma, so it
//!     stays one JSON object and is checked without a copy ([`signing`]). With it on, the
//!     orchestrator checks the tag first (after the rate limit) and answers a frame without
//!     one or with a wrong one with 4001 ([`ProtocolError::BadSignature`]) and handles
//!     nothing of it; it signs everything it sends. The agent signs everything it sends
//!     and reports a server frame with a bad tag ([`AgentEvent::ProtocolViolation`], 4001)
//!     without handling it.
//!     (`unsigned_or_badly_signed_frames_are_refused_with_4001_and_good_ones_are_answered_signed`)
//! 38. **Sequence ids** are per connection and count what a side *starts*: requests,
//!     notifications, progress and pings in the 24-byte form carry 1, 2, 3, ... on each
//!     connection (the orchestrator's counter is per connection; the agent's one counter
//!     rises across its connections). Responses, errors, pongs and batches echo the id of
//!     what they answer (decision 15) or carry 0, and are neither numbered nor checked;
//!     the JSON and 12-byte forms have no sequence id. The first numbered id received on a
//!     connection is taken as it comes; after it, a skipped id is a gap (counted in
//!     `mcpw_sequence_gaps_total`, reported as `SequenceGap`, the message handled) and an
//!     id not above the last one is a duplicate (counted, reported as
//!     `SequenceDuplicate`, not handled again).
//!     (`sequence_gaps_are_counted_and_reported_and_duplicates_are_dropped`,
//!     `what_the_orchestrator_starts_is_numbered_per_connection_from_1`,
//!     `the_agent_drops_duplicates_and_reports_gaps_of_the_servers_ids`)
//! 39. **Priority** ([`Flags::PRIORITY`]): the orchestrator sets it on every error it
//!     sends (4006 task cancellations included), the messages a peer must act on first;
//!     it travels in the 24-byte header only (the other forms have no flags). The spec's
//!     "handled before queued normal frames" finds nothing to reorder where frames are
//!     received, because neither machine queues inbound frames: `handle_frame` handles a
//!     frame whole before it returns (a batch's entries in order within that call; they
//!     carry no flags of their own), frames before `agent.register` are refused (4001),
//!     not held, and the only received bytes kept for later are the parts of a streamed
//!     message (decision 50), which are not a message until the last one. So when a
//!     flagged frame reaches a machine, every earlier frame has been handled and no later
//!     one seen. Frames wait only outside the machines, in the socket and the transport's
//!     per-connection channel, which keep arrival order and never read a header. The flag
//!     is therefore honoured where messages do wait, on the sending side: a flagged
//!     message never waits in either role's batching linger (decision 58) and leaves ahead
//!     of the small messages held there. A task's `priority` orders the orchestrator's one
//!     queue of work, the tasks waiting for an agent: a larger value first (the spec gives
//!     no scale; `2` in its example), equal ones in submission order; the reference
//!     server's stdin takes it as `TYPE priority=N [JSON_CONTEXT]`.
//!     (`errors_carry_the_priority_flag_and_answers_do_not`,
//!     `queued_tasks_go_out_by_priority_then_in_submission_order`,
//!     `with_a_linger_small_notifications_leave_together_and_errors_do_not_wait`; end to
//!     end `a_later_high_priority_task_typed_on_stdin_is_assigned_before_an_earlier_low_one`)
//! 40. **Adaptive compression** is a setting of both roles
//!     ([`OrchestratorConfig::compression`], [`AgentConfig::codec`]'s
//!     [`Compression::policy`]): default [`CompressPolicy::IfSmaller`] (the reference
//!     server's rule: above 1 KiB, keep gzip only if smaller);
//!     [`CompressPolicy::SPEC_ENTROPY`] is the spec's `ShouldCompress` (skip when the first
//!     KiB has 6.5 bits per byte or more). JSON text seldom gets there (printable ASCII
//!     tops out near 6.6), so the cut-off matters mostly for payloads that are not JSON;
//!     a lower one is a setting too. The reference server and agent both take
//!     `--compression if-smaller|entropy|never`.
//!     (`adaptive_compression_skips_payloads_that_look_incompressible`,
//!     `the_agents_adaptive_compression_skips_payloads_that_look_incompressible`; end to end
//!     `the_agents_compression_flag_decides_whether_its_large_messages_go_gzipped`)
//! 41. **Protocol analytics**: the spec's `ProtocolAnalytics` fields are rendered beside
//!     its three Prometheus families under names of ours ([`orchestrator::Metrics`]):
//!     `mcpw_compression_ratio{direction}`, `mcpw_errors_total{code}` and
//!     `mcpw_error_rate{code}` (per message received), `mcpw_message_size_bytes_avg
//!     {direction}` (with the frame and byte counters behind it), `mcpw_connections_peak`,
//!     and the sequence counters of decision 38. The reference server serves them on
//!     `/metrics`. (`protocol_analytics_sit_beside_the_spec_families`, end to end
//!     `metrics_show_the_protocol_analytics`)
//!
//! Reliability of both roles (`tests/agent_reliability.rs`,
//! `tests/orchestrator_reliability.rs`):
//!
//! 42. **The server's heartbeat period wins**: the agent beats every
//!     `heartbeat_interval_ms` of `registration.confirmed` (at least 100 ms, so a broken
//!     server cannot make it flood), shorter or longer than its own
//!     [`AgentConfig::heartbeat_interval`], which is only the fallback when the server
//!     names none: a mismatch never gets it dropped.
//!     (`the_servers_heartbeat_interval_wins_over_the_agents_setting`)
//! 43. **Cancellation**: the orchestrator cancels a task when its deadline passes and when
//!     the application calls [`cancel_task`](orchestrator::Orchestrator::cancel_task)
//!     ([`TaskFailure::Cancelled`](orchestrator::TaskFailure::Cancelled)); its agent gets a
//!     type-3 4006 whose `data.task_id` names it. The [`Agent`] then lets go of the task
//!     ([`AgentEvent::TaskCancelled`]) and sends nothing more about it: its retries are
//!     dropped and reports are refused with [`AgentCommandError::Cancelled`] (it remembers
//!     up to `max_tasks` such ids). What the agent had already sent about the task (and
//!     about tasks a shutdown handed over) reaches the orchestrator within
//!     [`OrchestratorConfig::cancel_grace`] (default 30 s, at most
//!     [`OrchestratorLimits::max_cancelled_tasks`] remembered) and is answered 4006 naming
//!     the task, never 4008; after it, such a message is an unknown task (4008).
//!     (`a_cancelled_task_is_dropped_and_nothing_more_is_sent_about_it`,
//!     `messages_in_flight_about_a_cancelled_task_get_4006_within_the_grace_then_4008`,
//!     `an_error_answer_names_the_request_it_refuses`; end to end, `cancel TASK_ID` on the
//!     reference server's stdin: `cancel_on_the_servers_stdin_stops_the_agent_working_on_the_task`)
//! 44. **Graceful shutdown**: [`Agent::shutdown`] sends `reason`, `graceful_timeout_ms`
//!     ([`AgentConfig::shutdown_timeout`], default 5 s), `transfer_tasks` and `final_state`
//!     (`completed_tasks`, `active_tasks`, and with a transfer `pending_transfers`: the held
//!     tasks, which it lets go of at once). The orchestrator marks the agent shutting down
//!     (no new task, no heartbeat check), hands the tasks named in `pending_transfers` that
//!     the agent holds (all of them when the list is absent) to other capable agents at once
//!     (queued if none can; not a failed attempt), answers with `transferred_tasks`, and
//!     treats the agent as gone only when it closes or its grace
//!     (`graceful_timeout_ms`, at most [`OrchestratorConfig::max_shutdown_grace`]) ends; what
//!     it still holds then is reassigned. The agent closes once answered and no task or
//!     completion is left (without a transfer it may finish its tasks meanwhile), or when
//!     `graceful_timeout_ms` ends. The reference agent shuts down so, with a transfer, on
//!     Ctrl-C and SIGTERM. (`shutdown_with_transfer_hands_the_tasks_over_and_stops`,
//!     `shutdown_without_transfer_waits_for_the_held_tasks_then_stops`,
//!     `shutdown_ends_at_graceful_timeout_ms_when_the_tasks_are_not_done`,
//!     `a_shutdown_hands_over_only_its_pending_transfers`, end to end
//!     `sigterm_makes_the_reference_agent_hand_its_task_over_and_exit`)
//! 45. **Idempotency keys** (the spec's "idempotency keys for critical operations"): an
//!     optional `idempotency_key` string in the params of `task.progress`, `task.complete`,
//!     `agent.capability.update` and `collaboration.request` (at most `max_id_bytes`, else
//!     4005). The orchestrator scopes a key by its sender and method and ties it to the
//!     params: the same key with the same params within
//!     [`OrchestratorConfig::idempotency_ttl`] (default 5 min) gets the first answer again
//!     and changes nothing; with other params it is 4008 (`data.field`:
//!     `idempotency_key`). Only answers that applied something are kept (a refused message
//!     changed nothing, so its retry is handled anew); a `collaboration.request` retried
//!     while it runs is absorbed and answered once, to the first message, when it ends.
//!     Memory: at most [`OrchestratorLimits::max_idempotency_keys`] (4,096) keys and
//!     [`OrchestratorLimits::max_idempotency_bytes`] (4 MiB), the oldest forgotten first.
//!     The [`Agent`] puts a fresh key on each of these messages (from
//!     [`Agent::with_ids`]; the reference agent uses random UUIDs so a restarted process
//!     never reuses one) and keeps it on retries.
//!     (`a_retried_message_with_the_same_key_gets_the_same_answer_once_applied`,
//!     `capability_updates_and_progress_are_applied_once_per_key`,
//!     `a_retried_collaboration_request_is_absorbed_while_it_runs_and_answered_after`,
//!     `idempotency_keys_are_bounded_and_expire`,
//!     `capability_updates_and_collaboration_requests_carry_idempotency_keys`)
//! 46. **Retries**: 4002 (Rate Limited) and 4003 (Server Error) say "later"; every other
//!     code is final. The [`Agent`] sends a register, progress report, completion,
//!     capability update or collaboration request refused with one of them again, as a new
//!     message (new id and sequence id: a repeated sequence id would be a duplicate) with
//!     the same params and key, after [`RetryPolicy`]'s backoff (500 ms doubling to 10 s)
//!     or the error's `data.retry_after_ms` when that is longer (at most 10 min), at most
//!     `max_attempts` (4) sends in all ([`AgentEvent::Retrying`]); then it reports the
//!     error. A newer progress report replaces an older one waiting for its retry.
//!     (`refusals_for_the_rate_limit_are_sent_again_after_retry_after_ms`,
//!     `a_retry_is_a_new_message_with_the_same_idempotency_key`)
//! 47. **`X-Agent-ID`**: a connection upgraded with that header must register as that
//!     agent: `agent.register` naming another `agent_id` is refused with 4001 (`data`:
//!     `field` `agent_id`, `expected` the header, `received` the params'); the connection
//!     stays unregistered (the register timeout applies). Without the header there is no
//!     check. (`an_x_agent_id_header_that_disagrees_with_register_is_refused`,
//!     `register_must_match_the_x_agent_id_header`, end to end
//!     `an_x_agent_id_header_that_disagrees_with_register_is_refused_over_a_socket`)
//! 48. **Error data**: every error the orchestrator sends carries the spec's
//!     `{field, reason, expected, received}` when it is about a field (the method, the
//!     type, `agent_id`, `task_id`, a param; a param of the wrong type names what serde
//!     expected and received), a `reason` alone for the server's own limits (too many
//!     agents or collaborations), and what a peer acts on: `retry_after_ms` of 4002,
//!     `task_id` of 4006, `limit` of 4007 ([`ProtocolError::data`]); a size or nesting
//!     limit names the limit expected and the size received ([`DecodeError::to_error_body`]).
//!     The agent's own errors do the same (4004 for a request it does not serve).
//!     (`every_error_names_field_reason_expected_and_received_where_they_apply`,
//!     `the_agents_own_errors_name_field_reason_expected_and_received`)
//!
//! Protocol evolution (`tests/wire_orchestrator.rs`, `tests/wire_agent.rs`, the upgrade
//! policy's unit tests, and end to end the root `tests/mcpw_wire_e2e.rs`):
//!
//! 49. **Version negotiation** ("Protocol Evolution": the client announces the versions it
//!     supports, the server selects the highest mutual one) happens at the upgrade, where
//!     the spec already requires the subprotocol `mcp.v1`: an agent offers `mcp.v<n>` for
//!     each version it speaks ([`AgentConfig::protocol_versions`],
//!     [`AgentConfig::subprotocols`]); the [`orchestrator::UpgradePolicy`] echoes the
//!     highest of [`orchestrator::UpgradeConfig::protocol_versions`] among them (none in
//!     common: 426, as for a missing `mcp.v1`); both machines keep it
//!     ([`Orchestrator::protocol_version`](orchestrator::Orchestrator::protocol_version),
//!     [`Agent::protocol_version`]). Only version 1 exists, so frames keep header version 1
//!     whatever was selected (a second version would switch the codec there), and nothing
//!     of `agent.register` changes: peers that offer only `mcp.v1` are unaffected.
//!     [`VERSIONS`] (every version the crate speaks) is the default on both sides. The
//!     reference agent offers each `--protocol-version` (default [`VERSIONS`]), says which
//!     one the server selected, and reports a 426 as no version in common; the reference
//!     server speaks each of its `--protocol-version`.
//!     (`the_highest_version_both_speak_is_selected`,
//!     `each_connection_keeps_the_version_its_upgrade_selected`,
//!     `the_agent_offers_its_versions_and_keeps_the_one_the_server_selected`, end to end
//!     `the_highest_version_both_sides_speak_is_selected_at_the_upgrade`,
//!     `the_agent_offers_its_versions_and_the_highest_in_common_is_selected_or_426_said_plainly`)
//! 50. **Streaming** ([`stream`], [`Flags::STREAMING`]): the spec names the flag ("part of
//!     streaming response") and nothing more. A message too large for one frame (over the
//!     payload limit after gzip, or over the text limit) goes as `stream.part`
//!     notifications (type 2, flag `STREAMING` in the 24-byte form) whose params
//!     `{"stream_id", "index", "final", "data"}` carry slices of its JSON form, numbered
//!     from 0; the last carries the message's id or sequence id (the others none, and 0),
//!     so the answer to the whole names it. The agent streams whatever it cannot send
//!     whole (a large `task.complete` result) in slices of
//!     [`AgentConfig::stream_part_bytes`] (256 KiB). The orchestrator reassembles per
//!     connection, after `agent.register` (else 4001), in order (else 4000), at most
//!     [`OrchestratorLimits::max_streams`] at once (4; beyond: 4003) holding at most
//!     [`OrchestratorLimits::max_stream_bytes`] (8 MiB; beyond: 4007), and handles the
//!     whole as if it had come alone; the parts must join to one message (a batch or a
//!     part: 4000). A refused part drops its stream. The orchestrator sends nothing
//!     streamed. (`a_task_result_too_large_for_one_frame_is_streamed_and_completes`,
//!     `hostile_streams_get_typed_errors_and_the_connection_keeps_working`)
//!
//! Shared state, collaborations and pooling (`tests/orchestrator_state_sync.rs`,
//! `tests/crdt_agents.rs`, `tests/crdt_props.rs`, `tests/orchestrator_collaboration.rs`,
//! and end to end the root `tests/collab_e2e.rs`):
//!
//! 51. **`state.sync` reaches the agents that share the state**: a connection shares it
//!     once it sent `state.sync` or `state.get` (an implicit subscription; agents that
//!     never touch the state are sent nothing). A sync the store applies goes on at once
//!     to every other sharing, registered connection as a type-2 `state.sync` notification
//!     carrying the sender's `agent_id`, its `vector_clock`, its operations (a remove that
//!     named no `unique_id` becomes one remove per tag the server had observed, so every
//!     replica removes the same adds) and the store's `merkle_root` after the merge. A
//!     repeat (decision 17) is not passed on.
//!     (`a_merged_sync_reaches_the_agents_sharing_the_state_and_state_get_reads_it_back`)
//! 52. **`state.get`** (a request; params ignored; register first) reads the whole store
//!     back: a [`crdt::StateSnapshot`] `{"vector_clock", "merkle_root", "counters", "sets",
//!     "applied"}`, where `applied` names the syncs it holds per sender (`floor` and
//!     `seen`), so a replica built from it neither counts them again nor misses the rest.
//!     A snapshot that does not fit in `max_message_bytes` is refused with 4007.
//! 53. **`merkle_root`** is 64 lowercase hex digits: SHA-256 over one leaf per key in byte
//!     order, each leaf the SHA-256 of the key's canonical compact JSON
//!     (`{"key","type":"g-counter","value":{actor: n}}` or `{"key","type":"or-set",
//!     "value":{"adds":{element:[tags]},"removed":[tags]}}`, everything in byte order, zero
//!     counts left out); clocks and applied syncs are not hashed
//!     ([`crdt::CrdtStore::merkle_root`]). The spec's example root has 40 digits and no
//!     definition; any other string simply never matches. It is compared where the
//!     comparison means something: the orchestrator answers a `state.sync` whose
//!     `vector_clock` equals the store's clock after the merge but whose root differs with
//!     the whole store in the result's `state` (a full sync; left out when it would not fit
//!     in a message); the agent compares the server's root in a notification or in its
//!     sync's answer with its own when none of its syncs is unanswered (then both have
//!     applied the same syncs) and fetches `state.get` on a difference.
//!     (`a_sender_whose_root_shows_it_diverged_gets_a_full_sync`,
//!     `the_root_is_a_hash_of_the_canonical_leaves`)
//! 54. **The agent's replica** ([`AgentConfig::shared_state`], off by default): after each
//!     registration the agent fetches `state.get` and replaces its replica with it; until
//!     then state changes are refused ([`AgentCommandError::StateNotReady`]) and
//!     notifications ignored. A change is applied locally and sent as a `state.sync` whose
//!     own clock entry continues from the larger of the agent's counter and what the
//!     server's snapshot shows applied (so a restarted agent never reuses one); adds are
//!     tagged `<agent_id>-<seq>`, removes name the tags observed. Syncs not answered when a
//!     connection ends are sent again after the next full sync unless it shows them
//!     applied (deduplication makes a repeat harmless); a full sync is followed by the
//!     unanswered syncs applied on top; a sync refused with 4002 or 4003 goes again after
//!     the retry wait ([`AgentConfig::retry`]); one refused for good, a notification that
//!     cannot apply, or a root that differs leads to `state.get`. Reads are local
//!     ([`Agent::state`]). (`three_agents_converge_whatever_the_interleaving_drops_and_resends`,
//!     `a_change_reaches_the_other_agents_and_a_dropped_sync_is_sent_again`,
//!     `a_sync_refused_with_4002_is_sent_again_not_rolled_back`)
//! 55. **`coordination_pattern`** ([`CoordinationPattern`]): `voting`, `consensus`,
//!     `parallel` or `broadcast`; absent is `broadcast`; any other value is 4000 with
//!     `data {"field": "coordination_pattern", "reason", "expected", "received": <value>}`
//!     and nothing is forwarded. `parallel` and `broadcast` ask every required agent at
//!     once and answer with every raw answer (`responses`).
//!     (`an_unknown_coordination_pattern_or_a_bad_quorum_is_refused`)
//! 56. **Votes** (`voting`, `consensus`): an answer's `vote` member is `approve`
//!     (`approved`, `yes`, `true`), `reject` (`rejected`, `no`, `false`) or `abstain`, any
//!     case; anything else, an error or no answer is no vote. `context.criteria.quorum`
//!     (1 to the agents asked) is the votes of any kind needed, default a majority of the
//!     agents asked for `voting` and all of them for `consensus`;
//!     `context.criteria.threshold` (0 to below 1, default 0.5; `voting` only): approvals
//!     must be more than that share of approve and reject votes (a tie rejects). Other
//!     criteria (`security_score`, ...) are the voters' to judge and are forwarded
//!     unchanged. `consensus` is approved only when every asked agent approves and rejected
//!     by any rejection or abstention. The collaboration ends as soon as the decision
//!     cannot change, or at `timeout_ms` (missing voters count as no vote: `no_quorum`);
//!     the requester gets `outcome {"decision": "approved" | "rejected" | "no_quorum",
//!     "approve", "reject", "abstain", "quorum", "threshold", "votes": {agent: vote}}`
//!     with `responses` left empty. Bad criteria are 4005 naming
//!     `context.criteria.quorum` or `.threshold`.
//!     (`a_vote_is_tallied_against_its_criteria_and_the_requester_gets_the_outcome`,
//!     `voting_needs_the_quorum_and_more_than_the_threshold`)
//! 57. **Connection pooling and client-side caching** (the spec's Best Practices): one
//!     connection carries one registered agent (registration is per connection, decision
//!     16), so "pooling for multiple agents" is N [`Agent`] machines over N connections in
//!     one process sharing one configuration and reconnect rule, each keeping its own
//!     connection and redialing it (the spec's `ConnectionPool` keys connections by agent
//!     id, one each): the reference apps' `AgentPool` and `mcpw_agent --count N`. Cached
//!     on the client: the shared state (the replica, decision 54: kept correct by the full
//!     sync on every connection and the root check) and each agent's codec state. Not
//!     cached: the registration (the server forgets an agent with its connection, so
//!     skipping `agent.register` on a new one would leave it unregistered, decision 31)
//!     and answers to requests (the server's idempotency keys already give a retried
//!     request its first answer).
//!
//! Sender-side batching (`tests/wire_orchestrator.rs`, `tests/wire_agent.rs`):
//!
//! 58. **Sender-side batching** ([`OrchestratorConfig::batch_linger`], off by default): the
//!     spec's "batch small messages when possible", with a linger. Small messages the
//!     orchestrator starts (1 KiB of JSON at most: `task.assigned`, forwarded
//!     `collaboration.request`s, `state.sync` notifications) to a peer speaking the JSON or
//!     12-byte form wait up to the linger and leave as one batch (decision 4's format; at
//!     once when `max_batch` wait). Errors and answers never wait, so whatever is urgent
//!     (decision 39) goes ahead of the waiting ones. The 24-byte form is not batched: its
//!     entries would lose their sequence ids (decision 38). The agent does the same with
//!     [`AgentConfig::batch_linger`] for what it starts (heartbeats, progress reports,
//!     requests; answers never wait). The reference server and agent take
//!     `--batch-linger-ms` (0, the default, is off).
//!     (`with_a_linger_small_notifications_leave_together_and_errors_do_not_wait`,
//!     `the_agent_batches_what_it_starts_within_its_linger`; end to end
//!     `the_servers_batch_linger_sends_waiting_tasks_as_one_batch`,
//!     `the_agents_batch_linger_sends_what_it_starts_together`)
//! 59. **Token rotation** (the spec's "Support for rotating authentication tokens"):
//!     [`UpgradePolicy::rotate_api_keys`](orchestrator::UpgradePolicy::rotate_api_keys)
//!     replaces the accepted API keys at `now`; a removed key is still accepted for the
//!     overlap given and refused with 401 after (connections it opened stay up: the key is
//!     checked at the upgrade). Once keys are required they stay required: rotating to no
//!     keys refuses everyone after the overlap rather than opening the server.
//!     (`a_rotated_key_is_accepted_and_the_retired_one_refused_after_the_overlap`,
//!     `keys_rotated_into_an_open_policy_turn_authentication_on`)
//!
//! (This file is longer than the workspace's 700 lines because it is the crate's
//! documentation, the spec decisions above among it; its code is the module list and the
//! re-exports.)
//!
//! # Features
//!
//! - `zlib-rs` (default): the zlib-rs deflate backend through flate2. miniz_oxide is always
//!   available as [`Backend::MinizOxide`].
//! - `tokio-util`: `tokio_codec::McpwFrames`, a `Decoder`/`Encoder` for MCPW frames over
//!   byte streams (`FramedRead`/`FramedWrite`).
//! - `fuzzing`: `#[doc(hidden)]` entry points for the cargo-fuzz targets.
#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod agent;
mod binary;
mod codec;
mod codes;
pub mod compact;
mod config;
pub mod crdt;
mod crdt_wire;
mod deflate;
mod error;
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub mod fuzzing;
pub mod gzip;
mod header;
pub mod json;
mod message;
pub mod orchestrator;
pub mod params;
mod sequence;
pub mod signing;
pub mod stream;
#[cfg(feature = "tokio-util")]
pub mod tokio_codec;

pub use agent::{Agent, AgentEvent};
pub use codec::{Codec, CompressionStats, Form, RawFrame};
pub use compact::{CompactHeader, CompactHeaderError};
pub use config::{AgentConfig, Reconnect, RetryPolicy};
pub use config::{
    Backend, BatchForm, CodecConfig, CompressPolicy, Compression, Limits, OrchestratorConfig,
    OrchestratorLimits, ReservedPolicy,
};
pub use error::{
    AgentCommandError, CommandError, DecodeError, EncodeError, ErrorBody, ErrorCode, ParamError,
    ProtocolError, SignatureError,
};
pub use gzip::GzipError;
pub use header::{
    subprotocol_of, version_of, Flags, Header, HeaderError, MessageType, Method, HEADER_LEN, MAGIC,
    VERSION, VERSIONS,
};
pub use message::{AgentId, Body, Message, OtherCall, TaskId, BATCH_METHOD};
pub use params::*;

/// The README's example, compiled and run as a doctest.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
