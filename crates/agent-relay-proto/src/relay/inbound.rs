//! The message the relay is handling: its envelope, read with the relay's limits, and what
//! the record of its refusal says about it (its type and size, never its payload).

use std::borrow::Cow;

use agentwire_core::{check_json_depth, Frame};

use crate::codec::{truncate, Route, VersionRule};
use crate::config::RelayConfig;
use crate::error::DecodeError;
use crate::message::types;

/// Longest piece of a peer's `type` echoed in an error or an event.
pub(super) const MAX_ECHOED_TYPE: usize = 128;

/// The message being handled, for the record of a refusal.
#[derive(Debug, Default)]
pub(super) struct Inbound {
    /// Its `type`, cut to [`MAX_ECHOED_TYPE`] bytes, once known.
    /// (Known types borrow their constant: no allocation per message.)
    pub(super) msg_type: Option<Cow<'static, str>>,
    /// Its size in bytes.
    pub(super) bytes: usize,
}

impl Inbound {
    /// A message of `bytes` bytes whose type is not known yet.
    pub(super) fn new(bytes: usize) -> Self {
        Self {
            msg_type: None,
            bytes,
        }
    }

    /// Reads the envelope of `frame` with `config`'s size, version and depth rules, and
    /// notes its type.
    pub(super) fn decode<'a>(
        &mut self,
        frame: Frame<'a>,
        config: &RelayConfig,
    ) -> Result<Route<'a>, DecodeError> {
        let version = if config.allow_missing_version {
            VersionRule::MayBeMissing
        } else {
            VersionRule::Required
        };
        let limit = config.limits.max_json_depth;
        let route = Route::decode(frame, config.limits.max_message_bytes, version)?;
        let t = &route.msg_type;
        let known = types::agent_to_host(t)
            .or_else(|| types::host_to_agent(t))
            .or_else(|| (t == types::RELAY_JOIN).then_some(types::RELAY_JOIN));
        self.msg_type = Some(match known {
            Some(k) => k.into(),
            None => truncate(t, MAX_ECHOED_TYPE).to_owned().into(),
        });
        // Deeper than a reader can read back: never forwarded, never logged.
        match check_json_depth(route.text.as_bytes(), limit) {
            Ok(()) => Ok(route),
            Err(_) => Err(DecodeError::TooDeep {
                limit,
                id: route.id.as_deref().map(str::to_owned),
            }),
        }
    }
}
