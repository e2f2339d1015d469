//! The configuration file: every key parsed and applied (one test per section, and a file with
//! environment and flag overrides served by the gateway over 127.0.0.1), bad files
//! rejected with the key and the line, environment and `--set` overrides beating the file,
//! and the commented defaults file parsing back to the defaults.

use std::collections::BTreeSet;
use std::net::IpAddr;
use std::path::PathBuf;
use std::time::Duration;

use agentwire::tokio::ServerConfig;
use agentwire_server::config::{defaults_toml, Config, ConfigError, Protocol, Source};

/// Every key path (`bus.max_message_bytes`, `listener[0].name`) of a TOML table, arrays of
/// tables entered, other arrays as one key.
fn key_paths(prefix: &str, table: &toml::Table, out: &mut BTreeSet<String>) {
    for (k, v) in table {
        let path = if prefix.is_empty() {
            k.clone()
        } else {
            format!("{prefix}.{k}")
        };
        match v {
            toml::Value::Table(t) => key_paths(&path, t, out),
            toml::Value::Array(items)
                if items.iter().all(toml::Value::is_table) && !items.is_empty() =>
            {
                for (i, item) in items.iter().enumerate() {
                    if let toml::Value::Table(t) = item {
                        key_paths(&format!("{path}[{i}]"), t, out);
                    }
                }
            }
            _ => {
                out.insert(path);
            }
        }
    }
}

fn table_of(config: &Config) -> toml::Table {
    toml::Table::try_from(config).expect("a config serializes")
}

fn parse(text: &str) -> Config {
    Config::from_toml_str(text, "test.toml").unwrap_or_else(|e| panic!("{e}"))
}

fn reject(text: &str) -> ConfigError {
    match Config::from_toml_str(text, "bad.toml") {
        Ok(c) => panic!("accepted: {c:?}"),
        Err(e) => e,
    }
}

/// `section`'s text sets every key of the section (a key added to the section without a
/// test value makes this fail), and each to a value other than its default.
fn assert_sets_every_key(section: &str, text: &str) {
    let defaults = table_of(&Config::default());
    let default_section = defaults[section].as_table().expect("a table");
    let parsed: toml::Table = text.parse().expect("valid TOML");
    let given = parsed[section].as_table().expect("the section");
    let mut want = BTreeSet::new();
    key_paths("", default_section, &mut want);
    let mut got = BTreeSet::new();
    key_paths("", given, &mut got);
    let missing: Vec<_> = want.difference(&got).collect();
    assert!(
        missing.is_empty(),
        "[{section}] test leaves out {missing:?}"
    );
    let config = parse(text);
    let set = table_of(&config);
    let set_section = set[section].as_table().expect("a table");
    for key in &want {
        let lookup = |t: &toml::Table| -> toml::Value {
            let mut v = toml::Value::Table(t.clone());
            for seg in key.split('.') {
                v = v.get(seg).cloned().expect("present");
            }
            v
        };
        assert_ne!(
            lookup(default_section),
            lookup(set_section),
            "[{section}] {key} is set to its default in the test"
        );
    }
}

#[test]
fn the_defaults_file_parses_back_to_the_defaults() {
    let text = defaults_toml();
    let parsed = Config::from_toml_str(&text, "defaults").expect("the defaults parse");
    assert_eq!(parsed, Config::default());
    assert_eq!(
        parsed.to_toml_string().expect("toml"),
        Config::default().to_toml_string().expect("toml")
    );
}

#[test]
fn every_key_of_the_configuration_is_in_the_defaults_file() {
    // Every key with a value by default is set in the file.
    let mut want = BTreeSet::new();
    key_paths("", &table_of(&Config::default()), &mut want);
    let mut got = BTreeSet::new();
    key_paths("", &defaults_toml().parse().expect("TOML"), &mut got);
    let missing: Vec<_> = want.difference(&got).collect();
    assert!(missing.is_empty(), "not in the defaults file: {missing:?}");
    assert!(want.len() > 200, "{} keys", want.len());
    // Keys absent by default (secrets, files, TLS) are there as comments.
    let text = defaults_toml();
    for key in [
        "server_id",
        "runner_secret",
        "runner_secrets_file",
        "admin_token",
        "api_keys_file",
        "hmac_secret",
        "playbook",
        "transcript",
        "cert",
        "key",
        "[listener.tls]",
    ] {
        let commented = if key.starts_with('[') {
            format!("# {key}")
        } else {
            format!("# {key} = ")
        };
        assert!(
            text.contains(&commented),
            "defaults file lacks {commented:?}"
        );
    }
    // Every key has a comment line right above it.
    let lines: Vec<&str> = text.lines().collect();
    for (i, line) in lines.iter().enumerate() {
        if line.contains(" = ") && !line.starts_with('#') {
            assert!(
                i > 0 && lines[i - 1].starts_with('#'),
                "no comment above {line:?}"
            );
        }
    }
}

#[test]
fn no_file_serves_all_five_protocols_on_one_listener_by_path() {
    let config = Config::resolve(None, Vec::new(), &[]).expect("defaults");
    assert_eq!(config, Config::default());
    assert_eq!(config.listener.len(), 1);
    assert_eq!(config.listener[0].name, "main");
    assert_eq!(config.listener[0].listen, "127.0.0.1:8080");
    assert_eq!(config.admin.listen, "127.0.0.1:9090");
    let paths: Vec<(Protocol, &str, &str, bool)> = config
        .endpoints()
        .iter()
        .map(|e| (e.protocol, e.listener, e.path, e.enabled))
        .collect();
    assert_eq!(
        paths,
        [
            (Protocol::Bus, "main", "/bus", true),
            (Protocol::Chopsticks, "main", "/chopsticks", true),
            (Protocol::Mcpw, "main", "/ws", true),
            (Protocol::Llmrtc, "main", "/llmrtc", true),
            (Protocol::Relay, "main", "/agent/ws", true),
        ]
    );
    assert_eq!(config.relay.log_dir, PathBuf::from("./agentwire-logs"));
}

#[test]
fn admin_log_and_keys_sections_are_applied() {
    let config = parse(
        r#"
[admin]
enabled = false
listen = "0.0.0.0:9191"
[log]
format = "json"
level = "debug,agentwire_tokio=trace"
[keys]
overlap_secs = 60
reload_secs = 2
"#,
    );
    assert!(!config.admin.enabled);
    assert_eq!(config.admin.listen, "0.0.0.0:9191");
    assert_eq!(config.log.format, agentwire_server::config::LogFormat::Json);
    assert_eq!(config.log.level, "debug,agentwire_tokio=trace");
    assert_eq!(config.keys.overlap_secs, 60);
    assert_eq!(config.keys.reload_secs, 2);
}

#[test]
fn listener_section_is_applied() {
    let text = r#"
[[listener]]
name = "edge"
listen = "0.0.0.0:443"
allow = ["10.0.0.0/8", "192.168.1.7", "::1", "fd00::/8"]
handshake_timeout_ms = 2500
max_pending_handshakes = 100
max_pending_handshakes_per_address = 4
max_header_bytes = 8192
[listener.tls]
cert = "/etc/agentwire/cert.pem"
key = "/etc/agentwire/key.pem"
reload_secs = 3

[bus]
listener = "edge"
[chopsticks]
listener = "edge"
[mcpw]
listener = "edge"
[llmrtc]
listener = "edge"
[relay]
listener = "edge"
"#;
    let config = parse(text);
    let l = config.listener("edge").expect("the listener");
    assert_eq!(l.socket_addr().expect("address").port(), 443);
    let allow: Vec<String> = l
        .allowlist()
        .expect("allowlist")
        .iter()
        .map(ToString::to_string)
        .collect();
    assert_eq!(
        allow,
        ["10.0.0.0/8", "192.168.1.7/32", "::1/128", "fd00::/8"]
    );
    let tls = l.tls.as_ref().expect("tls");
    assert_eq!(tls.cert, PathBuf::from("/etc/agentwire/cert.pem"));
    assert_eq!(tls.key, PathBuf::from("/etc/agentwire/key.pem"));
    assert_eq!(tls.reload_secs, 3);
    let lc = l.listener_config();
    assert_eq!(lc.handshake_timeout, Duration::from_millis(2500));
    assert_eq!(lc.max_pending_handshakes, 100);
    assert_eq!(lc.max_pending_handshakes_per_address, 4);
    assert_eq!(lc.max_header_bytes, 8192);
    assert!(config.endpoints().iter().all(|e| e.listener == "edge"));
}

#[test]
fn bus_section_is_applied() {
    let text = r#"
[[listener]]
name = "main"
[[listener]]
name = "side"
listen = "127.0.0.1:8081"

[bus]
enabled = false
listener = "side"
path = "/events"
server_id = "bus-one"
server_name = "my-bus"
server_version = "9.9.9"
topics = ["a:*"]
match_mode = "prefix"
payload = "any"
delivery_timeout_ms = 1500
initialize_timeout_secs = 0
max_in_flight_per_subscriber = 1
deliver_to_publisher = false
drop_report_interval_ms = 250
max_connections = 11
max_message_bytes = 12
max_batch_len = 13
max_subscriptions_per_conn = 14
max_topic_bytes = 15
max_pending_per_subscriber = 16
max_pending_per_publisher = 17
max_backlog_per_publisher = 18
max_payload_depth = 19
[bus.transport]
max_connections_per_address = 3
ping_interval_secs = 0
pong_timeout_secs = 7
send_queue_frames = 9
send_queue_bytes = 4096
close_timeout_secs = 1
read_buffer_bytes = 2048
"#;
    assert_sets_every_key("bus", text);
    let config = parse(text);
    assert!(!config.bus.enabled);
    assert_eq!(config.bus.path, "/events");
    let b = config.bus.bus_config();
    assert_eq!(b.server_id.as_deref(), Some("bus-one"));
    assert_eq!(b.server_name, "my-bus");
    assert_eq!(b.server_version, "9.9.9");
    assert_eq!(b.topics, ["a:*"]);
    assert_eq!(
        b.match_mode,
        agentwire::jsonrpc_bus::MatchMode::GlobOrPrefix
    );
    assert_eq!(b.payload, agentwire::jsonrpc_bus::PayloadRule::Any);
    assert_eq!(b.delivery_timeout, Duration::from_millis(1500));
    assert_eq!(b.initialize_timeout, None);
    assert_eq!(b.max_in_flight_per_subscriber, 1);
    assert!(!b.deliver_to_publisher);
    assert_eq!(b.drop_report_interval, Duration::from_millis(250));
    let l = &b.limits;
    assert_eq!(
        [
            l.max_connections,
            l.max_message_bytes,
            l.max_batch_len,
            l.max_subscriptions_per_conn,
            l.max_topic_bytes,
            l.max_pending_per_subscriber,
            l.max_pending_per_publisher,
            l.max_backlog_per_publisher,
            l.max_payload_depth
        ],
        [11, 12, 13, 14, 15, 16, 17, 18, 19]
    );
    let t = config.bus.transport.apply(ServerConfig::default());
    assert_eq!(t.max_connections_per_address, 3);
    assert_eq!(t.limits.ping_interval, None);
    assert_eq!(t.limits.pong_timeout, Duration::from_secs(7));
    assert_eq!(t.limits.send_queue_frames, 9);
    assert_eq!(t.limits.send_queue_bytes, 4096);
    assert_eq!(t.limits.close_timeout, Duration::from_secs(1));
    assert_eq!(t.limits.read_buffer_size, 2048);
}

#[test]
fn chopsticks_section_is_applied() {
    let text = r#"
[[listener]]
name = "main"
[[listener]]
name = "side"
listen = "127.0.0.1:8081"

[chopsticks]
enabled = false
listener = "side"
path = "/cs"
runner_secret = "s3cret"
runner_secrets_file = "/run/secrets/runner"
supported_versions = ["1.0.0", "1.1.0"]
hello_timeout_secs = 2
request_timeout_secs = 3
stale_after_secs = 4
actor_user_id = "user-1"
admin_token = "tok"
max_frame_bytes = 5
max_connections_per_ip = 6
max_connections = 7
max_messages_per_second = 8
max_pending_per_agent = 9
max_guilds_per_agent = 10
max_sessions = 11
[chopsticks.transport]
max_connections_per_address = 3
ping_interval_secs = 5
pong_timeout_secs = 7
send_queue_frames = 9
send_queue_bytes = 4096
close_timeout_secs = 1
read_buffer_bytes = 2048
"#;
    assert_sets_every_key("chopsticks", text);
    let config = parse(text);
    let s = &config.chopsticks;
    assert_eq!(s.path, "/cs");
    assert_eq!(
        s.runner_secrets_file.as_deref(),
        Some(std::path::Path::new("/run/secrets/runner"))
    );
    let c = s.controller_config();
    assert_eq!(c.runner_secrets, ["s3cret"]);
    assert_eq!(
        c.supported_versions.iter().collect::<Vec<_>>(),
        ["1.0.0", "1.1.0"]
    );
    assert_eq!(c.hello_timeout, Duration::from_secs(2));
    assert_eq!(c.request_timeout, Duration::from_secs(3));
    assert_eq!(c.stale_after, Duration::from_secs(4));
    let l = &c.limits;
    assert_eq!(
        [
            l.max_frame_bytes,
            l.max_connections_per_ip,
            l.max_connections,
            l.max_messages_per_second as usize,
            l.max_pending_per_agent,
            l.max_guilds_per_agent,
            l.max_sessions
        ],
        [5, 6, 7, 8, 9, 10, 11]
    );
    let actor = s.actor();
    assert_eq!(actor.user_id, "user-1");
    assert_eq!(actor.admin_token.as_deref(), Some("tok"));
    let t = s.transport.apply(ServerConfig::default());
    assert_eq!(t.limits.ping_interval, Some(Duration::from_secs(5)));
}

#[test]
fn mcpw_section_is_applied() {
    let text = r#"
[[listener]]
name = "main"
[[listener]]
name = "side"
listen = "127.0.0.1:8081"

[mcpw]
enabled = false
listener = "side"
path = "/mcp"
api_keys = ["k1", "k2"]
api_keys_file = "/run/secrets/api-keys"
require_subprotocol = false
protocol_versions = [1, 2]
connect_rate_per_minute = 30
connect_burst = 5
rate_per_minute = 0
rate_burst = 7
hmac_secret = "mac"
compression = "entropy"
batch_linger_ms = 5
heartbeat_secs = 10
unhealthy_after = 4
remove_after = 6
register_timeout_secs = 0
default_task_deadline_secs = 100
max_task_attempts = 5
max_shutdown_grace_secs = 60
cancel_grace_secs = 9
idempotency_ttl_secs = 120
default_collaboration_timeout_secs = 11
max_collaboration_timeout_secs = 99
routing_confidence = 0.6
routing_specialty = 0.1
routing_capacity = 0.25
routing_max_alternatives = 2
max_connections = 101
max_agents = 102
max_message_bytes = 103
max_capabilities = 104
max_tasks = 105
max_collaborations = 106
max_collaborators = 107
max_id_bytes = 108
max_metric_series = 109
max_json_depth = 110
max_cancelled_tasks = 111
max_idempotency_keys = 112
max_idempotency_bytes = 113
max_stream_bytes = 114
max_streams = 115
crdt_max_keys = 201
crdt_max_counter_actors = 202
crdt_max_set_tags = 203
crdt_max_clock_actors = 204
crdt_max_ops_per_sync = 205
crdt_max_string_bytes = 206
crdt_max_origins = 207
crdt_sync_window = 208
[mcpw.transport]
max_connections_per_address = 3
ping_interval_secs = 5
pong_timeout_secs = 7
send_queue_frames = 9
send_queue_bytes = 4096
close_timeout_secs = 1
read_buffer_bytes = 2048
"#;
    assert_sets_every_key("mcpw", text);
    let config = parse(text);
    let m = &config.mcpw;
    assert_eq!(m.path, "/mcp");
    assert_eq!(
        m.api_keys_file.as_deref(),
        Some(std::path::Path::new("/run/secrets/api-keys"))
    );
    let u = m.upgrade_config();
    assert_eq!(u.api_keys, ["k1", "k2"]);
    assert!(!u.require_subprotocol);
    assert_eq!(u.protocol_versions, [1, 2]);
    assert_eq!(u.max_connections, 101);
    assert_eq!(
        u.connect_rate,
        Some(agentwire::core::Rate::per_minute(30, 5))
    );
    let o = m.orchestrator_config();
    assert_eq!(o.rate, None);
    assert!(o.hmac.is_some());
    assert_eq!(o.compression, agentwire::mcpw::CompressPolicy::SPEC_ENTROPY);
    assert_eq!(o.batch_linger, Some(Duration::from_millis(5)));
    assert_eq!(o.heartbeat_interval, Duration::from_secs(10));
    assert_eq!((o.unhealthy_after, o.remove_after), (4, 6));
    assert_eq!(o.register_timeout, None);
    assert_eq!(o.default_task_deadline, Duration::from_secs(100));
    assert_eq!(o.max_task_attempts, 5);
    assert_eq!(o.max_shutdown_grace, Duration::from_secs(60));
    assert_eq!(o.cancel_grace, Duration::from_secs(9));
    assert_eq!(o.idempotency_ttl, Duration::from_secs(120));
    assert_eq!(o.default_collaboration_timeout, Duration::from_secs(11));
    assert_eq!(o.max_collaboration_timeout, Duration::from_secs(99));
    assert_eq!(
        (
            o.routing.confidence,
            o.routing.specialty,
            o.routing.capacity,
            o.routing.max_alternatives
        ),
        (0.6, 0.1, 0.25, 2)
    );
    let l = &o.limits;
    assert_eq!(
        [
            l.max_connections,
            l.max_agents,
            l.max_message_bytes,
            l.max_capabilities,
            l.max_tasks,
            l.max_collaborations,
            l.max_collaborators,
            l.max_id_bytes,
            l.max_metric_series,
            l.max_json_depth,
            l.max_cancelled_tasks,
            l.max_idempotency_keys,
            l.max_idempotency_bytes,
            l.max_stream_bytes,
            l.max_streams
        ],
        [101, 102, 103, 104, 105, 106, 107, 108, 109, 110, 111, 112, 113, 114, 115]
    );
    let k = &o.crdt;
    assert_eq!(
        [
            k.max_keys,
            k.max_counter_actors,
            k.max_set_tags,
            k.max_clock_actors,
            k.max_ops_per_sync,
            k.max_string_bytes,
            k.max_origins,
            k.sync_window
        ],
        [201, 202, 203, 204, 205, 206, 207, 208]
    );
}

#[test]
fn llmrtc_section_is_applied() {
    let dir = std::env::temp_dir().join(format!("agentwire-config-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let transcript = dir.join("transcript.txt");
    std::fs::write(&transcript, "hello there\n").expect("write");
    let text = format!(
        r#"
[[listener]]
name = "main"
[[listener]]
name = "side"
listen = "127.0.0.1:8081"

[llmrtc]
enabled = false
listener = "side"
path = "/voice"
example_playbook = true
transcript = {transcript:?}
fast = true
streaming_tts = false
session_ttl_secs = 600
heartbeat_timeout_secs = 0
track_sample_rate = 48000
ice_servers = ["stun:stun.example.org:3478", "turn:turn.example.org,user,pass"]
webrtc = false
udp_port = 40000
public_ips = ["203.0.113.9"]
webrtc_audio = false
webrtc_connect_timeout_ms = 3000
webrtc_max_sdp_bytes = 1001
webrtc_max_peers = 1002
webrtc_offers_per_minute = 6
webrtc_offer_burst = 2
webrtc_max_datagram_bytes = 1003
webrtc_max_addrs_per_peer = 1004
webrtc_max_channel_message_bytes = 1005
webrtc_max_channel_buffered_bytes = 1006
stt_timeout_secs = 31
llm_timeout_secs = 32
tts_timeout_secs = 33
tool_timeout_secs = 34
vad_frame_ms = 10
vad_start_rms = 501
vad_end_rms = 301
vad_min_speech_ms = 61
vad_silence_ms = 501
vad_pre_roll_ms = 201
vad_end_of_message_ends_speech = false
vad_min_sample_rate = 16000
vad_max_sample_rate = 96000
max_connections = 2001
max_sessions = 2002
max_message_bytes = 2003
max_segment_bytes = 2004
max_queued_turns = 2005
max_queued_attachments = 2006
max_history = 2007
max_reply_bytes = 2008
max_transcript_bytes = 2009
max_expired_remembered = 2010
max_tool_rounds = 2011
max_tool_calls_per_round = 2012
message_rate_per_second = 20
message_burst = 40
byte_rate_kib_per_second = 512
byte_burst_kib = 4096
max_tts_bytes = 2013
[llmrtc.transport]
max_connections_per_address = 3
ping_interval_secs = 5
pong_timeout_secs = 7
send_queue_frames = 9
send_queue_bytes = 4096
close_timeout_secs = 1
read_buffer_bytes = 2048
"#
    );
    // `playbook` cannot be set beside `example_playbook`; it has its own check below.
    let mut with_playbook = text.clone();
    with_playbook = with_playbook.replace(
        "example_playbook = true",
        "example_playbook = true\nplaybook = \"p.json\"",
    );
    let e = reject(&with_playbook);
    assert_eq!(e.key(), Some("llmrtc.example_playbook"), "{e}");
    assert_sets_every_key("llmrtc", &text);
    let config = parse(&text);
    let l = &config.llmrtc;
    assert_eq!(l.path, "/voice");
    let s = l.server_config().expect("server config");
    assert!(s.playbook.is_some(), "example playbook loaded");
    assert!(!s.streaming_tts);
    assert_eq!(s.session_ttl, Duration::from_secs(600));
    assert_eq!(s.heartbeat_timeout, None);
    assert_eq!(s.track_sample_rate, 48_000);
    assert_eq!(s.ice_servers.len(), 2);
    assert_eq!(s.ice_servers[1].username.as_deref(), Some("user"));
    assert_eq!(s.ice_servers[1].credential.as_deref(), Some("pass"));
    assert_eq!(
        (
            s.timeouts.stt,
            s.timeouts.llm,
            s.timeouts.tts,
            s.timeouts.tool
        ),
        (
            Duration::from_secs(31),
            Duration::from_secs(32),
            Duration::from_secs(33),
            Duration::from_secs(34)
        )
    );
    let v = &s.vad;
    assert_eq!(
        [
            v.frame_ms,
            v.start_rms,
            v.end_rms,
            v.min_speech_ms,
            v.silence_ms,
            v.pre_roll_ms,
            v.min_sample_rate,
            v.max_sample_rate
        ],
        [10, 501, 301, 61, 501, 201, 16_000, 96_000]
    );
    assert!(!v.end_of_message_ends_speech);
    let lim = &s.limits;
    assert_eq!(
        [
            lim.max_connections,
            lim.max_sessions,
            lim.max_message_bytes,
            lim.max_segment_bytes,
            lim.max_queued_turns,
            lim.max_queued_attachments,
            lim.max_history,
            lim.max_reply_bytes,
            lim.max_transcript_bytes,
            lim.max_expired_remembered,
            lim.max_tool_rounds,
            lim.max_tool_calls_per_round,
            lim.max_tts_bytes
        ],
        [2001, 2002, 2003, 2004, 2005, 2006, 2007, 2008, 2009, 2010, 2011, 2012, 2013]
    );
    assert_eq!(lim.message_rate, agentwire::core::Rate::per_second(20, 40));
    assert_eq!(lim.byte_rate, agentwire::core::Rate::per_second(512, 4096));
    assert!(l.pacing().token < agentwire_server::llmrtc::server_app::Pacing::real_time().token);
    l.stt().expect("the transcript file is read");
    assert!(l.webrtc_options().is_none(), "webrtc = false");
    // The WebRTC settings apply when WebRTC is on.
    let mut on = l.clone();
    on.webrtc = true;
    let w = on.webrtc_options().expect("webrtc on");
    assert_eq!(w.udp_port, 40_000);
    assert_eq!(w.public_ips, ["203.0.113.9".parse::<IpAddr>().expect("ip")]);
    assert!(!w.config.audio);
    assert_eq!(w.config.connect_timeout, Duration::from_millis(3000));
    let wl = &w.config.limits;
    assert_eq!(
        [
            wl.max_sdp_bytes,
            wl.max_peers,
            wl.max_datagram_bytes,
            wl.max_addrs_per_peer,
            wl.max_channel_message_bytes,
            wl.max_channel_buffered_bytes
        ],
        [1001, 1002, 1003, 1004, 1005, 1006]
    );
    assert_eq!(wl.offer_rate, agentwire::core::Rate::per_minute(6, 2));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn relay_section_is_applied() {
    let text = r#"
[[listener]]
name = "main"
[[listener]]
name = "side"
listen = "127.0.0.1:8081"

[relay]
enabled = false
listener = "side"
path = "/relay"
log_dir = "/var/log/agentwire"
sync = "every-record"
log_records = false
hello = false
presence = false
allow_missing_version = true
join_timeout_secs = 0
pending_timeout_secs = 5
max_connections = 301
max_sessions = 302
max_agents_per_session = 303
max_message_bytes = 304
max_pending_per_agent = 305
max_id_bytes = 306
max_session_id_bytes = 307
max_name_bytes = 308
rate_per_second = 0
rate_burst = 9
max_json_depth = 309
max_log_bytes_per_session = 0
[relay.transport]
max_connections_per_address = 3
ping_interval_secs = 5
pong_timeout_secs = 7
send_queue_frames = 9
send_queue_bytes = 4096
close_timeout_secs = 1
read_buffer_bytes = 2048
"#;
    assert_sets_every_key("relay", text);
    let config = parse(text);
    let r = &config.relay;
    assert_eq!(r.log_dir, PathBuf::from("/var/log/agentwire"));
    assert_eq!(
        r.sync_policy(),
        agentwire_server::relay::log_writer::SyncPolicy::EveryRecord
    );
    let c = r.relay_config();
    assert_eq!(c.path.as_deref(), Some("/relay"));
    assert!(!c.log_records && !c.hello && !c.presence);
    assert!(c.allow_missing_version);
    assert_eq!(c.join_timeout, None);
    assert_eq!(c.pending_timeout, Some(Duration::from_secs(5)));
    let l = &c.limits;
    assert_eq!(
        [
            l.max_connections,
            l.max_sessions,
            l.max_agents_per_session,
            l.max_message_bytes,
            l.max_pending_per_agent,
            l.max_id_bytes,
            l.max_session_id_bytes,
            l.max_name_bytes,
            l.max_json_depth
        ],
        [301, 302, 303, 304, 305, 306, 307, 308, 309]
    );
    assert_eq!(l.rate, None);
    assert_eq!(l.max_log_bytes_per_session, None);
    // A rate and a log cap when set.
    let c =
        parse("[relay]\nrate_per_second = 10\nrate_burst = 20\nmax_log_bytes_per_session = 1000\n")
            .relay
            .relay_config();
    assert_eq!(
        c.limits.rate,
        Some(agentwire::agent_relay::RateLimit {
            per_second: 10,
            burst: 20
        })
    );
    assert_eq!(c.limits.max_log_bytes_per_session, Some(1000));
}

// ---- bad files: rejected with the key and the line ----

fn assert_at(e: &ConfigError, key: &str, line: usize) {
    assert_eq!(e.key(), Some(key), "{e}");
    assert_eq!(e.line(), Some(line), "{e}");
    let shown = e.to_string();
    assert!(
        shown.starts_with(&format!("bad.toml:{line}: key `{key}`: ")),
        "{shown}"
    );
}

#[test]
fn an_unknown_key_is_an_error_naming_it_and_its_line() {
    let e = reject("[bus]\npath = \"/bus\"\nmax_mesage_bytes = 10\n");
    assert_at(&e, "bus.max_mesage_bytes", 3);
    assert!(e.to_string().contains("unknown key"), "{e}");
    let e = reject("[admin]\nlisten = \"127.0.0.1:1\"\n\n[nonsense]\nx = 1\n");
    assert_at(&e, "nonsense", 4);
    let e = reject("[[listener]]\nname = \"a\"\nport = 80\n");
    assert_at(&e, "listener[0].port", 3);
}

#[test]
fn a_value_of_the_wrong_type_is_an_error_naming_the_key_and_its_line() {
    let e = reject("# a comment\n[bus]\nmax_message_bytes = \"big\"\n");
    assert_at(&e, "bus.max_message_bytes", 3);
    assert!(e.to_string().contains("big"), "{e}");
    let e = reject("[relay]\nsync = \"sometimes\"\n");
    assert_at(&e, "relay.sync", 2);
    let e = reject("[mcpw]\nmax_streams = -1\n");
    assert_at(&e, "mcpw.max_streams", 2);
    // Dotted keys and inline tables are located the same way.
    let e = reject("[admin]\nenabled = true\n\nbus.max_message_bytes = \"big\"\n");
    assert_at(&e, "admin.bus", 4);
    let e = reject("bus.path = \"/b\"\nbus.max_message_bytes = \"big\"\n");
    assert_at(&e, "bus.max_message_bytes", 2);
    let e = reject("relay = { path = \"/r\" }\nbus = { path = \"/b\", max_batch_len = true }\n");
    assert_at(&e, "bus.max_batch_len", 2);
    let e = reject("# sections are tables\nbus = 3\n");
    assert_at(&e, "bus", 2);
    assert!(e.to_string().ends_with("expected a table"), "{e}");
    let e = reject("[listener]\nname = \"a\"\n");
    assert_at(&e, "listener", 1);
}

#[test]
fn a_syntax_error_names_its_line() {
    let e = reject("[bus]\npath = \"/bus\"\nmax_message_bytes = = 3\n");
    assert_eq!(e.line(), Some(3), "{e}");
    assert!(e.to_string().starts_with("bad.toml:3: "), "{e}");
}

#[test]
fn a_protocol_on_a_listener_that_does_not_exist_is_an_error() {
    let e = reject("[[listener]]\nname = \"main\"\n\n[relay]\nlistener = \"b\"\n");
    assert_at(&e, "relay.listener", 5);
    assert!(e.to_string().contains("\"b\""), "{e}");
    // A disabled protocol may name any listener.
    let c = parse(
        "[[listener]]\nname = \"a\"\n[bus]\nlistener = \"a\"\n[chopsticks]\nlistener = \"a\"\n\
         [mcpw]\nlistener = \"a\"\n[llmrtc]\nlistener = \"a\"\n[relay]\nenabled = false\nlistener = \"b\"\n",
    );
    assert!(!c.relay.enabled);
}

#[test]
fn two_protocols_on_one_path_of_one_listener_are_an_error() {
    let e = reject("[bus]\npath = \"/x\"\n\n[relay]\npath = \"/x\"\n");
    assert_at(&e, "relay.path", 5);
    assert!(e.to_string().contains("[bus]"), "{e}");
    // The same path on two listeners is fine.
    parse(
        "[[listener]]\nname = \"main\"\n[[listener]]\nname = \"b\"\nlisten = \"127.0.0.1:8081\"\n\
         [bus]\npath = \"/x\"\n[relay]\nlistener = \"b\"\npath = \"/x\"\n",
    );
}

#[test]
fn a_path_that_is_not_a_url_path_is_an_error() {
    for bad in ["bus", "/a b", "/a?b", "/a#b", ""] {
        let e = reject(&format!("[bus]\npath = {bad:?}\n"));
        assert_at(&e, "bus.path", 2);
    }
    parse("[bus]\npath = \"/v1/bus-events_2~x\"\n");
}

#[test]
fn duplicate_listener_names_are_an_error() {
    let e = reject(
        "[[listener]]\nname = \"a\"\n\n[[listener]]\nname = \"a\"\nlisten = \"127.0.0.1:1\"\n",
    );
    assert_at(&e, "listener[1].name", 5);
}

#[test]
fn a_bad_address_is_an_error() {
    let e = reject("[[listener]]\nname = \"main\"\nlisten = \"localhost\"\n");
    assert_at(&e, "listener[0].listen", 3);
    let e = reject("[admin]\nlisten = \"127.0.0.1\"\n");
    assert_at(&e, "admin.listen", 2);
}

#[test]
fn a_bad_allowlist_entry_is_an_error() {
    let e = reject(
        "[[listener]]\nname = \"main\"\nallow = [\n  \"10.0.0.0/8\",\n  \"10.0.0.0/33\",\n]\n",
    );
    assert_eq!(e.key(), Some("listener[0].allow[1]"), "{e}");
    assert_eq!(e.line(), Some(5), "{e}");
    let e = reject("[[listener]]\nname = \"main\"\nallow = [\"not-an-ip\"]\n");
    assert_eq!(e.key(), Some("listener[0].allow[0]"), "{e}");
    assert_eq!(e.line(), Some(3), "{e}");
}

#[test]
fn tls_with_only_a_certificate_is_an_error() {
    let e = reject("[[listener]]\nname = \"main\"\n\n[listener.tls]\ncert = \"c.pem\"\n");
    assert_eq!(e.key(), Some("listener[0].tls"), "{e}");
    assert_eq!(e.line(), Some(4), "{e}");
    assert!(e.to_string().contains("key"), "{e}");
}

#[test]
fn a_zero_limit_is_an_error() {
    let e = reject("[bus]\nmax_connections = 0\n");
    assert_at(&e, "bus.max_connections", 2);
    assert!(e.to_string().contains("greater than 0"), "{e}");
    let e = reject("[relay.transport]\nsend_queue_frames = 0\n");
    assert_at(&e, "relay.transport.send_queue_frames", 2);
    let e = reject("[bus.transport]\nread_buffer_bytes = 0\n");
    assert_at(&e, "bus.transport.read_buffer_bytes", 2);
}

#[test]
fn an_unreadable_file_is_an_error_naming_it() {
    let missing = std::path::Path::new("/nonexistent/agentwire.toml");
    let e = Config::load(missing).expect_err("no such file");
    assert!(matches!(e, ConfigError::Read { .. }), "{e:?}");
    assert!(e.to_string().contains("/nonexistent/agentwire.toml"), "{e}");
}

// ---- overrides ----

fn env(vars: &[(&str, &str)]) -> Vec<(String, String)> {
    vars.iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

fn file(text: &str) -> (PathBuf, tempfile_path::Guard) {
    tempfile_path::write(text)
}

/// A file in the temp directory, removed when the guard drops.
mod tempfile_path {
    use std::path::PathBuf;
    use std::sync::atomic::{AtomicUsize, Ordering};

    pub(crate) struct Guard(PathBuf);

    impl Drop for Guard {
        fn drop(&mut self) {
            let _ = std::fs::remove_file(&self.0);
        }
    }

    pub(crate) fn write(text: &str) -> (PathBuf, Guard) {
        static N: AtomicUsize = AtomicUsize::new(0);
        let path = std::env::temp_dir().join(format!(
            "agentwire-config-{}-{}.toml",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::write(&path, text).expect("write the file");
        (path.clone(), Guard(path))
    }
}

#[test]
fn environment_beats_the_file_and_flags_beat_both() {
    let (path, _guard) =
        file("[bus]\nmax_message_bytes = 1000\npath = \"/file\"\n[log]\nlevel = \"warn\"\n");
    let from_file = Config::resolve(Some(&path), Vec::new(), &[]).expect("file");
    assert_eq!(from_file.bus.max_message_bytes, 1000);
    let c = Config::resolve(
        Some(&path),
        env(&[
            ("AGENTWIRE__BUS__MAX_MESSAGE_BYTES", "2000"),
            ("AGENTWIRE__BUS__PATH", "/env"),
            ("AGENTWIRE__LOG__FORMAT", "json"),
            ("AGENTWIRE_PYTHON", "/usr/bin/python3"),
            ("HOME", "/root"),
        ]),
        &["bus.path=/flag".to_owned(), "relay.hello=false".to_owned()],
    )
    .expect("resolved");
    assert_eq!(c.bus.max_message_bytes, 2000, "env beats the file");
    assert_eq!(c.bus.path, "/flag", "the flag beats env and file");
    assert_eq!(c.log.format, agentwire_server::config::LogFormat::Json);
    assert_eq!(c.log.level, "warn", "untouched keys keep the file's value");
    assert!(!c.relay.hello);
}

#[test]
fn overrides_apply_without_a_file_and_reach_the_default_listener() {
    let c = Config::resolve(
        None,
        env(&[("AGENTWIRE__LISTENER__0__LISTEN", "0.0.0.0:9000")]),
        &[
            "listener[0].allow=[\"10.0.0.0/8\"]".to_owned(),
            "mcpw.api_keys=[\"a\", \"b\"]".to_owned(),
        ],
    )
    .expect("resolved");
    assert_eq!(c.listener.len(), 1);
    assert_eq!(c.listener[0].name, "main");
    assert_eq!(c.listener[0].listen, "0.0.0.0:9000");
    assert_eq!(c.listener[0].allow, ["10.0.0.0/8"]);
    assert_eq!(c.mcpw.api_keys, ["a", "b"]);
}

#[test]
fn a_bad_override_names_the_variable_or_flag() {
    let e = Config::resolve(
        None,
        env(&[("AGENTWIRE__BUS__MAX_MESSAGE_BYTES", "lots")]),
        &[],
    )
    .expect_err("not a number");
    assert_eq!(e.key(), Some("bus.max_message_bytes"), "{e}");
    assert_eq!(
        e.source_of_setting(),
        Some(&Source::Env {
            name: "AGENTWIRE__BUS__MAX_MESSAGE_BYTES".to_owned()
        })
    );
    assert!(
        e.to_string().starts_with(
            "environment variable AGENTWIRE__BUS__MAX_MESSAGE_BYTES: key `bus.max_message_bytes`"
        ),
        "{e}"
    );
    let e = Config::resolve(None, Vec::new(), &["bus.nope=1".to_owned()]).expect_err("unknown");
    assert!(
        e.to_string()
            .starts_with("--set bus.nope=1: key `bus.nope`: unknown key"),
        "{e}"
    );
    let e = Config::resolve(None, Vec::new(), &["relay.listener=elsewhere".to_owned()])
        .expect_err("no such listener");
    assert!(
        e.to_string()
            .starts_with("--set relay.listener=elsewhere: key `relay.listener`"),
        "{e}"
    );
    let e = Config::resolve(None, Vec::new(), &["bus.path".to_owned()]).expect_err("no value");
    assert!(matches!(e, ConfigError::Override { .. }), "{e:?}");
    let e = Config::resolve(
        None,
        Vec::new(),
        &["listener.5.listen=1.2.3.4:5".to_owned()],
    )
    .expect_err("no such listener index");
    assert!(e.to_string().contains("past the end"), "{e}");
}

#[test]
fn a_file_error_after_overrides_still_names_the_file_line() {
    let (path, _guard) = file("[bus]\n\nmax_batch_len = 0\n");
    let e = Config::resolve(Some(&path), env(&[("AGENTWIRE__BUS__PATH", "/b")]), &[])
        .expect_err("zero");
    assert_eq!(e.key(), Some("bus.max_batch_len"), "{e}");
    assert_eq!(e.line(), Some(3), "{e}");
    assert!(
        e.to_string()
            .starts_with(&format!("{}:3: key `bus.max_batch_len`", path.display())),
        "{e}"
    );
}

#[test]
fn two_listeners_on_one_address_are_an_error() {
    let e = reject(
        "[[listener]]\nname = \"main\"\nlisten = \"127.0.0.1:7000\"\n\n[[listener]]\nname = \"b\"\nlisten = \"127.0.0.1:7000\"\n",
    );
    assert_at(&e, "listener[1].listen", 7);
    let e = reject("[admin]\nlisten = \"127.0.0.1:8080\"\n");
    assert_at(&e, "admin.listen", 2);
    // Port 0 (any free port) twice is fine.
    parse(
        "[admin]\nlisten = \"127.0.0.1:0\"\n[[listener]]\nname = \"main\"\nlisten = \"127.0.0.1:0\"\n\
         [[listener]]\nname = \"b\"\nlisten = \"127.0.0.1:0\"\n",
    );
}

#[test]
fn llmrtc_files_and_rates_are_checked_before_anything_binds() {
    let e = reject("[llmrtc]\nfast = true\nplaybook = \"/nonexistent/playbook.json\"\n");
    assert_at(&e, "llmrtc.playbook", 3);
    let e = reject("[llmrtc]\ntranscript = \"/nonexistent/transcript.txt\"\n");
    assert_at(&e, "llmrtc.transcript", 2);
    let e = reject("[llmrtc]\n\nice_servers = [\"http://example.org\"]\n");
    assert_eq!(e.key(), Some("llmrtc.ice_servers[0]"), "{e}");
    assert_eq!(e.line(), Some(3), "{e}");
    let e = reject("[llmrtc]\ntrack_sample_rate = 4000\n");
    assert_at(&e, "llmrtc.track_sample_rate", 2);
}

#[test]
fn a_file_larger_than_any_configuration_is_refused_unread() {
    let (path, _guard) = file(&format!(
        "# {}\n",
        "x".repeat(usize::try_from(agentwire_server::config::MAX_FILE_BYTES).expect("fits"))
    ));
    let e = Config::load(&path).expect_err("too large");
    assert!(matches!(e, ConfigError::TooLarge { .. }), "{e:?}");
}

#[test]
fn deeply_nested_values_are_an_error_not_a_crash() {
    for text in [
        format!("x = {}1{}", "[".repeat(100_000), "]".repeat(100_000)),
        format!("x = {}1{}", "{a=".repeat(100_000), "}".repeat(100_000)),
    ] {
        reject(&text);
    }
    let set = format!("bus.topics={}1{}", "[".repeat(100_000), "]".repeat(100_000));
    Config::resolve(None, Vec::new(), &[set]).expect_err("not a list of strings");
}

#[test]
fn the_process_environment_gives_only_agentwire_variables() {
    std::env::set_var("AGENTWIRE__RELAY__HELLO", "false");
    let vars = agentwire_server::config::environment();
    assert!(vars
        .iter()
        .all(|(name, _)| name.starts_with(agentwire_server::config::ENV_PREFIX)));
    let c = Config::resolve(None, vars, &[]).expect("resolved");
    assert!(!c.relay.hello);
}

// ---- end to end: the settings reach the servers ----

mod e2e {
    use std::net::SocketAddr;
    use std::time::Duration;

    use agentwire_server::config::{Config, Protocol};
    use agentwire_server::gateway::Gateway;
    use futures_util::{SinkExt, StreamExt};
    use serde_json::{json, Value};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpStream;
    use tokio_tungstenite::tungstenite::client::IntoClientRequest;
    use tokio_tungstenite::tungstenite::http::{HeaderName, HeaderValue};
    use tokio_tungstenite::tungstenite::Message;

    type Ws = tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<TcpStream>>;

    const STEP: Duration = Duration::from_secs(20);

    async fn within<T>(what: &str, fut: impl std::future::Future<Output = T>) -> T {
        tokio::time::timeout(STEP, fut)
            .await
            .unwrap_or_else(|_| panic!("timed out: {what}"))
    }

    /// Sends `request` on a fresh TCP connection and reads the whole answer.
    async fn http(addr: SocketAddr, request: &str) -> String {
        let mut tcp = within("connect", TcpStream::connect(addr))
            .await
            .expect("connect");
        tcp.write_all(request.as_bytes()).await.expect("write");
        let mut answer = Vec::new();
        within("answer", tcp.read_to_end(&mut answer))
            .await
            .expect("read");
        String::from_utf8_lossy(&answer).into_owned()
    }

    fn get(path: &str) -> String {
        format!("GET {path} HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n")
    }

    /// The next text message as JSON.
    async fn next_json(ws: &mut Ws) -> Value {
        loop {
            match within("message", ws.next()).await {
                Some(Ok(Message::Text(t))) => return serde_json::from_str(&t).expect("json"),
                Some(Ok(Message::Ping(_) | Message::Pong(_))) => {}
                other => panic!("expected a text message, got {other:?}"),
            }
        }
    }

    async fn connect(url: &str, headers: &[(&str, &str)]) -> Result<Ws, String> {
        let mut req = url.into_client_request().expect("request");
        for (name, value) in headers {
            req.headers_mut().insert(
                HeaderName::from_bytes(name.as_bytes()).expect("header name"),
                HeaderValue::from_str(value).expect("header value"),
            );
        }
        within(url, tokio_tungstenite::connect_async(req))
            .await
            .map(|(ws, _)| ws)
            .map_err(|e| e.to_string())
    }

    /// A configuration from a file, the environment and `--set` flags, served by the
    /// gateway: each setting is seen over real sockets on 127.0.0.1.
    #[tokio::test]
    async fn settings_from_the_file_environment_and_flags_reach_the_servers() {
        let dir = std::env::temp_dir().join(format!("agentwire-config-e2e-{}", std::process::id()));
        let log_dir = dir.join("study-logs");
        let text = format!(
            r#"
[admin]
listen = "127.0.0.1:0"

[[listener]]
name = "main"
listen = "127.0.0.1:0"

[[listener]]
name = "side"
listen = "127.0.0.1:0"

[bus]
path = "/events"
max_message_bytes = 2048
server_id = "bus-from-file"

[chopsticks]
enabled = false

[mcpw]
listener = "side"
path = "/mcp"

[llmrtc]
enabled = false

[relay]
log_dir = {log_dir:?}

[relay.transport]
max_connections_per_address = 1
"#,
            log_dir = log_dir.display().to_string()
        );
        let (path, _guard) = super::file(&text);
        let config = Config::resolve(
            Some(&path),
            vec![(
                "AGENTWIRE__BUS__SERVER_ID".to_owned(),
                "bus-from-env".to_owned(),
            )],
            &[r#"mcpw.api_keys=["key-from-flag"]"#.to_owned()],
        )
        .expect("config");
        let gateway = within("start", Gateway::start(&config))
            .await
            .expect("gateway");
        let main = gateway.local_addr("main").expect("main listener");
        let side = gateway.local_addr("side").expect("side listener");

        // Bus at its configured path, with the environment's server id and the file's
        // message limit.
        let bus_url = gateway.url(Protocol::Bus).expect("bus served");
        assert_eq!(bus_url, format!("ws://{main}/events"));
        let mut bus = connect(&bus_url, &[]).await.expect("bus connects");
        bus.send(Message::text(
            json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                   "params": {"clientId": "cfg", "clientInfo": {"name": "t", "version": "1"}}})
            .to_string(),
        ))
        .await
        .expect("send");
        let init = next_json(&mut bus).await;
        assert_eq!(init["result"]["serverId"], "bus-from-env", "{init}");
        let big = "x".repeat(3000);
        bus.send(Message::text(
            json!({"jsonrpc": "2.0", "id": 2, "method": "ping", "params": {"pad": big}})
                .to_string(),
        ))
        .await
        .expect("send");
        let refused = next_json(&mut bus).await;
        assert_eq!(refused["error"]["code"], -32005, "{refused}");
        assert!(http(main, &get("/bus")).await.starts_with("HTTP/1.1 404"));

        // Chopsticks and llmrtc are off: nothing at their default paths.
        assert!(gateway.url(Protocol::Chopsticks).is_none());
        assert!(gateway.url(Protocol::Llmrtc).is_none());
        assert!(http(main, &get("/chopsticks"))
            .await
            .starts_with("HTTP/1.1 404"));
        assert!(http(main, &get("/llmrtc"))
            .await
            .starts_with("HTTP/1.1 404"));

        // MCPW on the side listener at its configured path, with the flag's API key.
        let mcpw_url = gateway.url(Protocol::Mcpw).expect("mcpw served");
        assert_eq!(mcpw_url, format!("ws://{side}/mcp"));
        let without = connect(&mcpw_url, &[("sec-websocket-protocol", "mcp.v1")])
            .await
            .expect_err("no API key");
        assert!(without.contains("401"), "{without}");
        let with = connect(
            &mcpw_url,
            &[
                ("sec-websocket-protocol", "mcp.v1"),
                ("authorization", "Bearer key-from-flag"),
            ],
        )
        .await
        .expect("the flag's key is accepted");
        drop(with);

        // Relay at the spec's path: one connection per address, study logs in log_dir.
        let relay_url = gateway.url(Protocol::Relay).expect("relay served");
        assert_eq!(relay_url, format!("ws://{main}/agent/ws"));
        let mut first = connect(&relay_url, &[])
            .await
            .expect("first relay connection");
        let hello = next_json(&mut first).await;
        assert_eq!(hello["type"], "relay.hello", "{hello}");
        let mut second = connect(&relay_url, &[])
            .await
            .expect("upgraded, then closed");
        let closed = loop {
            match within("close", second.next()).await {
                Some(Ok(Message::Close(frame))) => break frame.map(|f| u16::from(f.code)),
                Some(Ok(_)) => {}
                other => panic!("expected a close frame, got {other:?}"),
            }
        };
        assert_eq!(closed, Some(1013));
        assert!(log_dir.is_dir(), "the relay's study-log folder is created");

        drop(first);
        drop(bus);
        within("shutdown", gateway.shutdown()).await;
        let _ = std::fs::remove_dir_all(&dir);
    }
}
