//! [`Codec`]: binary frames (header + payload, gzip, batches), the streaming decoder, and
//! the WebSocket-frame entry points that pick the binary or JSON form.

use agentwire_core::{Frame, FrameBuf};
use bytes::{Bytes, BytesMut};

use crate::binary;
use crate::compact::{is_compact, CompactHeader, COMPACT_COMPRESSED, COMPACT_HEADER_LEN};
use crate::config::{BatchForm, CodecConfig, CompressPolicy, Limits};
use crate::error::{DecodeError, EncodeError};
use crate::gzip::{entropy_bits_per_byte, GzipDecoder, GzipEncoder};
use crate::header::{Flags, Header, MessageType, HEADER_LEN};
use crate::json::{self, Shallow};
use crate::message::Message;

/// Inflate buffers larger than this are not kept between frames.
const RETAIN_INFLATED: usize = 1 << 20;

/// Which form a message travels in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Form {
    /// A binary WebSocket frame: the 24-byte header and the (maybe gzipped) JSON payload.
    Binary,
    /// A text WebSocket frame: the JSON form.
    Json,
    /// A binary WebSocket frame in the real server's 12-byte form (after
    /// `protocol.set_binary`): the whole JSON form, maybe gzipped (see [`crate::compact`]).
    Compact,
}

impl Form {
    /// Its lowercase name (`json`, `binary`, `compact`), e.g. for logs and metric labels.
    pub fn label(self) -> &'static str {
        match self {
            Self::Json => "json",
            Self::Binary => "binary",
            Self::Compact => "compact",
        }
    }
}

/// A decoded binary frame: its header as on the wire, and its payload, inflated if it was
/// compressed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RawFrame<'a> {
    /// The header as received ([`Flags::COMPRESSED`] and the wire size included).
    pub header: Header,
    /// The payload: borrowed from the input if it was not compressed, else from the codec's
    /// reusable inflate buffer.
    pub payload: &'a [u8],
}

/// Bytes through gzip since a [`Codec`] was made, each way: the protocol analytics'
/// compression ratio ([`ratio_out`](Self::ratio_out), [`ratio_in`](Self::ratio_in)).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct CompressionStats {
    /// Outgoing payload bytes that were compressed, before gzip.
    pub out_raw: u64,
    /// What they took on the wire (their gzip members).
    pub out_wire: u64,
    /// Incoming gzip bytes inflated.
    pub in_wire: u64,
    /// What they inflated to.
    pub in_raw: u64,
}

impl CompressionStats {
    /// Outgoing bytes before gzip over bytes after (`None` before anything was compressed).
    pub fn ratio_out(&self) -> Option<f64> {
        ratio(self.out_raw, self.out_wire)
    }

    /// Incoming bytes after inflating over bytes on the wire (`None` before any).
    pub fn ratio_in(&self) -> Option<f64> {
        ratio(self.in_raw, self.in_wire)
    }
}

/// `raw / wire`, when anything went through.
fn ratio(raw: u64, wire: u64) -> Option<f64> {
    (wire > 0).then(|| raw as f64 / wire as f64)
}

/// The MCPW codec: encodes and decodes binary frames and JSON text, owning the gzip
/// compressor and decompressor state and the buffers it reuses across frames.
///
/// One per connection (or per thread): every method takes `&mut self` only to reuse that
/// state, never to remember anything between frames except in
/// [`decode_stream`](Self::decode_stream)'s caller-owned buffer.
pub struct Codec {
    config: CodecConfig,
    encoder: GzipEncoder,
    decoder: GzipDecoder,
    /// Reused inflate output.
    inflated: Vec<u8>,
    /// Reused compress output.
    deflated: Vec<u8>,
    /// Outgoing bytes before and after gzip.
    deflate_totals: (u64, u64),
}

impl Default for Codec {
    fn default() -> Self {
        Self::new(CodecConfig::default())
    }
}

impl std::fmt::Debug for Codec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Codec")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl Codec {
    /// A codec with `config`; builds its compressor and decompressor once, here.
    pub fn new(config: CodecConfig) -> Self {
        let c = &config.compression;
        Self {
            encoder: GzipEncoder::new(c.backend, c.level),
            decoder: GzipDecoder::new(c.backend),
            inflated: Vec::new(),
            deflated: Vec::new(),
            deflate_totals: (0, 0),
            config,
        }
    }

    /// The configuration.
    pub fn config(&self) -> &CodecConfig {
        &self.config
    }

    /// The decode limits.
    pub fn limits(&self) -> &Limits {
        &self.config.limits
    }

    /// Bytes through gzip since this codec was made, each way.
    pub fn compression_stats(&self) -> CompressionStats {
        let (in_wire, in_raw) = self.decoder.totals();
        CompressionStats {
            out_raw: self.deflate_totals.0,
            out_wire: self.deflate_totals.1,
            in_wire,
            in_raw,
        }
    }

    // -----------------------------------------------------------------------------------
    // Binary form
    // -----------------------------------------------------------------------------------

    /// Appends the binary frame of `msg` to `out` and returns the header written.
    ///
    /// The payload is the JSON of the params (the crate docs' "Spec decisions" 2-3
    /// give the layout), gzipped when the [`Compression`](crate::Compression) policy says so and the
    /// result is smaller. On error `out` is unchanged.
    pub fn encode(&mut self, msg: &Message, out: &mut Vec<u8>) -> Result<Header, EncodeError> {
        self.encode_with_batch(msg, self.config.batch, out)
    }

    /// [`encode`](Self::encode), writing a batch with the body `batch` whatever
    /// [`CodecConfig::batch`] says (a server answers a batch in the body its peer used).
    pub fn encode_with_batch(
        &mut self,
        msg: &Message,
        batch: BatchForm,
        out: &mut Vec<u8>,
    ) -> Result<Header, EncodeError> {
        json::check_kind(msg, self.config.limits.max_batch)?;
        if msg.flags.contains(Flags::ENCRYPTED) {
            return Err(EncodeError::Encrypted);
        }
        let start = out.len();
        out.extend_from_slice(&[0; HEADER_LEN]);
        let method = match binary::write_payload(msg, batch, out) {
            Ok(m) => m,
            Err(e) => {
                out.truncate(start);
                return Err(e);
            }
        };
        let mut header = Header::new(msg.kind, msg.seq, method);
        header.flags = binary::frame_flags(msg);
        self.finish_frame(header, out, start)
    }

    /// Appends a frame with `header` (its size and [`Flags::COMPRESSED`] are set here) and
    /// `payload` to `out`, compressing as [`encode`](Self::encode) does unless the
    /// header has [`Flags::ENCRYPTED`] (ciphertext does not compress). For payloads the
    /// typed layer does not cover: encrypted ones, or your own JSON.
    pub fn encode_frame(
        &mut self,
        mut header: Header,
        payload: &[u8],
        out: &mut Vec<u8>,
    ) -> Result<Header, EncodeError> {
        let start = out.len();
        header.flags = header.flags.without(Flags::COMPRESSED);
        out.extend_from_slice(&[0; HEADER_LEN]);
        out.extend_from_slice(payload);
        self.finish_frame(header, out, start)
    }

    /// Compresses `out[start + 24..]` if worth it, checks the size and writes the header.
    fn finish_frame(
        &mut self,
        mut header: Header,
        out: &mut Vec<u8>,
        start: usize,
    ) -> Result<Header, EncodeError> {
        let body = start + HEADER_LEN;
        if !header.flags.contains(Flags::ENCRYPTED)
            && self.compress_tail(out, body, self.config.compression.threshold)
        {
            header.flags = header.flags.with(Flags::COMPRESSED);
        }
        let size = out.len() - body;
        let max = self.config.limits.max_payload as usize;
        if size > max {
            out.truncate(start);
            return Err(EncodeError::PayloadTooLarge { size, max });
        }
        header.size = size as u32;
        out[start..body].copy_from_slice(&header.to_bytes());
        Ok(header)
    }

    /// Replaces `out[body..]` by its gzip member if the policy (at `threshold`) says to try
    /// and the member is smaller; returns whether it did.
    fn compress_tail(&mut self, out: &mut Vec<u8>, body: usize, threshold: usize) -> bool {
        let len = out.len() - body;
        if !self.should_compress_at(&out[body..], threshold) {
            return false;
        }
        self.deflated.clear();
        let done = self
            .encoder
            .compress_within(&out[body..], &mut self.deflated, len - 1);
        if done {
            self.deflate_totals.0 = self.deflate_totals.0.saturating_add(len as u64);
            self.deflate_totals.1 = self
                .deflate_totals
                .1
                .saturating_add(self.deflated.len() as u64);
            out.truncate(body);
            out.extend_from_slice(&self.deflated);
        }
        if self.deflated.capacity() > RETAIN_INFLATED {
            self.deflated = Vec::new();
        }
        done
    }

    /// Whether a payload goes through gzip, by the configured threshold and policy.
    pub fn should_compress(&self, payload: &[u8]) -> bool {
        self.should_compress_at(payload, self.config.compression.threshold)
    }

    fn should_compress_at(&self, payload: &[u8], threshold: usize) -> bool {
        let c = &self.config.compression;
        if payload.len() <= threshold || payload.len() < 2 {
            return false;
        }
        match c.policy {
            CompressPolicy::Never => false,
            CompressPolicy::IfSmaller => true,
            CompressPolicy::Entropy { max_bits_per_byte } => {
                let sample = &payload[..payload.len().min(1024)];
                entropy_bits_per_byte(sample) < max_bits_per_byte
            }
        }
    }

    /// Decodes one binary frame (exactly one: a WebSocket binary message) into a message.
    pub fn decode(&mut self, frame: &[u8]) -> Result<Message, DecodeError> {
        let Self {
            config,
            decoder,
            inflated,
            ..
        } = self;
        let raw = decode_frame_into(frame, &config.limits, decoder, inflated)?;
        binary::read_payload(&raw.header, raw.payload, &config.limits)
    }

    /// Decodes one binary frame's header and payload (inflated if compressed) without
    /// parsing the payload. The header is checked before anything is allocated; an
    /// uncompressed payload is borrowed from `frame`, not copied.
    ///
    /// An encrypted payload ([`Flags::ENCRYPTED`]) is returned as it is, never inflated.
    pub fn decode_frame<'a>(&'a mut self, frame: &'a [u8]) -> Result<RawFrame<'a>, DecodeError> {
        decode_frame_into(
            frame,
            &self.config.limits,
            &mut self.decoder,
            &mut self.inflated,
        )
    }

    /// [`decode_frame`](Self::decode_frame) for a `Bytes` frame: an uncompressed payload
    /// is a `slice` of `frame` (no copy), an inflated one a new buffer.
    pub fn decode_frame_bytes(&mut self, frame: Bytes) -> Result<(Header, Bytes), DecodeError> {
        let raw = self.decode_frame(&frame)?;
        let header = raw.header;
        let inflated =
            header.flags.contains(Flags::COMPRESSED) && !header.flags.contains(Flags::ENCRYPTED);
        let payload = if inflated {
            Bytes::copy_from_slice(raw.payload)
        } else {
            frame.slice(HEADER_LEN..)
        };
        Ok((header, payload))
    }

    // -----------------------------------------------------------------------------------
    // The real server's 12-byte form
    // -----------------------------------------------------------------------------------

    /// Appends `msg` in the real server's 12-byte form ([`crate::compact`]) to `out`: the
    /// header, then the message's whole JSON form, gzipped as [`encode`](Self::encode)
    /// decides. Flags of `msg` other than framing are not carried (as in the JSON form).
    /// On error `out` is unchanged.
    pub fn encode_compact(
        &mut self,
        msg: &Message,
        out: &mut Vec<u8>,
    ) -> Result<CompactHeader, EncodeError> {
        let threshold = match self.config.compression.policy {
            CompressPolicy::Never => None,
            _ => Some(self.config.compression.threshold),
        };
        self.encode_compact_with(msg, threshold, out)
    }

    /// [`encode_compact`](Self::encode_compact) with a compression threshold of its own
    /// (`None`: never compress), as `protocol.set_binary` sets one per connection.
    pub fn encode_compact_with(
        &mut self,
        msg: &Message,
        threshold: Option<usize>,
        out: &mut Vec<u8>,
    ) -> Result<CompactHeader, EncodeError> {
        json::check_kind(msg, self.config.limits.max_batch)?;
        let start = out.len();
        let body = start + COMPACT_HEADER_LEN;
        out.extend_from_slice(&[0; COMPACT_HEADER_LEN]);
        if let Err(e) = json::encode(msg, out) {
            out.truncate(start);
            return Err(e);
        }
        let mut header = CompactHeader::new(msg.kind);
        if let Some(t) = threshold {
            if self.compress_tail(out, body, t) {
                header.flags |= COMPACT_COMPRESSED;
            }
        }
        let size = out.len() - body;
        let max = self.config.limits.max_payload as usize;
        if size > max {
            out.truncate(start);
            return Err(EncodeError::PayloadTooLarge { size, max });
        }
        header.size = size as u32;
        out[start..body].copy_from_slice(&header.to_bytes());
        Ok(header)
    }

    /// Decodes one frame in the real server's 12-byte form: header checked before anything
    /// is allocated, payload inflated under the cap, then the whole-message JSON, whose
    /// type the header's overrides.
    pub fn decode_compact(&mut self, frame: &[u8]) -> Result<Message, DecodeError> {
        let Self {
            config,
            decoder,
            inflated,
            ..
        } = self;
        let (header, payload) = compact_payload(frame, &config.limits, decoder, inflated)?;
        json::decode_compact(payload, &config.limits, header.kind)
    }

    // -----------------------------------------------------------------------------------
    // Byte streams
    // -----------------------------------------------------------------------------------

    /// Decodes the next message from a byte stream.
    ///
    /// `Ok(None)`: `buf` does not hold a whole frame yet (nothing consumed; room for the
    /// rest is reserved once the header is known good). `Ok(Some)`: exactly one frame was
    /// consumed. `Err`: for a bad header nothing is consumed and the stream cannot be
    /// resynchronised (close it); for a bad payload the frame is consumed and the next one
    /// can be decoded (answer with the error's code and go on).
    pub fn decode_stream(&mut self, buf: &mut BytesMut) -> Result<Option<Message>, DecodeError> {
        match self.next_stream_frame(buf)? {
            Some(frame) => self.decode(&frame).map(Some),
            None => Ok(None),
        }
    }

    /// [`decode_stream`](Self::decode_stream) without parsing the payload: the next frame's
    /// header and payload (inflated if it was compressed), same consumption rules.
    pub fn decode_frame_stream(
        &mut self,
        buf: &mut BytesMut,
    ) -> Result<Option<(Header, Bytes)>, DecodeError> {
        match self.next_stream_frame(buf)? {
            Some(frame) => self.decode_frame_bytes(frame).map(Some),
            None => Ok(None),
        }
    }

    /// Splits the next whole frame off `buf`, checking the header first.
    fn next_stream_frame(&self, buf: &mut BytesMut) -> Result<Option<Bytes>, DecodeError> {
        let Some(head) = buf.first_chunk::<HEADER_LEN>() else {
            return Ok(None);
        };
        let header = Header::parse(head, &self.config.limits)?;
        let total = HEADER_LEN + header.size as usize;
        if buf.len() < total {
            buf.reserve(total - buf.len());
            return Ok(None);
        }
        Ok(Some(buf.split_to(total).freeze()))
    }

    // -----------------------------------------------------------------------------------
    // JSON form and WebSocket frames
    // -----------------------------------------------------------------------------------

    /// Decodes a JSON-form message (a text frame), under this codec's limits.
    pub fn decode_json(&self, text: &[u8]) -> Result<Message, DecodeError> {
        json::decode(text, &self.config.limits)
    }

    /// Appends the JSON form of `msg` to `out` (see [`json::encode`]).
    pub fn encode_json(&self, msg: &Message, out: &mut Vec<u8>) -> Result<(), EncodeError> {
        json::check_kind(msg, self.config.limits.max_batch)?;
        json::encode(msg, out)
    }

    /// Decodes a WebSocket frame: text frames as JSON, binary frames as MCPW frames (the
    /// 12-byte form when the first byte is its version, 1; else the spec's 24-byte form).
    /// Returns the form too, so a server can answer in the one its peer uses.
    pub fn decode_ws(&mut self, frame: Frame<'_>) -> Result<(Message, Form), DecodeError> {
        match frame {
            Frame::Text(t) => self.decode_json(t.as_bytes()).map(|m| (m, Form::Json)),
            Frame::Binary(b) if is_compact(b) => self.decode_compact(b).map(|m| (m, Form::Compact)),
            Frame::Binary(b) => self.decode(b).map(|m| (m, Form::Binary)),
        }
    }

    /// Decodes a WebSocket frame as [`decode_ws`](Self::decode_ws) does, but leaves a
    /// batch's entries undecoded, so each can be answered as if it came alone.
    pub(crate) fn decode_ws_shallow<'a>(
        &'a mut self,
        frame: Frame<'a>,
    ) -> Result<(Shallow<'a>, Form), DecodeError> {
        match frame {
            Frame::Text(t) => json::decode_shallow(t.as_bytes(), &self.config.limits, None)
                .map(|m| (m, Form::Json)),
            Frame::Binary(b) if is_compact(b) => {
                let Self {
                    config,
                    decoder,
                    inflated,
                    ..
                } = self;
                let (header, payload) = compact_payload(b, &config.limits, decoder, inflated)?;
                json::decode_shallow(payload, &config.limits, Some(header.kind))
                    .map(|m| (m, Form::Compact))
            }
            Frame::Binary(b) => {
                let Self {
                    config,
                    decoder,
                    inflated,
                    ..
                } = self;
                let raw = decode_frame_into(b, &config.limits, decoder, inflated)?;
                let h = raw.header;
                let batch = h.kind == MessageType::BATCH && !h.flags.contains(Flags::ENCRYPTED);
                let shallow = if batch {
                    let (entries, form) = json::split_batch(raw.payload, &config.limits)?;
                    Shallow::Batch {
                        id: None,
                        seq: h.seq,
                        form,
                        entries,
                    }
                } else {
                    Shallow::One(Box::new(binary::read_payload(
                        &h,
                        raw.payload,
                        &config.limits,
                    )?))
                };
                Ok((shallow, Form::Binary))
            }
        }
    }

    /// Encodes `msg` as a WebSocket frame of the given form.
    pub fn encode_ws(&mut self, msg: &Message, form: Form) -> Result<FrameBuf, EncodeError> {
        let mut out = Vec::new();
        match form {
            Form::Binary => {
                self.encode(msg, &mut out)?;
                Ok(FrameBuf::binary(out))
            }
            Form::Json => {
                self.encode_json(msg, &mut out)?;
                Ok(FrameBuf::json_from_vec(out))
            }
            Form::Compact => {
                self.encode_compact(msg, &mut out)?;
                Ok(FrameBuf::binary(out))
            }
        }
    }
}

/// The header and (inflated) payload of a 12-byte frame, on split borrows of the codec.
fn compact_payload<'a>(
    frame: &'a [u8],
    limits: &Limits,
    decoder: &mut GzipDecoder,
    inflated: &'a mut Vec<u8>,
) -> Result<(CompactHeader, &'a [u8]), DecodeError> {
    let header = CompactHeader::parse(frame, limits)?;
    let payload = exact_payload(&frame[COMPACT_HEADER_LEN..], header.size)?;
    if header.is_encrypted() {
        return Err(DecodeError::Encrypted);
    }
    if !header.is_compressed() {
        return Ok((header, payload));
    }
    inflate(payload, limits, decoder, inflated)?;
    Ok((header, inflated))
}

/// The payload after a header that names its `size`: exactly `size` bytes must follow.
fn exact_payload(payload: &[u8], size: u32) -> Result<&[u8], DecodeError> {
    match payload.len().cmp(&(size as usize)) {
        std::cmp::Ordering::Less => Err(DecodeError::Truncated {
            expected: size,
            actual: payload.len(),
        }),
        std::cmp::Ordering::Greater => {
            Err(DecodeError::TrailingBytes(payload.len() - size as usize))
        }
        std::cmp::Ordering::Equal => Ok(payload),
    }
}

/// Inflates `payload` into the reused `inflated` buffer under `limits.max_decompressed`.
fn inflate(
    payload: &[u8],
    limits: &Limits,
    decoder: &mut GzipDecoder,
    inflated: &mut Vec<u8>,
) -> Result<(), DecodeError> {
    if inflated.capacity() > RETAIN_INFLATED {
        *inflated = Vec::new();
    }
    inflated.clear();
    if let Err(e) = decoder.decompress(payload, inflated, limits.max_decompressed) {
        // A refused bomb must not keep its cap-sized buffer alive until the next frame.
        if inflated.capacity() > RETAIN_INFLATED {
            *inflated = Vec::new();
        }
        return Err(e.into());
    }
    Ok(())
}

/// The body of [`Codec::decode_frame`], on split borrows of the codec.
fn decode_frame_into<'a>(
    frame: &'a [u8],
    limits: &Limits,
    decoder: &mut GzipDecoder,
    inflated: &'a mut Vec<u8>,
) -> Result<RawFrame<'a>, DecodeError> {
    let header = Header::parse_slice(frame, limits)?;
    let payload = exact_payload(&frame[HEADER_LEN..], header.size)?;
    if !header.flags.contains(Flags::COMPRESSED) || header.flags.contains(Flags::ENCRYPTED) {
        return Ok(RawFrame { header, payload });
    }
    inflate(payload, limits, decoder, inflated)?;
    Ok(RawFrame {
        header,
        payload: inflated,
    })
}
