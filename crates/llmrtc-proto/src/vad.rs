//! Energy-based voice activity detection on 16-bit mono PCM.
//!
//! The signal is cut into frames of [`VadConfig::frame_ms`]; a frame is *loud* when its RMS
//! is at least [`VadConfig::start_rms`] and *quiet* when below [`VadConfig::end_rms`] (the
//! gap between the two is hysteresis). Speech starts after [`VadConfig::min_speech_ms`] of
//! consecutive loud frames and ends after [`VadConfig::silence_ms`] of consecutive quiet
//! ones. The detector keeps at most one partial frame and the pre-roll, so its memory is
//! bounded whatever it is fed.

use std::collections::VecDeque;

/// Thresholds of the detector. Defaults suit 16-bit speech at normal level.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct VadConfig {
    /// Analysis frame length in milliseconds. Default 20.
    pub frame_ms: u32,
    /// RMS (in 16-bit sample units) at or above which a frame is loud. Default 500
    /// (about -36 dBFS).
    pub start_rms: u32,
    /// RMS below which a frame is quiet. Default 300 (about -41 dBFS).
    pub end_rms: u32,
    /// Consecutive loud time that starts speech. Default 60 ms.
    pub min_speech_ms: u32,
    /// Consecutive quiet time that ends speech. Default 500 ms.
    pub silence_ms: u32,
    /// Audio kept from before speech started and prepended to the segment. Default 200 ms.
    pub pre_roll_ms: u32,
    /// Whether the end of each `audio` message ends speech that is still going on. Default
    /// `true`: the spec's `audio` carries one recorded utterance, which may stop without
    /// trailing silence. Set `false` for clients that stream short chunks.
    pub end_of_message_ends_speech: bool,
    /// Lowest sample rate the detector runs at. Default 8,000 Hz (telephone audio): below
    /// it a frame holds too few samples and speech's energy (300-3,400 Hz) is folded away,
    /// so the thresholds mean nothing. The server answers `audio` at a lower rate with
    /// `error VAD_ERROR`: the WAV is well formed, the detector cannot judge it.
    pub min_sample_rate: u32,
    /// Highest sample rate the detector runs at. Default 384,000 Hz (the highest rate
    /// audio interfaces record); above it, `error VAD_ERROR` as for
    /// [`min_sample_rate`](Self::min_sample_rate).
    pub max_sample_rate: u32,
}

impl VadConfig {
    /// Whether the detector runs at `sample_rate` (within
    /// [`min_sample_rate`](Self::min_sample_rate)..=[`max_sample_rate`](Self::max_sample_rate)).
    pub fn supports_rate(&self, sample_rate: u32) -> bool {
        (self.min_sample_rate..=self.max_sample_rate).contains(&sample_rate)
    }
}

impl Default for VadConfig {
    fn default() -> Self {
        Self {
            frame_ms: 20,
            start_rms: 500,
            end_rms: 300,
            min_speech_ms: 60,
            silence_ms: 500,
            pre_roll_ms: 200,
            end_of_message_ends_speech: true,
            min_sample_rate: 8_000,
            max_sample_rate: 384_000,
        }
    }
}

/// What the detector saw in a batch of samples.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum VadEvent {
    /// Speech started; `pre_roll` holds the samples just before and including the loud frames
    /// that started it (the start of the segment).
    SpeechStart {
        /// The segment's first samples.
        pre_roll: Vec<i16>,
    },
    /// Samples inside a speech segment (after the start).
    Speech(Vec<i16>),
    /// Speech ended (after `silence_ms` of quiet, or at the end of a message).
    SpeechEnd,
}

/// A streaming energy detector for one audio stream at one sample rate.
#[derive(Debug, Clone)]
pub struct Vad {
    config: VadConfig,
    sample_rate: u32,
    frame_len: usize,
    partial: Vec<i16>,
    /// Recent frames while not speaking (pre-roll plus the loud run so far).
    recent: VecDeque<Vec<i16>>,
    recent_cap: usize,
    loud_run: u32,
    quiet_run: u32,
    speaking: bool,
}

impl Vad {
    /// A detector for `sample_rate` Hz mono samples.
    pub fn new(config: VadConfig, sample_rate: u32) -> Self {
        let frame_ms = config.frame_ms.clamp(1, 1000);
        let frame_len = (u64::from(sample_rate.max(1)) * u64::from(frame_ms) / 1000).max(1);
        let frame_len = usize::try_from(frame_len.min(1 << 20)).unwrap_or(1 << 20);
        let frames = |ms: u32| ms.div_ceil(frame_ms);
        let recent_cap =
            (frames(config.pre_roll_ms) + frames(config.min_speech_ms)).max(1) as usize;
        Self {
            config,
            sample_rate,
            frame_len,
            partial: Vec::new(),
            recent: VecDeque::new(),
            recent_cap,
            loud_run: 0,
            quiet_run: 0,
            speaking: false,
        }
    }

    /// The sample rate this detector was made for.
    pub fn sample_rate(&self) -> u32 {
        self.sample_rate
    }

    /// Whether speech is going on.
    pub fn is_speaking(&self) -> bool {
        self.speaking
    }

    fn frames(&self, ms: u32) -> u32 {
        ms.div_ceil(self.config.frame_ms.clamp(1, 1000)).max(1)
    }

    /// Feeds samples; appends what happened to `events` (in order).
    pub fn push(&mut self, samples: &[i16], events: &mut Vec<VadEvent>) {
        let mut rest = samples;
        while !rest.is_empty() {
            let need = self.frame_len - self.partial.len();
            let take = need.min(rest.len());
            self.partial.extend_from_slice(&rest[..take]);
            rest = &rest[take..];
            if self.partial.len() == self.frame_len {
                let frame = std::mem::take(&mut self.partial);
                self.frame(frame, events);
            }
        }
    }

    /// Ends the stream: a partial frame counts as part of the speech going on, and speech
    /// still going on ends.
    pub fn finish(&mut self, events: &mut Vec<VadEvent>) {
        let partial = std::mem::take(&mut self.partial);
        if self.speaking {
            if !partial.is_empty() {
                events.push(VadEvent::Speech(partial));
            }
            events.push(VadEvent::SpeechEnd);
        }
        self.reset();
    }

    /// Forgets everything (speech, pre-roll, partial frame) without reporting.
    pub fn reset(&mut self) {
        self.partial.clear();
        self.recent.clear();
        self.loud_run = 0;
        self.quiet_run = 0;
        self.speaking = false;
    }

    fn frame(&mut self, frame: Vec<i16>, events: &mut Vec<VadEvent>) {
        let rms = rms(&frame);
        if self.speaking {
            if rms < u64::from(self.config.end_rms) {
                self.quiet_run += 1;
            } else {
                self.quiet_run = 0;
            }
            events.push(VadEvent::Speech(frame));
            if self.quiet_run >= self.frames(self.config.silence_ms) {
                events.push(VadEvent::SpeechEnd);
                self.speaking = false;
                self.quiet_run = 0;
                self.loud_run = 0;
            }
            return;
        }
        if rms >= u64::from(self.config.start_rms) {
            self.loud_run += 1;
        } else {
            self.loud_run = 0;
        }
        self.recent.push_back(frame);
        while self.recent.len() > self.recent_cap {
            self.recent.pop_front();
        }
        if self.loud_run >= self.frames(self.config.min_speech_ms) {
            let pre_roll: Vec<i16> = self.recent.drain(..).flatten().collect();
            events.push(VadEvent::SpeechStart { pre_roll });
            self.speaking = true;
            self.quiet_run = 0;
        }
    }
}

/// Root mean square of `frame`, in sample units (0 for an empty frame).
pub fn rms(frame: &[i16]) -> u64 {
    if frame.is_empty() {
        return 0;
    }
    let sum: u64 = frame
        .iter()
        .map(|&s| {
            let s = i64::from(s);
            (s * s) as u64
        })
        .sum();
    isqrt(sum / frame.len() as u64)
}

fn isqrt(n: u64) -> u64 {
    if n < 2 {
        return n;
    }
    let mut x = (n as f64).sqrt() as u64;
    while x * x > n {
        x -= 1;
    }
    while (x + 1) * (x + 1) <= n {
        x += 1;
    }
    x
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tone(n: usize, amp: i16) -> Vec<i16> {
        (0..n)
            .map(|i| if i % 2 == 0 { amp } else { -amp })
            .collect()
    }

    #[test]
    fn rms_of_a_square_wave_is_its_amplitude() {
        assert_eq!(rms(&tone(100, 1000)), 1000);
        assert_eq!(rms(&[]), 0);
        assert_eq!(rms(&[i16::MIN; 4]), 32768);
    }

    #[test]
    fn speech_starts_after_min_speech_and_ends_after_silence() {
        let mut vad = Vad::new(VadConfig::default(), 16000); // 320-sample frames
        let mut ev = Vec::new();
        vad.push(&vec![0; 320 * 20], &mut ev);
        assert!(ev.is_empty());
        vad.push(&tone(320 * 2, 2000), &mut ev);
        assert!(ev.is_empty(), "two loud frames are not yet 60 ms");
        vad.push(&tone(320, 2000), &mut ev);
        let [VadEvent::SpeechStart { pre_roll }] = &ev[..] else {
            panic!("{ev:?}")
        };
        // 10 frames of pre-roll + 3 loud ones, capped by the ring.
        assert_eq!(pre_roll.len(), 320 * 13);
        ev.clear();
        vad.push(&vec![0; 320 * 24], &mut ev);
        assert!(!ev.contains(&VadEvent::SpeechEnd));
        vad.push(&vec![0; 320], &mut ev);
        assert_eq!(ev.last(), Some(&VadEvent::SpeechEnd));
        assert!(!vad.is_speaking());
    }

    #[test]
    fn finish_ends_ongoing_speech_and_hysteresis_holds_it() {
        let mut vad = Vad::new(VadConfig::default(), 8000);
        let mut ev = Vec::new();
        vad.push(&tone(160 * 3, 2000), &mut ev);
        assert!(vad.is_speaking());
        // Between end_rms and start_rms: neither starts nor ends.
        vad.push(&tone(160 * 100, 400), &mut ev);
        assert!(vad.is_speaking());
        vad.push(&tone(7, 400), &mut ev);
        ev.clear();
        vad.finish(&mut ev);
        assert_eq!(ev, [VadEvent::Speech(tone(7, 400)), VadEvent::SpeechEnd]);
    }
}
