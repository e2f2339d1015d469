//! The participant's side of `movie_host`: the commands a person at the host types on its
//! standard input (a stand-in for clicking the browser UI), parsed into what the
//! [`Host`](agentwire::agent_relay::Host) does with them.
//!
//! A line starting with `/` is a UI action, run as the current stage's tool exactly as an
//! agent's `tool.call` of it would be ([`Host::user_action`](agentwire::agent_relay::Host::user_action)),
//! and pushed to every agent as `state.updated` with `source: "user"` (spec §4.2); `help`
//! lists the commands ([`HELP`]); any other line is the participant's chat message,
//! `user.message`.

use serde_json::{json, Value};

/// The command list `help` prints.
pub const HELP: &str = "\
Participant commands (a UI action is pushed to the agents as state.updated, source \"user\"):
  /select ITEM_ID              choose an item on screen (on the seat stage: toggle a seat)
  /next                        go on to the next stage (the stage must be complete)
  /prev                        go back one stage
  /filter FIELD OP VALUE       show only items whose FIELD compares true with VALUE
                               (OP: eq neq contains gt lt gte lte in; VALUE is JSON or text)
  /sort FIELD [asc|desc]       sort the items on screen
  /quantity TYPE_ID N          set how many tickets of a type (ticket stage)
  /clear [filter|sort|highlight|augment|all]
                               clear modifications of the screen (default all)
  /show                        print the stage and the items on screen
  /say TEXT                    send TEXT as a chat message (e.g. one starting with /)
  help, /help                  this list
Any other line is sent to the agents as the participant's chat message (user.message).";

/// One line of the participant's input.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Command {
    /// A chat message: `user.message`.
    Say(String),
    /// A UI action: `tool` of the current stage with `params`.
    Act {
        /// The tool (`select`, `next`, `filter`, ...).
        tool: &'static str,
        /// Its params, a JSON object.
        params: Value,
    },
    /// Print the stage and the items on screen.
    Show,
    /// Print [`HELP`].
    Help,
}

/// Reads one line: `Ok(None)` for a blank line, `Err` with a one-line usage hint for a
/// command that is malformed or unknown.
pub fn parse(line: &str) -> Result<Option<Command>, String> {
    let line = line.trim();
    if line.is_empty() {
        return Ok(None);
    }
    if line == "help" {
        return Ok(Some(Command::Help));
    }
    let Some(rest) = line.strip_prefix('/') else {
        return Ok(Some(Command::Say(line.to_owned())));
    };
    let (name, args) = rest.split_once(char::is_whitespace).unwrap_or((rest, ""));
    let args = args.trim();
    let words: Vec<&str> = args.split_whitespace().collect();
    let act = |tool: &'static str, params: Value| Ok(Some(Command::Act { tool, params }));
    match (name, words.as_slice()) {
        ("help", _) => Ok(Some(Command::Help)),
        ("show", []) => Ok(Some(Command::Show)),
        ("say", _) if !args.is_empty() => Ok(Some(Command::Say(args.to_owned()))),
        ("select", [id]) => act("select", json!({ "itemId": id })),
        ("next", []) => act("next", json!({})),
        ("prev", []) => act("prev", json!({})),
        ("filter", [field, op, ..]) => {
            // The value is the rest of the line after the operator.
            let after_field = args[field.len()..].trim_start();
            let raw = after_field[op.len()..].trim();
            if raw.is_empty() {
                return Err(usage("/filter FIELD OP VALUE"));
            }
            let value = serde_json::from_str(raw).unwrap_or_else(|_| json!(raw));
            act(
                "filter",
                json!({"field": field, "operator": op, "value": value}),
            )
        }
        ("sort", [field]) => act("sort", json!({ "field": field })),
        ("sort", [field, order]) => act("sort", json!({"field": field, "order": order})),
        ("quantity", [type_id, n]) => match n.parse::<u64>() {
            Ok(n) => act("setQuantity", json!({"typeId": type_id, "quantity": n})),
            Err(_) => Err(usage("/quantity TYPE_ID N (N a whole number)")),
        },
        ("clear", []) => act("clearModification", json!({})),
        ("clear", [what]) => act("clearModification", json!({ "type": what })),
        ("select", _) => Err(usage("/select ITEM_ID")),
        ("filter", _) => Err(usage("/filter FIELD OP VALUE")),
        ("sort", _) => Err(usage("/sort FIELD [asc|desc]")),
        ("quantity", _) => Err(usage("/quantity TYPE_ID N")),
        ("clear", _) => Err(usage("/clear [filter|sort|highlight|augment|all]")),
        ("say", _) => Err(usage("/say TEXT")),
        ("next" | "prev" | "show", _) => Err(format!("/{name} takes no arguments")),
        _ => Err(format!("unknown command /{name}; type help for the list")),
    }
}

fn usage(form: &str) -> String {
    format!("usage: {form}")
}

/// The stage and the items on screen of a `uiSpec`, a few lines for the participant.
pub fn describe_screen(ui_spec: &Value) -> String {
    if ui_spec.is_null() {
        return "no screen is loaded".to_owned();
    }
    let mut out = format!(
        "stage {} ({})",
        ui_spec["stage"].as_str().unwrap_or("?"),
        ui_spec["title"].as_str().unwrap_or("")
    );
    for item in ui_spec["items"].as_array().into_iter().flatten() {
        let id = item["id"].as_str().unwrap_or("?");
        let label = ["title", "name", "date", "time"]
            .iter()
            .find_map(|k| item[*k].as_str())
            .map_or_else(|| item.to_string(), str::to_owned);
        out.push_str(&format!("\n  {id}  {label}"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn act(line: &str) -> (&'static str, Value) {
        match parse(line) {
            Ok(Some(Command::Act { tool, params })) => (tool, params),
            other => panic!("{line}: {other:?}"),
        }
    }

    #[test]
    fn ui_actions_become_the_stages_tools() {
        assert_eq!(act("/select m2"), ("select", json!({"itemId": "m2"})));
        assert_eq!(act(" /next "), ("next", json!({})));
        assert_eq!(act("/prev"), ("prev", json!({})));
        assert_eq!(
            act("/filter rating gte 7.5"),
            (
                "filter",
                json!({"field": "rating", "operator": "gte", "value": 7.5})
            )
        );
        assert_eq!(
            act("/filter genre contains science fiction"),
            (
                "filter",
                json!({"field": "genre", "operator": "contains", "value": "science fiction"})
            )
        );
        assert_eq!(
            act(r#"/filter genre in ["drama","comedy"]"#),
            (
                "filter",
                json!({"field": "genre", "operator": "in", "value": ["drama", "comedy"]})
            )
        );
        assert_eq!(
            act("/sort rating desc"),
            ("sort", json!({"field": "rating", "order": "desc"}))
        );
        assert_eq!(act("/sort title"), ("sort", json!({"field": "title"})));
        assert_eq!(
            act("/quantity adult 2"),
            ("setQuantity", json!({"typeId": "adult", "quantity": 2}))
        );
        assert_eq!(act("/clear"), ("clearModification", json!({})));
        assert_eq!(
            act("/clear sort"),
            ("clearModification", json!({"type": "sort"}))
        );
    }

    #[test]
    fn chat_help_and_mistakes() {
        assert_eq!(parse("   "), Ok(None));
        assert_eq!(
            parse("I prefer evening showtimes."),
            Ok(Some(Command::Say("I prefer evening showtimes.".into())))
        );
        assert_eq!(
            parse("/say /next is a command"),
            Ok(Some(Command::Say("/next is a command".into())))
        );
        assert_eq!(parse("help"), Ok(Some(Command::Help)));
        assert_eq!(parse("/help"), Ok(Some(Command::Help)));
        assert_eq!(parse("/show"), Ok(Some(Command::Show)));
        assert!(parse("/select").unwrap_err().contains("/select ITEM_ID"));
        assert!(parse("/quantity adult two")
            .unwrap_err()
            .contains("whole number"));
        assert!(parse("/filter rating gte").unwrap_err().contains("usage"));
        assert!(parse("/next 2").unwrap_err().contains("no arguments"));
        assert!(parse("/fly").unwrap_err().contains("help"));
        // Every command the help names parses.
        for line in [
            "/select x",
            "/next",
            "/prev",
            "/filter a eq 1",
            "/sort a",
            "/quantity a 1",
            "/clear",
            "/show",
            "/say hi",
            "/help",
            "help",
        ] {
            assert!(matches!(parse(line), Ok(Some(_))), "{line}");
            let name = line.split_whitespace().next().unwrap();
            assert!(HELP.contains(name), "{name}");
        }
    }
}
