//! The `signal` payloads: `RTCSessionDescriptionInit` JSON (`{type, sdp}`) in and out, and
//! the few SDP lines the machines read themselves (ICE username fragment, DTLS fingerprint).

use agentwire_core::json::RawJson;
use serde::{Deserialize, Serialize};
use str0m::change::{SdpAnswer, SdpOffer};

use crate::config::Limits;
use crate::error::OfferError;

/// `RTCSessionDescriptionInit`, as browsers write it.
#[derive(Debug, Deserialize, Serialize)]
struct Description<'a> {
    #[serde(rename = "type")]
    kind: &'a str,
    #[serde(borrow)]
    sdp: std::borrow::Cow<'a, str>,
}

/// An offer, checked and parsed.
#[derive(Debug)]
pub(crate) struct Offer {
    /// str0m's parse of it.
    pub(crate) sdp: SdpOffer,
    /// The first `a=ice-ufrag:` value: which `RTCPeerConnection` (and ICE generation) made
    /// it. A new offer with the same value is a renegotiation of the same peer connection.
    pub(crate) ice_ufrag: Option<String>,
    /// Whether the offer has an application (data channel) m-line.
    pub(crate) has_application: bool,
}

/// Reads `signal` as an offer within `limits`.
pub(crate) fn parse_offer(signal: &RawJson, limits: &Limits) -> Result<Offer, OfferError> {
    let raw = signal.get();
    // The JSON escapes of an SDP (`\r\n`) make the JSON a little larger than the SDP; a body
    // far over the limit is refused before it is parsed.
    if raw.len() > limits.max_sdp_bytes.saturating_mul(2).saturating_add(1024) {
        return Err(OfferError::TooLarge {
            len: raw.len(),
            max: limits.max_sdp_bytes,
        });
    }
    let desc: Description<'_> = serde_json::from_str(raw).map_err(|_| OfferError::NotAnOffer)?;
    if desc.kind != "offer" {
        return Err(OfferError::NotAnOffer);
    }
    if desc.sdp.len() > limits.max_sdp_bytes {
        return Err(OfferError::TooLarge {
            len: desc.sdp.len(),
            max: limits.max_sdp_bytes,
        });
    }
    let ice_ufrag = attribute(&desc.sdp, "ice-ufrag").map(str::to_owned);
    let has_application = desc.sdp.lines().any(|l| l.starts_with("m=application "));
    let sdp = SdpOffer::from_sdp_string(&desc.sdp).map_err(|e| OfferError::Sdp(e.to_string()))?;
    Ok(Offer {
        sdp,
        ice_ufrag,
        has_application,
    })
}

/// Reads `signal` as an answer (the client side).
pub(crate) fn parse_answer(signal: &RawJson, limits: &Limits) -> Result<SdpAnswer, OfferError> {
    let desc: Description<'_> =
        serde_json::from_str(signal.get()).map_err(|_| OfferError::NotAnOffer)?;
    if desc.kind != "answer" {
        return Err(OfferError::NotAnOffer);
    }
    if desc.sdp.len() > limits.max_sdp_bytes {
        return Err(OfferError::TooLarge {
            len: desc.sdp.len(),
            max: limits.max_sdp_bytes,
        });
    }
    SdpAnswer::from_sdp_string(&desc.sdp).map_err(|e| OfferError::Sdp(e.to_string()))
}

/// `{"type":"answer","sdp":...}`.
pub(crate) fn answer_json(answer: &SdpAnswer) -> RawJson {
    description_json("answer", &answer.to_sdp_string())
}

/// `{"type":"offer","sdp":...}`.
pub(crate) fn offer_json(offer: &SdpOffer) -> RawJson {
    description_json("offer", &offer.to_sdp_string())
}

fn description_json(kind: &str, sdp: &str) -> RawJson {
    let desc = Description {
        kind,
        sdp: sdp.into(),
    };
    // A struct of two strings always serializes.
    RawJson::from_serialize(&desc).unwrap_or_else(|_| RawJson::null())
}

/// The value of the first `a=<name>:` line of `sdp`.
pub(crate) fn attribute<'a>(sdp: &'a str, name: &str) -> Option<&'a str> {
    sdp.lines().find_map(|line| {
        let rest = line.strip_prefix("a=")?.strip_prefix(name)?;
        Some(rest.strip_prefix(':')?.trim_end())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attribute_reads_the_first_value() {
        let sdp = "v=0\r\na=ice-ufrag:abcd\r\na=ice-ufrag:efgh\r\n";
        assert_eq!(attribute(sdp, "ice-ufrag"), Some("abcd"));
        assert_eq!(attribute(sdp, "ice-pwd"), None);
    }

    #[test]
    fn offers_that_are_not_offers_are_refused() {
        let limits = Limits::default();
        for bad in [
            r#"null"#,
            r#""v=0""#,
            r#"{"type":"answer","sdp":"v=0"}"#,
            r#"{"type":"offer"}"#,
            r#"{"type":"offer","sdp":42}"#,
        ] {
            let raw = RawJson::from_text(bad).unwrap();
            assert!(matches!(
                parse_offer(&raw, &limits),
                Err(OfferError::NotAnOffer)
            ));
        }
        let raw = RawJson::from_text(r#"{"type":"offer","sdp":"not sdp"}"#).unwrap();
        assert!(matches!(
            parse_offer(&raw, &limits),
            Err(OfferError::Sdp(_))
        ));
    }

    #[test]
    fn oversized_offers_are_refused_before_parsing() {
        let limits = Limits {
            max_sdp_bytes: 100,
            ..Limits::default()
        };
        let sdp = "x".repeat(101);
        let raw = RawJson::from_text(&format!(r#"{{"type":"offer","sdp":"{sdp}"}}"#)).unwrap();
        assert!(matches!(
            parse_offer(&raw, &limits),
            Err(OfferError::TooLarge { len: 101, max: 100 })
        ));
    }
}
