//! The checks every `hello` passes, in the real controller's order: `agentId`, then the
//! version, then the runner secret.

use subtle::ConstantTimeEq;

use crate::config::ControllerConfig;
use crate::error::ProtocolError;
use crate::id::AgentId;
use crate::message::Hello;
use crate::texts;

/// What a `hello` earns.
#[derive(Debug)]
pub(crate) enum Verdict {
    /// No `agentId`: ignored, whatever its version (no reply, no close, the hello deadline
    /// keeps running).
    Ignored,
    /// Refused: the `error` text to send and the error that closes the connection.
    Rejected(String, ProtocolError),
    /// Accepted: the agent id and the version it speaks.
    Accepted {
        /// The agent id (not empty).
        agent_id: AgentId,
        /// The version, one of the configured set.
        version: String,
    },
}

/// Checks `hello` against `cfg`.
pub(crate) fn check(cfg: &ControllerConfig, hello: &Hello) -> Verdict {
    let Some(agent_id) = hello.agent_id.as_ref().filter(|a| !a.is_empty()) else {
        return Verdict::Ignored;
    };
    let Some(version) = hello.protocol_version.as_ref().filter(|v| !v.is_empty()) else {
        return Verdict::Rejected(
            texts::ERR_VERSION_REQUIRED.to_owned(),
            ProtocolError::MissingVersion,
        );
    };
    if !cfg.supported_versions.contains(version) {
        let expected = texts::expected_versions(cfg.supported_versions.iter().map(String::as_str));
        return Verdict::Rejected(
            texts::err_incompatible_version(version, &expected),
            ProtocolError::IncompatibleVersion(version.clone()),
        );
    }
    if !secret_matches(cfg.runner_secret.as_deref(), hello.runner_secret.as_deref()) {
        return Verdict::Rejected(
            texts::ERR_UNAUTHORIZED.to_owned(),
            ProtocolError::Unauthorized,
        );
    }
    Verdict::Accepted {
        agent_id: AgentId::from(agent_id.as_str()),
        version: version.clone(),
    }
}

/// Whether `presented` matches the configured secret (constant-time); no configured secret
/// accepts anything, and an empty secret on either side never matches.
fn secret_matches(expected: Option<&str>, presented: Option<&str>) -> bool {
    match (expected, presented) {
        (None, _) => true,
        (Some(expected), Some(p)) if !expected.is_empty() && !p.is_empty() => {
            bool::from(expected.as_bytes().ct_eq(p.as_bytes()))
        }
        _ => false,
    }
}
