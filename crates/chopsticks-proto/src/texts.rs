//! The strings the controller writes on the wire: `error` message texts, close reasons and
//! the error strings of failed requests, as the real controller spells them (INTEROP.md);
//! and the agent's close reason when it leaves.

/// `error` text for a `hello` without a version.
pub const ERR_VERSION_REQUIRED: &str = "Protocol version required. Please upgrade agent.";
/// `error` text for a wrong or missing runner secret.
pub const ERR_UNAUTHORIZED: &str = "Unauthorized runner secret.";
/// `error` text for a body over [`Limits::max_frame_bytes`](crate::Limits::max_frame_bytes).
pub const ERR_FRAME_TOO_LARGE: &str = "Frame too large";
/// `error` text for a body that is not UTF-8 JSON.
pub const ERR_INVALID_JSON: &str = "Invalid JSON";
/// `error` text for JSON that is not an object with a known `type` (before `hello`).
pub const ERR_UNKNOWN_TYPE: &str = "Unknown message type";

/// The `error` text for a `hello` whose version is outside the accepted set, naming that set
/// as [`expected_versions`] writes it.
pub fn err_incompatible_version(version: &str, expected: &str) -> String {
    format!("Incompatible protocol version {version}. Controller expects {expected}.")
}

/// The `error` text for a `hello` with a field of the wrong type (the version excepted:
/// see [`err_incompatible_version`]): `Invalid hello: ready must be a boolean.`
pub fn err_invalid_hello(field: &str, expected: &str) -> String {
    format!("Invalid hello: {field} must be {expected}.")
}

/// The versions a controller accepts, as its version-mismatch error names them: `1.0.0`,
/// `1.0.0 or 2.0.0`, `0.9.0, 1.0.0 or 2.0.0` (in the given order); `no version` when there
/// is none.
pub fn expected_versions<'a>(versions: impl ExactSizeIterator<Item = &'a str>) -> String {
    let mut out = String::new();
    let n = versions.len();
    for (i, v) in versions.enumerate() {
        if i > 0 {
            out.push_str(if i + 1 == n { " or " } else { ", " });
        }
        out.push_str(v);
    }
    if out.is_empty() {
        out.push_str("no version");
    }
    out
}

/// Close reason for a `hello` without a version (1008).
pub const CLOSE_MISSING_VERSION: &str = "Missing protocol version";
/// Close reason for a `hello` with an unaccepted version (1008).
pub const CLOSE_INCOMPATIBLE_VERSION: &str = "Incompatible protocol version";
/// Close reason for a `hello` with a field of the wrong type (1008).
pub const CLOSE_INVALID_HELLO: &str = "Invalid hello";
/// Close reason for a wrong runner secret (1008).
pub const CLOSE_UNAUTHORIZED: &str = "Unauthorized";
/// Close reason for a connection without a valid `hello` before the deadline (1008).
pub const CLOSE_HELLO_REQUIRED: &str = "hello-required";
/// Close reason for an agent silent for longer than the stale window (1008).
pub const CLOSE_STALE: &str = "stale";
/// Close reason for a connection over the per-address cap (1008).
pub const CLOSE_TOO_MANY_CONNECTIONS: &str = "too-many-connections";
/// Close reason for a connection over the total cap (1008).
pub const CLOSE_SERVER_FULL: &str = "server-full";
/// Close reason for an unknown message type before `hello`, and any other protocol error
/// that closes (1008).
pub const CLOSE_PROTOCOL_ERROR: &str = "protocol-error";
/// Close reason for the older socket of an agent that connected again (1000).
pub const CLOSE_REPLACED: &str = "replaced by a newer connection";

/// Close reason the agent sends after releasing its sessions in a graceful disconnect
/// ([`Agent::leave`](crate::Agent::leave), 1000).
pub const CLOSE_AGENT_LEAVING: &str = "agent shutting down";

/// Error string for a request whose agent went away.
pub const AGENT_OFFLINE: &str = "agent-offline";
/// Error string for a request that timed out.
pub const AGENT_TIMEOUT: &str = "agent-timeout";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expected_versions_read_as_a_list() {
        let names = |v: &[&str]| expected_versions(v.iter().copied());
        assert_eq!(names(&[]), "no version");
        assert_eq!(names(&["1.0.0"]), "1.0.0");
        assert_eq!(names(&["1.0.0", "2.0.0"]), "1.0.0 or 2.0.0");
        assert_eq!(names(&["0.9.0", "1.0.0", "2.0.0"]), "0.9.0, 1.0.0 or 2.0.0");
        assert_eq!(
            err_incompatible_version("0.9.0", &names(&["1.0.0"])),
            "Incompatible protocol version 0.9.0. Controller expects 1.0.0."
        );
    }
}
