//! The host's study session: its id (`s-YYYYMMDD-NNN`, numbered per day of the wall clock),
//! who it is for, and a session end awaiting the application's log flush, with its deadline.

use std::time::{Duration, Instant};

use agentwire_core::{ConnId, UtcDateTime, WallClock};

use crate::error::HostCommandError;
use crate::event::EndTicket;
use crate::id::StudySessionId;
use crate::texts::host as host_texts;

/// A session end awaiting its log flush.
#[derive(Debug)]
pub(super) struct Ending {
    pub(super) ticket: EndTicket,
    /// The `session.end` request's id (none when the application ended the session).
    pub(super) reply_to: Option<String>,
    /// The connection the request came on: a reply only makes sense there.
    pub(super) conn: Option<ConnId>,
}

/// The active study session.
#[derive(Debug)]
pub(super) struct Session {
    pub(super) id: StudySessionId,
    study_id: String,
    participant_id: String,
    ending: Option<Ending>,
}

/// What a `session.start` comes to.
#[derive(Debug)]
pub(super) enum Start {
    /// A new session with this id.
    Started(StudySessionId),
    /// A retry of the active session's start (its first answer was lost with a
    /// connection): the same id.
    Again(StudySessionId),
    /// Another session is active (this is its id).
    Refused(StudySessionId),
}

/// The study session, the day's numbering and the flush deadline.
#[derive(Debug)]
pub(super) struct Study {
    session: Option<Session>,
    /// The date and number of the last session id given out.
    numbering: Option<(String, u32)>,
    next_ticket: u64,
    flush_deadline: Option<Instant>,
    wall: WallClock,
}

impl Study {
    /// No session; `unix_ms` is the wall-clock time at `now`.
    pub(super) fn new(now: Instant, unix_ms: u64) -> Self {
        Self {
            session: None,
            numbering: None,
            next_ticket: 0,
            flush_deadline: None,
            wall: WallClock::new(now, unix_ms),
        }
    }

    /// The active session's id.
    pub(super) fn id(&self) -> Option<&str> {
        self.session.as_ref().map(|s| s.id.as_str())
    }

    /// Whether the session's end awaits the log flush.
    pub(super) fn is_ending(&self) -> bool {
        self.session.as_ref().is_some_and(|s| s.ending.is_some())
    }

    /// When a session end fails for want of a flush confirmation.
    pub(super) fn flush_deadline(&self) -> Option<Instant> {
        self.flush_deadline
    }

    /// Re-anchors the wall clock: `unix_ms` is the wall-clock time at `now`.
    pub(super) fn set_wall_clock(&mut self, now: Instant, unix_ms: u64) {
        self.wall.set(now, unix_ms);
    }

    /// Why a request other than a read cannot be served in the current session state, if
    /// it cannot.
    pub(super) fn gate(&self) -> Option<&'static str> {
        match &self.session {
            None => Some(host_texts::NO_SESSION),
            Some(s) if s.ending.is_some() => Some(host_texts::SESSION_ENDING),
            Some(_) => None,
        }
    }

    /// Whether a session end can begin: `Err` if there is no session or it is ending.
    pub(super) fn can_end(&self) -> Result<(), HostCommandError> {
        match &self.session {
            None => Err(HostCommandError::NoSession),
            Some(s) if s.ending.is_some() => Err(HostCommandError::Ending),
            Some(_) => Ok(()),
        }
    }

    /// A `session.start` for `study_id` and `participant_id` at `now`.
    pub(super) fn start(&mut self, study_id: &str, participant_id: &str, now: Instant) -> Start {
        if let Some(s) = &self.session {
            if s.ending.is_none() && s.study_id == study_id && s.participant_id == participant_id {
                return Start::Again(s.id.clone());
            }
            return Start::Refused(s.id.clone());
        }
        let id = self.next_session_id(now);
        self.session = Some(Session {
            id: id.clone(),
            study_id: study_id.to_owned(),
            participant_id: participant_id.to_owned(),
            ending: None,
        });
        Start::Started(id)
    }

    /// Continues the day's numbering after `last_session_id`; ids of an older day than the
    /// one already known change nothing.
    pub(super) fn resume_numbering(
        &mut self,
        last_session_id: &str,
    ) -> Result<(), HostCommandError> {
        let (date, n) =
            parse_session_id(last_session_id).ok_or(HostCommandError::InvalidSessionId)?;
        match &mut self.numbering {
            Some((d, last)) if *d == date => *last = (*last).max(n),
            Some((d, _)) if *d > date => {}
            slot => *slot = Some((date, n)),
        }
        Ok(())
    }

    fn next_session_id(&mut self, now: Instant) -> StudySessionId {
        let date = UtcDateTime::from_unix_ms(self.wall.unix_ms(now)).yyyymmdd();
        let n = match &self.numbering {
            Some((d, last)) if *d == date => last.saturating_add(1),
            _ => 1,
        };
        let id = format!("s-{date}-{n:03}");
        self.numbering = Some((date, n));
        StudySessionId::new(id)
    }

    /// Begins the end of the active session (a new ticket is used up either way): the
    /// request's `reply_to` and `conn` are kept for the answer, and the flush deadline is set
    /// `flush_timeout` from `now`. Returns the ticket and, with a session, its id.
    pub(super) fn begin_end(
        &mut self,
        reply_to: Option<String>,
        conn: Option<ConnId>,
        flush_timeout: Option<Duration>,
        now: Instant,
    ) -> (EndTicket, Option<StudySessionId>) {
        let ticket = EndTicket(self.next_ticket);
        self.next_ticket += 1;
        let Some(s) = self.session.as_mut() else {
            return (ticket, None);
        };
        s.ending = Some(Ending {
            ticket,
            reply_to,
            conn,
        });
        if let Some(t) = flush_timeout {
            self.flush_deadline = Some(now + t);
        }
        (ticket, Some(s.id.clone()))
    }

    /// Takes the end in progress if `ticket` names it.
    pub(super) fn take_ending(&mut self, ticket: EndTicket) -> Result<Ending, HostCommandError> {
        let s = self
            .session
            .as_mut()
            .ok_or(HostCommandError::UnknownTicket)?;
        match &s.ending {
            Some(e) if e.ticket == ticket => {
                self.flush_deadline = None;
                s.ending.take().ok_or(HostCommandError::UnknownTicket)
            }
            _ => Err(HostCommandError::UnknownTicket),
        }
    }

    /// Takes the end in progress once its flush deadline has passed at `now`.
    pub(super) fn expire_flush(&mut self, now: Instant) -> Option<Ending> {
        if self.flush_deadline.is_none_or(|t| t > now) {
            return None;
        }
        self.flush_deadline = None;
        self.session.as_mut().and_then(|s| s.ending.take())
    }

    /// Ends the session: it is no longer active.
    pub(super) fn finish(&mut self) -> Option<Session> {
        self.session.take()
    }
}

/// Splits `s-YYYYMMDD-NNN` into its date and number.
fn parse_session_id(id: &str) -> Option<(String, u32)> {
    let rest = id.strip_prefix("s-")?;
    let (date, n) = rest.split_once('-')?;
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    if date.len() != 8 || !digits(date) || !digits(n) || n.len() > 9 {
        return None;
    }
    Some((date.to_owned(), n.parse().ok()?))
}
