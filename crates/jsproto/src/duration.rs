//! Go `time.Duration` text, the one parser and the one formatter every crate uses: parsing
//! (`-NAK {"delay":…}`'s text form, `Nats-TTL`, the server's config file, `jsctl` flags) and
//! formatting (`Exceeded MaxRequestExpires of 2s`, the `/varz` uptime), with the same grammar
//! and output as Go's `time.ParseDuration` and `Duration.String`.
//!
//! Grammar (Go's): an optional sign, then `0` alone or one or more `<number><unit>` terms,
//! where a number is decimal digits with an optional fraction (`1`, `1.5`, `.5`, `5.`) and a
//! unit one of `ns`, `us`, `µs` (U+00B5), `μs` (U+03BC), `ms`, `s`, `m`, `h`. Values are signed
//! nanoseconds and must fit an `i64` (about 292 years). Fraction digits beyond nanosecond
//! precision are truncated per digit.
//!
//! What callers add on top stays with them, as thin wrappers: the config file refuses a sign
//! `-` (`jsserver::conf::parse_duration`) and reads bare integers as seconds (in
//! `jsserver::options`); `jsctl` reads a bare number as seconds and also accepts `d` (days)
//! through [`parse_duration_with_units`]; the monitoring endpoint prints uptimes with days
//! (`jsserver::monitor::go_duration`).

use std::fmt::{self, Write as _};
use std::time::Duration;

/// Why a text is not a duration, as Go's `time.ParseDuration` tells them apart.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DurationError {
    /// Nothing but an optional sign.
    Empty,
    /// A term without digits (`s`, `.s`, `-`), or a character that cannot start a term.
    Invalid,
    /// A number without a unit (`5`, `1h5`).
    MissingUnit,
    /// A unit that is not one of Go's nor of the extra units given; holds the unit's text.
    UnknownUnit(String),
    /// The value does not fit an `i64` of nanoseconds.
    OutOfRange,
}

impl fmt::Display for DurationError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Empty | Self::Invalid => f.write_str("invalid duration"),
            Self::MissingUnit => f.write_str("missing unit in duration"),
            Self::UnknownUnit(u) => write!(f, "unknown unit {u:?} in duration"),
            Self::OutOfRange => f.write_str("duration out of range"),
        }
    }
}

impl std::error::Error for DurationError {}

/// Parses Go duration text such as `300ms`, `1.5s`, `2h45m`, `-1m` or `0`, returning signed
/// nanoseconds. Units: `ns`, `us`, `µs`, `μs`, `ms`, `s`, `m`, `h`. `None` for anything Go
/// rejects (empty, missing unit, unknown unit, overflow).
pub fn parse_go_duration(text: &str) -> Option<i64> {
    parse_duration_with_units(text, &[]).ok()
}

/// [`parse_go_duration`] with more units than Go's: each `(name, nanoseconds)` of
/// `extra_units` is accepted where a unit may stand (e.g. `("d", 86_400_000_000_000)` for
/// days). Go's own units are looked up first, so an extra unit cannot redefine them. Returns
/// signed nanoseconds, or why the text is not a duration.
pub fn parse_duration_with_units(
    text: &str,
    extra_units: &[(&str, u64)],
) -> Result<i64, DurationError> {
    let mut s = text.as_bytes();
    let negative = match s.first() {
        Some(b'-') => {
            s = &s[1..];
            true
        }
        Some(b'+') => {
            s = &s[1..];
            false
        }
        _ => false,
    };
    if s == b"0" {
        return Ok(0);
    }
    if s.is_empty() {
        return Err(DurationError::Empty);
    }
    let mut total: u128 = 0;
    while !s.is_empty() {
        let int_len = s.iter().take_while(|b| b.is_ascii_digit()).count();
        let (int_part, rest) = s.split_at(int_len);
        let mut rest = rest;
        let mut frac_part: &[u8] = &[];
        if rest.first() == Some(&b'.') {
            let frac_len = rest[1..].iter().take_while(|b| b.is_ascii_digit()).count();
            frac_part = &rest[1..=frac_len];
            rest = &rest[1 + frac_len..];
        }
        if int_part.is_empty() && frac_part.is_empty() {
            return Err(DurationError::Invalid);
        }
        let unit_len = rest
            .iter()
            .take_while(|b| !b.is_ascii_digit() && **b != b'.')
            .count();
        let (unit, tail) = rest.split_at(unit_len);
        let scale: u128 = match unit {
            b"" => return Err(DurationError::MissingUnit),
            b"ns" => 1,
            // `µs` (U+00B5) and `μs` (U+03BC), as Go accepts both.
            b"us" | b"\xc2\xb5s" | b"\xce\xbcs" => 1_000,
            b"ms" => 1_000_000,
            b"s" => 1_000_000_000,
            b"m" => 60 * 1_000_000_000,
            b"h" => 3600 * 1_000_000_000,
            _ => match extra_units.iter().find(|(name, _)| name.as_bytes() == unit) {
                Some((_, ns)) => u128::from(*ns),
                None => {
                    return Err(DurationError::UnknownUnit(
                        String::from_utf8_lossy(unit).into_owned(),
                    ))
                }
            },
        };
        let mut int_value: u128 = 0;
        for d in int_part {
            int_value = int_value
                .checked_mul(10)
                .and_then(|v| v.checked_add(u128::from(d - b'0')))
                .ok_or(DurationError::OutOfRange)?;
            if int_value > u128::from(u64::MAX) {
                return Err(DurationError::OutOfRange);
            }
        }
        let mut value = int_value
            .checked_mul(scale)
            .ok_or(DurationError::OutOfRange)?;
        // Fraction: digits beyond nanosecond precision are truncated, as Go does.
        let mut frac_scale = scale;
        for d in frac_part {
            frac_scale /= 10;
            if frac_scale == 0 {
                break;
            }
            value += u128::from(d - b'0') * frac_scale;
        }
        total = total.checked_add(value).ok_or(DurationError::OutOfRange)?;
        if total > i64::MAX as u128 + u128::from(negative) {
            return Err(DurationError::OutOfRange);
        }
        s = tail;
    }
    let total = total as i128;
    i64::try_from(if negative { -total } else { total }).map_err(|_| DurationError::OutOfRange)
}

/// Formats like Go's `Duration.String`: `0s`, `1.5µs`, `250ms`, `2s`, `1m30s`, `1h0m0s`.
pub fn format_go_duration(d: Duration) -> String {
    let ns = d.as_nanos();
    let mut out = String::new();
    if ns == 0 {
        return "0s".to_owned();
    }
    if ns < 1_000_000_000 {
        // Sub-second: one unit with a decimal fraction, trailing zeros trimmed.
        let (unit, scale) = if ns < 1_000 {
            ("ns", 1)
        } else if ns < 1_000_000 {
            ("µs", 1_000)
        } else {
            ("ms", 1_000_000)
        };
        write_fraction(&mut out, ns, scale);
        out.push_str(unit);
        return out;
    }
    let hours = ns / (3600 * 1_000_000_000);
    let rem = ns % (3600 * 1_000_000_000);
    let minutes = rem / (60 * 1_000_000_000);
    let secs_ns = rem % (60 * 1_000_000_000);
    if hours > 0 {
        let _ = write!(out, "{hours}h{minutes}m");
    } else if minutes > 0 {
        let _ = write!(out, "{minutes}m");
    }
    write_fraction(&mut out, secs_ns, 1_000_000_000);
    out.push('s');
    out
}

fn write_fraction(out: &mut String, value: u128, scale: u128) {
    let whole = value / scale;
    let frac = value % scale;
    let _ = write!(out, "{whole}");
    if frac > 0 {
        let width = scale.ilog10() as usize;
        let digits = format!("{frac:0width$}");
        out.push('.');
        out.push_str(digits.trim_end_matches('0'));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_go_durations() {
        assert_eq!(parse_go_duration("5s"), Some(5_000_000_000));
        assert_eq!(parse_go_duration("1.5s"), Some(1_500_000_000));
        assert_eq!(parse_go_duration("300ms"), Some(300_000_000));
        assert_eq!(
            parse_go_duration("2h45m"),
            Some((2 * 3600 + 45 * 60) * 1_000_000_000)
        );
        assert_eq!(parse_go_duration("1µs"), Some(1_000));
        assert_eq!(parse_go_duration("-1m"), Some(-60_000_000_000));
        assert_eq!(parse_go_duration("0"), Some(0));
        assert_eq!(parse_go_duration(".5s"), Some(500_000_000));
        for bad in [
            "",
            "5",
            "s",
            "5x",
            "1.s.",
            "-",
            "1e3s",
            "9999999999999999999h",
        ] {
            assert_eq!(parse_go_duration(bad), None, "{bad}");
        }
    }

    #[test]
    fn extra_units_and_error_kinds() {
        const DAY: (&str, u64) = ("d", 86_400_000_000_000);
        let p = |s| parse_duration_with_units(s, &[DAY]);
        assert_eq!(p("1d12h"), Ok(36 * 3600 * 1_000_000_000));
        assert_eq!(p("1.5d"), Ok(36 * 3600 * 1_000_000_000));
        assert_eq!(parse_go_duration("1d"), None);
        assert_eq!(p(""), Err(DurationError::Empty));
        assert_eq!(p("-"), Err(DurationError::Empty));
        assert_eq!(p("s"), Err(DurationError::Invalid));
        assert_eq!(p("5"), Err(DurationError::MissingUnit));
        assert_eq!(p("1h5"), Err(DurationError::MissingUnit));
        assert_eq!(p("2x"), Err(DurationError::UnknownUnit("x".to_owned())));
        assert_eq!(p("9999999999999999999h"), Err(DurationError::OutOfRange));
        assert_eq!(p("-9223372036854775808ns"), Ok(i64::MIN));
        assert_eq!(p("9223372036854775808ns"), Err(DurationError::OutOfRange));
    }

    #[test]
    fn formats_like_go() {
        let f = |ns: u64| format_go_duration(Duration::from_nanos(ns));
        assert_eq!(f(0), "0s");
        assert_eq!(f(2_000_000_000), "2s");
        assert_eq!(f(1_500_000_000), "1.5s");
        assert_eq!(f(500_000_000), "500ms");
        assert_eq!(f(1_500), "1.5µs");
        assert_eq!(f(90_000_000_000), "1m30s");
        assert_eq!(f(3_600_000_000_000), "1h0m0s");
        assert_eq!(f(60_000_000_000), "1m0s");
        assert_eq!(f(12), "12ns");
    }
}
