//! The bus methods' params and results, with the spec's exact (camelCase) field names.
//!
//! Every method is a request in JSON-RPC terms; the bus also *sends* `sendMessage` requests to
//! subscribers (the interceptor chain), which answer with a [`SendMessageResult`].

use std::borrow::Cow;

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

mod jsonrpc;

pub(crate) use jsonrpc::{raw_number, raw_str, write_json_str};
pub use jsonrpc::{ErrorCode, ErrorObject, Id, JsonRpc2, Notification, Outcome, Request, Response};

/// Method names.
pub mod method {
    /// `initialize`: must be the first request on a connection.
    pub const INITIALIZE: &str = "initialize";
    /// `subscribe`: add a topic pattern.
    pub const SUBSCRIBE: &str = "subscribe";
    /// `unsubscribe`: remove a topic pattern (by the same string).
    pub const UNSUBSCRIBE: &str = "unsubscribe";
    /// `sendMessage`: publish (client → bus) and deliver (bus → subscriber).
    pub const SEND_MESSAGE: &str = "sendMessage";
    /// `ping`: keep-alive; answered with a timestamp.
    pub const PING: &str = "ping";
}

/// The built-in topic families (`capabilities.topics` of the `initialize` result).
pub mod topics {
    /// External messages entering the system: `inbound:{chat_id}`.
    pub const INBOUND: &str = "inbound:*";
    /// Messages to be sent to external channels: `outbound:{chat_id}`.
    pub const OUTBOUND: &str = "outbound:*";
    /// Agent lifecycle (spawn, complete, error): `agent:{event}`.
    pub const AGENT: &str = "agent:*";
    /// The three, in the order the reference lists them.
    pub const BUILT_IN: [&str; 3] = [INBOUND, OUTBOUND, AGENT];

    /// `inbound:{chat_id}`.
    pub fn inbound(chat_id: &str) -> String {
        format!("inbound:{chat_id}")
    }

    /// `outbound:{chat_id}`.
    pub fn outbound(chat_id: &str) -> String {
        format!("outbound:{chat_id}")
    }

    /// `agent:{event}` (`spawn`, `complete`, `error`, ...).
    pub fn agent(event: &str) -> String {
        format!("agent:{event}")
    }
}

agentwire_core::string_id! {
    /// A client's `clientId`, as it sent it in `initialize` (`"agent-1"`).
    pub struct ClientId [serde];
}

agentwire_core::string_id! {
    /// A `subscriptionId` the bus returns for a `subscribe` (`"sub_1a2b3c4d"`).
    pub struct SubscriptionId [serde];
}

/// Raw JSON kept as text (a payload the bus forwards without building a tree), comparable
/// by its text: agentwire-core's one `RawJson`.
pub use agentwire_core::json::RawJson;

/// `initialize` params.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InitializeParams {
    /// The client's chosen id (`"agent-1"`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_id: Option<String>,
    /// Who the client is; `null` is valid (INTEROP.md).
    #[serde(default)]
    pub client_info: Option<ClientInfo>,
}

/// `clientInfo`: `{name, version}`, both optional strings; other members are ignored.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct ClientInfo {
    /// Client software name (`"bub"`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Client software version (`"0.2.0"`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
}

impl ClientInfo {
    /// `{name, version}`.
    pub fn new(name: impl Into<String>, version: impl Into<String>) -> Self {
        Self {
            name: Some(name.into()),
            version: Some(version.into()),
        }
    }
}

/// `initialize` result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InitializeResult {
    /// The bus's id (`"bus-<hex>"`).
    pub server_id: String,
    /// `{name: "bub-bus", version}`.
    pub server_info: ServerInfo,
    /// What the bus supports.
    pub capabilities: Capabilities,
}

/// `serverInfo`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServerInfo {
    /// `"bub-bus"`.
    pub name: String,
    /// Bus version.
    pub version: String,
}

/// `capabilities`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Capabilities {
    /// `true`.
    pub subscribe: bool,
    /// `true`.
    pub publish: bool,
    /// The built-in topic patterns.
    pub topics: Vec<String>,
}

/// `subscribe` and `unsubscribe` params: `{topic}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TopicParams {
    /// The topic pattern, exactly as subscribed.
    pub topic: String,
}

/// `subscribe` result: `{success, subscriptionId}` (the reference client expects the id).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SubscribeResult {
    /// `true`.
    pub success: bool,
    /// `"sub_<8 hex>"`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subscription_id: Option<String>,
}

/// `unsubscribe` result: `{success}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UnsubscribeResult {
    /// `true`.
    pub success: bool,
}

/// `sendMessage` params: `{topic, payload}`; the payload stays raw JSON by default, so the
/// bus forwards it without parsing it into a tree.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SendMessageParams<P = RawJson> {
    /// The topic (not a pattern).
    pub topic: String,
    /// Any JSON.
    pub payload: P,
}

impl<P: PartialEq> PartialEq for SendMessageParams<P> {
    fn eq(&self, other: &Self) -> bool {
        self.topic == other.topic && self.payload == other.payload
    }
}

/// `sendMessage` params borrowed from a message body (the bus's decode path).
#[derive(Debug, Deserialize)]
pub struct SendMessageRef<'a> {
    /// The topic.
    #[serde(borrow)]
    pub topic: Cow<'a, str>,
    /// The payload, raw; absent is forwarded as `null`.
    #[serde(default, borrow)]
    pub payload: Option<&'a RawValue>,
}

/// `sendMessage` result, both for a subscriber's answer (`{success, stopPropagation}`) and
/// for the publisher's aggregated answer, which adds the delivery counters.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SendMessageResult {
    /// `true` when the message was handled.
    pub success: bool,
    /// `true` when a subscriber stopped the chain.
    #[serde(default)]
    pub stop_propagation: bool,
    /// Subscribers that answered with a result (ours, publisher's answer only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delivered: Option<u32>,
    /// Subscribers that answered with an error (skipped; ours).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub errors: Option<u32>,
    /// Subscribers that did not answer in time (skipped; ours).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeouts: Option<u32>,
    /// Subscribers that disconnected before answering (skipped; ours).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disconnected: Option<u32>,
    /// Subscribers skipped because their delivery queue was full (ours).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub overloaded: Option<u32>,
}

impl SendMessageResult {
    /// A subscriber's answer: `{"success":true,"stopPropagation":stop}`.
    pub fn answer(stop_propagation: bool) -> Self {
        Self {
            success: true,
            stop_propagation,
            ..Self::default()
        }
    }

    /// Appends this result's JSON, byte for byte what its `Serialize` impl writes, without
    /// going through serde (the bus writes one per publish).
    pub fn write_json(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(match (self.success, self.stop_propagation) {
            (true, false) => b"{\"success\":true,\"stopPropagation\":false",
            (true, true) => b"{\"success\":true,\"stopPropagation\":true",
            (false, false) => b"{\"success\":false,\"stopPropagation\":false",
            (false, true) => b"{\"success\":false,\"stopPropagation\":true",
        });
        let counters = [
            (&b",\"delivered\":"[..], self.delivered),
            (b",\"errors\":", self.errors),
            (b",\"timeouts\":", self.timeouts),
            (b",\"disconnected\":", self.disconnected),
            (b",\"overloaded\":", self.overloaded),
        ];
        let mut digits = itoa::Buffer::new();
        for (name, count) in counters {
            if let Some(n) = count {
                out.extend_from_slice(name);
                out.extend_from_slice(digits.format(n).as_bytes());
            }
        }
        out.push(b'}');
    }
}

/// A subscriber's `sendMessage` result as the bus reads it: only `stopPropagation` matters
/// (absent or `null`: the chain goes on). Lenient on purpose: any other member is ignored.
#[derive(Debug, Deserialize)]
pub(crate) struct Ack {
    /// `stopPropagation`.
    #[serde(default, rename = "stopPropagation")]
    pub(crate) stop: Option<bool>,
}

impl Ack {
    /// Whether the subscriber ends the chain.
    pub(crate) fn stops(&self) -> bool {
        self.stop == Some(true)
    }
}

/// `ping` result: `{timestamp}` (RFC 3339, UTC).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PingResult {
    /// E.g. `"2025-02-14T12:00:00Z"`.
    pub timestamp: String,
}

/// Formats Unix milliseconds as RFC 3339 UTC with second precision, the spec's form
/// (`2025-02-14T12:00:00Z`): agentwire-core's one civil-date formatter.
pub use agentwire_core::rfc3339_utc;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc3339_known_points() {
        assert_eq!(rfc3339_utc(0), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339_utc(1_739_534_400_000), "2025-02-14T12:00:00Z");
        assert_eq!(rfc3339_utc(951_782_400_999), "2000-02-29T00:00:00Z");
        assert_eq!(rfc3339_utc(4_107_542_399_000), "2100-02-28T23:59:59Z");
    }

    proptest::proptest! {
        /// The hand-written writer and serde agree on every result.
        #[test]
        fn write_json_is_the_serde_encoding(
            success: bool,
            stop_propagation: bool,
            counters in proptest::array::uniform5(proptest::option::of(proptest::num::u32::ANY)),
        ) {
            let [delivered, errors, timeouts, disconnected, overloaded] = counters;
            let result = SendMessageResult {
                success,
                stop_propagation,
                delivered,
                errors,
                timeouts,
                disconnected,
                overloaded,
            };
            let mut ours = Vec::new();
            result.write_json(&mut ours);
            proptest::prop_assert_eq!(
                String::from_utf8(ours).unwrap(),
                serde_json::to_string(&result).unwrap()
            );
        }
    }

    #[test]
    fn answer_serializes_as_the_spec() {
        assert_eq!(
            serde_json::to_string(&SendMessageResult::answer(false)).unwrap(),
            r#"{"success":true,"stopPropagation":false}"#
        );
    }
}
