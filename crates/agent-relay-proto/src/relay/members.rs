//! The relay's connections and sessions: who is connected, who joined which session in which
//! role, and the relay's id and display name for each member.

use std::collections::BTreeMap;
use std::time::Instant;

use agentwire_core::{ConnId, IdGen, Rate, TokenBucket};

use crate::id::{ClientId, SessionId};
use crate::message::{PresenceAgent, Role};
use crate::texts;

/// Where a connection is in its life.
#[derive(Debug)]
enum ConnState {
    Unjoined,
    Joined {
        session: SessionId,
        role: Role,
    },
    /// The relay closed it (host replaced, join deadline, [`Relay::close`](crate::Relay));
    /// its frames are ignored until the driver reports the disconnect.
    Closing,
}

#[derive(Debug)]
struct Conn {
    state: ConnState,
    bucket: Option<TokenBucket>,
    /// The relay's id for it, assigned at its first join.
    client_id: Option<ClientId>,
    /// Display name (agents).
    name: Option<String>,
}

#[derive(Debug, Default)]
struct Session {
    host: Option<ConnId>,
    /// In join order.
    agents: Vec<ConnId>,
}

/// What a connection that may send is, as [`Members::admit_frame`] finds it.
#[derive(Debug)]
pub(super) struct Admitted {
    /// Whether the frame is within the connection's rate.
    pub(super) within_rate: bool,
    /// Its session and role, if it has joined.
    pub(super) membership: Option<(SessionId, Role)>,
}

/// Every accepted connection and every session with at least one member.
#[derive(Debug, Default)]
pub(super) struct Members {
    conns: BTreeMap<ConnId, Conn>,
    sessions: BTreeMap<SessionId, Session>,
}

impl Members {
    /// Accepted connections (joined or not, including closing ones).
    pub(super) fn connection_count(&self) -> usize {
        self.conns.len()
    }

    /// Sessions with at least one member.
    pub(super) fn session_count(&self) -> usize {
        self.sessions.len()
    }

    /// The sessions, in id order.
    pub(super) fn sessions(&self) -> impl Iterator<Item = &SessionId> {
        self.sessions.keys()
    }

    /// Whether `session` has a member.
    pub(super) fn has_session(&self, session: &SessionId) -> bool {
        self.sessions.contains_key(session)
    }

    /// Whether `conn` is an accepted connection.
    pub(super) fn contains(&self, conn: ConnId) -> bool {
        self.conns.contains_key(&conn)
    }

    /// Whether `conn` is accepted and not being closed.
    pub(super) fn is_open(&self, conn: ConnId) -> bool {
        self.conns
            .get(&conn)
            .is_some_and(|c| !matches!(c.state, ConnState::Closing))
    }

    /// The host of `session`.
    pub(super) fn host_of(&self, session: &str) -> Option<ConnId> {
        self.sessions.get(session).and_then(|s| s.host)
    }

    /// The agents of `session`, in join order.
    pub(super) fn agents_of(&self, session: &str) -> &[ConnId] {
        self.sessions
            .get(session)
            .map_or(&[][..], |s| s.agents.as_slice())
    }

    /// The session and role `conn` has joined.
    pub(super) fn membership(&self, conn: ConnId) -> Option<(&SessionId, Role)> {
        match &self.conns.get(&conn)?.state {
            ConnState::Joined { session, role } => Some((session, *role)),
            _ => None,
        }
    }

    /// The session `conn` has joined.
    pub(super) fn session_of(&self, conn: ConnId) -> Option<SessionId> {
        self.membership(conn).map(|(s, _)| s.clone())
    }

    /// The relay's id and the display name of `conn`, for its `relay.disconnect` record.
    pub(super) fn identity(&self, conn: ConnId) -> (&str, Option<&str>) {
        self.conns.get(&conn).map_or(("", None), |c| {
            let id = c.client_id.as_ref().map_or("", ClientId::as_str);
            (id, c.name.as_deref())
        })
    }

    /// Accepts `conn`, unjoined, with a full token bucket if there is a rate limit.
    pub(super) fn insert(&mut self, conn: ConnId, rate_limited: bool, now: Instant) {
        self.conns.insert(
            conn,
            Conn {
                state: ConnState::Unjoined,
                bucket: rate_limited.then(|| TokenBucket::new(now)),
                client_id: None,
                name: None,
            },
        );
    }

    /// Forgets `conn` (it has left its session).
    pub(super) fn remove(&mut self, conn: ConnId) {
        self.conns.remove(&conn);
    }

    /// A frame arrived on `conn`: takes a token at `now` and says what the connection is;
    /// `None` for an unknown or closing connection, whose frames are ignored.
    pub(super) fn admit_frame(
        &mut self,
        conn: ConnId,
        rate: Option<&Rate>,
        now: Instant,
    ) -> Option<Admitted> {
        let c = self.conns.get_mut(&conn)?;
        let within_rate = match (&mut c.bucket, rate) {
            (Some(bucket), Some(rate)) => bucket.take(rate, now),
            _ => true,
        };
        let membership = match &c.state {
            ConnState::Closing => return None,
            ConnState::Unjoined => None,
            ConnState::Joined { session, role } => Some((session.clone(), *role)),
        };
        Some(Admitted {
            within_rate,
            membership,
        })
    }

    /// Marks `conn` as being closed by the relay.
    pub(super) fn set_closing(&mut self, conn: ConnId) {
        if let Some(c) = self.conns.get_mut(&conn) {
            c.state = ConnState::Closing;
        }
    }

    /// Marks `conn` as being closed if it has not joined; whether it had not.
    pub(super) fn close_if_unjoined(&mut self, conn: ConnId) -> bool {
        match self.conns.get_mut(&conn) {
            Some(c) if matches!(c.state, ConnState::Unjoined) => {
                c.state = ConnState::Closing;
                true
            }
            _ => false,
        }
    }

    /// Whether `session` can take a new member in `role`: `Err` names the
    /// [`Limits`](crate::Limits) field a new session or one more agent would pass, and the
    /// text of the refusal.
    pub(super) fn room_for(
        &self,
        session: &SessionId,
        role: Role,
        max_sessions: usize,
        max_agents: usize,
    ) -> Result<(), (&'static str, &'static str)> {
        let target = self.sessions.get(session);
        if target.is_none() && self.sessions.len() >= max_sessions {
            return Err(("max_sessions", texts::TOO_MANY_SESSIONS));
        }
        if role == Role::Agent && target.is_some_and(|s| s.agents.len() >= max_agents) {
            return Err(("max_agents_per_session", texts::TOO_MANY_AGENTS));
        }
        Ok(())
    }

    /// Names `conn` at its join: the relay's id for it (made once, with `ids`) and, for an
    /// agent, `requested` or `agent-` and the end of the id. Returns both.
    pub(super) fn name(
        &mut self,
        conn: ConnId,
        role: Role,
        requested: Option<String>,
        ids: &mut dyn IdGen,
    ) -> Option<(ClientId, Option<String>)> {
        let c = self.conns.get_mut(&conn)?;
        let client_id = c
            .client_id
            .get_or_insert_with(|| ClientId::new(ids.next_id().to_string()))
            .clone();
        c.name = match role {
            Role::Host => None,
            Role::Agent => Some(requested.unwrap_or_else(|| {
                let tail = client_id.len().saturating_sub(6);
                format!("agent-{}", client_id.get(tail..).unwrap_or_default())
            })),
        };
        Some((client_id, c.name.clone()))
    }

    /// Makes `conn` a member of `session` in `role` (a host takes the host's seat).
    pub(super) fn seat(&mut self, conn: ConnId, session: &SessionId, role: Role) {
        if let Some(c) = self.conns.get_mut(&conn) {
            c.state = ConnState::Joined {
                session: session.clone(),
                role,
            };
        }
        let s = self.sessions.entry(session.clone()).or_default();
        match role {
            Role::Host => s.host = Some(conn),
            Role::Agent => s.agents.push(conn),
        }
    }

    /// Leaves `conn` unjoined and returns the session and role it had joined.
    pub(super) fn unjoin(&mut self, conn: ConnId) -> Option<(SessionId, Role)> {
        let c = self.conns.get_mut(&conn)?;
        match std::mem::replace(&mut c.state, ConnState::Unjoined) {
            ConnState::Joined { session, role } => Some((session, role)),
            other => {
                c.state = other;
                None
            }
        }
    }

    /// Takes `conn` out of `session`'s seats; for a host, whether it held the host's seat.
    pub(super) fn unseat(&mut self, conn: ConnId, session: &SessionId, role: Role) -> bool {
        let Some(s) = self.sessions.get_mut(session) else {
            return false;
        };
        match role {
            Role::Host if s.host == Some(conn) => {
                s.host = None;
                true
            }
            Role::Host => false,
            Role::Agent => {
                s.agents.retain(|a| *a != conn);
                true
            }
        }
    }

    /// Forgets `session` if it has no member left; whether it did.
    pub(super) fn remove_if_empty(&mut self, session: &SessionId) -> bool {
        let empty = self
            .sessions
            .get(session)
            .is_some_and(|s| s.host.is_none() && s.agents.is_empty());
        if empty {
            self.sessions.remove(session);
        }
        empty
    }

    /// The host of `session` and its agents as `relay.presence` lists them.
    pub(super) fn presence(&self, session: &SessionId) -> Option<(ConnId, Vec<PresenceAgent>)> {
        let s = self.sessions.get(session)?;
        let host = s.host?;
        let agents = s
            .agents
            .iter()
            .filter_map(|a| self.conns.get(a))
            .map(|c| PresenceAgent {
                id: c
                    .client_id
                    .as_ref()
                    .map_or_else(String::new, |id| id.as_str().to_owned()),
                name: c.name.clone().unwrap_or_default(),
            })
            .collect();
        Some((host, agents))
    }
}
