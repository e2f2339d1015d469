//! Environment variables and `--set` flags that override the file.
//!
//! One scheme for both: a key path (`bus.max_message_bytes`, `listener.0.listen` or
//! `listener[0].listen` for the first listener) and a value read as a TOML value (`1024`,
//! `true`, `["a", "b"]`, `"text"`), or as a plain string when it is not one
//! (`--set bus.path=/events`).
//!
//! - Environment: `AGENTWIRE__<SECTION>__<KEY>=value`, segments separated by two
//!   underscores, case-insensitive (`AGENTWIRE__BUS__MAX_MESSAGE_BYTES=2097152`,
//!   `AGENTWIRE__LISTENER__0__LISTEN=0.0.0.0:8080`). Variables without the `AGENTWIRE__`
//!   prefix are ignored.
//! - Flags: `--set bus.max_message_bytes=2097152`, repeatable; flags win over the
//!   environment, which wins over the file.
//!
//! An override of a key inside `[[listener]]` when the file has no `[[listener]]` applies to
//! the default listener list.

use toml::{Table, Value};

use super::error::{ConfigError, Source};

/// The prefix of the environment variables that override settings.
pub const ENV_PREFIX: &str = "AGENTWIRE__";

/// The `AGENTWIRE__*` variables of this process's environment, for
/// [`Config::resolve`](super::Config::resolve). Unlike `std::env::vars`, never panics: a
/// value that is not UTF-8 is passed on with U+FFFD in place of the bad bytes (so its
/// error names the variable), and variables of other names are left out unread.
pub fn environment() -> Vec<(String, String)> {
    std::env::vars_os()
        .filter_map(|(name, value)| {
            let name = name.into_string().ok()?;
            name.starts_with(ENV_PREFIX)
                .then(|| (name, value.to_string_lossy().into_owned()))
        })
        .collect()
}

/// One override: where it came from, the key path and the value.
#[derive(Debug, Clone)]
pub(crate) struct Override {
    /// The variable or flag.
    pub(crate) source: Source,
    /// Key path segments (`["listener", "0", "listen"]`).
    pub(crate) segments: Vec<String>,
    /// The value.
    pub(crate) value: Value,
}

impl Override {
    /// The key path as errors and the file index name it: `listener[0].listen`.
    pub(crate) fn key(&self) -> String {
        let mut out = String::new();
        for seg in &self.segments {
            if seg.bytes().all(|b| b.is_ascii_digit()) && !out.is_empty() {
                out.push('[');
                out.push_str(seg);
                out.push(']');
            } else {
                if !out.is_empty() {
                    out.push('.');
                }
                out.push_str(seg);
            }
        }
        out
    }
}

/// The overrides in `env` (only `AGENTWIRE__*` variables), in the order given.
pub(crate) fn from_env(
    env: impl IntoIterator<Item = (String, String)>,
) -> Result<Vec<Override>, ConfigError> {
    let mut out = Vec::new();
    for (name, raw) in env {
        let Some(rest) = name.strip_prefix(ENV_PREFIX) else {
            continue;
        };
        let source = Source::Env { name: name.clone() };
        let segments: Vec<String> = rest.split("__").map(str::to_ascii_lowercase).collect();
        check_segments(&segments, &source)?;
        out.push(Override {
            source,
            segments,
            value: parse_value(&raw),
        });
    }
    Ok(out)
}

/// The overrides of `--set KEY=VALUE` flags (`sets` holds the `KEY=VALUE` arguments).
pub(crate) fn from_flags(sets: &[String]) -> Result<Vec<Override>, ConfigError> {
    sets.iter()
        .map(|arg| {
            let source = Source::Flag { arg: arg.clone() };
            let Some((key, raw)) = arg.split_once('=') else {
                return Err(ConfigError::Override {
                    source_: source,
                    message: "expected KEY=VALUE (e.g. bus.max_message_bytes=2097152)".to_owned(),
                });
            };
            let segments: Vec<String> = key
                .trim()
                .replace('[', ".")
                .replace(']', "")
                .split('.')
                .map(str::to_owned)
                .collect();
            check_segments(&segments, &source)?;
            Ok(Override {
                source,
                segments,
                value: parse_value(raw.trim()),
            })
        })
        .collect()
}

/// Every segment non-empty and made of `[A-Za-z0-9_-]`.
fn check_segments(segments: &[String], source: &Source) -> Result<(), ConfigError> {
    let ok = !segments.is_empty()
        && segments.iter().all(|s| {
            !s.is_empty()
                && s.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
        });
    if ok {
        Ok(())
    } else {
        Err(ConfigError::Override {
            source_: source.clone(),
            message: "not a key path (expected SECTION.KEY, e.g. bus.max_message_bytes)".to_owned(),
        })
    }
}

/// `raw` as a TOML value, or as a string when it is not one.
fn parse_value(raw: &str) -> Value {
    toml::from_str::<Table>(&format!("v = {raw}"))
        .ok()
        .filter(|t| t.len() == 1)
        .and_then(|mut t| t.remove("v"))
        .unwrap_or_else(|| Value::String(raw.to_owned()))
}

/// Sets `o` in `root`; `defaults` is the default configuration as TOML, from which arrays
/// absent from `root` are copied before an element is changed.
pub(crate) fn apply(root: &mut Table, o: &Override, defaults: &Table) -> Result<(), ConfigError> {
    let mut slot = Value::Table(std::mem::take(root));
    let result = set_in(
        &mut slot,
        &o.segments,
        o.value.clone(),
        Some(&Value::Table(defaults.clone())),
    );
    if let Value::Table(t) = slot {
        *root = t;
    }
    result.map_err(|message| ConfigError::Override {
        source_: o.source.clone(),
        message,
    })
}

fn set_in(
    slot: &mut Value,
    segments: &[String],
    value: Value,
    default: Option<&Value>,
) -> Result<(), String> {
    let Some((head, rest)) = segments.split_first() else {
        *slot = value;
        return Ok(());
    };
    match slot {
        Value::Table(table) => {
            let default = default.and_then(|d| d.get(head.as_str()));
            if !table.contains_key(head) {
                let fresh = if rest.is_empty() {
                    Value::Boolean(false)
                } else {
                    default
                        .filter(|d| d.is_array())
                        .cloned()
                        .unwrap_or_else(|| Value::Table(Table::new()))
                };
                table.insert(head.clone(), fresh);
            }
            let next = table
                .get_mut(head)
                .ok_or_else(|| format!("cannot set `{head}`"))?;
            set_in(next, rest, value, default)
        }
        Value::Array(items) => {
            let index: usize = head
                .parse()
                .map_err(|_| format!("`{head}` is not an index into a list (0, 1, ...)"))?;
            let default = default.and_then(|d| d.get(index));
            if index == items.len() {
                items.push(Value::Table(Table::new()));
            }
            let len = items.len();
            let next = items
                .get_mut(index)
                .ok_or_else(|| format!("index {index} is past the end of a list of {len}"))?;
            set_in(next, rest, value, default)
        }
        _ => Err(format!("`{head}` is inside a value that is not a table")),
    }
}
