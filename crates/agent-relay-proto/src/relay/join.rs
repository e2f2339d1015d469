//! Reading a `relay.join`: the role, the session and the agent's name, each checked by hand
//! so that a wrong one gets the reference relay's exact error.

use serde::Deserialize;
use serde_json::value::RawValue;

use crate::codec::{raw_str, truncate};
use crate::config::Limits;
use crate::error::ProtocolError;
use crate::id::SessionId;
use crate::message::Role;
use crate::texts;

/// `relay.join` payload as the relay reads it: every field raw.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct JoinFields<'a> {
    #[serde(borrow, default)]
    role: Option<&'a RawValue>,
    #[serde(borrow, default)]
    session_id: Option<&'a RawValue>,
    #[serde(borrow, default)]
    agent_name: Option<&'a RawValue>,
    #[serde(borrow, default)]
    client_name: Option<&'a RawValue>,
    #[serde(borrow, default)]
    name: Option<&'a RawValue>,
}

/// A `relay.join` that reads well.
#[derive(Debug)]
pub(super) struct JoinRequest {
    /// `host` or `agent`.
    pub(super) role: Role,
    /// The session, trimmed (`default` when absent, `null` or blank).
    pub(super) session: SessionId,
    /// An agent's name: the first non-blank of `agentName`, `clientName` and `name`, cut to
    /// [`Limits::max_name_bytes`].
    pub(super) name: Option<String>,
}

/// Why a `relay.join` is refused, and the text the `error` carries.
pub(super) type JoinRefusal = (ProtocolError, &'static str);

/// Reads the payload of a `relay.join` (known to be a JSON object).
pub(super) fn read_join(payload: &RawValue, limits: &Limits) -> Result<JoinRequest, JoinRefusal> {
    let invalid = |reason| (ProtocolError::InvalidJoin { reason }, reason);
    // Only a duplicated field fails here: the payload is known to be an object.
    let fields = serde_json::from_str::<JoinFields<'_>>(payload.get())
        .map_err(|_| invalid(texts::INVALID_ROLE))?;
    let role = match fields.role.and_then(raw_str).as_deref() {
        Some("host") => Role::Host,
        Some("agent") => Role::Agent,
        _ => return Err(invalid(texts::INVALID_ROLE)),
    };
    let session = match fields.session_id.map(raw_str) {
        None => SessionId::default_session(),
        Some(None) => return Err(invalid(texts::INVALID_SESSION_ID)),
        Some(Some(s)) => match s.trim() {
            "" => SessionId::default_session(),
            t if t.len() > limits.max_session_id_bytes => {
                let e = ProtocolError::Limit {
                    limit: "max_session_id_bytes",
                };
                return Err((e, texts::SESSION_ID_TOO_LONG));
            }
            t => SessionId::new(t),
        },
    };
    let name = match role {
        Role::Host => None,
        Role::Agent => [fields.agent_name, fields.client_name, fields.name]
            .into_iter()
            .flatten()
            .filter_map(raw_str)
            .find_map(|n| {
                let n = n.trim();
                (!n.is_empty()).then(|| truncate(n, limits.max_name_bytes).to_owned())
            }),
    };
    Ok(JoinRequest {
        role,
        session,
        name,
    })
}
