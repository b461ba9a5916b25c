//! Go `time.Duration` text: parsing (`-NAK 5s`) and formatting (`Exceeded MaxRequestExpires of
//! 2s`), with the same grammar and output as Go's `time.ParseDuration` and `Duration.String`.

use std::fmt::Write as _;
use std::time::Duration;

/// Parses Go duration text such as `300ms`, `1.5s`, `2h45m`, `-1m` or `0`, returning signed
/// nanoseconds. Units: `ns`, `us`, `µs`, `μs`, `ms`, `s`, `m`, `h`. `None` for anything Go
/// rejects (empty, missing unit, unknown unit, overflow).
pub fn parse_go_duration(text: &str) -> Option<i64> {
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
        return Some(0);
    }
    if s.is_empty() {
        return None;
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
            return None;
        }
        let unit_len = rest
            .iter()
            .take_while(|b| !b.is_ascii_digit() && **b != b'.')
            .count();
        let (unit, tail) = rest.split_at(unit_len);
        let scale: u128 = match unit {
            b"ns" => 1,
            // `µs` (U+00B5) and `μs` (U+03BC), as Go accepts both.
            b"us" | b"\xc2\xb5s" | b"\xce\xbcs" => 1_000,
            b"ms" => 1_000_000,
            b"s" => 1_000_000_000,
            b"m" => 60 * 1_000_000_000,
            b"h" => 3600 * 1_000_000_000,
            _ => return None,
        };
        let mut int_value: u128 = 0;
        for d in int_part {
            int_value = int_value
                .checked_mul(10)?
                .checked_add(u128::from(d - b'0'))?;
            if int_value > u128::from(u64::MAX) {
                return None;
            }
        }
        let mut value = int_value.checked_mul(scale)?;
        // Fraction: digits beyond nanosecond precision are truncated, as Go does.
        let mut frac_scale = scale;
        for d in frac_part {
            frac_scale /= 10;
            if frac_scale == 0 {
                break;
            }
            value += u128::from(d - b'0') * frac_scale;
        }
        total = total.checked_add(value)?;
        if total > i64::MAX as u128 + u128::from(negative) {
            return None;
        }
        s = tail;
    }
    let total = total as i128;
    i64::try_from(if negative { -total } else { total }).ok()
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
