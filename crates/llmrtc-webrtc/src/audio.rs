//! The audio tracks of a peer (feature `opus`): the client's microphone in (Opus → PCM) and
//! TTS out (PCM → Opus, one 20 ms frame every 20 ms).

use std::time::{Duration, Instant};

use str0m::media::{Frequency, MediaTime, Mid};
use str0m::Rtc;

use crate::opus::{OpusDecoder, OpusEncoder, FRAME_SAMPLES};

/// The time one Opus frame plays.
const FRAME: Duration = Duration::from_millis(20);

/// Audio from the client's microphone track.
pub(crate) struct TrackIn {
    dec: OpusDecoder,
    /// Packets that did not decode (dropped).
    pub(crate) bad_packets: u64,
}

impl TrackIn {
    /// A decoder; `None` if libopus refuses to make one.
    pub(crate) fn new() -> Option<Self> {
        Some(Self {
            dec: OpusDecoder::new().ok()?,
            bad_packets: 0,
        })
    }

    /// Decodes one RTP payload to 48 kHz mono PCM; a packet that does not decode is
    /// dropped and counted.
    pub(crate) fn decode(&mut self, payload: &[u8]) -> Option<&[i16]> {
        match self.dec.decode(payload) {
            Ok(pcm) => Some(pcm),
            Err(_) => {
                self.bad_packets += 1;
                None
            }
        }
    }
}

/// TTS for the client, paced onto an outbound track.
pub(crate) struct TrackOut {
    mid: Mid,
    enc: OpusEncoder,
    /// When the next frame is due; `None` while nothing is buffered.
    next: Option<Instant>,
    rtp_time: u64,
}

impl TrackOut {
    /// An encoder for the track `mid`; `None` if libopus refuses to make one.
    pub(crate) fn new(mid: Mid) -> Option<Self> {
        Some(Self {
            mid,
            enc: OpusEncoder::new().ok()?,
            next: None,
            rtp_time: 0,
        })
    }

    /// The track's m-line.
    pub(crate) fn mid(&self) -> Mid {
        self.mid
    }

    /// Queues PCM at `sample_rate`; frames start going out at `now`.
    pub(crate) fn push(&mut self, samples: &[i16], sample_rate: u32, now: Instant) {
        if self.enc.push_pcm(samples, sample_rate).is_ok() && self.next.is_none() {
            self.next = Some(now);
        }
    }

    /// The reply ended: the last partial frame is padded and played out.
    pub(crate) fn finish(&mut self) {
        self.enc.finish();
    }

    /// Barge-in: what is buffered is dropped now.
    pub(crate) fn clear(&mut self) {
        self.enc.clear();
        self.next = None;
    }

    /// When the next frame is due.
    pub(crate) fn next_due(&self) -> Option<Instant> {
        self.next
    }

    /// Writes every frame due at `now` to `rtc` (at most a second's worth after a stall,
    /// so a late timer does not burst).
    pub(crate) fn send_due(&mut self, rtc: &mut Rtc, now: Instant) {
        let mut budget = 50;
        while let Some(due) = self.next.filter(|t| *t <= now) {
            let Some(frame) = self.enc.next_frame() else {
                self.next = None;
                return;
            };
            if let (Ok(frame), Some(writer)) = (frame, rtc.writer(self.mid)) {
                let pt = writer.payload_params().next().map(|p| p.pt());
                if let Some(pt) = pt {
                    let time = MediaTime::new(self.rtp_time, Frequency::FORTY_EIGHT_KHZ);
                    let _ = writer.write(pt, due, time, frame);
                }
            }
            self.rtp_time += FRAME_SAMPLES as u64;
            budget -= 1;
            self.next = Some(if budget == 0 {
                now + FRAME
            } else {
                due + FRAME
            });
            if budget == 0 {
                return;
            }
        }
    }
}
