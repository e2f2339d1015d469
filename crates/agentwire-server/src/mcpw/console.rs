//! The reference server's stdin commands, one per line:
//!
//! - `TYPE [priority=N] [JSON_CONTEXT]` submits a task of `TYPE` (`code_review`) with
//!   `priority` N (0 to 4294967295, default 1; the larger goes first among tasks waiting
//!   for an agent, equal ones in submission order) and `context` the JSON (default `{}`):
//!   `code_review priority=5 {"pull_request": 7}`.
//! - `cancel TASK_ID` cancels a task (its agent gets error 4006).
//!
//! Blank lines are nothing.

use agentwire::mcpw::orchestrator::TaskSpec;

/// The help text that lists the commands (the server's `--help` shows it).
pub const HELP: &str = "\
Commands on stdin, one per line:
  TYPE [priority=N] [JSON_CONTEXT]   submit a task of TYPE; N from 0 to 4294967295 (default 1,
                                     the larger goes first among tasks waiting for an agent);
                                     the context defaults to {}
                                     e.g. code_review priority=5 {\"pull_request\": 7}
  cancel TASK_ID                     cancel a task (its agent gets error 4006)";

/// The task priority when a line names none (the orchestrator's default).
pub const DEFAULT_PRIORITY: u32 = 1;

/// One stdin command.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Command {
    /// Submit this task.
    Submit(TaskSpec),
    /// Cancel the task with this id.
    Cancel(String),
}

/// Why a line is not a command.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CommandError {
    /// `cancel` without a task id.
    #[error("cancel needs a task id: cancel TASK_ID")]
    CancelWithoutId,
    /// `priority=` with something other than a whole number from 0 to 4294967295.
    #[error("the priority must be a whole number from 0 to 4294967295, not {0:?}")]
    BadPriority(String),
    /// The context is not JSON.
    #[error("the context is not JSON ({0})")]
    BadContext(String),
}

/// Reads one line: `Ok(None)` for a blank one.
pub fn parse(line: &str) -> Result<Option<Command>, CommandError> {
    let line = line.trim();
    let (kind, rest) = line.split_once(char::is_whitespace).unwrap_or((line, ""));
    let rest = rest.trim();
    if kind.is_empty() {
        return Ok(None);
    }
    if kind == "cancel" {
        if rest.is_empty() {
            return Err(CommandError::CancelWithoutId);
        }
        return Ok(Some(Command::Cancel(rest.to_owned())));
    }
    let (priority, rest) = match rest.strip_prefix("priority=") {
        Some(p) => {
            let (n, after) = p.split_once(char::is_whitespace).unwrap_or((p, ""));
            let n = n
                .parse::<u32>()
                .map_err(|_| CommandError::BadPriority(n.to_owned()))?;
            (n, after.trim())
        }
        None => (DEFAULT_PRIORITY, rest),
    };
    let context = if rest.is_empty() {
        serde_json::json!({})
    } else {
        serde_json::from_str(rest).map_err(|e| CommandError::BadContext(e.to_string()))?
    };
    let spec = TaskSpec::new(kind)
        .with_priority(priority)
        .with_context(context);
    Ok(Some(Command::Submit(spec)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn submitted(line: &str) -> TaskSpec {
        match parse(line) {
            Ok(Some(Command::Submit(spec))) => spec,
            other => panic!("{line:?}: {other:?}"),
        }
    }

    #[test]
    fn a_task_line_takes_an_optional_priority_before_its_context() {
        let plain = submitted("code_review");
        assert_eq!(plain.task_type, "code_review");
        assert_eq!(plain.priority, DEFAULT_PRIORITY);
        assert_eq!(plain.context, json!({}));
        let full = submitted("  code_review priority=5 {\"pull_request\": 7} ");
        assert_eq!(full.priority, 5);
        assert_eq!(full.context, json!({"pull_request": 7}));
        assert_eq!(submitted("code_review priority=0").priority, 0);
        assert_eq!(
            submitted("code_review {\"a\": 1}").context,
            json!({"a": 1}),
            "no priority: the default"
        );
        assert_eq!(
            parse("cancel task-1"),
            Ok(Some(Command::Cancel("task-1".into())))
        );
        assert_eq!(parse("   "), Ok(None));
    }

    #[test]
    fn bad_lines_get_typed_errors() {
        assert_eq!(
            parse("code_review priority=high"),
            Err(CommandError::BadPriority("high".into()))
        );
        assert_eq!(
            parse("code_review priority=-1 {}"),
            Err(CommandError::BadPriority("-1".into()))
        );
        assert_eq!(
            parse("code_review priority=4294967296"),
            Err(CommandError::BadPriority("4294967296".into()))
        );
        assert!(matches!(
            parse("code_review {"),
            Err(CommandError::BadContext(_))
        ));
        assert_eq!(parse("cancel"), Err(CommandError::CancelWithoutId));
    }
}
