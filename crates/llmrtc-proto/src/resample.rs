//! Streaming sample-rate conversion of 16-bit mono PCM, in integer arithmetic.
//!
//! WebRTC audio runs at 48 kHz (Opus), speech-to-text at 16 kHz and TTS providers at 24 kHz
//! or 22.05 kHz, so audio on a WebRTC track changes rate on its way in and out. A
//! [`Resampler`] converts one stream chunk by chunk, keeping what it needs between chunks,
//! so the output does not depend on how the input was cut:
//!
//! - **down** (`to < from`): each output sample is the mean of the input samples that fall
//!   in its period (a box filter, which damps what would fold down past the new Nyquist
//!   frequency better than picking samples does);
//! - **up** (`to > from`): linear interpolation between neighbouring input samples;
//! - **equal rates**: copied.
//!
//! Rates are reduced by their greatest common divisor, and positions are exact fractions,
//! so there is no drift over long streams. Memory is constant.

/// A streaming converter from one sample rate to another (16-bit mono).
#[derive(Debug, Clone)]
pub struct Resampler {
    from_rate: u32,
    to_rate: u32,
    /// `from_rate / gcd`.
    from: u64,
    /// `to_rate / gcd`.
    to: u64,
    /// Down: sum and count of the input samples in the current output period, and the
    /// position within that period in units of `1/from`.
    acc: i64,
    count: u64,
    phase: u64,
    /// Up: the last input sample of the previous chunk, and the position of the next
    /// output sample after it, in units of `1/to` input samples.
    prev: Option<i16>,
    pos: u64,
}

impl Resampler {
    /// A converter from `from_rate` Hz to `to_rate` Hz; `None` when either is 0.
    pub fn new(from_rate: u32, to_rate: u32) -> Option<Self> {
        if from_rate == 0 || to_rate == 0 {
            return None;
        }
        let g = gcd(u64::from(from_rate), u64::from(to_rate));
        Some(Self {
            from_rate,
            to_rate,
            from: u64::from(from_rate) / g,
            to: u64::from(to_rate) / g,
            acc: 0,
            count: 0,
            phase: 0,
            prev: None,
            pos: 0,
        })
    }

    /// The input rate in Hz.
    pub fn from_rate(&self) -> u32 {
        self.from_rate
    }

    /// The output rate in Hz.
    pub fn to_rate(&self) -> u32 {
        self.to_rate
    }

    /// Forgets the stream so far: the next chunk starts a new one.
    pub fn reset(&mut self) {
        self.acc = 0;
        self.count = 0;
        self.phase = 0;
        self.prev = None;
        self.pos = 0;
    }

    /// Converts the next chunk of the stream, appending the output to `out` (about
    /// `input.len() * to / from` samples; up to one output sample's worth of input waits
    /// for the next chunk).
    pub fn process(&mut self, input: &[i16], out: &mut Vec<i16>) {
        use std::cmp::Ordering;
        match self.to.cmp(&self.from) {
            Ordering::Equal => out.extend_from_slice(input),
            Ordering::Less => self.down(input, out),
            Ordering::Greater => self.up(input, out),
        }
    }

    fn down(&mut self, input: &[i16], out: &mut Vec<i16>) {
        out.reserve(usize::try_from(input.len() as u64 * self.to / self.from + 1).unwrap_or(0));
        for &s in input {
            self.acc += i64::from(s);
            self.count += 1;
            self.phase += self.to;
            if self.phase >= self.from {
                self.phase -= self.from;
                out.push(mean(self.acc, self.count));
                self.acc = 0;
                self.count = 0;
            }
        }
    }

    fn up(&mut self, input: &[i16], out: &mut Vec<i16>) {
        if input.is_empty() {
            return;
        }
        // The virtual stream is `prev` (when there is one) followed by `input`.
        let offset = usize::from(self.prev.is_some());
        let len = (input.len() + offset) as u64;
        let at = |i: u64| -> i16 {
            let i = usize::try_from(i).unwrap_or(usize::MAX);
            match (i, self.prev) {
                (0, Some(p)) if offset == 1 => p,
                _ => input.get(i - offset).copied().unwrap_or(0),
            }
        };
        out.reserve(usize::try_from(input.len() as u64 * self.to / self.from + 1).unwrap_or(0));
        // Emit while both neighbours of the position are known.
        loop {
            let i = self.pos / self.to;
            if i + 1 >= len {
                break;
            }
            let frac = (self.pos % self.to) as i64;
            let (a, b) = (i64::from(at(i)), i64::from(at(i + 1)));
            let v = a + (b - a) * frac / self.to as i64;
            out.push(v.clamp(i64::from(i16::MIN), i64::from(i16::MAX)) as i16);
            self.pos += self.from;
        }
        // Re-base the position on the last sample, which becomes `prev`.
        self.pos -= (len - 1) * self.to;
        self.prev = input.last().copied();
    }
}

/// The rounded mean of `count` samples summing to `acc`.
fn mean(acc: i64, count: u64) -> i16 {
    let n = i64::try_from(count.max(1)).unwrap_or(i64::MAX);
    let half = if acc >= 0 { n / 2 } else { -(n / 2) };
    ((acc + half) / n).clamp(i64::from(i16::MIN), i64::from(i16::MAX)) as i16
}

fn gcd(mut a: u64, mut b: u64) -> u64 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tone(rate: u32, hz: f64, secs: f64, amp: f64) -> Vec<i16> {
        let n = (f64::from(rate) * secs) as usize;
        (0..n)
            .map(|i| {
                (amp * (2.0 * std::f64::consts::PI * hz * i as f64 / f64::from(rate)).sin()) as i16
            })
            .collect()
    }

    fn rms(s: &[i16]) -> f64 {
        (s.iter().map(|&x| f64::from(x).powi(2)).sum::<f64>() / s.len().max(1) as f64).sqrt()
    }

    /// Zero crossings per second: twice the frequency of a pure tone.
    fn crossings_per_second(s: &[i16], rate: u32) -> f64 {
        let c = s.windows(2).filter(|w| (w[0] < 0) != (w[1] < 0)).count();
        c as f64 * f64::from(rate) / s.len() as f64
    }

    fn convert_in_chunks(from: u32, to: u32, input: &[i16], chunk: usize) -> Vec<i16> {
        let mut r = Resampler::new(from, to).unwrap();
        let mut out = Vec::new();
        for c in input.chunks(chunk) {
            r.process(c, &mut out);
        }
        out
    }

    proptest::proptest! {
        #[test]
        fn any_rates_and_cuts_give_the_expected_length_and_the_same_output(
            from in 8_000u32..400_000,
            to in 8_000u32..400_000,
            input in proptest::collection::vec(proptest::num::i16::ANY, 0..600),
            cut in 1usize..97,
        ) {
            let whole = convert_in_chunks(from, to, &input, input.len().max(1));
            proptest::prop_assert_eq!(convert_in_chunks(from, to, &input, cut), whole.clone());
            let expected = input.len() as f64 * f64::from(to) / f64::from(from);
            let slack = f64::from(to) / f64::from(from) + 2.0;
            proptest::prop_assert!((whole.len() as f64 - expected).abs() <= slack,
                "{} samples for {} expected", whole.len(), expected);
        }
    }

    #[test]
    fn zero_rates_are_refused() {
        assert!(Resampler::new(0, 16_000).is_none());
        assert!(Resampler::new(48_000, 0).is_none());
    }

    #[test]
    fn a_tone_keeps_its_frequency_energy_and_length_across_common_rates() {
        for (from, to) in [
            (48_000, 16_000),
            (16_000, 48_000),
            (24_000, 48_000),
            (22_050, 48_000),
            (44_100, 16_000),
            (48_000, 48_000),
        ] {
            let input = tone(from, 440.0, 1.0, 10_000.0);
            let out = convert_in_chunks(from, to, &input, 480);
            let expected = input.len() as f64 * f64::from(to) / f64::from(from);
            assert!(
                (out.len() as f64 - expected).abs() <= 4.0,
                "{from}->{to}: {}",
                out.len()
            );
            let f = crossings_per_second(&out, to) / 2.0;
            assert!((f - 440.0).abs() < 5.0, "{from}->{to}: {f} Hz");
            let ratio = rms(&out) / rms(&input);
            assert!(
                (0.9..1.05).contains(&ratio),
                "{from}->{to}: energy ratio {ratio}"
            );
        }
    }

    #[test]
    fn the_output_does_not_depend_on_how_the_input_is_cut() {
        for (from, to) in [(48_000, 16_000), (24_000, 48_000), (22_050, 48_000)] {
            let input = tone(from, 300.0, 0.5, 8_000.0);
            let whole = convert_in_chunks(from, to, &input, input.len());
            for chunk in [1, 7, 160, 961] {
                assert_eq!(
                    convert_in_chunks(from, to, &input, chunk),
                    whole,
                    "{from}->{to} by {chunk}"
                );
            }
        }
    }

    #[test]
    fn downsampling_damps_a_tone_above_the_new_nyquist_frequency() {
        // 15 kHz at 48 kHz would fold to 1 kHz at 16 kHz if samples were just picked.
        let input = tone(48_000, 15_000.0, 0.5, 10_000.0);
        let out = convert_in_chunks(48_000, 16_000, &input, 960);
        assert!(
            rms(&out) < rms(&input) * 0.4,
            "{} vs {}",
            rms(&out),
            rms(&input)
        );
    }

    #[test]
    fn extreme_samples_do_not_overflow_and_reset_starts_afresh() {
        let input = vec![i16::MAX, i16::MIN, i16::MAX, i16::MIN, i16::MAX, i16::MAX];
        for (from, to) in [(48_000, 16_000), (8_000, 384_000), (7, 5)] {
            let mut r = Resampler::new(from, to).unwrap();
            let mut a = Vec::new();
            r.process(&input, &mut a);
            r.reset();
            let mut b = Vec::new();
            r.process(&input, &mut b);
            assert_eq!(a, b);
            assert!(!a.is_empty());
        }
    }
}
