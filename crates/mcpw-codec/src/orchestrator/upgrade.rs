//! The pre-upgrade policy: what the transport's upgrade hook asks before a WebSocket exists.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use agentwire_core::{Rate, RotatingSecrets, TokenBucket};

/// The subprotocol the spec requires every client to offer, and the server echoes.
pub const SUBPROTOCOL: &str = "mcp.v1";

pub use crate::header::{subprotocol_of, version_of};

/// Settings of the [`UpgradePolicy`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct UpgradeConfig {
    /// Whether an upgrade that does not offer [`SUBPROTOCOL`] is refused with 426. Default
    /// `true`, as the spec requires (the reference Go server never enforced it).
    pub require_subprotocol: bool,
    /// API keys accepted, in any of the three headers the reference server reads:
    /// `Authorization: Bearer <key>`, `Authorization: <key>` (no scheme) and
    /// `X-API-Key: <key>`. Empty (the default): no authentication, any or no credentials
    /// are accepted. The policy starts with these;
    /// [`UpgradePolicy::rotate_api_keys`] replaces them at run time.
    pub api_keys: Vec<String>,
    /// New connections per API key over time. Default `Some(60/min, burst 20)`; only
    /// applies when [`api_keys`](Self::api_keys) is set (the key is what is counted).
    pub connect_rate: Option<Rate>,
    /// Connections at once; one more is refused with 503. Default 10,000.
    pub max_connections: usize,
    /// The protocol versions the server speaks; of those a client offers as subprotocols
    /// (`mcp.v<n>`), the highest is selected and echoed (decision 49). Default
    /// [`VERSIONS`](crate::VERSIONS), every version the crate speaks (`[1]`, the only
    /// version there is).
    pub protocol_versions: Vec<u8>,
}

impl Default for UpgradeConfig {
    fn default() -> Self {
        Self {
            require_subprotocol: true,
            api_keys: Vec::new(),
            connect_rate: Some(Rate::per_minute(60, 20)),
            max_connections: 10_000,
            protocol_versions: crate::VERSIONS.to_vec(),
        }
    }
}

impl UpgradeConfig {
    /// Sets [`protocol_versions`](Self::protocol_versions).
    pub fn with_protocol_versions(mut self, versions: impl IntoIterator<Item = u8>) -> Self {
        self.protocol_versions = versions.into_iter().collect();
        self
    }

    /// Sets [`require_subprotocol`](Self::require_subprotocol).
    pub fn with_required_subprotocol(mut self, required: bool) -> Self {
        self.require_subprotocol = required;
        self
    }

    /// Sets [`api_keys`](Self::api_keys).
    pub fn with_api_keys<S: Into<String>>(mut self, keys: impl IntoIterator<Item = S>) -> Self {
        self.api_keys = keys.into_iter().map(Into::into).collect();
        self
    }

    /// Sets [`connect_rate`](Self::connect_rate).
    pub fn with_connect_rate(mut self, rate: Option<Rate>) -> Self {
        self.connect_rate = rate;
        self
    }

    /// Sets [`max_connections`](Self::max_connections).
    pub fn with_max_connections(mut self, max: usize) -> Self {
        self.max_connections = max;
        self
    }
}

/// The upgrade is allowed: what to answer and what was learned.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Admission {
    /// The subprotocol to echo: `mcp.v<n>` for the highest version both sides speak
    /// (`Some("mcp.v1")` when the client offered only that).
    pub subprotocol: Option<String>,
    /// The protocol version selected, the one the subprotocol names.
    pub version: Option<u8>,
    /// Position of the key used in the policy's key set ([`UpgradePolicy::api_keys`]),
    /// when keys are required; until a rotation, its index in [`UpgradeConfig::api_keys`].
    pub key_index: Option<usize>,
    /// The `X-Agent-ID` header.
    pub agent_id: Option<String>,
    /// The `X-Agent-Type` header.
    pub agent_type: Option<String>,
}

/// Why credentials were refused (logged by the server; the client only sees `401`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum AuthFailure {
    /// Neither `Authorization` nor `X-API-Key` was sent (or both were empty).
    #[error("no Authorization or X-API-Key header")]
    Missing,
    /// `Authorization` has a scheme other than `Bearer` (`Basic ...`), and no `X-API-Key`
    /// holds a key.
    #[error("unsupported Authorization scheme")]
    UnsupportedScheme,
    /// A key was sent but is not one of the configured keys.
    #[error("unknown API key")]
    UnknownKey,
}

/// The upgrade is refused: the HTTP status to answer with instead of `101`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Refusal {
    /// 426: no subprotocol `mcp.v<n>` offered names a version the server speaks (with
    /// the defaults: `mcp.v1` not offered).
    #[error("no protocol version in common: no subprotocol mcp.v<n> offered names a version this server speaks")]
    UpgradeRequired,
    /// 401: no credentials, or none that matches a configured key.
    #[error("unauthorized: {0}")]
    Unauthorized(AuthFailure),
    /// 429: too many new connections for this API key; retry after the duration.
    #[error("too many connections for this key")]
    RateLimited {
        /// When a new connection would be allowed.
        retry_after: Duration,
    },
    /// 503: the connection cap is reached.
    #[error("server at its connection limit")]
    Unavailable,
}

impl Refusal {
    /// The HTTP status code.
    pub fn status(&self) -> u16 {
        match self {
            Self::UpgradeRequired => 426,
            Self::Unauthorized(_) => 401,
            Self::RateLimited { .. } => 429,
            Self::Unavailable => 503,
        }
    }

    /// A plain-text body for the response. A 401 says only "unauthorized": which check
    /// failed is for the server's log ([`Display`](std::fmt::Display)), not for the client.
    pub fn body(&self) -> String {
        match self {
            Self::UpgradeRequired => {
                format!(
                    "upgrade required: offer Sec-WebSocket-Protocol: {SUBPROTOCOL} (or mcp.v<n> for another version this server speaks)"
                )
            }
            Self::Unauthorized(_) => "unauthorized".to_owned(),
            Self::RateLimited { retry_after } => format!(
                "too many new connections for this API key; retry in {} ms",
                retry_after.as_millis()
            ),
            other => other.to_string(),
        }
    }
}

/// Decides whether an upgrade request becomes a connection, before the upgrade.
///
/// Sans-IO like the rest of the crate: the caller passes the request's headers, the
/// subprotocols offered, the number of open connections and the time. Checks, in order
/// (the first failing one answers):
///
/// 1. a subprotocol `mcp.v<n>` offered for a version of
///    [`protocol_versions`](UpgradeConfig::protocol_versions) (the highest such is
///    selected), if required → else **426**;
/// 2. if keys are configured, a valid key in `Authorization: Bearer <key>`,
///    `Authorization: <key>` or `X-API-Key: <key>` (every candidate compared in constant
///    time against every key) → else **401** with an [`AuthFailure`] saying why. Keys
///    rotate with [`rotate_api_keys`](Self::rotate_api_keys): a removed key is still
///    accepted for the overlap given, and refused after (connections it opened stay up);
/// 3. fewer than `max_connections` open → else **503**;
/// 4. the key's connection rate → else **429** (a token is spent only on admission).
///
/// `X-Agent-ID` and `X-Agent-Type` are returned in the [`Admission`] (they also reach the
/// machine in `PeerInfo`, where the [`Orchestrator`](crate::orchestrator::Orchestrator)
/// records them).
#[derive(Debug, Clone)]
pub struct UpgradePolicy {
    config: UpgradeConfig,
    /// The keys accepted now, current and retiring.
    keys: RotatingSecrets,
    /// One bucket per key in `keys` (bounded by them: pruned at each rotation).
    buckets: BTreeMap<String, TokenBucket>,
}

impl UpgradePolicy {
    /// A policy with `config`.
    pub fn new(config: UpgradeConfig) -> Self {
        Self {
            keys: RotatingSecrets::new(config.api_keys.iter().cloned()),
            config,
            buckets: BTreeMap::new(),
        }
    }

    /// The configuration (its `api_keys` are the keys the policy started with).
    pub fn config(&self) -> &UpgradeConfig {
        &self.config
    }

    /// The keys accepted now: current ones, and removed ones until their overlap ends.
    pub fn api_keys(&self) -> &RotatingSecrets {
        &self.keys
    }

    /// Replaces the accepted keys with `keys` at `now`: a key no longer listed is still
    /// accepted until `now + overlap` and refused after. Once keys are required they stay
    /// required: an empty list refuses everyone after the overlap.
    pub fn rotate_api_keys<S: Into<String>>(
        &mut self,
        keys: impl IntoIterator<Item = S>,
        overlap: Duration,
        now: Instant,
    ) {
        self.keys.rotate(keys, overlap, now);
        let kept = &self.keys;
        self.buckets
            .retain(|key, _| kept.secrets().any(|(k, _)| k == key));
    }

    /// Checks one upgrade request. `headers` are `(name, value)` pairs (any case);
    /// `offered` the subprotocols of `Sec-WebSocket-Protocol`; `open` the connections open
    /// now.
    pub fn check(
        &mut self,
        headers: &[(String, String)],
        offered: &[String],
        open: usize,
        now: Instant,
    ) -> Result<Admission, Refusal> {
        let header = |name: &str| {
            headers
                .iter()
                .find(|(n, _)| n.eq_ignore_ascii_case(name))
                .map(|(_, v)| v.as_str())
        };
        let version = offered
            .iter()
            .filter_map(|p| version_of(p))
            .filter(|v| self.config.protocol_versions.contains(v))
            .max();
        if self.config.require_subprotocol && version.is_none() {
            return Err(Refusal::UpgradeRequired);
        }
        let key_index = if self.keys.is_required() {
            let found = authenticate(
                &self.keys,
                header("authorization"),
                header("x-api-key"),
                now,
            );
            Some(found.map_err(Refusal::Unauthorized)?)
        } else {
            None
        };
        if open >= self.config.max_connections {
            return Err(Refusal::Unavailable);
        }
        let key = key_index
            .and_then(|i| self.keys.secrets().nth(i))
            .map(|(k, _)| k);
        if let (Some(key), Some(rate)) = (key, self.config.connect_rate) {
            let bucket = self
                .buckets
                .entry(key.to_owned())
                .or_insert_with(|| TokenBucket::new(now));
            if !bucket.take(&rate, now) {
                return Err(Refusal::RateLimited {
                    retry_after: bucket.retry_after(&rate, now),
                });
            }
        }
        Ok(Admission {
            subprotocol: version.map(subprotocol_of),
            version,
            key_index,
            agent_id: header("x-agent-id").map(str::to_owned),
            agent_type: header("x-agent-type").map(str::to_owned),
        })
    }
}

/// The key of an `Authorization` value: `Bearer <key>` (scheme case-insensitive, RFC
/// 6750) or a bare `<key>` (one word, as the reference server accepts it). `Err` for
/// another scheme (`Basic ...`), `Ok(None)` for an empty value.
fn authorization_key(value: &str) -> Result<Option<&str>, AuthFailure> {
    let value = value.trim();
    match value.split_once(|c: char| c.is_ascii_whitespace()) {
        // `Bearer` with no token names no key.
        None if value.eq_ignore_ascii_case("bearer") => Ok(None),
        None => Ok((!value.is_empty()).then_some(value)),
        Some((scheme, token)) if scheme.eq_ignore_ascii_case("bearer") => {
            let token = token.trim();
            Ok((!token.is_empty()).then_some(token))
        }
        Some(_) => Err(AuthFailure::UnsupportedScheme),
    }
}

/// The position of the valid key the request's credentials name.
///
/// Both headers are looked at (the reference reads `X-API-Key` only when `Authorization`
/// is absent; we also accept a key there beside an `Authorization` that holds none of
/// ours, e.g. a proxy's), and every candidate is compared with every key.
fn authenticate(
    keys: &RotatingSecrets,
    authorization: Option<&str>,
    x_api_key: Option<&str>,
    now: Instant,
) -> Result<usize, AuthFailure> {
    let from_auth = authorization.map(authorization_key);
    let from_header = x_api_key.map(str::trim).filter(|k| !k.is_empty());
    let mut failure = AuthFailure::Missing;
    let mut found = None;
    if let Some(Err(e)) = from_auth {
        failure = e;
    }
    for token in [from_auth.and_then(Result::ok).flatten(), from_header]
        .into_iter()
        .flatten()
    {
        failure = AuthFailure::UnknownKey;
        found = found.or(keys.find(token, now));
    }
    found.ok_or(failure)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[allow(clippy::disallowed_methods)] // test base time
    fn t0() -> Instant {
        Instant::now()
    }

    fn h(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(n, v)| ((*n).to_owned(), (*v).to_owned()))
            .collect()
    }

    fn mcp() -> Vec<String> {
        vec!["mcp.v1".to_owned()]
    }

    #[test]
    fn subprotocol_is_required_unless_configured_otherwise() {
        let t = t0();
        let mut p = UpgradePolicy::new(UpgradeConfig::default());
        assert_eq!(p.check(&[], &[], 0, t), Err(Refusal::UpgradeRequired));
        assert_eq!(Refusal::UpgradeRequired.status(), 426);
        let other = vec!["graphql-ws".to_owned()];
        assert_eq!(p.check(&[], &other, 0, t), Err(Refusal::UpgradeRequired));
        let ok = p.check(&[], &mcp(), 0, t).unwrap();
        assert_eq!(ok.subprotocol.as_deref(), Some("mcp.v1"));
        assert_eq!(ok.version, Some(1));

        let mut lax = UpgradePolicy::new(UpgradeConfig::default().with_required_subprotocol(false));
        assert_eq!(lax.check(&[], &[], 0, t).unwrap().subprotocol, None);
    }

    #[test]
    fn the_highest_version_both_speak_is_selected() {
        let t = t0();
        let offer = |v: &[&str]| v.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
        let mut two = UpgradePolicy::new(UpgradeConfig::default().with_protocol_versions([1, 2]));
        let ok = two.check(&[], &offer(&["mcp.v1", "mcp.v2"]), 0, t).unwrap();
        assert_eq!(
            (ok.subprotocol.as_deref(), ok.version),
            (Some("mcp.v2"), Some(2))
        );
        let ok = two.check(&[], &offer(&["mcp.v1", "mcp.v3"]), 0, t).unwrap();
        assert_eq!(ok.version, Some(1));
        let mut one = UpgradePolicy::new(UpgradeConfig::default());
        let ok = one.check(&[], &offer(&["mcp.v2", "mcp.v1"]), 0, t).unwrap();
        assert_eq!(ok.subprotocol.as_deref(), Some("mcp.v1"));
        assert_eq!(
            one.check(&[], &offer(&["mcp.v2"]), 0, t),
            Err(Refusal::UpgradeRequired),
            "no version in common"
        );
        for bad in ["mcp.v", "mcp.v0", "mcp.v+1", "mcp.v256", "mcp.v1x"] {
            assert_eq!(version_of(bad), None, "{bad}");
        }
        assert_eq!(subprotocol_of(7), "mcp.v7");
    }

    #[test]
    fn bearer_tokens_are_checked_against_the_keys() {
        let t = t0();
        let mut p = UpgradePolicy::new(UpgradeConfig::default().with_api_keys(["k1", "k2"]));
        let unknown: Result<Admission, Refusal> =
            Err(Refusal::Unauthorized(AuthFailure::UnknownKey));
        assert_eq!(
            p.check(&[], &mcp(), 0, t),
            Err(Refusal::Unauthorized(AuthFailure::Missing))
        );
        for bad in ["Bearer nope", "k1x", "Bearer k1x", "nope"] {
            assert_eq!(
                p.check(&h(&[("Authorization", bad)]), &mcp(), 0, t),
                unknown.clone(),
                "{bad}"
            );
        }
        for empty in ["Bearer", "Bearer  ", "", "  "] {
            assert_eq!(
                p.check(&h(&[("Authorization", empty)]), &mcp(), 0, t),
                Err(Refusal::Unauthorized(AuthFailure::Missing)),
                "{empty:?}"
            );
        }
        assert_eq!(
            p.check(&h(&[("Authorization", "Basic k1")]), &mcp(), 0, t),
            Err(Refusal::Unauthorized(AuthFailure::UnsupportedScheme))
        );
        let ok = p
            .check(
                &h(&[
                    ("authorization", "bearer k2"),
                    ("X-Agent-ID", "agent-123"),
                    ("x-agent-type", "code-analyzer"),
                ]),
                &mcp(),
                0,
                t,
            )
            .unwrap();
        assert_eq!(ok.key_index, Some(1));
        assert_eq!(ok.agent_id.as_deref(), Some("agent-123"));
        assert_eq!(ok.agent_type.as_deref(), Some("code-analyzer"));
        // The subprotocol is checked first.
        assert_eq!(
            p.check(&h(&[("authorization", "Bearer k1")]), &[], 0, t),
            Err(Refusal::UpgradeRequired)
        );
        // The 401's body does not say which check failed; the log (Display) does.
        assert_eq!(
            Refusal::Unauthorized(AuthFailure::UnknownKey).body(),
            "unauthorized"
        );
        assert_eq!(
            Refusal::Unauthorized(AuthFailure::UnknownKey).to_string(),
            "unauthorized: unknown API key"
        );
    }

    #[test]
    fn keys_are_read_from_bearer_bare_authorization_and_x_api_key() {
        let t = t0();
        let mut p = UpgradePolicy::new(UpgradeConfig::default().with_api_keys(["k1", "k2"]));
        let admitted = |p: &mut UpgradePolicy, headers: &[(&str, &str)]| {
            p.check(&h(headers), &mcp(), 0, t).map(|a| a.key_index)
        };
        assert_eq!(
            admitted(&mut p, &[("Authorization", "Bearer k1")]),
            Ok(Some(0))
        );
        assert_eq!(admitted(&mut p, &[("Authorization", "k2")]), Ok(Some(1)));
        assert_eq!(admitted(&mut p, &[("Authorization", " k2 ")]), Ok(Some(1)));
        assert_eq!(admitted(&mut p, &[("X-API-Key", "k1")]), Ok(Some(0)));
        assert_eq!(admitted(&mut p, &[("x-api-key", "k2")]), Ok(Some(1)));
        // A key in X-API-Key beside an Authorization that is not ours (a proxy's).
        assert_eq!(
            admitted(
                &mut p,
                &[("Authorization", "Basic cHJveHk="), ("X-API-Key", "k2")]
            ),
            Ok(Some(1))
        );
        assert_eq!(
            admitted(
                &mut p,
                &[("Authorization", "Bearer zz"), ("X-API-Key", "k1")]
            ),
            Ok(Some(0))
        );
        assert_eq!(
            admitted(&mut p, &[("X-API-Key", "k3")]),
            Err(Refusal::Unauthorized(AuthFailure::UnknownKey))
        );
        assert_eq!(
            admitted(&mut p, &[("X-API-Key", "")]),
            Err(Refusal::Unauthorized(AuthFailure::Missing))
        );
    }

    #[test]
    fn connection_cap_answers_503() {
        let t = t0();
        let mut p = UpgradePolicy::new(UpgradeConfig::default().with_max_connections(2));
        assert!(p.check(&[], &mcp(), 1, t).is_ok());
        assert_eq!(p.check(&[], &mcp(), 2, t), Err(Refusal::Unavailable));
        assert_eq!(Refusal::Unavailable.status(), 503);
    }

    #[test]
    fn new_connections_per_key_are_rate_limited() {
        let t = t0();
        let cfg = UpgradeConfig::default()
            .with_api_keys(["a", "b"])
            .with_connect_rate(Some(Rate::per_second(1, 2)));
        let mut p = UpgradePolicy::new(cfg);
        let a = h(&[("authorization", "Bearer a")]);
        let b = h(&[("authorization", "Bearer b")]);
        assert!(p.check(&a, &mcp(), 0, t).is_ok());
        assert!(p.check(&a, &mcp(), 0, t).is_ok());
        let refused = p.check(&a, &mcp(), 0, t).unwrap_err();
        assert_eq!(
            refused,
            Refusal::RateLimited {
                retry_after: Duration::from_secs(1)
            }
        );
        assert_eq!(refused.status(), 429);
        assert!(refused.body().contains("1000 ms"));
        // Another key has its own budget; a refusal for the cap spends no token.
        assert_eq!(p.check(&b, &mcp(), 10_000, t), Err(Refusal::Unavailable));
        assert!(p.check(&b, &mcp(), 0, t).is_ok());
        assert!(p.check(&b, &mcp(), 0, t).is_ok());
        assert!(p.check(&a, &mcp(), 0, t + Duration::from_secs(1)).is_ok());
    }

    #[test]
    fn empty_keys_never_match() {
        let t = t0();
        let empty = RotatingSecrets::new([""]);
        assert_eq!(empty.find("", t), None);
        assert_eq!(authorization_key("Bearer "), Ok(None));
        assert_eq!(
            authenticate(&empty, Some(""), Some(""), t),
            Err(AuthFailure::Missing)
        );
        let mut p = UpgradePolicy::new(UpgradeConfig::default().with_api_keys([""]));
        assert_eq!(
            p.check(&h(&[("Authorization", "Bearer ")]), &mcp(), 0, t),
            Err(Refusal::Unauthorized(AuthFailure::Missing))
        );
        let keys = RotatingSecrets::new(["abc", "xyz"]);
        assert_eq!(authenticate(&keys, None, Some("abc"), t), Ok(0));
        assert_eq!(authenticate(&keys, None, Some("xyz"), t), Ok(1));
        for wrong in ["abd", "ab", "abcd"] {
            assert_eq!(
                authenticate(&keys, None, Some(wrong), t),
                Err(AuthFailure::UnknownKey)
            );
        }
    }

    #[test]
    fn a_rotated_key_is_accepted_and_the_retired_one_refused_after_the_overlap() {
        let t = t0();
        let overlap = Duration::from_secs(300);
        let mut p = UpgradePolicy::new(UpgradeConfig::default().with_api_keys(["old"]));
        let with = |key: &str| h(&[("Authorization", &format!("Bearer {key}"))]);
        assert!(p.check(&with("old"), &mcp(), 0, t).is_ok());
        assert_eq!(
            p.check(&with("new"), &mcp(), 0, t),
            Err(Refusal::Unauthorized(AuthFailure::UnknownKey))
        );
        p.rotate_api_keys(["new"], overlap, t);
        let during = t + overlap - Duration::from_secs(1);
        assert!(p.check(&with("new"), &mcp(), 0, during).is_ok());
        assert!(p.check(&with("old"), &mcp(), 0, during).is_ok());
        assert_eq!(
            p.check(&with("old"), &mcp(), 0, t + overlap),
            Err(Refusal::Unauthorized(AuthFailure::UnknownKey))
        );
        assert!(p.check(&with("new"), &mcp(), 0, t + overlap).is_ok());
        // The retired key's rate bucket is dropped with it at the next rotation.
        p.rotate_api_keys(["new"], overlap, t + overlap);
        assert_eq!(p.buckets.len(), 1);
        assert_eq!(p.api_keys().current().collect::<Vec<_>>(), ["new"]);
    }

    #[test]
    fn keys_rotated_into_an_open_policy_turn_authentication_on() {
        let t = t0();
        let mut p = UpgradePolicy::new(UpgradeConfig::default());
        assert!(p.check(&[], &mcp(), 0, t).is_ok());
        p.rotate_api_keys(["k"], Duration::from_secs(300), t);
        assert_eq!(
            p.check(&[], &mcp(), 0, t),
            Err(Refusal::Unauthorized(AuthFailure::Missing))
        );
        // Emptying the keys never turns it off again: after the overlap nobody is let in.
        p.rotate_api_keys(Vec::<String>::new(), Duration::from_secs(300), t);
        let after = t + Duration::from_secs(300);
        assert_eq!(
            p.check(&h(&[("X-API-Key", "k")]), &mcp(), 0, after),
            Err(Refusal::Unauthorized(AuthFailure::UnknownKey))
        );
    }
}
