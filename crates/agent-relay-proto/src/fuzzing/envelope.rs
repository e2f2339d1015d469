//! The envelope decoder's fuzz body.

use agentwire_core::{Frame, FrameError};

use super::FUZZ_MAX;
use crate::codec::{Route, VersionRule};
use crate::error::DecodeError;
use crate::message::{AgentMessage, Body, Envelope, HostMessage, RelayMessage};

/// Decodes `data` as a frame with [`Route::decode`] (text and binary, both version rules)
/// and as every sender's typed [`Envelope`].
///
/// Checks: no panic; text and binary frames of the same bytes agree; the size limit is
/// checked first (one byte less is `TooLarge`); what decodes with `v` required decodes with
/// `v` optional too, and a `v`-less message only there; [`Route::payload_range`] slices
/// exactly the payload out of the text; every error maps to a spec code; and every typed
/// envelope re-encodes to a message that decodes to itself (both as a route and typed).
pub fn envelope(data: &[u8]) {
    let binary = Route::decode(Frame::Binary(data), FUZZ_MAX, VersionRule::Required);
    if let Ok(text) = std::str::from_utf8(data) {
        let as_text = Route::decode(Frame::Text(text), FUZZ_MAX, VersionRule::Required);
        assert_eq!(
            as_text.as_ref().map(|r| r.text).map_err(Clone::clone),
            binary.as_ref().map(|r| r.text).map_err(Clone::clone),
            "text and binary frames decode alike"
        );
    } else {
        assert_eq!(
            binary.as_ref().err(),
            Some(&DecodeError::Frame(FrameError::NotUtf8))
        );
    }
    let lenient = Route::decode(Frame::Binary(data), FUZZ_MAX, VersionRule::MayBeMissing);
    match &binary {
        Ok(route) => {
            assert!(lenient.is_ok(), "required v passes, optional v must too");
            let range = route.payload_range();
            assert_eq!(
                route.text.get(range),
                Some(route.payload.get()),
                "payload_range"
            );
            assert!(route.payload.get().starts_with('{'), "payload is an object");
        }
        Err(e) => {
            let _ = e.code();
            if let Ok(r) = &lenient {
                assert_eq!(
                    *e,
                    DecodeError::Version {
                        id: r.id.as_deref().map(str::to_owned)
                    },
                    "only a missing v differs between the rules"
                );
            }
        }
    }
    if let Some(max) = data.len().checked_sub(1) {
        assert_eq!(
            Route::decode(Frame::Binary(data), max, VersionRule::Required).err(),
            Some(DecodeError::Frame(FrameError::TooLarge {
                len: data.len(),
                max
            })),
            "the size limit is checked first"
        );
    }
    typed::<AgentMessage>(data);
    typed::<HostMessage>(data);
    typed::<RelayMessage>(data);
}

/// A typed decode with sender `B`, and its round trip.
fn typed<B: Body + PartialEq + std::fmt::Debug>(data: &[u8]) {
    let Ok(env) = Envelope::<B>::decode(Frame::Binary(data), FUZZ_MAX) else {
        return;
    };
    let mut out = Vec::new();
    env.encode(&mut out);
    let text = std::str::from_utf8(&out).expect("encoding is UTF-8");
    let route = Route::parse(text, VersionRule::Required)
        .unwrap_or_else(|e| panic!("re-encoded envelope rejected: {e}: {text}"));
    assert_eq!(&*route.msg_type, env.msg_type(), "type round trip");
    assert_eq!(route.id.as_deref(), env.id.as_deref(), "id round trip");
    assert_eq!(
        route.reply_to.as_deref(),
        env.reply_to.as_deref(),
        "replyTo round trip"
    );
    let again = Envelope::<B>::decode(Frame::Text(text), FUZZ_MAX)
        .unwrap_or_else(|e| panic!("re-encoded envelope does not decode: {e}: {text}"));
    assert_eq!(again, env, "typed round trip of {text}");
}
