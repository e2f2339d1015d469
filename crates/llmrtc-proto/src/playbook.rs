//! Playbook mode: conversation stages, each with its instructions, tools and transitions.
//!
//! The LLM of a turn is given the current stage's instructions and tools
//! ([`LlmRequest::stage`](crate::LlmRequest::stage)). Tools it calls run through the
//! application ([`ServerEvent::ToolCall`](crate::ServerEvent::ToolCall)) and are announced with
//! `tool-call-start` / `tool-call-end`. A stage moves on (`stage-change`) when a transition's
//! trigger fires: a tool returning successfully (`reason: "tool_result"`), a keyword in the
//! user's transcript (`"keyword_match"`), or the application
//! ([`LlmrtcServer::change_stage`](crate::LlmrtcServer::change_stage), its own reason).
//! Playbooks are plain data and (de)serialize as JSON, so they can live in a file.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// `stage-change.reason` when a tool's success moved the stage.
pub const REASON_TOOL_RESULT: &str = "tool_result";
/// `stage-change.reason` when a keyword in the user's transcript moved the stage.
pub const REASON_KEYWORD_MATCH: &str = "keyword_match";

/// A playbook: named stages and the one to start in.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Playbook {
    /// The stage every session starts in.
    pub initial_stage: String,
    /// Every stage (names unique).
    pub stages: Vec<Stage>,
}

/// One stage of a playbook.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Stage {
    /// The stage's name (in `stage-change.from` / `to`).
    pub name: String,
    /// What the LLM is told in this stage (its system prompt).
    #[serde(default)]
    pub instructions: String,
    /// Tools the LLM may call in this stage.
    #[serde(default)]
    pub tools: Vec<ToolSpec>,
    /// Ways out of this stage, checked in order.
    #[serde(default)]
    pub transitions: Vec<Transition>,
}

/// A tool the LLM may call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolSpec {
    /// Function name (`tool-call-start.name`).
    pub name: String,
    /// What it does, for the LLM.
    #[serde(default)]
    pub description: String,
    /// JSON Schema of its arguments, for the LLM (not checked by the server).
    #[serde(default = "empty_object")]
    pub parameters: Value,
}

fn empty_object() -> Value {
    Value::Object(serde_json::Map::new())
}

/// A way from one stage to another.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Transition {
    /// The stage to move to.
    pub to: String,
    /// What makes it happen.
    pub trigger: Trigger,
}

/// What fires a [`Transition`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Trigger {
    /// The named tool returned successfully (reason `"tool_result"`).
    ToolResult {
        /// The tool's name.
        tool: String,
    },
    /// The user's transcript contains one of the keywords, ignoring ASCII case (reason
    /// `"keyword_match"`), checked before the LLM is asked, so it answers in the new stage.
    Keyword {
        /// The keywords.
        keywords: Vec<String>,
    },
}

/// Why a playbook is unusable.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PlaybookError {
    /// No stages.
    #[error("a playbook needs at least one stage")]
    Empty,
    /// Two stages share a name.
    #[error("duplicate stage {0:?}")]
    DuplicateStage(String),
    /// The initial stage or a transition's target does not exist.
    #[error("unknown stage {0:?}")]
    UnknownStage(String),
    /// Two tools of one stage share a name.
    #[error("duplicate tool {tool:?} in stage {stage:?}")]
    DuplicateTool {
        /// The stage.
        stage: String,
        /// The tool.
        tool: String,
    },
}

impl Playbook {
    /// Checks that stage names are unique, and that the initial stage and every transition
    /// target exist, and that tool names are unique per stage.
    pub fn validate(&self) -> Result<(), PlaybookError> {
        if self.stages.is_empty() {
            return Err(PlaybookError::Empty);
        }
        for (i, s) in self.stages.iter().enumerate() {
            if self.stages[..i].iter().any(|o| o.name == s.name) {
                return Err(PlaybookError::DuplicateStage(s.name.clone()));
            }
            for (j, t) in s.tools.iter().enumerate() {
                if s.tools[..j].iter().any(|o| o.name == t.name) {
                    return Err(PlaybookError::DuplicateTool {
                        stage: s.name.clone(),
                        tool: t.name.clone(),
                    });
                }
            }
        }
        let targets = std::iter::once(&self.initial_stage).chain(
            self.stages
                .iter()
                .flat_map(|s| s.transitions.iter().map(|t| &t.to)),
        );
        for t in targets {
            if self.stage(t).is_none() {
                return Err(PlaybookError::UnknownStage(t.clone()));
            }
        }
        Ok(())
    }

    /// The stage named `name`.
    pub fn stage(&self, name: &str) -> Option<&Stage> {
        self.stages.iter().find(|s| s.name == name)
    }
}

impl Stage {
    /// The tool named `name`.
    pub fn tool(&self, name: &str) -> Option<&ToolSpec> {
        self.tools.iter().find(|t| t.name == name)
    }

    /// The first transition fired by `tool` returning successfully.
    pub fn on_tool_result(&self, tool: &str) -> Option<&Transition> {
        self.transitions
            .iter()
            .find(|t| matches!(&t.trigger, Trigger::ToolResult { tool: n } if n == tool))
    }

    /// The first transition fired by a keyword in `transcript`.
    pub fn on_transcript(&self, transcript: &str) -> Option<&Transition> {
        let lower = transcript.to_ascii_lowercase();
        self.transitions.iter().find(|t| match &t.trigger {
            Trigger::Keyword { keywords } => keywords
                .iter()
                .any(|k| !k.is_empty() && lower.contains(&k.to_ascii_lowercase())),
            Trigger::ToolResult { .. } => false,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn book() -> Playbook {
        serde_json::from_value(serde_json::json!({
            "initialStage": "greeting",
            "stages": [
                {"name": "greeting", "instructions": "Greet.",
                 "tools": [{"name": "bookTable", "description": "Books a table",
                            "parameters": {"type": "object"}}],
                 "transitions": [
                    {"to": "confirmation", "trigger": {"type": "tool_result", "tool": "bookTable"}},
                    {"to": "farewell", "trigger": {"type": "keyword", "keywords": ["Bye"]}}
                 ]},
                {"name": "confirmation"},
                {"name": "farewell"}
            ]
        }))
        .expect("playbook")
    }

    #[test]
    fn a_playbook_reads_from_json_and_validates() {
        let b = book();
        assert_eq!(b.validate(), Ok(()));
        let g = b.stage("greeting").expect("stage");
        assert_eq!(
            g.on_tool_result("bookTable").map(|t| t.to.as_str()),
            Some("confirmation")
        );
        assert_eq!(
            g.on_transcript("ok BYE now").map(|t| t.to.as_str()),
            Some("farewell")
        );
        assert_eq!(g.on_transcript("hello"), None);
        let mut bad = b.clone();
        bad.stages[0].transitions[0].to = "nowhere".into();
        assert_eq!(
            bad.validate(),
            Err(PlaybookError::UnknownStage("nowhere".into()))
        );
        let mut dup = b;
        dup.stages.push(Stage {
            name: "farewell".into(),
            instructions: String::new(),
            tools: vec![],
            transitions: vec![],
        });
        assert_eq!(
            dup.validate(),
            Err(PlaybookError::DuplicateStage("farewell".into()))
        );
    }
}
