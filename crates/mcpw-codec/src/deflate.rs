//! Raw deflate engines behind [`Backend`]: one compressor and one decompressor state each,
//! reset between frames instead of rebuilt (a fresh state per 1 KiB frame costs several times
//! the work of the frame).

use miniz_oxide::deflate::core::{create_comp_flags_from_zip_params, CompressorOxide};
use miniz_oxide::inflate::stream::InflateState;
use miniz_oxide::{DataFormat, MZError, MZFlush, MZStatus};

use crate::config::Backend;

/// How a raw inflate step ended.
pub(crate) enum Step {
    /// The deflate stream ended (final block done).
    End,
    /// Progress was made or the output is full; call again.
    More,
    /// No progress: the input ended inside the stream.
    Starved,
    /// The deflate data is invalid.
    Corrupt,
}

/// A raw deflate compressor (no zlib or gzip wrapper).
pub(crate) enum Deflater {
    Miniz(Box<CompressorOxide>),
    #[cfg(feature = "zlib-rs")]
    Zlib(flate2::Compress),
}

impl Deflater {
    pub(crate) fn new(backend: Backend, level: u32) -> Self {
        let level = level.min(9);
        match backend {
            Backend::MinizOxide => Self::Miniz(Box::new(CompressorOxide::new(
                create_comp_flags_from_zip_params(level as i32, -15, 0),
            ))),
            #[cfg(feature = "zlib-rs")]
            Backend::ZlibRs => Self::Zlib(flate2::Compress::new(
                flate2::Compression::new(level),
                false,
            )),
        }
    }

    /// Deflates all of `input` as one finished stream into `out[start..]`, which the caller
    /// sized; returns the bytes written, or `None` if they did not fit.
    pub(crate) fn finish_into(&mut self, input: &[u8], out: &mut [u8]) -> Option<usize> {
        match self {
            Self::Miniz(c) => {
                c.reset();
                let mut pos_in = 0;
                let mut pos_out = 0;
                loop {
                    let r = miniz_oxide::deflate::stream::deflate(
                        c,
                        &input[pos_in..],
                        &mut out[pos_out..],
                        MZFlush::Finish,
                    );
                    pos_in += r.bytes_consumed;
                    pos_out += r.bytes_written;
                    match r.status {
                        Ok(MZStatus::StreamEnd) => return Some(pos_out),
                        Ok(_) if pos_out < out.len() && r.bytes_written + r.bytes_consumed > 0 => {}
                        _ => return None,
                    }
                }
            }
            #[cfg(feature = "zlib-rs")]
            Self::Zlib(c) => {
                c.reset();
                loop {
                    let pos_in = c.total_in() as usize;
                    let pos_out = c.total_out() as usize;
                    let status = c
                        .compress(
                            &input[pos_in..],
                            &mut out[pos_out..],
                            flate2::FlushCompress::Finish,
                        )
                        .ok()?;
                    let now_out = c.total_out() as usize;
                    match status {
                        flate2::Status::StreamEnd => return Some(now_out),
                        _ if now_out < out.len()
                            && (now_out > pos_out || c.total_in() as usize > pos_in) => {}
                        _ => return None,
                    }
                }
            }
        }
    }
}

/// A raw deflate decompressor (no zlib or gzip wrapper).
pub(crate) enum Inflater {
    Miniz(Box<InflateState>),
    #[cfg(feature = "zlib-rs")]
    Zlib(flate2::Decompress),
}

impl Inflater {
    pub(crate) fn new(backend: Backend) -> Self {
        match backend {
            Backend::MinizOxide => Self::Miniz(InflateState::new_boxed(DataFormat::Raw)),
            #[cfg(feature = "zlib-rs")]
            Backend::ZlibRs => Self::Zlib(flate2::Decompress::new(false)),
        }
    }

    /// Starts a new stream.
    pub(crate) fn reset(&mut self) {
        match self {
            Self::Miniz(s) => s.reset(DataFormat::Raw),
            #[cfg(feature = "zlib-rs")]
            Self::Zlib(d) => d.reset(false),
        }
    }

    /// One inflate step from `input` into the spare room of `out` up to `out_limit` total
    /// length (`out.len() < out_limit`); returns the input consumed and how it ended.
    ///
    /// With `finish`, right after [`reset`](Self::reset), the whole stream is expected to
    /// fit: it is inflated straight into `out` (miniz_oxide skips its 32 KiB window copy,
    /// zlib-rs its final window update). If it does not fit, the state is spent: reset
    /// before streaming the same input again.
    ///
    /// `out` never grows past `out_limit`, and its allocation only as far as the caller
    /// reserved: the caller decides every allocation.
    pub(crate) fn step(
        &mut self,
        input: &[u8],
        out: &mut Vec<u8>,
        out_limit: usize,
        finish: bool,
    ) -> (usize, Step) {
        match self {
            Self::Miniz(s) => {
                let filled = out.len();
                out.resize(out_limit, 0);
                let flush = if finish {
                    MZFlush::Finish
                } else {
                    MZFlush::None
                };
                let r = miniz_oxide::inflate::stream::inflate(s, input, &mut out[filled..], flush);
                out.truncate(filled + r.bytes_written);
                let progressed = r.bytes_consumed + r.bytes_written > 0;
                let step = match r.status {
                    Ok(MZStatus::StreamEnd) => Step::End,
                    Ok(_) | Err(MZError::Buf) if progressed => Step::More,
                    Ok(_) | Err(MZError::Buf) => Step::Starved,
                    Err(_) => Step::Corrupt,
                };
                (r.bytes_consumed, step)
            }
            #[cfg(feature = "zlib-rs")]
            Self::Zlib(d) => {
                let in_before = d.total_in();
                let out_before = d.total_out();
                let filled = out.len();
                let flush = if finish {
                    flate2::FlushDecompress::Finish
                } else {
                    flate2::FlushDecompress::None
                };
                let r = if out.capacity() <= out_limit {
                    // Writes into spare capacity only, without zeroing it first.
                    d.decompress_vec(input, out, flush)
                } else {
                    out.resize(out_limit, 0);
                    let r = d.decompress(input, &mut out[filled..], flush);
                    out.truncate(filled + (d.total_out() - out_before) as usize);
                    r
                };
                let consumed = (d.total_in() - in_before) as usize;
                let written = (d.total_out() - out_before) as usize;
                let step = match r {
                    Ok(flate2::Status::StreamEnd) => Step::End,
                    Ok(_) if consumed + written > 0 => Step::More,
                    Ok(_) => Step::Starved,
                    Err(_) => Step::Corrupt,
                };
                (consumed, step)
            }
        }
    }
}
