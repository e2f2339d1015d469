//! [`validate`]: the checks types cannot express.

use std::collections::BTreeMap;
use std::net::SocketAddr;

use super::error::ConfigError;
use super::transport::Transport;
use super::Config;

/// Fails on the first problem, naming its key (the caller adds where it was set).
pub(crate) fn validate(c: &Config) -> Result<(), ConfigError> {
    listeners(c)?;
    if c.admin.enabled {
        let admin = address("admin.listen", &c.admin.listen)?;
        if let Some(i) = c
            .listener
            .iter()
            .position(|l| admin.port() != 0 && l.listen.parse() == Ok(admin))
        {
            return Err(ConfigError::invalid(
                "admin.listen",
                format!("{admin} is also the address of listener[{i}]"),
            ));
        }
    }
    tracing_subscriber::EnvFilter::try_new(&c.log.level)
        .map_err(|e| ConfigError::invalid("log.level", format!("not a tracing filter: {e}")))?;
    nonzero("keys.reload_secs", c.keys.reload_secs)?;
    endpoints(c)?;
    bus(c)?;
    chopsticks(c)?;
    mcpw(c)?;
    llmrtc(c)?;
    relay(c)
}

fn listeners(c: &Config) -> Result<(), ConfigError> {
    let mut names: BTreeMap<&str, usize> = BTreeMap::new();
    for (i, l) in c.listener.iter().enumerate() {
        let key = |k: &str| format!("listener[{i}].{k}");
        if l.name.trim().is_empty() {
            return Err(ConfigError::invalid(key("name"), "must not be empty"));
        }
        if let Some(first) = names.insert(&l.name, i) {
            return Err(ConfigError::invalid(
                key("name"),
                format!(
                    "listener name {:?} is also the name of listener[{first}]",
                    l.name
                ),
            ));
        }
        let addr = address(&key("listen"), &l.listen)?;
        if let Some(first) = c.listener[..i]
            .iter()
            .position(|other| addr.port() != 0 && other.listen.parse() == Ok(addr))
        {
            return Err(ConfigError::invalid(
                key("listen"),
                format!("{addr} is also the address of listener[{first}]"),
            ));
        }
        l.allowlist()
            .map_err(|e| prefixed(e, &format!("listener[{i}].")))?;
        nonzero(&key("handshake_timeout_ms"), l.handshake_timeout_ms)?;
        nonzero(&key("max_pending_handshakes"), l.max_pending_handshakes)?;
        nonzero(
            &key("max_pending_handshakes_per_address"),
            l.max_pending_handshakes_per_address,
        )?;
        nonzero(&key("max_header_bytes"), l.max_header_bytes)?;
        if let Some(tls) = &l.tls {
            if tls.cert.as_os_str().is_empty() {
                return Err(ConfigError::invalid(
                    key("tls.cert"),
                    "must name a PEM file",
                ));
            }
            if tls.key.as_os_str().is_empty() {
                return Err(ConfigError::invalid(key("tls.key"), "must name a PEM file"));
            }
            nonzero(&key("tls.reload_secs"), tls.reload_secs)?;
        }
    }
    Ok(())
}

/// Every enabled protocol on an existing listener, on a path of its own there.
fn endpoints(c: &Config) -> Result<(), ConfigError> {
    let mut taken: BTreeMap<(&str, &str), &str> = BTreeMap::new();
    for e in c.endpoints() {
        let section = e.protocol.name();
        let url_safe = e
            .path
            .bytes()
            .all(|b| b.is_ascii_graphic() && b != b'?' && b != b'#');
        if !e.path.starts_with('/') || !url_safe {
            return Err(ConfigError::invalid(
                format!("{section}.path"),
                format!(
                    "{:?} is not a URL path (it starts with `/` and holds no spaces, `?` or `#`)",
                    e.path
                ),
            ));
        }
        transport(section, e.transport)?;
        if !e.enabled {
            continue;
        }
        if c.listener(e.listener).is_none() {
            let known: Vec<&str> = c.listener.iter().map(|l| l.name.as_str()).collect();
            return Err(ConfigError::invalid(
                format!("{section}.listener"),
                format!(
                    "no [[listener]] is named {:?} (listeners: {})",
                    e.listener,
                    if known.is_empty() {
                        "none".to_owned()
                    } else {
                        known.join(", ")
                    }
                ),
            ));
        }
        if let Some(other) = taken.insert((e.listener, e.path), section) {
            return Err(ConfigError::invalid(
                format!("{section}.path"),
                format!(
                    "{:?} on listener {:?} is already the path of [{other}]",
                    e.path, e.listener
                ),
            ));
        }
    }
    Ok(())
}

fn transport(section: &str, t: &Transport) -> Result<(), ConfigError> {
    let key = |k: &str| format!("{section}.transport.{k}");
    nonzero(
        &key("max_connections_per_address"),
        t.max_connections_per_address,
    )?;
    nonzero(&key("pong_timeout_secs"), t.pong_timeout_secs)?;
    nonzero(&key("send_queue_frames"), t.send_queue_frames)?;
    nonzero(&key("send_queue_bytes"), t.send_queue_bytes)?;
    nonzero(&key("read_buffer_bytes"), t.read_buffer_bytes)?;
    Ok(())
}

fn bus(c: &Config) -> Result<(), ConfigError> {
    let b = &c.bus;
    for (k, v) in [
        ("delivery_timeout_ms", b.delivery_timeout_ms),
        ("drop_report_interval_ms", b.drop_report_interval_ms),
    ] {
        nonzero(&format!("bus.{k}"), v)?;
    }
    for (k, v) in [
        (
            "max_in_flight_per_subscriber",
            b.max_in_flight_per_subscriber,
        ),
        ("max_connections", b.max_connections),
        ("max_message_bytes", b.max_message_bytes),
        ("max_batch_len", b.max_batch_len),
        ("max_subscriptions_per_conn", b.max_subscriptions_per_conn),
        ("max_topic_bytes", b.max_topic_bytes),
        ("max_pending_per_subscriber", b.max_pending_per_subscriber),
        ("max_pending_per_publisher", b.max_pending_per_publisher),
        ("max_backlog_per_publisher", b.max_backlog_per_publisher),
        ("max_payload_depth", b.max_payload_depth),
    ] {
        nonzero(&format!("bus.{k}"), v)?;
    }
    if b.server_id.as_deref().is_some_and(str::is_empty) {
        return Err(ConfigError::invalid("bus.server_id", "must not be empty"));
    }
    Ok(())
}

fn chopsticks(c: &Config) -> Result<(), ConfigError> {
    let s = &c.chopsticks;
    if s.supported_versions.is_empty() {
        return Err(ConfigError::invalid(
            "chopsticks.supported_versions",
            "must list at least one version",
        ));
    }
    for (k, v) in [
        ("hello_timeout_secs", s.hello_timeout_secs),
        ("request_timeout_secs", s.request_timeout_secs),
        ("stale_after_secs", s.stale_after_secs),
        (
            "max_messages_per_second",
            u64::from(s.max_messages_per_second),
        ),
    ] {
        nonzero(&format!("chopsticks.{k}"), v)?;
    }
    for (k, v) in [
        ("max_frame_bytes", s.max_frame_bytes),
        ("max_connections_per_ip", s.max_connections_per_ip),
        ("max_connections", s.max_connections),
        ("max_pending_per_agent", s.max_pending_per_agent),
        ("max_guilds_per_agent", s.max_guilds_per_agent),
        ("max_sessions", s.max_sessions),
    ] {
        nonzero(&format!("chopsticks.{k}"), v)?;
    }
    if s.runner_secret.as_deref().is_some_and(str::is_empty) {
        return Err(ConfigError::invalid(
            "chopsticks.runner_secret",
            "must not be empty (leave it out to check no secret)",
        ));
    }
    Ok(())
}

fn mcpw(c: &Config) -> Result<(), ConfigError> {
    let m = &c.mcpw;
    if m.protocol_versions.is_empty() {
        return Err(ConfigError::invalid(
            "mcpw.protocol_versions",
            "must list at least one version",
        ));
    }
    if let Some(i) = m.api_keys.iter().position(|k| k.trim().is_empty()) {
        return Err(ConfigError::invalid(
            format!("mcpw.api_keys[{i}]"),
            "must not be empty",
        ));
    }
    for (k, v) in [
        ("heartbeat_secs", m.heartbeat_secs),
        ("unhealthy_after", u64::from(m.unhealthy_after)),
        ("remove_after", u64::from(m.remove_after)),
        ("default_task_deadline_secs", m.default_task_deadline_secs),
        ("max_task_attempts", u64::from(m.max_task_attempts)),
        ("idempotency_ttl_secs", m.idempotency_ttl_secs),
        (
            "default_collaboration_timeout_secs",
            m.default_collaboration_timeout_secs,
        ),
        (
            "max_collaboration_timeout_secs",
            m.max_collaboration_timeout_secs,
        ),
    ] {
        nonzero(&format!("mcpw.{k}"), v)?;
    }
    if m.remove_after < m.unhealthy_after {
        return Err(ConfigError::invalid(
            "mcpw.remove_after",
            format!(
                "{} is below unhealthy_after ({}): an agent is unhealthy before it is removed",
                m.remove_after, m.unhealthy_after
            ),
        ));
    }
    for (k, v) in [
        ("routing_confidence", m.routing_confidence),
        ("routing_specialty", m.routing_specialty),
        ("routing_capacity", m.routing_capacity),
    ] {
        if !(v.is_finite() && v >= 0.0) {
            return Err(ConfigError::invalid(
                format!("mcpw.{k}"),
                format!("{v} is not a weight (a finite number, 0 or more)"),
            ));
        }
    }
    for (k, v) in [
        ("max_connections", m.max_connections),
        ("max_agents", m.max_agents),
        ("max_message_bytes", m.max_message_bytes),
        ("max_capabilities", m.max_capabilities),
        ("max_tasks", m.max_tasks),
        ("max_collaborations", m.max_collaborations),
        ("max_collaborators", m.max_collaborators),
        ("max_id_bytes", m.max_id_bytes),
        ("max_metric_series", m.max_metric_series),
        ("max_json_depth", m.max_json_depth),
        ("max_cancelled_tasks", m.max_cancelled_tasks),
        ("max_idempotency_keys", m.max_idempotency_keys),
        ("max_idempotency_bytes", m.max_idempotency_bytes),
        ("max_stream_bytes", m.max_stream_bytes),
        ("max_streams", m.max_streams),
        ("crdt_max_keys", m.crdt_max_keys),
        ("crdt_max_counter_actors", m.crdt_max_counter_actors),
        ("crdt_max_set_tags", m.crdt_max_set_tags),
        ("crdt_max_clock_actors", m.crdt_max_clock_actors),
        ("crdt_max_ops_per_sync", m.crdt_max_ops_per_sync),
        ("crdt_max_string_bytes", m.crdt_max_string_bytes),
        ("crdt_max_origins", m.crdt_max_origins),
        ("crdt_sync_window", m.crdt_sync_window),
    ] {
        nonzero(&format!("mcpw.{k}"), v)?;
    }
    if m.hmac_secret.as_deref().is_some_and(str::is_empty) {
        return Err(ConfigError::invalid(
            "mcpw.hmac_secret",
            "must not be empty (leave it out to turn HMAC off)",
        ));
    }
    Ok(())
}

fn llmrtc(c: &Config) -> Result<(), ConfigError> {
    let l = &c.llmrtc;
    if l.playbook.is_some() && l.example_playbook {
        return Err(ConfigError::invalid(
            "llmrtc.example_playbook",
            "cannot be true when `playbook` names a file (choose one)",
        ));
    }
    // Reads the playbook and the transcript, so a bad one is found before anything binds.
    l.server_config()?;
    l.stt()?;
    for (k, v) in [
        ("session_ttl_secs", l.session_ttl_secs),
        ("webrtc_connect_timeout_ms", l.webrtc_connect_timeout_ms),
        ("stt_timeout_secs", l.stt_timeout_secs),
        ("llm_timeout_secs", l.llm_timeout_secs),
        ("tts_timeout_secs", l.tts_timeout_secs),
        ("tool_timeout_secs", l.tool_timeout_secs),
    ] {
        nonzero(&format!("llmrtc.{k}"), v)?;
    }
    for (k, v) in [
        ("track_sample_rate", l.track_sample_rate),
        ("webrtc_offers_per_minute", l.webrtc_offers_per_minute),
        ("webrtc_offer_burst", l.webrtc_offer_burst),
        ("vad_frame_ms", l.vad_frame_ms),
        ("vad_min_sample_rate", l.vad_min_sample_rate),
        ("message_rate_per_second", l.message_rate_per_second),
        ("message_burst", l.message_burst),
        ("byte_rate_kib_per_second", l.byte_rate_kib_per_second),
        ("byte_burst_kib", l.byte_burst_kib),
    ] {
        nonzero(&format!("llmrtc.{k}"), u64::from(v))?;
    }
    if !(l.vad_min_sample_rate..=l.vad_max_sample_rate).contains(&l.track_sample_rate)
        && l.vad_min_sample_rate <= l.vad_max_sample_rate
    {
        return Err(ConfigError::invalid(
            "llmrtc.track_sample_rate",
            format!(
                "{} Hz is outside vad_min_sample_rate..=vad_max_sample_rate ({}..={})",
                l.track_sample_rate, l.vad_min_sample_rate, l.vad_max_sample_rate
            ),
        ));
    }
    if l.vad_max_sample_rate < l.vad_min_sample_rate {
        return Err(ConfigError::invalid(
            "llmrtc.vad_max_sample_rate",
            format!(
                "{} is below vad_min_sample_rate ({})",
                l.vad_max_sample_rate, l.vad_min_sample_rate
            ),
        ));
    }
    for (k, v) in [
        ("webrtc_max_sdp_bytes", l.webrtc_max_sdp_bytes),
        ("webrtc_max_peers", l.webrtc_max_peers),
        ("webrtc_max_datagram_bytes", l.webrtc_max_datagram_bytes),
        ("webrtc_max_addrs_per_peer", l.webrtc_max_addrs_per_peer),
        (
            "webrtc_max_channel_message_bytes",
            l.webrtc_max_channel_message_bytes,
        ),
        (
            "webrtc_max_channel_buffered_bytes",
            l.webrtc_max_channel_buffered_bytes,
        ),
        ("max_connections", l.max_connections),
        ("max_sessions", l.max_sessions),
        ("max_message_bytes", l.max_message_bytes),
        ("max_segment_bytes", l.max_segment_bytes),
        ("max_history", l.max_history),
        ("max_reply_bytes", l.max_reply_bytes),
        ("max_transcript_bytes", l.max_transcript_bytes),
        ("max_tool_rounds", l.max_tool_rounds),
        ("max_tool_calls_per_round", l.max_tool_calls_per_round),
        ("max_tts_bytes", l.max_tts_bytes),
    ] {
        nonzero(&format!("llmrtc.{k}"), v)?;
    }
    Ok(())
}

fn relay(c: &Config) -> Result<(), ConfigError> {
    let r = &c.relay;
    if r.log_dir.as_os_str().is_empty() {
        return Err(ConfigError::invalid(
            "relay.log_dir",
            "must name a directory",
        ));
    }
    if r.rate_per_second > 0 {
        nonzero("relay.rate_burst", u64::from(r.rate_burst))?;
    }
    for (k, v) in [
        ("max_connections", r.max_connections),
        ("max_sessions", r.max_sessions),
        ("max_agents_per_session", r.max_agents_per_session),
        ("max_message_bytes", r.max_message_bytes),
        ("max_pending_per_agent", r.max_pending_per_agent),
        ("max_id_bytes", r.max_id_bytes),
        ("max_session_id_bytes", r.max_session_id_bytes),
        ("max_name_bytes", r.max_name_bytes),
        ("max_json_depth", r.max_json_depth),
    ] {
        nonzero(&format!("relay.{k}"), v)?;
    }
    Ok(())
}

/// `value` must not be zero.
fn nonzero<T: PartialEq + Default>(key: &str, value: T) -> Result<(), ConfigError> {
    if value == T::default() {
        return Err(ConfigError::invalid(key, "must be greater than 0"));
    }
    Ok(())
}

/// `value` must be an `IP:PORT` socket address.
fn address(key: &str, value: &str) -> Result<SocketAddr, ConfigError> {
    value.parse::<SocketAddr>().map_err(|_| {
        ConfigError::invalid(
            key,
            format!("{value:?} is not an IP:PORT address (e.g. 127.0.0.1:8080, [::]:8080)"),
        )
    })
}

/// `e` with `prefix` put before its key.
fn prefixed(e: ConfigError, prefix: &str) -> ConfigError {
    match e {
        ConfigError::Invalid {
            where_,
            key,
            message,
        } => ConfigError::Invalid {
            where_,
            key: format!("{prefix}{key}"),
            message,
        },
        other => other,
    }
}
