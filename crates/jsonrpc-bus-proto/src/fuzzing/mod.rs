//! Entry points of the cargo-fuzz targets in `fuzz/` (feature `fuzzing`).
//!
//! Each `fuzz/fuzz_targets/bus_*.rs` only calls one of these functions, so the bodies build
//! and run on stable Rust too: `tests/fuzz_seeds.rs` replays every committed seed through
//! them. Every function panics on a broken invariant; that is how the fuzzer finds bugs.
//!
//! One file per target: `decode.rs` (the decoder and the one-pass reader), `bus.rs` (the
//! `Bus` machine), `client.rs` (the `BusClient` machine); this file holds what the machine
//! harnesses share.

use std::time::{Duration, Instant};

use agentwire_core::fuzzing::{maybe_set, FuzzClock};
use agentwire_core::{Frame, FrameBuf};
use arbitrary::Unstructured;
use serde_json::{Map, Value};

use crate::codec::{classify, split_body, Body, Incoming};

mod bus;
mod client;
mod decode;

pub use bus::bus;
pub use client::client;
pub use decode::decode;

/// Operations on a machine are read from the input until it runs out, at most this many.
const MAX_OPS: usize = 512;

/// Patterns the harnesses subscribe to: globs, literals, prefixes, classes.
const PATTERNS: [&str; 12] = [
    "inbound:*",
    "inbound:chat-*",
    "inbound:chat-1",
    "inbound:chat-",
    "outbound:*",
    "agent:?",
    "agent:*",
    "*",
    "[io]*",
    "agent:[!a-c]*",
    "agent:spawn",
    "inbound:chat-[0-9]",
];

/// Topics the harnesses publish to.
const TOPICS: [&str; 8] = [
    "inbound:chat-1",
    "inbound:chat-2",
    "outbound:chat-1",
    "agent:spawn",
    "agent:x",
    "inbound:chat-",
    "zzz",
    "inbound:chat-1x",
];

/// Moves the clock: forward, backward, or to the machine's next deadline.
fn move_clock(
    clock: &mut FuzzClock,
    u: &mut Unstructured<'_>,
    next: Option<Instant>,
) -> arbitrary::Result<bool> {
    match u.int_in_range(0..=2)? {
        0 => {
            let ms = u.int_in_range(0..=60_000u64)?;
            clock.advance(Duration::from_millis(ms));
            u.arbitrary()
        }
        1 => {
            let ms = u.int_in_range(0..=60_000u64)?;
            clock.rewind(Duration::from_millis(ms));
            Ok(false)
        }
        _ => {
            if let Some(t) = next {
                clock.jump_past_seen_to(t);
            }
            Ok(true)
        }
    }
}

/// `"jsonrpc": "2.0"`, or (rarely) a wrong version or none.
fn version(u: &mut Unstructured<'_>, o: &mut Map<String, Value>) -> arbitrary::Result<()> {
    match u.int_in_range(0..=31)? {
        0 => {}
        1 => {
            o.insert("jsonrpc".into(), Value::from("1.0"));
        }
        2 => {
            o.insert("jsonrpc".into(), Value::from(2.0));
        }
        _ => {
            o.insert("jsonrpc".into(), Value::from("2.0"));
        }
    }
    Ok(())
}

/// Applies 1-4 byte mutations (flip, insert, delete, truncate) to `body`.
fn mutate(u: &mut Unstructured<'_>, body: &mut Vec<u8>) -> arbitrary::Result<()> {
    for _ in 0..u.int_in_range(1..=4)? {
        if body.is_empty() {
            break;
        }
        let at = u.int_in_range(0..=body.len() - 1)?;
        match u.int_in_range(0..=3)? {
            0 => body[at] = u.arbitrary()?,
            1 => body.insert(at, u.arbitrary()?),
            2 => {
                body.remove(at);
            }
            _ => body.truncate(at),
        }
    }
    Ok(())
}

/// How a body is framed: a text frame when it is UTF-8 and the input says so.
fn frame_of<'a>(u: &mut Unstructured<'_>, body: &'a [u8]) -> arbitrary::Result<Frame<'a>> {
    let text = u.ratio(3u8, 4u8)?;
    Ok(match std::str::from_utf8(body) {
        Ok(s) if text => Frame::Text(s),
        _ => Frame::Binary(body),
    })
}

/// Runs `f` on every entry of a body the machine sent, classified; panics on anything
/// undecodable.
fn for_each_sent(frame: &FrameBuf, who: &str, mut f: impl FnMut(Incoming<'_>)) {
    let text = frame
        .as_text()
        .unwrap_or_else(|| panic!("{who} sent a binary frame: {frame:?}"));
    let entries = match split_body(text.as_bytes(), usize::MAX, usize::MAX) {
        Ok(Body::Single(raw)) => vec![raw],
        Ok(Body::Batch(v)) => v.iter().map(|r| r.get()).collect(),
        Err(e) => panic!("{who} sent an undecodable body: {e}: {text}"),
    };
    for raw in entries {
        match classify(raw) {
            Ok(entry) => f(entry),
            Err(e) => panic!("{who} sent an invalid entry: {e}: {text}"),
        }
    }
}
