//! The checks every `hello` passes, in the real controller's order: `agentId`, then the
//! version, then the types of the other fields, then the runner secret.

use std::time::Instant;

use agentwire_core::RotatingSecrets;

use crate::config::ControllerConfig;
use crate::error::{InvalidHello, ProtocolError};
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

/// Checks `hello` against `cfg` and the runner secrets valid at `now`.
pub(crate) fn check(
    cfg: &ControllerConfig,
    secrets: &RotatingSecrets,
    hello: &Hello,
    now: Instant,
) -> Verdict {
    let Some(agent_id) = hello.agent_id.as_ref().filter(|a| !a.is_empty()) else {
        return Verdict::Ignored;
    };
    let version = match check_version(cfg, hello.protocol_version.as_deref()) {
        Ok(v) => v,
        Err(rejected) => return rejected,
    };
    // No secret configured accepts anything; an empty secret on either side never matches.
    if !secrets.accepts(hello.runner_secret.as_deref(), now) {
        return Verdict::Rejected(
            texts::ERR_UNAUTHORIZED.to_owned(),
            ProtocolError::Unauthorized,
        );
    }
    Verdict::Accepted {
        agent_id: AgentId::from(agent_id.as_str()),
        version: version.to_owned(),
    }
}

/// Checks a `hello` with a wrong-typed field, in the same order: a wrong-typed `agentId` is
/// refused (it is present, so not ignored); then a missing `agentId` is ignored; a
/// wrong-typed version is an incompatible version (no string is ever one of the accepted
/// set); then a missing or unaccepted version is refused as usual; any other wrong-typed
/// field is refused with `Invalid hello`. Never accepted.
pub(crate) fn check_invalid(cfg: &ControllerConfig, bad: &InvalidHello) -> Verdict {
    let invalid = || {
        Verdict::Rejected(
            texts::err_invalid_hello(bad.field, bad.expected),
            ProtocolError::InvalidHello {
                field: bad.field,
                expected: bad.expected,
            },
        )
    };
    if bad.field == "agentId" {
        return invalid();
    }
    if bad.hello.agent_id.as_ref().is_none_or(String::is_empty) {
        return Verdict::Ignored;
    }
    if bad.is_version() {
        return incompatible(cfg, &bad.found);
    }
    match check_version(cfg, bad.hello.protocol_version.as_deref()) {
        Ok(_) => invalid(),
        Err(rejected) => rejected,
    }
}

/// The version, if present and accepted; else the rejection.
fn check_version<'a>(cfg: &ControllerConfig, version: Option<&'a str>) -> Result<&'a str, Verdict> {
    let Some(version) = version.filter(|v| !v.is_empty()) else {
        return Err(Verdict::Rejected(
            texts::ERR_VERSION_REQUIRED.to_owned(),
            ProtocolError::MissingVersion,
        ));
    };
    if !cfg.supported_versions.contains(version) {
        return Err(incompatible(cfg, version));
    }
    Ok(version)
}

fn incompatible(cfg: &ControllerConfig, version: &str) -> Verdict {
    let expected = texts::expected_versions(cfg.supported_versions.iter().map(String::as_str));
    Verdict::Rejected(
        texts::err_incompatible_version(version, &expected),
        ProtocolError::IncompatibleVersion(version.to_owned()),
    )
}
