//! An in-memory music player per guild: what the mock agent answers requests with.
//!
//! Ops: `play`, `pause`, `resume`, `skip`, `stop`, `queue`, `search`, `status`, `volume`,
//! `remove`, `move`, `swap`, `shuffle`, `clear`; anything else is `unknown-op`. Error strings
//! are those the real agents use (INTEROP.md).

use std::collections::BTreeMap;

use serde_json::{json, Value};

/// Longest track the player accepts (3 hours), beyond it `track-too-long`.
pub const MAX_TRACK_MS: u64 = 3 * 60 * 60 * 1000;
/// Longest queue, beyond it `queue-full`.
pub const MAX_QUEUE: usize = 100;

const CATALOG: &[(&str, &str, u64)] = &[
    ("Never Gonna Give You Up", "Rick Astley", 213_000),
    ("Take On Me", "a-ha", 225_000),
    ("Bohemian Rhapsody", "Queen", 354_000),
    ("Blinding Lights", "The Weeknd", 200_000),
    ("Africa", "TOTO", 295_000),
    ("Dancing Queen", "ABBA", 231_000),
    ("Smells Like Teen Spirit", "Nirvana", 301_000),
    ("Billie Jean", "Michael Jackson", 294_000),
    (
        "Lofi Beats To Study To (10 hour mix)",
        "Lofi Girl",
        36_000_000,
    ),
];

/// One track.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Track {
    /// Title.
    pub title: String,
    /// Artist.
    pub author: String,
    /// Length in milliseconds.
    pub duration: u64,
}

impl Track {
    fn json(&self) -> Value {
        json!({"title": self.title, "author": self.author, "duration": self.duration})
    }
}

/// What a request did besides its reply: the agent reports these as `event` messages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SideEffect {
    /// Joined a voice channel (send `add`).
    Joined {
        /// Guild.
        guild_id: String,
        /// Voice channel.
        voice_channel_id: String,
        /// Text channel, if the request named one.
        text_channel_id: Option<String>,
        /// Requesting user, if named.
        owner_user_id: Option<String>,
    },
    /// Left a voice channel (send `released`).
    Left {
        /// Guild.
        guild_id: String,
        /// Voice channel.
        voice_channel_id: String,
        /// Why.
        reason: String,
    },
}

#[derive(Debug, Default)]
struct GuildPlayer {
    voice_channel_id: String,
    owner_user_id: Option<String>,
    current: Option<Track>,
    queue: Vec<Track>,
    paused: bool,
    volume: u64,
    position: u64,
}

/// Players of every guild this agent serves.
#[derive(Debug, Default)]
pub struct MockPlayer {
    guilds: BTreeMap<String, GuildPlayer>,
}

fn str_field<'a>(data: &'a Value, key: &str) -> Option<&'a str> {
    data.get(key)
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
}

fn index_field(data: &Value, key: &str) -> Option<usize> {
    data.get(key)
        .and_then(Value::as_u64)
        .and_then(|i| usize::try_from(i).ok())
}

/// Finds tracks for a query: catalog matches first, else one synthesized track.
pub fn search(query: &str) -> Vec<Track> {
    let q = query.trim().to_lowercase();
    if q.is_empty() {
        return Vec::new();
    }
    let hits: Vec<Track> = CATALOG
        .iter()
        .filter(|(t, a, _)| format!("{t} {a}").to_lowercase().contains(&q))
        .map(|(t, a, d)| Track {
            title: (*t).into(),
            author: (*a).into(),
            duration: *d,
        })
        .collect();
    if !hits.is_empty() {
        return hits;
    }
    // A deterministic "stream" for anything else, 2-6 minutes long.
    let hash = q.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
    });
    let title = q
        .split_whitespace()
        .map(|w| {
            let mut c = w.chars();
            c.next()
                .map(|f| f.to_uppercase().chain(c).collect::<String>())
                .unwrap_or_default()
        })
        .collect::<Vec<_>>()
        .join(" ");
    vec![Track {
        title,
        author: "Unknown Artist".into(),
        duration: 120_000 + hash % 240_000,
    }]
}

impl MockPlayer {
    /// A player with no sessions.
    pub fn new() -> Self {
        Self::default()
    }

    /// Runs one request: the reply (`Ok(data)` or `Err(error string)`) and a side effect.
    pub fn handle(
        &mut self,
        op: &str,
        data: &Value,
    ) -> (Result<Value, String>, Option<SideEffect>) {
        if op == "search" {
            let q = str_field(data, "query").unwrap_or("");
            let tracks: Vec<Value> = search(q).iter().take(5).map(Track::json).collect();
            return (Ok(json!({"query": q, "tracks": tracks})), None);
        }
        const KNOWN: &[&str] = &[
            "play", "pause", "resume", "skip", "stop", "queue", "status", "volume", "remove",
            "move", "swap", "shuffle", "clear",
        ];
        if !KNOWN.contains(&op) {
            return (Err("unknown-op".into()), None);
        }
        let Some(guild_id) = str_field(data, "guildId") else {
            return (Err("missing-session".into()), None);
        };
        if op == "play" {
            return self.play(guild_id, data);
        }
        if op == "status" && !self.guilds.contains_key(guild_id) {
            return (
                Ok(json!({"connected": false, "playing": false, "queueLength": 0})),
                None,
            );
        }
        let Some(g) = self.guilds.get_mut(guild_id) else {
            return (Err("no-session".into()), None);
        };
        if let (Some(owner), Some(user)) = (&g.owner_user_id, str_field(data, "userId")) {
            if matches!(op, "stop" | "skip" | "clear") && owner != user {
                return (Err("not-owner".into()), None);
            }
        }
        let reply = match op {
            "pause" => {
                g.paused = true;
                Ok(json!({"paused": true, "current": g.current.as_ref().map(Track::json)}))
            }
            "resume" => {
                g.paused = false;
                Ok(json!({"paused": false, "current": g.current.as_ref().map(Track::json)}))
            }
            "skip" => {
                let skipped = g.current.take();
                g.current = (!g.queue.is_empty()).then(|| g.queue.remove(0));
                g.position = 0;
                Ok(json!({"skipped": skipped.as_ref().map(Track::json),
                          "current": g.current.as_ref().map(Track::json)}))
            }
            "stop" => {
                let Some(g) = self.guilds.remove(guild_id) else {
                    return (Err("no-session".into()), None);
                };
                let effect = SideEffect::Left {
                    guild_id: guild_id.into(),
                    voice_channel_id: g.voice_channel_id,
                    reason: "STOPPED".into(),
                };
                return (Ok(json!({"stopped": true})), Some(effect));
            }
            "queue" => Ok(json!({
                "current": g.current.as_ref().map(Track::json),
                "queue": g.queue.iter().map(Track::json).collect::<Vec<_>>(),
                "length": g.queue.len(),
                "totalDuration": g.queue.iter().map(|t| t.duration).sum::<u64>(),
            })),
            "status" => Ok(json!({
                "connected": true,
                "voiceChannelId": g.voice_channel_id,
                "playing": g.current.is_some() && !g.paused,
                "paused": g.paused,
                "volume": g.volume,
                "position": g.position,
                "current": g.current.as_ref().map(Track::json),
                "queueLength": g.queue.len(),
            })),
            "volume" => match data.get("volume").and_then(Value::as_u64) {
                Some(v) if v <= 200 => {
                    g.volume = v;
                    Ok(json!({"volume": v}))
                }
                _ => Err("bad-volume".into()),
            },
            "remove" => match index_field(data, "index") {
                Some(i) if (1..=g.queue.len()).contains(&i) => {
                    Ok(json!({"removed": g.queue.remove(i - 1).json(), "length": g.queue.len()}))
                }
                _ => Err("bad-index".into()),
            },
            "move" => match (index_field(data, "from"), index_field(data, "to")) {
                (Some(f), Some(t))
                    if (1..=g.queue.len()).contains(&f) && (1..=g.queue.len()).contains(&t) =>
                {
                    let track = g.queue.remove(f - 1);
                    g.queue.insert(t - 1, track);
                    Ok(json!({"moved": g.queue[t - 1].json(), "from": f, "to": t}))
                }
                _ => Err("bad-index".into()),
            },
            "swap" => match (index_field(data, "first"), index_field(data, "second")) {
                (Some(a), Some(b))
                    if (1..=g.queue.len()).contains(&a) && (1..=g.queue.len()).contains(&b) =>
                {
                    g.queue.swap(a - 1, b - 1);
                    Ok(
                        json!({"swapped": [a, b], "queue": g.queue.iter().map(Track::json).collect::<Vec<_>>()}),
                    )
                }
                _ => Err("bad-index".into()),
            },
            "shuffle" => {
                // A deterministic shuffle (reverse interleave), so tests and the demo can assert it.
                let n = g.queue.len();
                let mut out = Vec::with_capacity(n);
                let (mut lo, mut hi) = (0usize, n);
                while lo < hi {
                    hi -= 1;
                    out.push(g.queue[hi].clone());
                    if lo < hi {
                        out.push(g.queue[lo].clone());
                        lo += 1;
                    }
                }
                g.queue = out;
                Ok(json!({"shuffled": n}))
            }
            "clear" => {
                let n = g.queue.len();
                g.queue.clear();
                Ok(json!({"cleared": n}))
            }
            _ => Err("unknown-op".into()),
        };
        (reply, None)
    }

    fn play(
        &mut self,
        guild_id: &str,
        data: &Value,
    ) -> (Result<Value, String>, Option<SideEffect>) {
        let Some(vc) = str_field(data, "voiceChannelId") else {
            return (Err("not-in-voice".into()), None);
        };
        let query = str_field(data, "query").unwrap_or("");
        let Some(track) = search(query).into_iter().next() else {
            return (Err("Track not found".into()), None);
        };
        if track.duration > MAX_TRACK_MS {
            return (Err("track-too-long".into()), None);
        }
        let mut effect = None;
        let g = self.guilds.entry(guild_id.to_owned()).or_insert_with(|| {
            effect = Some(SideEffect::Joined {
                guild_id: guild_id.into(),
                voice_channel_id: vc.into(),
                text_channel_id: str_field(data, "textChannelId").map(Into::into),
                owner_user_id: str_field(data, "userId").map(Into::into),
            });
            GuildPlayer {
                voice_channel_id: vc.into(),
                owner_user_id: str_field(data, "userId").map(Into::into),
                volume: 100,
                ..GuildPlayer::default()
            }
        });
        if g.voice_channel_id != vc {
            return (Err("not-in-voice".into()), None);
        }
        if g.current.is_none() {
            let reply = json!({"track": track.json(), "action": "playing"});
            g.current = Some(track);
            g.paused = false;
            (Ok(reply), effect)
        } else if g.queue.len() >= MAX_QUEUE {
            (Err("queue-full".into()), effect)
        } else {
            g.queue.push(track.clone());
            (
                Ok(json!({"track": track.json(), "action": "queued", "position": g.queue.len()})),
                effect,
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn play_queue_skip_stop() {
        let mut p = MockPlayer::new();
        let d = |q: &str| json!({"guildId":"g","voiceChannelId":"v","query":q});
        let (r, e) = p.handle("play", &d("never gonna give you up"));
        assert_eq!(r.unwrap()["track"]["author"], "Rick Astley");
        assert!(matches!(e, Some(SideEffect::Joined { .. })));
        let (r, e) = p.handle("play", &d("take on me"));
        assert_eq!(r.unwrap()["action"], "queued");
        assert!(e.is_none());
        assert_eq!(
            p.handle("skip", &json!({"guildId":"g"})).0.unwrap()["current"]["title"],
            "Take On Me"
        );
        assert_eq!(
            p.handle("volume", &json!({"guildId":"g","volume":300})).0,
            Err("bad-volume".into())
        );
        assert!(matches!(
            p.handle("stop", &json!({"guildId":"g"})).1,
            Some(SideEffect::Left { .. })
        ));
        assert_eq!(
            p.handle("pause", &json!({"guildId":"g"})).0,
            Err("no-session".into())
        );
        assert_eq!(p.handle("dance", &json!({})).0, Err("unknown-op".into()));
    }
}
