//! Text output of `jsctl`: the `nats` CLI's column layout (right-aligned labels, a colon, the
//! value; section titles followed by a blank line), plain tables, and the number, size,
//! duration and time renderings used in them.

use std::fmt::Write as _;
use std::time::Duration;

use jsproto::api::Timestamp;
use jsproto::duration::DurationError;

enum Row {
    Title(String),
    Pair(String, String),
}

/// A "label: value" block with section titles, labels right-aligned to the longest one.
pub struct Columns {
    heading: String,
    rows: Vec<Row>,
}

impl Columns {
    /// A block under `heading` (printed first, then a blank line).
    pub fn new(heading: impl Into<String>) -> Columns {
        Columns {
            heading: heading.into(),
            rows: Vec::new(),
        }
    }

    /// Starts a section: a blank line, `title:`, a blank line.
    pub fn section(&mut self, title: &str) {
        self.rows.push(Row::Title(title.to_owned()));
    }

    /// Adds `label: value`.
    pub fn row(&mut self, label: &str, value: impl ToString) {
        self.rows
            .push(Row::Pair(label.to_owned(), value.to_string()));
    }

    /// Adds `label: value` when `cond` holds.
    pub fn row_if(&mut self, label: &str, value: impl ToString, cond: bool) {
        if cond {
            self.row(label, value);
        }
    }

    /// The rendered text, ending in a newline.
    pub fn render(&self) -> String {
        let longest = self
            .rows
            .iter()
            .filter_map(|r| match r {
                Row::Pair(l, _) => Some(l.chars().count()),
                Row::Title(_) => None,
            })
            .max()
            .unwrap_or(0);
        let mut out = String::new();
        if !self.heading.is_empty() {
            let _ = writeln!(out, "{}\n", self.heading);
        }
        for (i, row) in self.rows.iter().enumerate() {
            match row {
                Row::Title(t) => {
                    if i != 0 {
                        out.push('\n');
                    }
                    let _ = writeln!(out, "{t}:\n");
                }
                Row::Pair(l, v) => {
                    let pad = longest - l.chars().count() + 2;
                    let _ = writeln!(out, "{}{l}: {v}", " ".repeat(pad));
                }
            }
        }
        out
    }
}

/// A plain table: a header row and rows, columns separated by two spaces, left-aligned
/// (numbers too, to keep it simple to read and to grep).
pub fn table(headers: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = headers.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    let mut line = |cells: Vec<&str>| {
        let mut l = String::new();
        for (i, (cell, w)) in cells.iter().zip(&widths).enumerate() {
            if i > 0 {
                l.push_str("  ");
            }
            let _ = write!(l, "{cell:<w$}");
        }
        out.push_str(l.trim_end());
        out.push('\n');
    };
    line(headers.to_vec());
    for row in rows {
        line(row.iter().map(String::as_str).collect());
    }
    out
}

/// `1234567` → `1,234,567`.
pub fn num(n: impl Into<i128>) -> String {
    let n: i128 = n.into();
    let digits = n.unsigned_abs().to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    if n < 0 {
        out.insert(0, '-');
    }
    out
}

/// `-1` (or any negative limit) → `unlimited`, else [`num`].
pub fn limit(n: i64) -> String {
    if n < 0 {
        "unlimited".to_owned()
    } else {
        num(n)
    }
}

/// Sizes in IEC units: `327 B`, `1.5 KiB`, `2.0 MiB`.
pub fn bytes(n: u64) -> String {
    const UNITS: [&str; 6] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
    if n < 1024 {
        return format!("{n} B");
    }
    let mut value = n as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit < UNITS.len() - 1 {
        value /= 1024.0;
        unit += 1;
    }
    format!("{value:.1} {}", UNITS[unit])
}

/// Durations as the `nats` CLI shows them: `1.50s` under a minute, else `2m0s`, `1h30m0s`,
/// `3d2h0m0s`.
pub fn duration(d: Duration) -> String {
    let secs = d.as_secs();
    if secs < 60 {
        if d < Duration::from_millis(1) && !d.is_zero() {
            return format!("{}µs", d.as_micros());
        }
        return format!("{:.2}s", d.as_secs_f64());
    }
    let (days, rest) = (secs / 86_400, secs % 86_400);
    let (h, m, s) = (rest / 3600, rest / 60 % 60, rest % 60);
    let mut out = String::new();
    if days > 0 {
        let _ = write!(out, "{days}d");
    }
    if days > 0 || h > 0 {
        let _ = write!(out, "{h}h");
    }
    let _ = write!(out, "{m}m{s}s");
    out
}

/// Nanoseconds in a day: `jsctl`'s `d` unit, beside Go's `ns` … `h`.
const DAY: (&str, u64) = ("d", 86_400_000_000_000);

/// Parses a `jsctl` duration flag: `500ms`, `30s`, `2m`, `1h`, `1h30m`, `1.5s`, `2d`, or a bare
/// number of seconds (`2`, `0.5`).
///
/// A Go duration ([`jsproto::duration::parse_duration_with_units`]) that is not negative, with
/// `jsctl`'s own rules on top: surrounding blanks are ignored, a bare number is seconds (as
/// Rust reads an `f64`: `2`, `0.5`, `1e3`), `d` (days) is a unit, and the unit form takes no
/// sign. Errors are the message clap shows (`"2x": unknown unit "x" (ms, s,
/// m, h, d)`).
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    if let Ok(secs) = s.parse::<f64>() {
        return Duration::try_from_secs_f64(secs).map_err(|e| format!("{s:?}: {e}"));
    }
    if s.is_empty() {
        return Err("empty duration".to_owned());
    }
    if s.starts_with(['+', '-']) {
        return Err(format!("{s:?}: not a duration"));
    }
    match jsproto::duration::parse_duration_with_units(s, &[DAY]) {
        Ok(nanos) => u64::try_from(nanos)
            .map(Duration::from_nanos)
            .map_err(|_| format!("{s:?}: not a duration")),
        Err(DurationError::MissingUnit) => Err(format!("{s:?}: missing unit (ms, s, m, h, d)")),
        Err(DurationError::UnknownUnit(unit)) => {
            Err(format!("{s:?}: unknown unit {unit:?} (ms, s, m, h, d)"))
        }
        Err(DurationError::OutOfRange) => Err(format!("{s:?}: too long")),
        Err(DurationError::Empty | DurationError::Invalid) => Err(format!("{s:?}: not a duration")),
    }
}

/// `2026-05-02 10:40:00 UTC` (seconds precision).
pub fn time(t: &Timestamp) -> String {
    let s = t.to_string();
    match s.get(..19) {
        Some(head) => format!("{} UTC", head.replace('T', " ")),
        None => s,
    }
}

/// How long before `now` the time `then` was (zero if after).
pub fn since(now: &Timestamp, then: &Timestamp) -> Duration {
    match (now.unix_nanos(), then.unix_nanos()) {
        (Some(n), Some(t)) => Duration::from_nanos(n.saturating_sub(t)),
        _ => Duration::ZERO,
    }
}

/// `workqueue` → `WorkQueue`, `last_per_subject` → `Last Per Subject`, `explicit` → `Explicit`.
pub fn title_case(s: &str) -> String {
    if s == "workqueue" {
        return "WorkQueue".to_owned();
    }
    s.split('_')
        .map(|w| {
            let mut c = w.chars();
            match c.next() {
                Some(f) => f.to_uppercase().chain(c).collect(),
                None => String::new(),
            }
        })
        .collect::<Vec<String>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_align_labels_across_sections() {
        let mut c = Columns::new("Information for Consumer ORDERS > shipping");
        c.section("Configuration");
        c.row("Name", "shipping");
        c.section("State");
        c.row("Outstanding Acks", "0 out of maximum 1,000");
        assert_eq!(
            c.render(),
            "Information for Consumer ORDERS > shipping\n\nConfiguration:\n\n\
             \x20             Name: shipping\n\nState:\n\n  Outstanding Acks: 0 out of maximum 1,000\n"
        );
    }

    #[test]
    fn numbers_sizes_and_durations() {
        assert_eq!(num(0u8), "0");
        assert_eq!(num(1000u32), "1,000");
        assert_eq!(num(-1234567i64), "-1,234,567");
        assert_eq!(limit(-1), "unlimited");
        assert_eq!(bytes(327), "327 B");
        assert_eq!(bytes(1536), "1.5 KiB");
        assert_eq!(duration(Duration::from_secs(30)), "30.00s");
        assert_eq!(duration(Duration::from_secs(120)), "2m0s");
        assert_eq!(duration(Duration::from_secs(5400)), "1h30m0s");
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("1h30m"), Ok(Duration::from_secs(5400)));
        assert_eq!(parse_duration("2"), Ok(Duration::from_secs(2)));
        assert!(parse_duration("2x").is_err());
        assert!(parse_duration("").is_err());
        assert_eq!(title_case("last_per_subject"), "Last Per Subject");
        assert_eq!(title_case("workqueue"), "WorkQueue");
    }

    #[test]
    fn tables_pad_columns() {
        let t = table(
            &["Name", "Messages"],
            &[
                vec!["ORDERS".into(), "3".into()],
                vec!["X".into(), "10".into()],
            ],
        );
        assert_eq!(t, "Name    Messages\nORDERS  3\nX       10\n");
    }

    #[test]
    fn times_are_utc_seconds() {
        let t = Timestamp::from_unix_nanos(1_700_000_000_123_000_000);
        assert_eq!(time(&t), "2023-11-14 22:13:20 UTC");
    }
}
