//! WAV (RIFF) parsing and writing for `audio` and TTS payloads.
//!
//! Only what the protocol needs: 16-bit PCM, mono or stereo, any sample rate. The parser
//! borrows the samples from the input and never allocates, so it is safe on hostile bytes.

/// Why a WAV file was refused (the server answers `INVALID_AUDIO_FORMAT`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum WavError {
    /// No `RIFF....WAVE` header.
    #[error("not a RIFF/WAVE file")]
    NotWave,
    /// No `fmt ` chunk before the `data` chunk, or one shorter than 16 bytes.
    #[error("missing or short fmt chunk")]
    MissingFormat,
    /// No `data` chunk.
    #[error("missing data chunk")]
    MissingData,
    /// A format other than PCM (1), or extensible (0xFFFE) with a non-PCM subformat.
    #[error("unsupported audio format tag {0} (only PCM)")]
    NotPcm(u16),
    /// Bits per sample other than 16.
    #[error("unsupported {0} bits per sample (only 16)")]
    BitsPerSample(u16),
    /// Channel count other than 1 or 2.
    #[error("unsupported channel count {0} (only mono or stereo)")]
    Channels(u16),
    /// A sample rate of 0, or a block alignment that does not match the channels.
    #[error("inconsistent header (sample rate {sample_rate}, block align {block_align})")]
    Inconsistent {
        /// The header's sample rate.
        sample_rate: u32,
        /// The header's block alignment.
        block_align: u16,
    },
}

/// The format of a parsed WAV file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WavFormat {
    /// 1 (mono) or 2 (stereo).
    pub channels: u16,
    /// Samples per second per channel (any positive rate).
    pub sample_rate: u32,
}

/// A parsed WAV file: its format and its PCM bytes (16-bit little-endian, interleaved).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Wav<'a> {
    /// Channels and sample rate.
    pub format: WavFormat,
    /// The samples, borrowed from the input, cut to whole frames.
    pub pcm: &'a [u8],
}

impl Wav<'_> {
    /// Number of frames (samples per channel).
    pub fn frames(&self) -> usize {
        self.pcm.len() / (2 * usize::from(self.format.channels))
    }

    /// Duration in milliseconds.
    pub fn duration_ms(&self) -> u64 {
        self.frames() as u64 * 1000 / u64::from(self.format.sample_rate.max(1))
    }

    /// The samples mixed down to mono (stereo frames averaged).
    pub fn mono_samples(&self) -> impl Iterator<Item = i16> + '_ {
        let stereo = self.format.channels == 2;
        let step = if stereo { 4 } else { 2 };
        self.pcm.chunks_exact(step).map(move |c| {
            let l = i16::from_le_bytes([c[0], c[1]]);
            if stereo {
                let r = i16::from_le_bytes([c[2], c[3]]);
                ((i32::from(l) + i32::from(r)) / 2) as i16
            } else {
                l
            }
        })
    }
}

/// `KSDATAFORMAT_SUBTYPE_PCM`'s first two bytes (the rest of the GUID is fixed).
const EXTENSIBLE: u16 = 0xFFFE;

/// Parses a WAV file: `RIFF`/`WAVE`, a `fmt ` chunk (PCM 16-bit, mono or stereo, any
/// rate), then the `data` chunk. Other chunks (`LIST`, `fact`, ...) are skipped.
///
/// A `data` size larger than the bytes present (streaming writers put `0xFFFFFFFF`) is cut to
/// what is present; a trailing partial frame is dropped. The RIFF size is not checked, for the
/// same reason.
pub fn parse_wav(bytes: &[u8]) -> Result<Wav<'_>, WavError> {
    if bytes.len() < 12 || &bytes[..4] != b"RIFF" || &bytes[8..12] != b"WAVE" {
        return Err(WavError::NotWave);
    }
    let mut rest = &bytes[12..];
    let mut format = None;
    while rest.len() >= 8 {
        let id = &rest[..4];
        let size = u32::from_le_bytes([rest[4], rest[5], rest[6], rest[7]]) as usize;
        let body_all = &rest[8..];
        let body = &body_all[..size.min(body_all.len())];
        match id {
            b"fmt " => format = Some(parse_fmt(body)?),
            b"data" => {
                let format = format.ok_or(WavError::MissingFormat)?;
                let frame = 2 * usize::from(format.channels);
                let whole = body.len() - body.len() % frame;
                return Ok(Wav {
                    format,
                    pcm: &body[..whole],
                });
            }
            _ => {}
        }
        // Chunks are padded to an even size.
        let skip = size.saturating_add(size & 1);
        rest = body_all.get(skip..).unwrap_or(&[]);
    }
    Err(if format.is_some() {
        WavError::MissingData
    } else {
        WavError::MissingFormat
    })
}

fn parse_fmt(body: &[u8]) -> Result<WavFormat, WavError> {
    if body.len() < 16 {
        return Err(WavError::MissingFormat);
    }
    let u16_at = |i: usize| u16::from_le_bytes([body[i], body[i + 1]]);
    let mut tag = u16_at(0);
    if tag == EXTENSIBLE {
        // cbSize (2) + validBits (2) + channelMask (4), then the subformat GUID.
        tag = if body.len() >= 26 { u16_at(24) } else { 0 };
        if tag != 1 {
            return Err(WavError::NotPcm(EXTENSIBLE));
        }
    }
    if tag != 1 {
        return Err(WavError::NotPcm(tag));
    }
    let channels = u16_at(2);
    let sample_rate = u32::from_le_bytes([body[4], body[5], body[6], body[7]]);
    let block_align = u16_at(12);
    let bits = u16_at(14);
    if bits != 16 {
        return Err(WavError::BitsPerSample(bits));
    }
    if channels != 1 && channels != 2 {
        return Err(WavError::Channels(channels));
    }
    if sample_rate == 0 || block_align != 2 * channels {
        return Err(WavError::Inconsistent {
            sample_rate,
            block_align,
        });
    }
    Ok(WavFormat {
        channels,
        sample_rate,
    })
}

/// Appends a 44-byte-header WAV file of 16-bit PCM to `out`.
///
/// `pcm` is 16-bit little-endian interleaved samples; an odd trailing byte is dropped.
pub fn write_wav(out: &mut Vec<u8>, format: WavFormat, pcm: &[u8]) {
    let frame = 2 * usize::from(format.channels.max(1));
    let pcm = &pcm[..pcm.len() - pcm.len() % frame];
    let data_len = u32::try_from(pcm.len()).unwrap_or(u32::MAX - 36);
    let byte_rate = format.sample_rate * u32::from(format.channels) * 2;
    out.reserve(44 + pcm.len());
    out.extend_from_slice(b"RIFF");
    out.extend_from_slice(&(36 + data_len).to_le_bytes());
    out.extend_from_slice(b"WAVEfmt ");
    out.extend_from_slice(&16u32.to_le_bytes());
    out.extend_from_slice(&1u16.to_le_bytes());
    out.extend_from_slice(&format.channels.to_le_bytes());
    out.extend_from_slice(&format.sample_rate.to_le_bytes());
    out.extend_from_slice(&byte_rate.to_le_bytes());
    out.extend_from_slice(&(format.channels * 2).to_le_bytes());
    out.extend_from_slice(&16u16.to_le_bytes());
    out.extend_from_slice(b"data");
    out.extend_from_slice(&data_len.to_le_bytes());
    out.extend_from_slice(&pcm[..data_len as usize]);
}

/// A mono 16-bit WAV file of `samples`.
pub fn wav_from_samples(sample_rate: u32, samples: &[i16]) -> Vec<u8> {
    let pcm: Vec<u8> = samples.iter().flat_map(|s| s.to_le_bytes()).collect();
    wav_from_pcm(sample_rate, &pcm)
}

/// A mono WAV file of `pcm` (16-bit little-endian samples at `sample_rate`).
pub fn wav_from_pcm(sample_rate: u32, pcm: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(44 + pcm.len());
    write_wav(
        &mut out,
        WavFormat {
            channels: 1,
            sample_rate,
        },
        pcm,
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn write_then_parse_round_trips() {
        let wav = wav_from_samples(16000, &[0, 1, -1, i16::MAX, i16::MIN]);
        let w = parse_wav(&wav).expect("wav");
        assert_eq!(
            w.format,
            WavFormat {
                channels: 1,
                sample_rate: 16000
            }
        );
        assert_eq!(
            w.mono_samples().collect::<Vec<_>>(),
            [0, 1, -1, i16::MAX, i16::MIN]
        );
        assert_eq!(w.frames(), 5);
    }

    #[test]
    fn stereo_is_mixed_down_and_other_formats_are_refused() {
        let mut out = Vec::new();
        let pcm: Vec<u8> = [100i16, 300, -100, -300]
            .iter()
            .flat_map(|s| s.to_le_bytes())
            .collect();
        let stereo = WavFormat {
            channels: 2,
            sample_rate: 44100,
        };
        write_wav(&mut out, stereo, &pcm);
        let w = parse_wav(&out).expect("stereo");
        assert_eq!(w.mono_samples().collect::<Vec<_>>(), [200, -200]);

        let patch = |off: usize, v: &[u8]| {
            let mut b = out.clone();
            b[off..off + v.len()].copy_from_slice(v);
            parse_wav(&b).map(|w| w.format)
        };
        assert_eq!(patch(20, &3u16.to_le_bytes()), Err(WavError::NotPcm(3)));
        assert_eq!(
            patch(34, &8u16.to_le_bytes()),
            Err(WavError::BitsPerSample(8))
        );
        assert_eq!(patch(22, &6u16.to_le_bytes()), Err(WavError::Channels(6)));
        assert!(matches!(
            patch(24, &0u32.to_le_bytes()),
            Err(WavError::Inconsistent { .. })
        ));
        assert_eq!(patch(0, b"RIFX"), Err(WavError::NotWave));
        assert_eq!(parse_wav(&out[..36]), Err(WavError::MissingData));
        assert_eq!(parse_wav(&out[..20]), Err(WavError::MissingFormat));
    }

    #[test]
    fn streaming_data_sizes_are_cut_to_what_is_present() {
        let mut wav = wav_from_samples(8000, &[1, 2, 3]);
        wav[40..44].copy_from_slice(&u32::MAX.to_le_bytes());
        wav.push(9); // half a sample
        let w = parse_wav(&wav).expect("wav");
        assert_eq!(w.frames(), 3);
    }
}
