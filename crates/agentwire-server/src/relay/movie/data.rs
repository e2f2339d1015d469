//! The in-memory catalogue of the movie host: movies, theaters, dates, showtimes, seats and
//! ticket types, each stage's items as the JSON objects agents see in `uiSpec.items`.
//!
//! Everything is fixed data or derived deterministically from the choices made so far (which
//! seats are taken depends on the showtime), so a run, a test and a demo see the same screens.

use serde_json::{json, Map, Value};

/// One item on a stage's screen: its `id` and its fields (the `id` included), as JSON.
pub type Item = Map<String, Value>;

/// `(id, title, genre, rating, runtime minutes, age rating)`.
const MOVIES: [(&str, &str, &str, f64, u32, &str); 6] = [
    ("m1", "The Long Night", "thriller", 7.4, 118, "16"),
    ("m2", "Paper Planets", "animation", 8.3, 96, "6"),
    ("m3", "Harbor Lights", "drama", 8.1, 124, "12"),
    ("m4", "Quantum Alley", "sci-fi", 6.9, 131, "12"),
    ("m5", "Laugh Track", "comedy", 7.8, 102, "0"),
    ("m6", "Glass Mountain", "adventure", 8.6, 142, "12"),
];

/// `(id, name, city, distance km, format, movies shown)`.
type Theater = (
    &'static str,
    &'static str,
    &'static str,
    f64,
    &'static str,
    &'static [&'static str],
);

const THEATERS: [Theater; 4] = [
    (
        "t1",
        "Cinema Central",
        "Berlin",
        1.2,
        "2D",
        &["m1", "m2", "m3", "m5", "m6"],
    ),
    (
        "t2",
        "Riverside Screens",
        "Berlin",
        3.8,
        "IMAX",
        &["m2", "m4", "m6"],
    ),
    (
        "t3",
        "Old Town Picture House",
        "Potsdam",
        24.5,
        "2D",
        &["m1", "m3", "m5"],
    ),
    (
        "t4",
        "Northside Multiplex",
        "Berlin",
        7.1,
        "3D",
        &["m1", "m2", "m3", "m4", "m5", "m6"],
    ),
];

/// `(id, date, weekday)`.
const DATES: [(&str, &str, &str); 5] = [
    ("d1", "2026-02-14", "Saturday"),
    ("d2", "2026-02-15", "Sunday"),
    ("d3", "2026-02-16", "Monday"),
    ("d4", "2026-02-17", "Tuesday"),
    ("d5", "2026-02-18", "Wednesday"),
];

/// `(id, time, language)`; the format is the theater's.
const TIMES: [(&str, &str, &str); 5] = [
    ("s1", "13:00", "original"),
    ("s2", "15:45", "dubbed"),
    ("s3", "18:30", "original"),
    ("s4", "20:15", "dubbed"),
    ("s5", "22:40", "original"),
];

/// Seat rows and seats per row.
const ROWS: [char; 5] = ['A', 'B', 'C', 'D', 'E'];
const SEATS_PER_ROW: u32 = 8;

/// `(id, name, price in cents)`.
pub const TICKET_TYPES: [(&str, &str, u64); 4] = [
    ("adult", "Adult", 1250),
    ("child", "Child (under 12)", 800),
    ("senior", "Senior (65+)", 950),
    ("student", "Student", 1000),
];

/// The movie stage's items.
pub fn movies() -> Vec<Item> {
    MOVIES
        .iter()
        .map(|(id, title, genre, rating, runtime, age)| {
            obj(
                json!({"id": id, "title": title, "genre": genre, "rating": rating,
                       "runtimeMinutes": runtime, "ageRating": age}),
            )
        })
        .collect()
}

/// The theaters showing `movie`.
pub fn theaters(movie: &str) -> Vec<Item> {
    THEATERS
        .iter()
        .filter(|t| t.5.contains(&movie))
        .map(|(id, name, city, km, format, _)| {
            obj(json!({"id": id, "name": name, "city": city, "distanceKm": km, "format": format}))
        })
        .collect()
}

/// The dates with showings (every theater plays every date).
pub fn dates() -> Vec<Item> {
    DATES
        .iter()
        .map(|(id, date, weekday)| obj(json!({"id": id, "date": date, "weekday": weekday})))
        .collect()
}

/// The showtimes of `theater` on `date`: the late show only at weekends.
pub fn showtimes(theater: &str, date: &str) -> Vec<Item> {
    let weekend = matches!(date, "d1" | "d2");
    let format = THEATERS
        .iter()
        .find(|t| t.0 == theater)
        .map_or("2D", |t| t.4);
    TIMES
        .iter()
        .filter(|(id, ..)| weekend || *id != "s5")
        .map(|(id, time, language)| {
            obj(json!({"id": id, "time": time, "format": format, "language": language}))
        })
        .collect()
}

/// The seats of one showing; which are taken follows from the showing's and the seat's ids
/// (FNV-1a), so the same showing always shows the same map. `A1` and `A8` are wheelchair
/// places, rows D and E premium.
pub fn seats(movie: &str, theater: &str, date: &str, time: &str) -> Vec<Item> {
    let mut items = Vec::with_capacity(ROWS.len() * SEATS_PER_ROW as usize);
    for row in &ROWS {
        for n in 1..=SEATS_PER_ROW {
            let id = format!("{row}{n}");
            let kind = match (row, n) {
                ('A', 1 | 8) => "accessible",
                ('D' | 'E', _) => "premium",
                _ => "standard",
            };
            // About a third of the seats are taken; never the accessible ones.
            let taken =
                kind != "accessible" && fnv1a(&[movie, theater, date, time, &id]).is_multiple_of(3);
            items.push(obj(json!({"id": id, "row": row.to_string(), "number": n,
                                  "type": kind, "available": !taken})));
        }
    }
    items
}

/// The ticket types with the quantity chosen of each.
pub fn ticket_types(quantity_of: impl Fn(&str) -> u64) -> Vec<Item> {
    TICKET_TYPES
        .iter()
        .map(|(id, name, price)| {
            obj(json!({"id": id, "name": name, "priceCents": price, "quantity": quantity_of(id)}))
        })
        .collect()
}

/// The price of ticket type `id`, in cents.
pub fn ticket_price(id: &str) -> Option<u64> {
    TICKET_TYPES.iter().find(|t| t.0 == id).map(|t| t.2)
}

/// The name of each movie, theater, date and showtime, for summaries.
pub fn label(stage: &str, id: &str) -> Option<String> {
    let found = match stage {
        "movie" => MOVIES.iter().find(|m| m.0 == id).map(|m| m.1.to_owned()),
        "theater" => THEATERS.iter().find(|t| t.0 == id).map(|t| t.1.to_owned()),
        "date" => DATES
            .iter()
            .find(|d| d.0 == id)
            .map(|d| format!("{} {}", d.2, d.1)),
        "time" => TIMES.iter().find(|t| t.0 == id).map(|t| t.1.to_owned()),
        _ => None,
    };
    found
}

fn obj(v: Value) -> Item {
    match v {
        Value::Object(m) => m,
        _ => Map::new(),
    }
}

/// FNV-1a of the parts, then the murmur3 finalizer (FNV alone keeps the residue mod 3 of
/// similar inputs too alike).
fn fnv1a(parts: &[&str]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for p in parts {
        for b in p.bytes().chain(std::iter::once(0)) {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
    }
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^= h >> 33;
    h
}
