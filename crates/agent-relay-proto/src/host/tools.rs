//! The UI a [`Host`](crate::Host) exposes to agents: the [`Tools`] trait an application
//! implements, and what a tool gets and gives back.

use serde_json::Value;

use super::history::{ChatRole, History};
use crate::error::ToolError;
use crate::message::{RawJson, ToolSchema};

/// The application's UI, as the [`Host`](crate::Host) sees it: the tools of the current
/// stage, the visible state, and how to run a tool.
///
/// The host does everything around a call: it answers `SESSION_NOT_ACTIVE` outside a
/// session, checks `reason`, answers `NO_ACTIVE_SPEC` when [`has_active_spec`] is false,
/// `UNKNOWN_TOOL` when the name is not in [`tool_schema`], and `INVALID_PARAMS` (naming the
/// parameter) when the params do not fit the tool's `parameters` schema
/// ([`validate_params`](crate::validate_params)). [`call`](Self::call) therefore only sees
/// a known tool with valid params, and answers for the tool's own logic.
///
/// A movie-booking UI keeps its stage (`movie` … `confirm`) and the items on screen, returns
/// the stage's tools from `tool_schema`, and moves between stages in `next`/`prev`:
///
/// ```
/// use agent_relay_proto::{RawJson, ToolContext, ToolError, ToolOutcome, ToolSchema, Tools};
/// use serde_json::Value;
///
/// struct Booking { stage: usize, picked: Option<String>, schema: Vec<Vec<ToolSchema>> }
/// const STAGES: [&str; 2] = ["movie", "confirm"];
///
/// impl Tools for Booking {
///     fn tool_schema(&self) -> &[ToolSchema] { &self.schema[self.stage] }
///     fn ui_spec(&self) -> Option<RawJson> {
///         Some(RawJson::from_value(&serde_json::json!({"stage": STAGES[self.stage], "picked": self.picked})))
///     }
///     fn stage(&self) -> Option<&str> { Some(STAGES[self.stage]) }
///     fn call(&mut self, name: &str, params: &Value, _: &mut ToolContext<'_>) -> Result<ToolOutcome, ToolError> {
///         match name {
///             "select" => {
///                 let id = params["itemId"].as_str().unwrap_or_default();
///                 if !["m1", "m2"].contains(&id) {
///                     return Err(ToolError::invalid_params(format!("select: no item {id:?}")));
///                 }
///                 self.picked = Some(id.to_owned());
///                 Ok(ToolOutcome::Applied)
///             }
///             "next" if self.picked.is_none() => Err(ToolError::failed("pick a movie first")),
///             "next" => { self.stage = 1; Ok(ToolOutcome::Applied) }
///             _ => Ok(ToolOutcome::Unchanged),
///         }
///     }
///     fn reset(&mut self) { self.stage = 0; self.picked = None; }
/// }
/// ```
///
/// [`has_active_spec`]: Self::has_active_spec
/// [`tool_schema`]: Self::tool_schema
pub trait Tools {
    /// The tools an agent may call now (the current stage's), in the order agents see them
    /// in `snapshot.state`'s `toolSchema`. A tool's `parameters` is the JSON Schema its
    /// params are checked against.
    fn tool_schema(&self) -> &[ToolSchema];

    /// The visible UI state (`uiSpec`), or `None` while no UI spec is loaded (tool calls then
    /// get `NO_ACTIVE_SPEC`, snapshots carry `"uiSpec": null`).
    ///
    /// Never include backend payloads: `backendData` must not reach agents (spec §7). The
    /// host drops a top-level `backendData` key as a safeguard, nothing deeper.
    fn ui_spec(&self) -> Option<RawJson>;

    /// Whether a UI spec is loaded. Default: `ui_spec().is_some()`; override it when
    /// building the spec is costly.
    fn has_active_spec(&self) -> bool {
        self.ui_spec().is_some()
    }

    /// The current stage's name (`movie`, `theater`, …), sent as `stage` with
    /// `user.message`. Default: none.
    fn stage(&self) -> Option<&str> {
        None
    }

    /// Runs tool `name` (one of [`tool_schema`](Self::tool_schema)) with `params`, a JSON
    /// object that fits its schema. Apply all or nothing: on `Err` the host answers the
    /// agent with the error and sends no `state.updated` for the call (unless the tool wrote
    /// to the chat through `ctx`).
    fn call(
        &mut self,
        name: &str,
        params: &Value,
        ctx: &mut ToolContext<'_>,
    ) -> Result<ToolOutcome, ToolError>;

    /// Returns to the initial state: called when a session ends, after the logs are flushed.
    fn reset(&mut self);
}

/// What a successful tool did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ToolOutcome {
    /// The visible state changed: the host sends `tool.result`, then `state.updated`.
    Applied,
    /// Nothing visible changed (e.g. selecting what is already selected): `tool.result`
    /// only (plus `state.updated` if the tool wrote to the chat).
    Unchanged,
}

/// What a tool may use besides its params: the call's `reason` and the chat timeline.
#[derive(Debug)]
pub struct ToolContext<'a> {
    tool_name: &'a str,
    reason: &'a str,
    history: &'a mut History,
}

impl<'a> ToolContext<'a> {
    /// A context for a call of `tool_name` because of `reason`, writing to `history` (the
    /// host builds one per call; tests of a [`Tools`] implementation can too).
    pub fn new(tool_name: &'a str, reason: &'a str, history: &'a mut History) -> Self {
        Self {
            tool_name,
            reason,
            history,
        }
    }

    /// The tool being called.
    pub fn tool_name(&self) -> &str {
        self.tool_name
    }

    /// The agent's `reason` for the call (non-empty).
    pub fn reason(&self) -> &str {
        self.reason
    }

    /// The chat timeline.
    pub fn history(&self) -> &History {
        self.history
    }

    /// Appends to the chat timeline (a `postMessage` tool posts as [`ChatRole::Agent`]).
    /// Fails with [`ToolError::Failed`] when the timeline is full.
    pub fn post(&mut self, role: ChatRole, text: impl Into<String>) -> Result<(), ToolError> {
        self.history
            .push(role, text)
            .map_err(|e| ToolError::failed(e.to_string()))
    }
}
