//! Opus for the audio tracks (feature `opus`): RTP payloads to PCM and PCM to 20 ms frames.
//!
//! The codec is the system's libopus (Debian's `libopus-dev`, found with `pkg-config` and
//! linked dynamically) through the [`opus`] crate's safe bindings; nothing here
//! codes audio by hand. WebRTC's Opus runs at 48 kHz; the llmrtc pipeline runs at other
//! rates (speech-to-text at 16 kHz, TTS providers at 24 kHz), so both directions change rate
//! with [`llmrtc_proto::Resampler`].
//!
//! - **In** (the client's microphone): [`OpusDecoder::decode`] takes one RTP payload and
//!   gives its PCM, 48 kHz mono (a stereo packet is mixed down by libopus). Feed it to
//!   `LlmrtcServer::track_audio(conn, &pcm, SAMPLE_RATE, now)`, which resamples for the VAD
//!   and STT. A malformed or oversized payload is an [`OpusError`], never a panic; the
//!   decoder stays usable.
//! - **Out** (TTS): [`OpusEncoder::push_pcm`] (or [`push_pcm_le`](OpusEncoder::push_pcm_le)
//!   for a provider's 16-bit little-endian bytes) takes PCM at any rate and buffers it at
//!   48 kHz; [`OpusEncoder::next_frame`] encodes the next whole 20 ms frame
//!   ([`FRAME_SAMPLES`] samples, RTP timestamp step 960). Send one frame every 20 ms: the
//!   track plays in real time. At the end of an utterance [`OpusEncoder::finish`] pads the
//!   last partial frame with silence; on barge-in [`OpusEncoder::clear`] drops what is
//!   buffered.
//!
//! ```
//! use llmrtc_webrtc::opus::{OpusDecoder, OpusEncoder, FRAME_SAMPLES, SAMPLE_RATE};
//!
//! let mut enc = OpusEncoder::new().unwrap();
//! // 20 ms of a 24 kHz TTS chunk becomes one 48 kHz frame.
//! let tts: Vec<i16> = (0..480).map(|i| ((i % 48) as i16 - 24) * 500).collect();
//! enc.push_pcm(&tts, 24_000).unwrap();
//! enc.finish();
//! let mut dec = OpusDecoder::new().unwrap();
//! while let Some(frame) = enc.next_frame() {
//!     let pcm = dec.decode(&frame.unwrap()).unwrap();
//!     assert_eq!(pcm.len(), FRAME_SAMPLES); // 20 ms at SAMPLE_RATE
//! }
//! assert_eq!(SAMPLE_RATE, 48_000);
//! assert!(dec.decode(&[0x03]).is_err()); // malformed: an error, not a panic
//! ```

use llmrtc_proto::Resampler;

/// The Opus clock and PCM rate on WebRTC tracks (RFC 7587): 48 kHz.
pub const SAMPLE_RATE: u32 = 48_000;
/// Length of one encoded frame in milliseconds: 20 (what browsers send and expect).
pub const FRAME_MS: u32 = 20;
/// Samples in one 20 ms frame at 48 kHz mono (also the RTP timestamp step per frame).
pub const FRAME_SAMPLES: usize = 960;
/// Largest RTP payload the decoder takes: 4,000 bytes, more than any payload that fits a
/// datagram on a 1,500-byte MTU (a longer one cannot have come from a real sender).
pub const MAX_PACKET_BYTES: usize = 4_000;
/// Largest number of samples one packet decodes to: 120 ms at 48 kHz (the Opus maximum).
pub const MAX_PACKET_SAMPLES: usize = 5_760;
/// Default bound on the PCM an [`OpusEncoder`] buffers: 120 s at 48 kHz (11 MiB), more
/// than a spoken reply, so a reply longer than that is refused rather than held.
pub const DEFAULT_MAX_BUFFERED_SAMPLES: usize = 120 * SAMPLE_RATE as usize;
/// Bitrate of encoded frames: 32 kbit/s, what libwebrtc uses for mono speech.
pub const BITRATE: i32 = 32_000;
/// Largest encoded frame (libopus's recommended output buffer for one packet).
const MAX_ENCODED_BYTES: usize = 4_000;

/// What went wrong coding Opus.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum OpusError {
    /// An RTP payload longer than [`MAX_PACKET_BYTES`]; not decoded.
    #[error("opus packet of {len} bytes exceeds {max}")]
    PacketTooLarge {
        /// Its length.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// An empty RTP payload (nothing to decode).
    #[error("empty opus packet")]
    EmptyPacket,
    /// PCM at sample rate 0.
    #[error("sample rate 0")]
    ZeroSampleRate,
    /// Pushing this PCM would buffer more than the encoder's bound; nothing was buffered.
    #[error("opus encoder buffer full ({max} samples)")]
    BufferFull {
        /// The bound in 48 kHz samples.
        max: usize,
    },
    /// libopus refused (a malformed packet, an internal error); `function` is the libopus
    /// call, `code` its error code.
    #[error("libopus {function}: {description} ({code})")]
    Codec {
        /// The libopus function.
        function: &'static str,
        /// libopus's error code (negative).
        code: i32,
        /// libopus's description of it.
        description: String,
    },
}

impl From<::opus::Error> for OpusError {
    fn from(e: ::opus::Error) -> Self {
        Self::Codec {
            function: e.function(),
            code: e.code() as i32,
            description: e.description().to_owned(),
        }
    }
}

/// Decodes one track's Opus RTP payloads to 48 kHz mono PCM.
pub struct OpusDecoder {
    dec: ::opus::Decoder,
    pcm: Vec<i16>,
}

impl std::fmt::Debug for OpusDecoder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpusDecoder").finish_non_exhaustive()
    }
}

impl OpusDecoder {
    /// A decoder for one track (48 kHz, mono output).
    pub fn new() -> Result<Self, OpusError> {
        Ok(Self {
            dec: ::opus::Decoder::new(SAMPLE_RATE, ::opus::Channels::Mono)?,
            pcm: vec![0; MAX_PACKET_SAMPLES],
        })
    }

    /// Decodes one RTP payload; the PCM (48 kHz mono, usually [`FRAME_SAMPLES`] samples)
    /// is valid until the next call. An empty, oversized or malformed payload is an error
    /// and leaves the decoder usable for the next one.
    pub fn decode(&mut self, payload: &[u8]) -> Result<&[i16], OpusError> {
        if payload.is_empty() {
            return Err(OpusError::EmptyPacket);
        }
        if payload.len() > MAX_PACKET_BYTES {
            return Err(OpusError::PacketTooLarge {
                len: payload.len(),
                max: MAX_PACKET_BYTES,
            });
        }
        let n = self.dec.decode(payload, &mut self.pcm, false)?;
        Ok(&self.pcm[..n.min(self.pcm.len())])
    }

    /// Forgets the stream so far (a new track, or after a long gap).
    pub fn reset(&mut self) -> Result<(), OpusError> {
        self.dec.reset_state()?;
        Ok(())
    }
}

/// Encodes PCM at any rate into 20 ms Opus frames at 48 kHz mono, for one outbound track.
pub struct OpusEncoder {
    enc: ::opus::Encoder,
    resampler: Option<Resampler>,
    /// PCM at 48 kHz waiting to be encoded; frames are taken from its front.
    pending: Vec<i16>,
    /// Where the next frame starts in `pending` (consumed samples are dropped in bulk).
    start: usize,
    max_buffered: usize,
    scratch: Vec<i16>,
}

impl std::fmt::Debug for OpusEncoder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpusEncoder")
            .field("buffered", &self.buffered_samples())
            .finish_non_exhaustive()
    }
}

impl OpusEncoder {
    /// An encoder for speech (libopus `VOIP` mode, [`BITRATE`]) buffering at most
    /// [`DEFAULT_MAX_BUFFERED_SAMPLES`].
    pub fn new() -> Result<Self, OpusError> {
        Self::with_max_buffered(DEFAULT_MAX_BUFFERED_SAMPLES)
    }

    /// As [`new`](Self::new), buffering at most `max_samples` samples at 48 kHz.
    pub fn with_max_buffered(max_samples: usize) -> Result<Self, OpusError> {
        let mut enc = ::opus::Encoder::new(
            SAMPLE_RATE,
            ::opus::Channels::Mono,
            ::opus::Application::Voip,
        )?;
        enc.set_bitrate(::opus::Bitrate::Bits(BITRATE))?;
        Ok(Self {
            enc,
            resampler: None,
            pending: Vec::new(),
            start: 0,
            max_buffered: max_samples,
            scratch: Vec::new(),
        })
    }

    /// PCM at 48 kHz buffered and not yet encoded.
    pub fn buffered_samples(&self) -> usize {
        self.pending.len() - self.start
    }

    /// Whole 20 ms frames ready for [`next_frame`](Self::next_frame).
    pub fn frames_ready(&self) -> usize {
        self.buffered_samples() / FRAME_SAMPLES
    }

    /// Buffers mono PCM at `sample_rate`, resampled to 48 kHz (a new rate starts a new
    /// stream for the resampler). Refused as a whole, with nothing buffered, when it would
    /// pass the bound (checked before resampling, so a low rate cannot make it allocate
    /// beyond the bound).
    pub fn push_pcm(&mut self, samples: &[i16], sample_rate: u32) -> Result<(), OpusError> {
        if sample_rate == 0 {
            return Err(OpusError::ZeroSampleRate);
        }
        let at_48k = samples.len() as u64 * u64::from(SAMPLE_RATE) / u64::from(sample_rate);
        if self.buffered_samples() as u64 + at_48k > self.max_buffered as u64 {
            return Err(OpusError::BufferFull {
                max: self.max_buffered,
            });
        }
        self.resample(samples, sample_rate)?;
        self.take_scratch()
    }

    /// As [`push_pcm`](Self::push_pcm) for 16-bit little-endian bytes (a TTS provider's
    /// `pcm` format); an odd last byte is ignored.
    pub fn push_pcm_le(&mut self, bytes: &[u8], sample_rate: u32) -> Result<(), OpusError> {
        let samples: Vec<i16> = bytes
            .chunks_exact(2)
            .map(|b| i16::from_le_bytes([b[0], b[1]]))
            .collect();
        self.push_pcm(&samples, sample_rate)
    }

    /// Resamples `samples` into `scratch`.
    fn resample(&mut self, samples: &[i16], sample_rate: u32) -> Result<(), OpusError> {
        if sample_rate == 0 {
            return Err(OpusError::ZeroSampleRate);
        }
        let keep = self
            .resampler
            .as_ref()
            .is_some_and(|r| r.from_rate() == sample_rate);
        if !keep {
            self.resampler = Resampler::new(sample_rate, SAMPLE_RATE);
        }
        self.scratch.clear();
        match self.resampler.as_mut() {
            Some(r) => r.process(samples, &mut self.scratch),
            None => return Err(OpusError::ZeroSampleRate),
        }
        Ok(())
    }

    /// Moves `scratch` into the buffer, within the bound.
    fn take_scratch(&mut self) -> Result<(), OpusError> {
        if self.buffered_samples() + self.scratch.len() > self.max_buffered {
            self.scratch.clear();
            return Err(OpusError::BufferFull {
                max: self.max_buffered,
            });
        }
        if self.start > 0 && self.start >= self.pending.len() / 2 {
            self.pending.drain(..self.start);
            self.start = 0;
        }
        self.pending.extend_from_slice(&self.scratch);
        self.scratch.clear();
        Ok(())
    }

    /// Encodes the next whole 20 ms frame, if one is buffered: one RTP payload.
    pub fn next_frame(&mut self) -> Option<Result<Vec<u8>, OpusError>> {
        if self.frames_ready() == 0 {
            return None;
        }
        let frame = &self.pending[self.start..self.start + FRAME_SAMPLES];
        self.start += FRAME_SAMPLES;
        let out = self
            .enc
            .encode_vec(frame, MAX_ENCODED_BYTES)
            .map_err(OpusError::from);
        if self.start == self.pending.len() {
            self.pending.clear();
            self.start = 0;
        }
        Some(out)
    }

    /// Pads a partial last frame with silence so that it can be taken (the end of an
    /// utterance), and starts the resampler's next stream afresh.
    pub fn finish(&mut self) {
        let partial = self.buffered_samples() % FRAME_SAMPLES;
        if partial != 0 {
            let pad = FRAME_SAMPLES - partial;
            self.pending.extend(std::iter::repeat_n(0, pad));
        }
        if let Some(r) = self.resampler.as_mut() {
            r.reset();
        }
    }

    /// Drops everything buffered (barge-in: the rest of the reply is not played).
    pub fn clear(&mut self) {
        self.pending.clear();
        self.start = 0;
        if let Some(r) = self.resampler.as_mut() {
            r.reset();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tone(rate: u32, hz: f64, samples: usize, amp: f64) -> Vec<i16> {
        (0..samples)
            .map(|i| {
                let t = i as f64 / f64::from(rate);
                (amp * (2.0 * std::f64::consts::PI * hz * t).sin()) as i16
            })
            .collect()
    }

    fn rms(s: &[i16]) -> f64 {
        let sum: f64 = s.iter().map(|&x| f64::from(x).powi(2)).sum();
        (sum / s.len().max(1) as f64).sqrt()
    }

    /// The frequency of a pure tone from its zero crossings.
    fn frequency(s: &[i16], rate: u32) -> f64 {
        let c = s.windows(2).filter(|w| (w[0] < 0) != (w[1] < 0)).count();
        c as f64 * f64::from(rate) / s.len() as f64 / 2.0
    }

    fn round_trip(input: &[i16], rate: u32) -> Vec<i16> {
        let mut enc = OpusEncoder::new().unwrap();
        let mut dec = OpusDecoder::new().unwrap();
        let mut out = Vec::new();
        // Pushed in 10 ms pieces, as a TTS stream arrives.
        for piece in input.chunks(rate as usize / 100) {
            enc.push_pcm(piece, rate).unwrap();
            while let Some(frame) = enc.next_frame() {
                let frame = frame.unwrap();
                assert!(!frame.is_empty() && frame.len() <= MAX_ENCODED_BYTES);
                let pcm = dec.decode(&frame).unwrap();
                assert_eq!(pcm.len(), FRAME_SAMPLES);
                out.extend_from_slice(pcm);
            }
        }
        enc.finish();
        while let Some(frame) = enc.next_frame() {
            out.extend_from_slice(dec.decode(&frame.unwrap()).unwrap());
        }
        out
    }

    #[test]
    fn a_round_trip_keeps_a_tones_energy_and_frequency() {
        for (rate, hz) in [(48_000, 440.0), (24_000, 300.0), (16_000, 1_000.0)] {
            let input = tone(rate, hz, rate as usize, 8_000.0); // 1 s
            let out = round_trip(&input, rate);
            // 1 s at 48 kHz, rounded up to whole frames.
            assert_eq!(out.len(), 50 * FRAME_SAMPLES, "{rate} Hz input");
            // Skip the codec's start-up (its look-ahead delay) before measuring.
            let steady = &out[4_800..out.len() - 4_800];
            let f = frequency(steady, SAMPLE_RATE);
            assert!((f - hz).abs() < hz * 0.02, "{rate} Hz input: {f} Hz out");
            let ratio = rms(steady) / rms(&input);
            assert!(
                (0.7..1.3).contains(&ratio),
                "{rate} Hz input: energy ratio {ratio}"
            );
        }
    }

    #[test]
    fn silence_stays_silent() {
        let out = round_trip(&vec![0; 48_000], 48_000);
        assert!(rms(&out) < 10.0, "{}", rms(&out));
    }

    #[test]
    fn malformed_empty_and_oversized_packets_are_errors_and_the_decoder_goes_on() {
        let mut dec = OpusDecoder::new().unwrap();
        assert_eq!(dec.decode(&[]), Err(OpusError::EmptyPacket));
        assert_eq!(
            dec.decode(&vec![0u8; MAX_PACKET_BYTES + 1]),
            Err(OpusError::PacketTooLarge {
                len: MAX_PACKET_BYTES + 1,
                max: MAX_PACKET_BYTES
            })
        );
        // Code 3 (an arbitrary number of frames) without its frame-count byte.
        assert!(matches!(
            dec.decode(&[0x03]),
            Err(OpusError::Codec { code: -4, .. })
        ));
        // Code 3 asking for 63 frames of 20 ms (over Opus's 120 ms per packet).
        assert!(dec.decode(&[0x0b, 0x3f, 0, 0, 0]).is_err());
        // Arbitrary bytes never panic, whatever libopus makes of them.
        let mut x: u32 = 0x1234_5678;
        for len in 1..600 {
            let bytes: Vec<u8> = (0..len)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 17;
                    x ^= x << 5;
                    x as u8
                })
                .collect();
            if let Ok(pcm) = dec.decode(&bytes) {
                assert!(pcm.len() <= MAX_PACKET_SAMPLES);
            }
        }
        // Still decodes a good packet.
        let mut enc = OpusEncoder::new().unwrap();
        enc.push_pcm(&tone(48_000, 440.0, FRAME_SAMPLES, 5_000.0), 48_000)
            .unwrap();
        let frame = enc.next_frame().unwrap().unwrap();
        assert_eq!(dec.decode(&frame).unwrap().len(), FRAME_SAMPLES);
    }

    #[test]
    fn the_encoder_buffer_is_bounded_and_clear_drops_it() {
        let mut enc = OpusEncoder::with_max_buffered(2 * FRAME_SAMPLES).unwrap();
        enc.push_pcm(&[100; FRAME_SAMPLES], 48_000).unwrap();
        assert_eq!(
            enc.push_pcm(&[100; 2 * FRAME_SAMPLES], 48_000),
            Err(OpusError::BufferFull {
                max: 2 * FRAME_SAMPLES
            })
        );
        assert_eq!(enc.buffered_samples(), FRAME_SAMPLES);
        assert_eq!(enc.push_pcm(&[1], 0), Err(OpusError::ZeroSampleRate));
        // 1 Hz would be 48,000 samples each: refused before anything is resampled.
        assert_eq!(
            enc.push_pcm(&[1; 1_000], 1),
            Err(OpusError::BufferFull {
                max: 2 * FRAME_SAMPLES
            })
        );
        enc.push_pcm_le(&[1, 0, 2, 0, 3], 48_000).unwrap(); // two samples, odd byte ignored
        assert_eq!(enc.buffered_samples(), FRAME_SAMPLES + 2);
        assert_eq!(enc.frames_ready(), 1);
        enc.clear();
        assert_eq!(enc.buffered_samples(), 0);
        assert!(enc.next_frame().is_none());
        // Taking frames frees room.
        for _ in 0..10 {
            enc.push_pcm(&[7; FRAME_SAMPLES], 48_000).unwrap();
            assert!(enc.next_frame().unwrap().is_ok());
        }
        assert_eq!(enc.buffered_samples(), 0);
    }
}
