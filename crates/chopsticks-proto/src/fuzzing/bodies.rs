//! Generators: message bodies, JSON values and the small pools of ids they draw from, so
//! that arbitrary operations meet each other.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use agentwire_core::fuzzing::{json_value, maybe_set, pick, pick_or_any};
use arbitrary::Unstructured;
use serde_json::{Map, Value};

use crate::message::PROTOCOL_VERSION;

/// Operations on a machine are read from the input until it runs out, at most this many.
pub(super) const MAX_OPS: usize = 512;

/// A few agent ids, guilds and channels, so that arbitrary operations meet each other.
pub(super) const AGENT_IDS: [&str; 3] = ["agent-a", "agent-b", "agent-c"];
pub(super) const GUILDS: [&str; 3] = ["g1", "g2", "g3"];
pub(super) const CHANNELS: [&str; 2] = ["v1", "v2"];
pub(super) const OPS: [&str; 9] = [
    "play",
    "search",
    "pause",
    "queue",
    "status",
    "assistantJoin",
    "assistantStatus",
    "unknownOp",
    "",
];
const VERSION_KEYS: [&str; 4] = [
    "protocolVersion",
    "protocol_version",
    "protocolversion",
    "version",
];
pub(super) const IPS: [IpAddr; 4] = [
    IpAddr::V4(Ipv4Addr::new(127, 0, 0, 1)),
    IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1)),
    IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2)),
    IpAddr::V6(Ipv6Addr::LOCALHOST),
];

/// A subset of the guild pool (plus, rarely, an arbitrary guild).
pub(super) fn guild_list(u: &mut Unstructured<'_>) -> arbitrary::Result<Vec<Value>> {
    let mut out = Vec::new();
    for g in GUILDS {
        if u.arbitrary()? {
            out.push(Value::from(g));
        }
    }
    if u.ratio(1u8, 8u8)? {
        out.push(Value::String(u.arbitrary()?));
    }
    Ok(out)
}

/// An agent → controller message body: arbitrary bytes, or a template with arbitrary field
/// values (`resp` ids are taken from `pending` when there are any).
pub(super) fn agent_body(
    u: &mut Unstructured<'_>,
    pending: &[String],
) -> arbitrary::Result<Vec<u8>> {
    let mut o = Map::new();
    o.insert("type".into(), Value::from("hello"));
    match u.int_in_range(0..=9)? {
        0 => {
            let n = u.int_in_range(0..=256)?;
            return Ok(u.bytes(n)?.to_vec());
        }
        1 => {
            // hello: good, bad, missing or aliased version; secret; missing agentId.
            let version = match u.int_in_range(0..=3)? {
                0 | 1 => Value::from(PROTOCOL_VERSION),
                2 => Value::from("0.9.0"),
                _ => Value::String(u.arbitrary()?),
            };
            if u.ratio(7u8, 8u8)? {
                o.insert(pick(u, &VERSION_KEYS)?.into(), version);
            }
            maybe_set(pick_or_any(u, &AGENT_IDS)?.into(), u, &mut o, "agentId")?;
            o.insert("botUserId".into(), Value::Null);
            o.insert("tag".into(), Value::from("Bot#1"));
            maybe_set(Value::Bool(u.ratio(3u8, 4u8)?), u, &mut o, "ready")?;
            let guilds = guild_list(u)?;
            maybe_set(Value::Array(guilds), u, &mut o, "guildIds")?;
            o.insert("poolId".into(), Value::from("pool"));
            if u.ratio(1u8, 8u8)? {
                o.insert("runnerSecret".into(), Value::String(u.arbitrary()?));
            }
        }
        2 => {
            o.insert("type".into(), Value::from("guilds"));
            let guilds = guild_list(u)?;
            maybe_set(Value::Array(guilds), u, &mut o, "guildIds")?;
            o.insert("agentId".into(), pick_or_any(u, &AGENT_IDS)?.into());
        }
        3 | 4 => {
            o.insert("type".into(), Value::from("event"));
            let add = u.arbitrary::<bool>()?;
            o.insert(
                "event".into(),
                Value::from(if add { "add" } else { "released" }),
            );
            maybe_set(pick_or_any(u, &AGENT_IDS)?.into(), u, &mut o, "agentId")?;
            maybe_set(pick_or_any(u, &GUILDS)?.into(), u, &mut o, "guildId")?;
            let vc = pick_or_any(u, &CHANNELS)?;
            maybe_set(vc.clone().into(), u, &mut o, "voiceChannelId")?;
            let kind = if u.ratio(3u8, 4u8)? {
                "music"
            } else {
                "assistant"
            };
            maybe_set(kind.into(), u, &mut o, "kind")?;
            if add {
                maybe_set(vc.into(), u, &mut o, "channelId")?;
                let ok = u.ratio(3u8, 4u8)?;
                maybe_set(ok.into(), u, &mut o, "ok")?;
                if !ok {
                    o.insert("error".into(), Value::String(u.arbitrary()?));
                }
                if u.arbitrary()? {
                    o.insert("ownerUserId".into(), Value::String(u.arbitrary()?));
                }
            } else {
                o.insert("reason".into(), Value::from("USER_LEFT"));
            }
        }
        5 | 6 => {
            o.insert("type".into(), Value::from("resp"));
            let id = if !pending.is_empty() && u.ratio(7u8, 8u8)? {
                u.choose(pending)?.clone()
            } else {
                u.arbitrary()?
            };
            maybe_set(id.into(), u, &mut o, "id")?;
            let ok = u.arbitrary::<bool>()?;
            maybe_set(ok.into(), u, &mut o, "ok")?;
            if ok {
                if u.ratio(7u8, 8u8)? {
                    o.insert("data".into(), json_value(u, 3)?);
                }
            } else {
                o.insert("error".into(), Value::String(u.arbitrary()?));
            }
        }
        7 => {
            // Wrong direction, unknown type, not an object, `type` last.
            match u.int_in_range(0..=3)? {
                0 => {
                    o.insert("type".into(), Value::from("req"));
                    o.insert("id".into(), Value::from("x"));
                }
                1 => {
                    o.insert("type".into(), Value::String(u.arbitrary()?));
                }
                2 => return Ok(b"[1,2,3]".to_vec()),
                _ => {
                    return Ok(
                        br#"{"guildIds":["g1"],"agentId":"agent-a","type":"guilds"}"#.to_vec(),
                    )
                }
            }
        }
        8 => {
            // Oversize (just over the default 64 KiB limit), or exactly at it.
            let len = 64 * 1024 + usize::from(u.arbitrary::<bool>()?);
            let mut body = br#"{"type":"guilds","guildIds":[""#.to_vec();
            body.resize(len.saturating_sub(3), b'x');
            body.extend_from_slice(br#""]}"#);
            return Ok(body);
        }
        _ => {
            let v = json_value(u, 3)?;
            return Ok(v.to_string().into_bytes());
        }
    }
    Ok(Value::Object(o).to_string().into_bytes())
}

/// A controller → agent message body: arbitrary bytes, or a `req`/`error` template with
/// arbitrary field values, or an agent message (wrong direction).
pub(super) fn controller_body(u: &mut Unstructured<'_>) -> arbitrary::Result<Vec<u8>> {
    let mut o = Map::new();
    match u.int_in_range(0..=5)? {
        0 => {
            let n = u.int_in_range(0..=256)?;
            return Ok(u.bytes(n)?.to_vec());
        }
        1 | 2 => {
            o.insert("type".into(), Value::from("req"));
            maybe_set(Value::String(u.arbitrary()?), u, &mut o, "id")?;
            maybe_set(pick_or_any(u, &OPS)?.into(), u, &mut o, "op")?;
            if u.ratio(7u8, 8u8)? {
                o.insert("data".into(), json_value(u, 3)?);
            }
            maybe_set(pick_or_any(u, &AGENT_IDS)?.into(), u, &mut o, "agentId")?;
        }
        3 => {
            o.insert("type".into(), Value::from("error"));
            maybe_set(Value::String(u.arbitrary()?), u, &mut o, "error")?;
        }
        4 => return agent_body(u, &[]),
        _ => {
            let v = json_value(u, 3)?;
            return Ok(v.to_string().into_bytes());
        }
    }
    Ok(Value::Object(o).to_string().into_bytes())
}
