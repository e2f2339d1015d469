//! What the server emits: frames for a session's connection (with their data-channel
//! copies), `error` messages, close requests and events, all through one [`Outbox`].

use agentwire_core::{CloseCode, ConnId, FrameBuf, Outbox};

use crate::config::ServerConfig;
use crate::event::ServerEvent;
use crate::message::ErrorCode;
use crate::message::{Channel, ErrorMessage, ServerMessage};

use super::requests::Requests;

/// Where a session's frames go: its connection, whether that connection's WebRTC data
/// channel is open (then payload messages are also emitted as [`ServerEvent::DataChannel`]),
/// and whether it receives TTS on an audio track ([`ServerEvent::TrackAudio`]).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Link {
    pub(crate) conn: ConnId,
    pub(crate) dc_open: bool,
    pub(crate) audio_track: bool,
}

/// The server's outputs and the buffer messages are encoded in.
#[derive(Debug)]
pub(crate) struct Wire {
    out: Outbox<ServerEvent>,
    scratch: Vec<u8>,
}

impl Wire {
    /// Nothing queued.
    pub(crate) fn new() -> Self {
        Self {
            out: Outbox::new(),
            scratch: Vec::new(),
        }
    }

    /// The output queue (for requests to cancel, and for draining).
    pub(crate) fn out(&mut self) -> &mut Outbox<ServerEvent> {
        &mut self.out
    }

    /// Encodes `msg` and sends it to `to`.
    pub(crate) fn send(&mut self, to: Link, msg: &ServerMessage) {
        self.scratch.clear();
        msg.encode(&mut self.scratch);
        let frame = FrameBuf::json_from_slice(&self.scratch);
        self.send_frame(to, frame, msg.channel());
    }

    /// A frame built by `write` (a fast-path encoder) in the scratch buffer.
    pub(crate) fn frame_with(&mut self, write: impl FnOnce(&mut Vec<u8>)) -> FrameBuf {
        self.scratch.clear();
        write(&mut self.scratch);
        FrameBuf::json_from_slice(&self.scratch)
    }

    /// Sends `frame` to `to`; a payload message ([`Channel::Both`]) is also emitted as its
    /// data-channel copy while the channel is open.
    pub(crate) fn send_frame(&mut self, to: Link, frame: FrameBuf, channel: Channel) {
        if to.dc_open && channel == Channel::Both {
            self.out.send(to.conn, frame.clone());
            self.out.event(ServerEvent::DataChannel {
                conn: to.conn,
                frame,
            });
        } else {
            self.out.send(to.conn, frame);
        }
    }

    /// Sends `error` to `to` and reports it ([`ServerEvent::ErrorSent`]).
    pub(crate) fn error(&mut self, to: Link, code: ErrorCode, message: String) {
        let msg = ServerMessage::Error(ErrorMessage {
            code: code.clone(),
            message: message.clone(),
        });
        self.send(to, &msg);
        self.out.event(ServerEvent::ErrorSent {
            conn: to.conn,
            code,
            message,
        });
    }

    /// Queues a close of `conn`.
    pub(crate) fn close(&mut self, conn: ConnId, code: CloseCode, reason: &'static str) {
        self.out.close(conn, code, reason);
    }

    /// Emits `event`.
    pub(crate) fn event(&mut self, event: ServerEvent) {
        self.out.event(event);
    }
}

/// What a session's work needs from the server: the outputs, the provider requests, the
/// configuration, and where the session's frames go (`None` while it is disconnected, and
/// then nothing is sent).
pub(crate) struct Ctx<'a> {
    pub(crate) wire: &'a mut Wire,
    pub(crate) requests: &'a mut Requests,
    pub(crate) config: &'a ServerConfig,
    pub(crate) link: Option<Link>,
}

impl Ctx<'_> {
    /// Sends `msg` to the session's connection, if it has one.
    pub(crate) fn send(&mut self, msg: &ServerMessage) {
        if let Some(to) = self.link {
            self.wire.send(to, msg);
        }
    }

    /// Sends a payload `frame` (built by a fast-path encoder) to the session's connection,
    /// if it has one.
    pub(crate) fn send_payload(&mut self, write: impl FnOnce(&mut Vec<u8>)) {
        if let Some(to) = self.link {
            let frame = self.wire.frame_with(write);
            self.wire.send_frame(to, frame, Channel::Both);
        }
    }

    /// Sends `error` to the session's connection, if it has one.
    pub(crate) fn error(&mut self, code: ErrorCode, message: String) {
        if let Some(to) = self.link {
            self.wire.error(to, code, message);
        }
    }

    /// Emits `event`.
    pub(crate) fn event(&mut self, event: ServerEvent) {
        self.wire.event(event);
    }

    /// Withdraws `request` (see [`Requests::cancel`]).
    pub(crate) fn cancel(&mut self, request: crate::ids::RequestId) {
        self.requests.cancel(request, self.wire.out());
    }
}
