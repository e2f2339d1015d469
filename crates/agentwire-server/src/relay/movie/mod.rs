//! The movie-booking UI of the spec era, in memory: [`MovieTools`] implements the
//! [`Tools`] trait of agent-relay-proto's `Host`, so the host machine does the protocol
//! (sessions, snapshots, `reason`, UNKNOWN_TOOL, INVALID_PARAMS against each tool's schema,
//! `state.updated`) and this module does the booking.
//!
//! Stages `movie`, `theater`, `date`, `time`, `seat`, `ticket`, `confirm` ([`schema::STAGES`]);
//! the tools each stage offers are [`schema::STAGE_TOOLS`] (our choice: INTEROP.md lists the
//! tools but not the stages they belong to; see [`schema`]). What each tool does:
//!
//! - `select{itemId}`: choose an item on screen (the visible list, after filters). Choosing
//!   a different movie, theater, date or time clears the choices after it. On the seat stage
//!   it toggles a seat (a taken seat is TOOL_EXECUTION_FAILED; at most
//!   [`schema::MAX_QUANTITY`] seats).
//! - `next{}`: the stage must be complete (a choice made; on the ticket stage the ticket
//!   quantities must add up to the number of seats), else TOOL_EXECUTION_FAILED naming what
//!   is missing. On the confirm stage it places the booking: a reference `BK-NNNN`, a system
//!   line in the chat, and from then on only `postMessage` is offered.
//! - `prev{}`: back one stage (the choices stay).
//! - `filter`, `sort`, `highlight`, `augment`, `clearModification`: change the current
//!   screen only ([`view::View`]); leaving the stage (`next`/`prev`) clears them. Fields and
//!   item ids that are not on the current screen are INVALID_PARAMS naming the parameter.
//! - `setQuantity{typeId, quantity}`: `quantity` 0..=10 (the schema), `typeId` one of
//!   [`data::TICKET_TYPES`].
//! - `postMessage{text}`: a line from the agent in the chat (non-blank).
//!
//! `uiSpec` is `{stage, stageIndex, stages, title, items, itemCount, modifications,
//! booking}`: `items` the visible list (with `highlight` and `note` where set), `itemCount`
//! the stage's items before filters, `booking` the choices so far
//! (`{movie, theater, date, time: {id, label}|null, seats, tickets, ticketCount, totalCents,
//! status: "open"|"confirmed", reference}`). There is no backend payload in it.

pub mod data;
pub mod schema;
pub mod view;

use std::collections::BTreeMap;

use agentwire::agent_relay::{
    ChatRole, RawJson, ToolContext, ToolError, ToolOutcome, ToolSchema, Tools,
};
use serde_json::{json, Value};

use data::Item;
use schema::{BOOKED_TOOLS, MAX_QUANTITY, STAGES, STAGE_TOOLS};
use view::{Filter, View, MAX_FILTERS};

const MOVIE: usize = 0;
const SEAT: usize = 4;
const TICKET: usize = 5;
const CONFIRM: usize = 6;

/// The screen title of each stage.
const TITLES: [&str; 7] = [
    "Choose a movie",
    "Choose a theater",
    "Choose a date",
    "Choose a showtime",
    "Choose your seats",
    "Choose your tickets",
    "Confirm your booking",
];

/// The movie-booking UI: the current stage, the choices made, each stage's screen
/// modifications, and the booking once placed.
#[derive(Debug, Clone)]
pub struct MovieTools {
    stage: usize,
    /// Movie, theater, date and time ids (stages 0..=3).
    chosen: [Option<String>; 4],
    seats: Vec<String>,
    tickets: BTreeMap<String, u64>,
    views: [View; 7],
    reference: Option<String>,
    /// Bookings placed since the host started (not reset: it numbers the references).
    bookings: u64,
    /// The schemas of each stage, then those once booked.
    schemas: Vec<Vec<ToolSchema>>,
}

impl Default for MovieTools {
    fn default() -> Self {
        Self::new()
    }
}

impl MovieTools {
    /// The UI at the movie stage, nothing chosen.
    pub fn new() -> Self {
        let mut schemas: Vec<Vec<ToolSchema>> =
            STAGE_TOOLS.iter().map(|t| schema::schemas(t)).collect();
        schemas.push(schema::schemas(BOOKED_TOOLS));
        Self {
            stage: MOVIE,
            chosen: Default::default(),
            seats: Vec::new(),
            tickets: BTreeMap::new(),
            views: Default::default(),
            reference: None,
            bookings: 0,
            schemas,
        }
    }

    /// The current stage's name.
    pub fn stage_name(&self) -> &'static str {
        STAGES[self.stage]
    }

    /// The booking's reference once placed.
    pub fn reference(&self) -> Option<&str> {
        self.reference.as_deref()
    }

    /// Bookings placed since the host started.
    pub fn bookings(&self) -> u64 {
        self.bookings
    }

    /// The current stage's items, before the screen's modifications.
    pub fn items(&self) -> Vec<Item> {
        let c = |i: usize| self.chosen[i].as_deref().unwrap_or_default();
        match self.stage {
            0 => data::movies(),
            1 => data::theaters(c(0)),
            2 => data::dates(),
            3 => data::showtimes(c(1), c(2)),
            SEAT => {
                let mut seats = data::seats(c(0), c(1), c(2), c(3));
                for s in &mut seats {
                    let id = s.get("id").and_then(Value::as_str).unwrap_or_default();
                    let chosen = self.seats.iter().any(|x| x == id);
                    s.insert("selected".to_owned(), Value::Bool(chosen));
                }
                seats
            }
            TICKET => data::ticket_types(|id| self.tickets.get(id).copied().unwrap_or(0)),
            _ => Vec::new(),
        }
    }

    /// The visible items: [`items`](Self::items) through the screen's modifications.
    pub fn visible(&self) -> Vec<Item> {
        self.views[self.stage].apply(&self.items())
    }

    fn ticket_count(&self) -> u64 {
        self.tickets.values().sum()
    }

    fn total_cents(&self) -> u64 {
        self.tickets
            .iter()
            .map(|(id, n)| data::ticket_price(id).unwrap_or(0) * n)
            .sum()
    }

    fn booking_json(&self) -> Value {
        let choice = |i: usize| {
            self.chosen[i].as_ref().map(
                |id| json!({"id": id, "label": data::label(STAGES[i], id).unwrap_or_default()}),
            )
        };
        json!({
            "movie": choice(0),
            "theater": choice(1),
            "date": choice(2),
            "time": choice(3),
            "seats": self.seats,
            "tickets": self.tickets,
            "ticketCount": self.ticket_count(),
            "totalCents": self.total_cents(),
            "status": if self.reference.is_some() { "confirmed" } else { "open" },
            "reference": self.reference,
        })
    }

    /// The field names of the current stage's items.
    fn fields(&self) -> Vec<String> {
        self.items()
            .first()
            .map(|i| i.keys().cloned().collect())
            .unwrap_or_default()
    }

    fn check_field(&self, tool: &str, field: &str) -> Result<(), ToolError> {
        let fields = self.fields();
        if fields.iter().any(|f| f == field) {
            return Ok(());
        }
        Err(ToolError::invalid_params(format!(
            "{tool} requires field to be a field of the {} items: {}",
            self.stage_name(),
            fields.join(", ")
        )))
    }

    /// Checks that `id` is an item on screen; `param` names it in the error.
    fn on_screen(&self, tool: &str, param: &str, id: &str) -> Result<Item, ToolError> {
        let shown = self.visible();
        if let Some(item) = shown.iter().find(|i| i.get("id") == Some(&json!(id))) {
            return Ok(item.clone());
        }
        let hidden = self.items().iter().any(|i| i.get("id") == Some(&json!(id)));
        let why = if hidden {
            "it is hidden by a filter"
        } else {
            "there is no such item"
        };
        Err(ToolError::invalid_params(format!(
            "{tool} requires {param} to be an item on the {} screen ({id:?}: {why})",
            self.stage_name()
        )))
    }

    fn filter(&mut self, params: &Value) -> Result<ToolOutcome, ToolError> {
        let field = str_param(params, "field");
        let operator = str_param(params, "operator");
        let value = params.get("value").cloned().unwrap_or(Value::Null);
        self.check_field("filter", field)?;
        match operator {
            "in" if !value.is_array() => {
                return Err(ToolError::invalid_params(
                    "filter requires value to be an array for operator in",
                ))
            }
            "gt" | "lt" | "gte" | "lte" if !(value.is_number() || value.is_string()) => {
                return Err(ToolError::invalid_params(format!(
                    "filter requires value to be a number or a string for operator {operator}"
                )))
            }
            _ => {}
        }
        let f = Filter {
            field: field.to_owned(),
            operator: operator.to_owned(),
            value,
        };
        let view = &mut self.views[self.stage];
        if view.filters.contains(&f) {
            return Ok(ToolOutcome::Unchanged);
        }
        if view.filters.len() >= MAX_FILTERS {
            return Err(ToolError::failed(format!(
                "This screen already has {MAX_FILTERS} filters; clear some first."
            )));
        }
        view.filters.push(f);
        Ok(ToolOutcome::Applied)
    }

    fn sort(&mut self, params: &Value) -> Result<ToolOutcome, ToolError> {
        let field = str_param(params, "field");
        self.check_field("sort", field)?;
        let sort = Some((field.to_owned(), str_param(params, "order").to_owned()));
        Ok(changed(&mut self.views[self.stage].sort, sort))
    }

    fn highlight(&mut self, params: &Value) -> Result<ToolOutcome, ToolError> {
        let ids = array_param(params, "itemIds");
        if ids.is_empty() {
            return Err(ToolError::invalid_params(
                "highlight requires itemIds to name at least one item",
            ));
        }
        let style = params
            .get("style")
            .and_then(Value::as_str)
            .unwrap_or(schema::STYLES[0]);
        for (i, id) in ids.iter().enumerate() {
            self.on_screen(
                "highlight",
                &format!("itemIds[{i}]"),
                id.as_str().unwrap_or(""),
            )?;
        }
        let view = &mut self.views[self.stage];
        let mut outcome = ToolOutcome::Unchanged;
        for id in ids.iter().filter_map(Value::as_str) {
            if view
                .highlights
                .insert(id.to_owned(), style.to_owned())
                .as_deref()
                != Some(style)
            {
                outcome = ToolOutcome::Applied;
            }
        }
        Ok(outcome)
    }

    fn augment(&mut self, params: &Value) -> Result<ToolOutcome, ToolError> {
        let items = array_param(params, "items");
        if items.is_empty() {
            return Err(ToolError::invalid_params(
                "augment requires items to name at least one item",
            ));
        }
        for (i, item) in items.iter().enumerate() {
            let id = item.get("itemId").and_then(Value::as_str).unwrap_or("");
            self.on_screen("augment", &format!("items[{i}].itemId"), id)?;
        }
        let view = &mut self.views[self.stage];
        let mut outcome = ToolOutcome::Unchanged;
        for item in items {
            let id = str_param(item, "itemId").to_owned();
            let value = str_param(item, "value").to_owned();
            if view.augments.get(&id) != Some(&value) {
                view.augments.insert(id, value);
                outcome = ToolOutcome::Applied;
            }
        }
        Ok(outcome)
    }

    fn clear_modification(&mut self, params: &Value) -> ToolOutcome {
        let what = params.get("type").and_then(Value::as_str).unwrap_or("all");
        if self.views[self.stage].clear(what) {
            ToolOutcome::Applied
        } else {
            ToolOutcome::Unchanged
        }
    }

    fn select(&mut self, params: &Value) -> Result<ToolOutcome, ToolError> {
        let id = str_param(params, "itemId");
        let item = self.on_screen("select", "itemId", id)?;
        match self.stage {
            SEAT => {
                if let Some(pos) = self.seats.iter().position(|s| s == id) {
                    self.seats.remove(pos);
                    return Ok(ToolOutcome::Applied);
                }
                if item.get("available") != Some(&Value::Bool(true)) {
                    return Err(ToolError::failed(format!("Seat {id} is already taken.")));
                }
                if self.seats.len() as u64 >= MAX_QUANTITY {
                    return Err(ToolError::failed(format!(
                        "At most {MAX_QUANTITY} seats can be booked at once."
                    )));
                }
                self.seats.push(id.to_owned());
                Ok(ToolOutcome::Applied)
            }
            stage if stage < SEAT => {
                if self.chosen[stage].as_deref() == Some(id) {
                    return Ok(ToolOutcome::Unchanged);
                }
                self.chosen[stage] = Some(id.to_owned());
                // A different choice invalidates every later one.
                for later in &mut self.chosen[stage + 1..] {
                    *later = None;
                }
                self.seats.clear();
                self.tickets.clear();
                Ok(ToolOutcome::Applied)
            }
            // Not offered on the other stages (the host answers UNKNOWN_TOOL first).
            _ => Err(ToolError::failed("Nothing can be selected on this screen.")),
        }
    }

    fn set_quantity(&mut self, params: &Value) -> Result<ToolOutcome, ToolError> {
        let type_id = str_param(params, "typeId");
        if data::ticket_price(type_id).is_none() {
            let types: Vec<&str> = data::TICKET_TYPES.iter().map(|t| t.0).collect();
            return Err(ToolError::invalid_params(format!(
                "setQuantity requires typeId to be one of: {}",
                types.join(", ")
            )));
        }
        let quantity = params.get("quantity").and_then(Value::as_u64).unwrap_or(0);
        let before = self.tickets.get(type_id).copied().unwrap_or(0);
        if before == quantity {
            return Ok(ToolOutcome::Unchanged);
        }
        if quantity == 0 {
            self.tickets.remove(type_id);
        } else {
            self.tickets.insert(type_id.to_owned(), quantity);
        }
        Ok(ToolOutcome::Applied)
    }

    /// Why the current stage is not complete, if it is not.
    fn incomplete(&self) -> Option<String> {
        match self.stage {
            s if s < SEAT && self.chosen[s].is_none() => Some(format!(
                "Select a {} first.",
                if s == 3 { "showtime" } else { STAGES[s] }
            )),
            SEAT if self.seats.is_empty() => Some("Select at least one seat first.".to_owned()),
            TICKET if self.ticket_count() != self.seats.len() as u64 => Some(format!(
                "The ticket quantities add up to {}, but {} seat(s) are selected.",
                self.ticket_count(),
                self.seats.len()
            )),
            _ => None,
        }
    }

    fn next(&mut self, ctx: &mut ToolContext<'_>) -> Result<ToolOutcome, ToolError> {
        if let Some(why) = self.incomplete() {
            return Err(ToolError::failed(why));
        }
        if self.stage == CONFIRM {
            return self.book(ctx);
        }
        self.views[self.stage] = View::default();
        self.stage += 1;
        Ok(ToolOutcome::Applied)
    }

    fn book(&mut self, ctx: &mut ToolContext<'_>) -> Result<ToolOutcome, ToolError> {
        let reference = format!("BK-{:04}", self.bookings + 1);
        let label = |i: usize| {
            self.chosen[i]
                .as_deref()
                .and_then(|id| data::label(STAGES[i], id))
                .unwrap_or_default()
        };
        let total = self.total_cents();
        let line = format!(
            "Booking {reference} confirmed: {} at {}, {} {}, seat(s) {}, {} ticket(s), {}.{:02} EUR.",
            label(0),
            label(1),
            label(2),
            label(3),
            self.seats.join(", "),
            self.ticket_count(),
            total / 100,
            total % 100
        );
        // The chat line first: if the chat is full the booking is not placed.
        ctx.post(ChatRole::System, line)?;
        self.bookings += 1;
        self.reference = Some(reference);
        Ok(ToolOutcome::Applied)
    }
}

impl Tools for MovieTools {
    fn tool_schema(&self) -> &[ToolSchema] {
        let i = if self.reference.is_some() {
            STAGES.len()
        } else {
            self.stage
        };
        &self.schemas[i]
    }

    fn ui_spec(&self) -> Option<RawJson> {
        let title = if self.reference.is_some() {
            "Booking confirmed"
        } else {
            TITLES[self.stage]
        };
        let spec = json!({
            "stage": STAGES[self.stage],
            "stageIndex": self.stage,
            "stages": STAGES,
            "title": title,
            "items": self.visible(),
            "itemCount": self.items().len(),
            "modifications": self.views[self.stage].to_json(),
            "booking": self.booking_json(),
        });
        Some(RawJson::from_value(&spec))
    }

    fn has_active_spec(&self) -> bool {
        true
    }

    fn stage(&self) -> Option<&str> {
        Some(STAGES[self.stage])
    }

    fn call(
        &mut self,
        name: &str,
        params: &Value,
        ctx: &mut ToolContext<'_>,
    ) -> Result<ToolOutcome, ToolError> {
        match name {
            "filter" => self.filter(params),
            "sort" => self.sort(params),
            "highlight" => self.highlight(params),
            "augment" => self.augment(params),
            "clearModification" => Ok(self.clear_modification(params)),
            "select" => self.select(params),
            "setQuantity" => self.set_quantity(params),
            "next" => self.next(ctx),
            "prev" => {
                if self.stage == MOVIE {
                    return Err(ToolError::failed("This is the first stage."));
                }
                self.views[self.stage] = View::default();
                self.stage -= 1;
                Ok(ToolOutcome::Applied)
            }
            "postMessage" => {
                let text = str_param(params, "text");
                if text.trim().is_empty() {
                    return Err(ToolError::invalid_params(
                        "postMessage requires text to be non-empty",
                    ));
                }
                ctx.post(ChatRole::Agent, text)?;
                Ok(ToolOutcome::Unchanged)
            }
            other => Err(ToolError::failed(format!("{other} is not implemented."))),
        }
    }

    fn reset(&mut self) {
        let bookings = self.bookings;
        *self = Self::new();
        self.bookings = bookings;
    }
}

/// A string param the schema has checked (or `""`).
fn str_param<'a>(params: &'a Value, name: &str) -> &'a str {
    params.get(name).and_then(Value::as_str).unwrap_or_default()
}

/// An array param the schema has checked (or empty).
fn array_param<'a>(params: &'a Value, name: &str) -> &'a [Value] {
    params
        .get(name)
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice)
}

/// Sets `slot` to `value`; `Applied` if that changed it.
fn changed<T: PartialEq>(slot: &mut T, value: T) -> ToolOutcome {
    if *slot == value {
        ToolOutcome::Unchanged
    } else {
        *slot = value;
        ToolOutcome::Applied
    }
}
