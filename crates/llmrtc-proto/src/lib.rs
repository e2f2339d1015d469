//! Sans-IO **llmrtc** voice-AI protocol v1 (`@metered/llmrtc`, now `@llmrtc/llmrtc-*`).
//!
//! A browser running the llmrtc web client talks to a voice-agent backend over one
//! WebSocket (and, optionally, a WebRTC data channel): the server greets with `ready`, the
//! client sends speech as `audio` (base64 WAV), and the server answers with the turn's events:
//! `speech-start`, `speech-end`, `transcript`, streamed `llm-chunk`s and `llm`, then
//! `tts-start`, `tts-chunk`s and `tts-complete`. The spec is `specs/llmrtc.md`; what the real
//! TypeScript server and client do is `INTEROP.md` (llmrtc section).
//!
//! This crate never opens a socket or reads a clock: drive [`LlmrtcServer`] with
//! `agentwire-tokio`, with the in-memory `agentwire_core::sim` harness, or your own loop.
//!
//! # API map
//!
//! | you want to | use |
//! |---|---|
//! | decode a client / server message | [`ClientMessage::decode`], [`ServerMessage::decode`] → [`Decoded`] (`Message` or `Unknown`); [`ClientMessageRef::decode`] borrows `audio.data` |
//! | encode one | [`ClientMessage::encode`] / [`ServerMessage::encode`] / `to_frame` / `to_json`; fast paths [`encode_audio`], [`encode_tts_chunk`], [`encode_tts`] |
//! | read or write WAV | [`parse_wav`], [`write_wav`], [`wav::wav_from_samples`] |
//! | detect speech | [`Vad`] with [`VadConfig`] |
//! | serve clients | [`LlmrtcServer::new`] with [`ServerConfig`] (limits: [`Limits`], timeouts: [`ProviderTimeouts`], playbook: [`Playbook`]) |
//! | plug in STT | on [`ServerEvent::Stt`] ([`SttRequest`]): [`LlmrtcServer::stt_partial`]*, then [`LlmrtcServer::stt_result`] |
//! | plug in the LLM | on [`ServerEvent::Llm`] ([`LlmRequest`]): [`LlmrtcServer::llm_chunk`]*, [`LlmrtcServer::llm_tool_call`]* (playbook), then [`LlmrtcServer::llm_done`] or [`LlmrtcServer::llm_failed`] |
//! | plug in TTS | on [`ServerEvent::Tts`] ([`TtsRequest`], `streaming` from [`ServerConfig::streaming_tts`]): [`LlmrtcServer::tts_chunk`]* or [`LlmrtcServer::tts_audio`], then [`LlmrtcServer::tts_done`] or [`LlmrtcServer::tts_failed`] |
//! | report a failure around a provider (a panic, a dead worker) | [`ProviderError::Internal`] in any `*_failed` or `stt_result` (`INTERNAL_ERROR`) |
//! | run playbook tools | on [`ServerEvent::ToolCall`] ([`ToolCallRequest`]): [`LlmrtcServer::tool_result`]; move stages with [`LlmrtcServer::change_stage`] |
//! | stop provider work | on [`ServerEvent::Cancel`] (barge-in, disconnect, timeout): drop the request; late answers get [`CommandError::UnknownRequest`] |
//! | WebRTC | [`ServerConfig::webrtc`], [`ServerEvent::Offer`] → [`LlmrtcServer::signal`]; [`LlmrtcServer::set_data_channel_open`] and [`ServerEvent::DataChannel`] for the payload copies |
//! | WebRTC audio tracks | microphone in: [`LlmrtcServer::track_audio`] (PCM, resampled to [`ServerConfig::track_sample_rate`]); TTS out: [`LlmrtcServer::set_audio_track`], then [`ServerEvent::TrackAudio`] and [`ServerEvent::TrackAudioEnd`]; rates: [`Resampler`] |
//! | connect as a client | [`LlmrtcClient::new`] with [`ClientConfig`] ([`Reconnection`], jitter from [`SplitMix64`]); run it with `agentwire_tokio::Client::connect_dialer`; events [`ClientEvent`], states [`ConnectionState`], the session's mode [`LlmrtcClient::mode`] ([`SessionMode`]) |
//! | observe | [`ServerEvent`] (sessions started, resumed, expired; errors sent; turns ended), getters [`LlmrtcServer::sessions`], [`LlmrtcServer::history`], [`LlmrtcServer::stage`], [`LlmrtcServer::dropped_messages`] (over the rate limits), ... |
//! | name sessions, requests and tool calls | [`SessionId`] (the `ready.id` in every event), [`RequestId`] (one provider request), [`CallId`] (one playbook tool call, its `callId`) |
//! | handle errors | [`DecodeError`], [`ProtocolError`] (the client's report of a bad server message), [`CommandError`], [`ClientCommandError`], [`ConfigError`] |
//!
//! Every provider answer takes `now` (as every `handle_*`), because it restarts or ends a
//! provider timeout.
//!
//! # A run loop
//!
//! A driver feeds input, then drains every output in order: frames go to the socket, provider
//! requests go to the application's STT, LLM and TTS, whose answers come back as commands.
//! Here the providers answer at once.
//!
//! ```
//! use std::time::Instant;
//! use agentwire_core::{ConnId, Frame, Machine, Output, PeerInfo, SequentialIds};
//! use llmrtc_proto::{wav, encode_audio, LlmrtcServer, ServerConfig, ServerEvent};
//!
//! # #[allow(clippy::disallowed_methods)]
//! let now = Instant::now(); // a driver's clock; the machine never reads one
//! let mut server = LlmrtcServer::new(ServerConfig::default(), SequentialIds::new(0)).unwrap();
//! let conn = ConnId::new(1);
//! server.handle_connect(conn, &PeerInfo::new(None), now); // sends `ready`
//!
//! // The client sends an utterance: 200 ms of silence, 500 ms of "speech", 700 ms of silence.
//! let mut samples = vec![0i16; 3200];
//! samples.extend((0..8000).map(|i| if i % 16 < 8 { 3000 } else { -3000 }));
//! samples.extend(vec![0i16; 11200]);
//! let mut audio = Vec::new();
//! encode_audio(&mut audio, &wav::wav_from_samples(16000, &samples), &[]);
//! server.handle_frame(conn, Frame::Text(std::str::from_utf8(&audio).unwrap()), now);
//!
//! let mut sent = Vec::new();
//! for _ in 0..10 {
//!     let mut asks = Vec::new();
//!     while let Some(out) = server.poll_output() {
//!         match out {
//!             Output::Send { frame, .. } => {
//!                 let v: serde_json::Value = serde_json::from_slice(frame.as_bytes()).unwrap();
//!                 sent.push(v["type"].as_str().unwrap().to_owned());
//!             }
//!             Output::Event(e) => asks.push(e),
//!             Output::Close { .. } => {}
//!         }
//!     }
//!     for e in asks {
//!         match e {
//!             ServerEvent::Stt(r) => server.stt_result(r.request, Ok("Hello".into()), now).unwrap(),
//!             ServerEvent::Llm(r) => {
//!                 server.llm_chunk(r.request, "Hi", now).unwrap();
//!                 server.llm_chunk(r.request, " there!", now).unwrap();
//!                 server.llm_done(r.request, now).unwrap();
//!             }
//!             ServerEvent::Tts(r) => {
//!                 server.tts_chunk(r.request, "pcm", 24000, &[0u8; 480], now).unwrap();
//!                 server.tts_done(r.request, now).unwrap();
//!             }
//!             _ => {} // sessions, data-channel copies, errors: for logs
//!         }
//!     }
//! }
//! assert_eq!(sent, ["ready", "speech-start", "speech-end", "transcript", "llm-chunk",
//!                   "llm-chunk", "llm", "tts-start", "tts-chunk", "tts-complete"]);
//! ```
//!
//! # Limits
//!
//! Every collection a peer can grow is bounded ([`Limits`]):
//!
//! | limit | default | beyond it |
//! |---|---|---|
//! | `max_connections` | 1,024 | `error RATE_LIMITED`, close 1013 `server-full` (no `ready`) |
//! | `max_sessions` | 1,024 | the least recently active disconnected session is evicted; if all are connected, refused as above |
//! | `max_message_bytes` | 8 MiB | `error INVALID_MESSAGE`, checked before parsing |
//! | `max_segment_bytes` | 3,840,000 (2 min at 16 kHz) | the speech segment ends there (`speech-end`) |
//! | `max_queued_turns` | 4 | `error RATE_LIMITED`, the utterance is dropped |
//! | `max_queued_attachments` | 8 | `error RATE_LIMITED`, the extra attachments are dropped |
//! | `max_history` | 100 entries | the oldest entries are dropped |
//! | `max_reply_bytes` | 64 KiB | the turn fails with `LLM_ERROR` |
//! | `max_transcript_bytes` | 16 KiB | the turn fails with `STT_ERROR` |
//! | `max_expired_remembered` | 1,024 ids | older expired ids answer `SESSION_NOT_FOUND` |
//! | `max_tool_rounds` | 4 | the turn fails with `PLAYBOOK_ERROR` |
//! | `max_tool_calls_per_round` | 8 | the turn fails with `PLAYBOOK_ERROR` |
//! | `message_rate` | 50/s, bursts of 100, per connection | dropped unread; the first of a run gets `error RATE_LIMITED` |
//! | `byte_rate` | 1 MiB/s, bursts of 16 MiB, per connection | as `message_rate` |
//! | `max_tts_bytes` | 6 MiB less 1 KiB | with [`ServerConfig::streaming_tts`] off: the turn fails with `TTS_ERROR` |
//! | [`VadConfig::min_sample_rate`]..[`VadConfig::max_sample_rate`] | 8 kHz to 384 kHz | `error VAD_ERROR` |
//! | [`ServerConfig::heartbeat_timeout`] | 45 s | close 1008 `heartbeat-timeout` |
//! | [`ServerConfig::session_ttl`] | 30 min | the session is dropped (`SESSION_EXPIRED` afterwards) |
//! | [`ProviderTimeouts`] | STT 30 s, LLM 60 s, TTS 30 s, tool 30 s (idle) | `*_TIMEOUT` (tools: `TOOL_ERROR`) |
//!
//! # Spec decisions
//!
//! Each is pinned by the test named after it (in `tests/`).
//!
//! 1. **`ready` is sent inside `handle_connect`**, so nothing a client sends can be processed
//!    before it; the id is a UUID from the injected [`IdGen`](agentwire_core::IdGen).
//!    `iceServers` is omitted when none are configured; `mode` is always `"pipeline"` (core
//!    1.3.0's `ready.mode`: this machine runs STT → LLM → TTS, as the real backend says it
//!    does). (`ready_comes_first_with_id_version_ice_servers_and_mode`,
//!    `ready_omits_ice_servers_when_none_are_configured`, `messages_before_ready_and_after_close_are_handled_in_order`)
//! 2. **`pong` echoes `ping.timestamp` exactly, meaning its JSON text byte for byte**
//!    ([`Timestamp`] keeps the number's text and never converts it to a float and back), so
//!    the client reads back the very double it sent: `5.5e299` stays `5.5e299` (not
//!    `5.4999999999999995e299`), `-0` stays `-0`, `1e-320` (subnormal), `0.1`, `1.50` and
//!    integers beyond 2^53 or 2^64 stay as written. This holds whatever serde_json features the
//!    build unifies (without `float_roundtrip`, many decimals do not parse to the closest
//!    double). Any JSON number whose value is a finite double is accepted; one beyond the
//!    double range (`1e400`, `Infinity` to JavaScript, which would echo `null`) is
//!    `INVALID_MESSAGE`. [`Timestamp::as_f64`] is the closest double. Numbers this crate holds
//!    as JSON values (tool-call `arguments`, `backendData`, ...) are doubles: the crate turns
//!    on serde_json's `float_roundtrip` itself, so each parses to the closest double and is
//!    written back unchanged (`122222222222222222223` reads as `1.2222222222222223e20`, and
//!    writes and reads back as that same double), whatever other crates of a build enable.
//!    (`pong_echoes_the_timestamp_exactly`, `client_messages_round_trip`, the
//!    `llmrtc_decode` seeds `crash_ping_timestamp_5_5e299.bin` and
//!    `crash_tool_arguments_float_1_2e20.bin`)
//! 3. **Only `ping` resets the heartbeat**, as the spec words it ("no ping for 45 s"); the
//!    close is 1008 `heartbeat-timeout`, and the session stays for a reconnect.
//!    (`no_ping_for_45_s_closes_and_pings_keep_it_open`)
//! 4. **The session TTL runs while disconnected**, from the later of the last frame and the
//!    disconnect. (`a_session_expires_30_minutes_after_its_last_activity`)
//! 5. **Reconnect success** moves the connection to the recovered session: the ack's
//!    `sessionId` is the recovered id (remember it for the next reconnect), the session made
//!    at connect is discarded, and `historyRecovered` is `true`. Failure (the 1.1.0 behaviour,
//!    INTEROP.md): `success:false, historyRecovered:false, sessionId:<current ready.id>`, then
//!    `error SESSION_NOT_FOUND` or, for an id that expired (remembered, bounded),
//!    `SESSION_EXPIRED`. A session still held by another connection is taken from it (that
//!    connection is closed 1000 `session-moved`). Reconnecting to one's own id succeeds.
//!    (`reconnect_with_a_known_id_recovers_the_history`,
//!    `reconnect_with_an_unknown_id_fails_with_the_current_id_and_session_not_found`,
//!    `reconnect_with_an_expired_id_says_session_expired`,
//!    `reconnect_takes_a_session_from_a_connection_still_holding_it`)
//! 6. **Barge-in order is `tts-cancelled`, then `speech-start`** (INTEROP.md; the spec's
//!    diagram shows the reverse). Barge-in is speech while TTS plays (from `tts-start` to
//!    `tts-complete`); speech during STT or the LLM queues a new turn instead.
//!    (`barge_in_sends_tts_cancelled_then_speech_start_and_drops_the_turn`,
//!    `speech_while_the_llm_thinks_is_no_barge_in_and_waits_its_turn`)
//! 7. **Turns are serialized per session**: the next utterance's STT request is made after
//!    the previous turn's `tts-complete` (or failure). (`the_next_turn_starts_only_after_tts_complete`)
//! 8. **Each `audio` message is a recording**: by default the end of a message ends speech
//!    still going on ([`VadConfig::end_of_message_ends_speech`]); a message in which the VAD
//!    hears no speech produces nothing; stereo is mixed down; a new sample rate ends the old
//!    stream. (`silence_starts_no_turn_and_stereo_is_mixed_down`)
//! 9. **WAV**: PCM (format 1, or extensible with the PCM subformat), 16-bit, 1 or 2
//!    channels, any positive rate, consistent block alignment; anything else is
//!    `INVALID_AUDIO_FORMAT`. A `data` size beyond the file (streaming writers) is cut to what
//!    is present. Bad base64 is `AUDIO_PROCESSING_ERROR`. (`bad_wav_is_invalid_audio_format`,
//!    `bad_base64_is_audio_processing_error`, `huge_audio_is_refused_before_parsing_and_memory_stays_bounded`)
//! 10. **The LLM stream holds one chunk back** so that the last `llm-chunk` carries
//!     `done: true` (the spec's example); a reply without chunks sends `{content:"", done:true}`;
//!     `llm` always follows; an empty reply skips TTS. A failed stream is closed with
//!     `done: true` before the `LLM_*` error, and no `llm` is sent.
//!     (`a_whole_turn_sends_the_spec_sequence`, `an_llm_reply_without_chunks_still_closes_the_stream_and_skips_tts`,
//!     `provider_failures_become_their_error_codes`)
//! 11. **Every `tts-start` is closed exactly once**, by `tts-complete` (also after a TTS
//!     error, which comes first) or `tts-cancelled` (barge-in, or a `reconnect` replacing the
//!     session). `tts-start` is sent when TTS is requested. (`provider_failures_become_their_error_codes`,
//!     the `llmrtc_server` fuzz target)
//! 12. **An empty transcript ends the turn** after `transcript`, without an LLM call.
//!     (`speech_while_the_llm_thinks_is_no_barge_in_and_waits_its_turn`)
//! 13. **Attachments** (from `attachments` and from `audio.attachments`) queue for the next
//!     speech segment, in arrival order, and go with its LLM request.
//!     (`attachments_queue_for_the_next_turn_only`, `too_many_attachments_are_rate_limited_and_dropped`)
//! 14. **Unknown types are ignored** (spec "Compatibility Notes"), including server types sent
//!     by a client, and reported as [`ServerEvent::Ignored`]; malformed messages (not JSON, no
//!     string `type`, bad fields of a known type, oversize) get `error INVALID_MESSAGE` and
//!     the connection stays. (`errors_for_bad_messages_keep_the_connection_and_unknown_types_are_ignored`,
//!     `unknown_types_are_ignored_silently`, `garbage_frames_are_invalid_message_and_the_connection_stays`)
//! 15. **Payload messages go to both channels**: every type but `ready`, `pong`, `signal` and
//!     `reconnect-ack` is also emitted as [`ServerEvent::DataChannel`] while the application
//!     reports the channel open ([`channel_of`]). (`payload_messages_are_copied_to_the_data_channel_and_signalling_is_not`,
//!     `signalling_is_websocket_only_and_payload_goes_to_both_channels`)
//! 16. **WebRTC is the application's**: without [`ServerConfig::webrtc`] an `offer` gets
//!     `WEBRTC_UNAVAILABLE` (the reference without WebRTC support); with it, the SDP goes out
//!     as [`ServerEvent::Offer`] and back with [`LlmrtcServer::signal`], opaque.
//!     (`offers_are_webrtc_unavailable_unless_the_application_answers_them`)
//! 17. **Playbook**: stages, tools and transitions as JSON ([`Playbook`]); a keyword
//!     transition is checked against the user's transcript before the LLM is asked
//!     (`keyword_match`); a tool's success fires its `tool_result` transition after
//!     `tool-call-end`; text streamed before a tool call is flushed (`done:false`) before
//!     `tool-call-start`; the LLM is asked again with the tool results (bounded rounds). A tool
//!     the stage lacks, a failing or timed-out tool: `tool-call-end{error}` then
//!     `error TOOL_ERROR`; too many rounds or calls: `PLAYBOOK_ERROR`. Call ids ([`CallId`]) are
//!     `call_<n>`. (`playbook_tool_calls_announce_start_end_and_move_the_stage`,
//!     `playbook_keywords_move_the_stage_before_the_llm_is_asked`,
//!     `tool_failures_and_unknown_tools_are_tool_error_and_runaway_rounds_playbook_error`)
//! 18. **Provider timeouts are idle times** restarted by progress (partial transcripts,
//!     chunks); on expiry the request is withdrawn ([`ServerEvent::Cancel`]) and the turn fails
//!     with the `*_TIMEOUT` code. A disconnect abandons the turn (requests cancelled, nothing
//!     sent) but keeps the history. (`provider_failures_become_their_error_codes`,
//!     `every_deadline_fires_and_then_nothing_is_left`)
//! 19. **Over the session limit**, the least recently active disconnected session is evicted
//!     (and later reconnects to it say `SESSION_EXPIRED`); with none to evict the connection
//!     is refused. (`history_and_sessions_are_bounded`)
//! 20. **`durationMs` and `protocolVersion` are integers** (`u64`, `u32`); `tool-call-end`'s
//!     `result: null` decodes as a present `null`. (`every_fixture_decodes_and_re_encodes_to_the_same_json`)
//! 21. **Decoding is one pass** when `type` is the first key (every reference peer writes it
//!     first, and so do we); otherwise a skipping pass finds `type` and a second pass decodes,
//!     so field order never changes the result. (`type_may_come_last_and_unknown_types_are_distinct`,
//!     `client_messages_round_trip`)
//! 22. **The audio fast path**: [`ClientMessageRef::decode`] (what the server uses) borrows
//!     `audio.data`, and recognizes the exact `{"type":"audio","data":"..."}` that clients
//!     write by a scan for a quote, backslash or control byte instead of a JSON string parse;
//!     any other shape (attachments, another order, escapes, whitespace) goes through the
//!     general decoder with the same result. (`the_audio_fast_path_agrees_with_the_general_decoder`,
//!     `the_borrowed_decode_borrows_audio_data_and_agrees_with_the_owned_one`, the
//!     `llmrtc_decode` fuzz target)
//! 23. **core 1.3.0's additions are typed as `protocol.d.ts` has them** (newer than the spec
//!     copy): `assistant-transcript{text, isFinal}`, `usage{inputTokens, outputTokens,
//!     audioInputTokens?, audioOutputTokens?, cachedTokens?}` (token counts are `u64`, as
//!     `durationMs` is), `mode-changed{mode}`, `ready.mode?`, and the codes `REALTIME_ERROR`
//!     and `BUDGET_EXCEEDED`. [`SessionMode`] is open like [`ErrorCode`]: a mode other than
//!     `pipeline`/`realtime` is kept, never a decode error, so a newer server's `ready` is not
//!     refused. The three messages are payload messages (both channels, [`channel_of`]). This
//!     server sends none of them but `ready.mode`; the client surfaces them as
//!     [`ClientEvent::Message`] and tracks the mode ([`LlmrtcClient::mode`]).
//!     (`every_fixture_decodes_and_re_encodes_to_the_same_json`,
//!     `fields_land_where_the_spec_puts_them`,
//!     `core_1_3_shapes_refuse_wrong_field_types_and_keep_unknown_modes`,
//!     `all_twenty_error_codes_decode_as_known`,
//!     `core_1_3_messages_surface_as_events_and_mode_follows_mode_changed`)
//! 24. **The non-streaming `tts` is a server setting**, [`ServerConfig::streaming_tts`]
//!     (default on, as the real backend's `streamingTTS`; the spec names no client
//!     capability, and the real web client plays either). Off, the reply's audio goes out
//!     whole in one `tts` between `tts-start` and `tts-complete`, where the real backend
//!     puts it too; [`TtsRequest::streaming`] tells the provider. Chunks a provider streams
//!     anyway are gathered (bounded by `max_tts_bytes`), and PCM is sent as
//!     `format: "wav"`, since `tts` has no `sampleRate`; a reply whose chunks change format
//!     or rate, or pass the limit, fails with `TTS_ERROR`.
//!     (`with_streaming_tts_off_the_reply_goes_out_whole_in_one_tts_message`,
//!     `whole_tts_audio_over_the_limit_or_mixed_fails_the_turn_with_tts_error`)
//! 25. **Partial transcripts** ([`LlmrtcServer::stt_partial`]) go out at once as
//!     `transcript{isFinal:false}` (as the real backend forwards a streaming STT's interim
//!     results), each restarting the STT idle timeout; only the final text is remembered
//!     and asks the LLM; a partial after the final one is refused.
//!     (`partial_transcripts_go_out_before_the_final_one_and_keep_stt_alive`)
//! 26. **`RATE_LIMITED` per connection**: every message costs one token of
//!     [`Limits::message_rate`] and `ceil(bytes / 1 KiB)` of [`Limits::byte_rate`] (capped
//!     at its burst), checked before the message is parsed. Audio is held to the byte rate
//!     because the bytes, not the messages, cost the work (base64, WAV, VAD): a client may
//!     send a 2-minute recording at once, but not 8 MiB messages back to back. A message
//!     over either rate is dropped unread and is no activity (no heartbeat, no session
//!     touch); the first of a run of drops gets `error RATE_LIMITED`, the rest are counted
//!     ([`LlmrtcServer::dropped_messages`]) until a message is let through, so a flood gets
//!     one reply. (`a_ping_flood_gets_its_burst_then_one_rate_limited_and_silent_drops`,
//!     `big_audio_messages_are_held_to_the_byte_rate`,
//!     `a_message_bigger_than_the_byte_burst_passes_a_full_bucket`,
//!     `a_dropped_message_is_not_read_and_not_activity`)
//! 27. **`VAD_ERROR`** is a well-formed WAV at a rate the detector does not run at
//!     ([`VadConfig::min_sample_rate`], [`VadConfig::max_sample_rate`]); a WAV the parser
//!     does not take stays `INVALID_AUDIO_FORMAT` and bad base64 `AUDIO_PROCESSING_ERROR`
//!     (decision 9). (`audio_at_a_rate_the_vad_does_not_run_at_is_vad_error`)
//! 28. **`INTERNAL_ERROR`** is a failure around a provider rather than of it
//!     ([`ProviderError::Internal`]: a panic, a dead worker), for STT, the LLM and TTS
//!     alike, and the turn ends as for the provider's own failure; the reference server
//!     reports a provider that panics this way. A playbook tool's failures, a panic
//!     included, stay `TOOL_ERROR` (its `tool-call-end.error` tells the LLM). (`a_failure_around_a_provider_is_internal_error_whichever_provider`)
//! 29. **Track audio is one stream into the same turns**: PCM from the inbound WebRTC track
//!     ([`LlmrtcServer::track_audio`], any rate the VAD runs at) is resampled to
//!     [`ServerConfig::track_sample_rate`] (16 kHz, what the real backend gives its STT) and
//!     goes through a VAD of its own that runs across pieces: only silence ends speech
//!     (decision 8's end-of-message rule is for `audio` messages). `speech-start` and
//!     `speech-end` are sent as for `audio` (the real backend sends them only for its
//!     track); utterances queue with those of `audio` messages (decision 7), and barge-in
//!     is decision 6's: speech while TTS plays, including a track's playout. The real backend
//!     also aborts a turn still in STT or the LLM when track speech starts; we keep the
//!     spec's barge-in (an interruption of playback) for both sources, so a pause for
//!     breath does not throw away an answer being prepared.
//!     (`track_audio_is_resampled_and_makes_one_turn_with_speech_start_and_end`,
//!     `track_sample_rate_is_a_setting_checked_against_the_vad`,
//!     `track_audio_is_refused_for_unknown_connections_and_unsupported_rates`)
//! 30. **TTS on the outbound track replaces `tts-chunk`, not the signalling**: while the
//!     application reports a track ([`LlmrtcServer::set_audio_track`]), PCM replies (`pcm`
//!     chunks, an odd byte carried to the next chunk; `wav` files at their own rate) are
//!     emitted as [`ServerEvent::TrackAudio`], whatever [`ServerConfig::streaming_tts`]
//!     says (the track is a stream); formats the track cannot carry (`mp3`, ...) still go
//!     as `tts-chunk`/`tts`. `tts-start` comes first, as the real backend sends it; a
//!     reply's end is [`ServerEvent::TrackAudioEnd`] (`cancelled: false`), barge-in or an
//!     abandoned turn `cancelled: true` with `tts-cancelled`.
//!     (`with_an_audio_track_tts_goes_on_the_track_and_tts_complete_waits_for_playout`,
//!     `audio_the_track_cannot_carry_goes_as_messages_and_no_track_means_messages`,
//!     `barge_in_while_tts_streams_to_the_track_cancels_the_request_and_the_audio`,
//!     `a_disconnect_during_playout_drops_the_track_audio_and_the_turn`)
//! 31. **`tts-complete` on the track waits for the audio to play**: the real backend sends
//!     it after feeding its audio source in real time, so it means "playback finished".
//!     The machine counts the track's playout in real time from the first piece (samples ÷
//!     rate, back to back) and sends `tts-complete`, ending the turn, when the last sample
//!     is due; until then the reply is still playing and speech is barge-in.
//!     (`with_an_audio_track_tts_goes_on_the_track_and_tts_complete_waits_for_playout`,
//!     `barge_in_on_the_track_during_playout_cancels_the_track_audio`)
//!
//! # Feature flags
//!
//! - `fuzzing`: `#[doc(hidden)] pub mod fuzzing`, the bodies of the cargo-fuzz targets
//!   `llmrtc_decode`, `llmrtc_wav`, `llmrtc_server` and `llmrtc_client` (replayed by
//!   `tests/fuzz_seeds.rs`).
//!
//! The crate has no WebRTC stack and no codec: `llmrtc-webrtc` (str0m, Opus) drives the
//! WebRTC hooks above.
#![forbid(unsafe_code)]
#![deny(missing_docs)]

mod client;
mod codec;
mod config;
mod error;
mod event;
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub mod fuzzing;
mod ids;
pub mod message;
pub mod playbook;
mod provider;
pub mod resample;
mod server;
pub mod vad;
pub mod wav;

pub use client::{
    ClientEvent, ConnectionState, FixedJitter, IgnoreReason, JitterSource, LlmrtcClient,
    LossReason, SplitMix64, CLOSE_CLIENT, CLOSE_DROPPED, CLOSE_PONG_TIMEOUT, CLOSE_READY_TIMEOUT,
};
pub use codec::{
    decode_base64, encode_audio, encode_tts, encode_tts_chunk, write_base64, Decoded,
    DEFAULT_MAX_MESSAGE_BYTES,
};
pub use config::{ClientConfig, Limits, ProviderTimeouts, Reconnection, ServerConfig};
pub use error::{ClientCommandError, CommandError, ConfigError, DecodeError, ProtocolError};
pub use event::{ServerEvent, TurnOutcome};
pub use ids::{CallId, RequestId, SessionId};
pub use message::{
    channel_of, AssistantTranscript, Attachments, Audio, AudioRef, Channel, ClientMessage,
    ClientMessageRef, ErrorCode, ErrorMessage, IceServer, IceUrls, Llm, LlmChunk, ModeChanged,
    Offer, Ping, Pong, RawJson, Ready, Reconnect, ReconnectAck, ServerMessage, SessionMode, Signal,
    StageChange, Timestamp, ToolCallEnd, ToolCallStart, Transcript, Tts, TtsChunk, Usage,
    VisionAttachment, PROTOCOL_VERSION,
};
pub use playbook::{Playbook, PlaybookError, Stage, ToolSpec, Transition, Trigger};
pub use provider::{
    ChatMessage, ChatRole, LlmRequest, ProviderError, ProviderKind, SpeechSegment, StageContext,
    SttRequest, ToolCallRequest, ToolRecord, TtsRequest,
};
pub use resample::Resampler;
pub use server::texts::{self, CLOSE_FULL, CLOSE_HEARTBEAT, CLOSE_SESSION_MOVED};
pub use server::LlmrtcServer;
pub use vad::{Vad, VadConfig, VadEvent};
pub use wav::{parse_wav, write_wav, Wav, WavError, WavFormat};

/// The README's example, compiled and run as a doctest.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
