//! Generated audio: utterances the server's VAD hears as speech, PCM tones for the stand-in
//! TTS, and WAV files on disk.

use std::path::Path;

use agentwire::llmrtc::wav::{wav_from_pcm, wav_from_samples};

/// Sample rate of generated utterances (what browsers' speech pipelines commonly send).
pub const UTTERANCE_RATE: u32 = 16_000;
/// Sample rate of the stand-in TTS (the `tts-chunk` default, INTEROP.md).
pub const TTS_RATE: u32 = 24_000;

/// `ms` of a loud tone with a little vibrato: speech to an energy VAD.
fn voiced(rate: u32, ms: u32, freq: f32) -> Vec<i16> {
    let n = rate as usize * ms as usize / 1000;
    (0..n)
        .map(|i| {
            let t = i as f32 / rate as f32;
            let f = freq * (1.0 + 0.02 * (t * 6.0 * std::f32::consts::TAU).sin());
            (6000.0 * (t * f * std::f32::consts::TAU).sin()) as i16
        })
        .collect()
}

/// One utterance as 16 kHz samples: 300 ms of silence, `speech_ms` of voice, 600 ms of
/// silence (so the VAD sees it start and end).
pub fn utterance_samples(speech_ms: u32) -> Vec<i16> {
    let rate = UTTERANCE_RATE;
    let mut v = vec![0i16; rate as usize * 300 / 1000];
    v.extend(voiced(rate, speech_ms, 180.0));
    v.extend(vec![0i16; rate as usize * 600 / 1000]);
    v
}

/// [`utterance_samples`] as a WAV file.
pub fn utterance_wav(speech_ms: u32) -> Vec<u8> {
    wav_from_samples(UTTERANCE_RATE, &utterance_samples(speech_ms))
}

/// A tone of `ms` at `freq` Hz as 16-bit little-endian mono PCM at [`TTS_RATE`], with 5 ms
/// fades so chunk joins do not click.
pub fn tone_pcm(freq: f32, ms: u32) -> Vec<u8> {
    let rate = TTS_RATE as f32;
    let n = TTS_RATE as usize * ms as usize / 1000;
    let fade = (TTS_RATE as usize / 200).max(1);
    let mut out = Vec::with_capacity(n * 2);
    for i in 0..n {
        let edge = i.min(n - 1 - i).min(fade) as f32 / fade as f32;
        let s = 5000.0 * edge * (i as f32 / rate * freq * std::f32::consts::TAU).sin();
        out.extend_from_slice(&(s as i16).to_le_bytes());
    }
    out
}

/// Writes 16-bit mono PCM at `sample_rate` as a WAV file.
pub fn write_wav_file(path: &Path, sample_rate: u32, pcm: &[u8]) -> std::io::Result<()> {
    std::fs::write(path, wav_from_pcm(sample_rate, pcm))
}
