//! [`Timestamp`]: a wall-clock instant as the JetStream API writes it — RFC 3339 in UTC with up to
//! nanosecond precision (`"2026-11-29T07:22:16.306689303Z"`), Go's `time.RFC3339Nano`.
//!
//! jsproto reads no clock: the caller hands in unix nanoseconds ([`Timestamp::from_unix_nanos`])
//! and gets them back ([`Timestamp::unix_nanos`]). The conversion to and from the civil calendar is
//! pure arithmetic here rather than a dependency: it is ~60 lines, needs no time zones (the server
//! writes UTC only) and keeps jsproto's dependency list short.
//!
//! Formatting matches Go exactly: trailing zeros of the fraction are dropped
//! (`…:15.95577345Z`, 8 digits) and a whole second has no fraction at all. Go's zero `time.Time`,
//! which the server writes for "never" (`first_ts` of an empty stream), is
//! `"0001-01-01T00:00:00Z"`: [`Timestamp::ZERO`].

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// An instant: seconds and nanoseconds since the Unix epoch, UTC. Serialises as an RFC 3339 string.
///
/// Covers years 1 to 9999 (what RFC 3339 can write). The default is [`Timestamp::ZERO`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Timestamp {
    secs: i64,
    nanos: u32,
}

/// Seconds from 0001-01-01T00:00:00Z to the Unix epoch.
const ZERO_SECS: i64 = -62_135_596_800;
/// Seconds of 9999-12-31T23:59:59Z.
const MAX_SECS: i64 = 253_402_300_799;

impl Default for Timestamp {
    fn default() -> Self {
        Self::ZERO
    }
}

/// Why a string is not an RFC 3339 timestamp.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid RFC 3339 timestamp: {0:?}")]
pub struct ParseTimestampError(String);

impl Timestamp {
    /// Go's zero time, `"0001-01-01T00:00:00Z"`: what the server writes for an unset time.
    pub const ZERO: Timestamp = Timestamp {
        secs: ZERO_SECS,
        nanos: 0,
    };
    /// The Unix epoch, `"1970-01-01T00:00:00Z"`.
    pub const UNIX_EPOCH: Timestamp = Timestamp { secs: 0, nanos: 0 };

    /// The instant `n` nanoseconds after the Unix epoch.
    pub fn from_unix_nanos(n: u64) -> Self {
        Self {
            secs: (n / 1_000_000_000) as i64,
            nanos: (n % 1_000_000_000) as u32,
        }
    }

    /// Nanoseconds since the Unix epoch; `None` before the epoch (e.g. [`Timestamp::ZERO`]).
    /// Every instant up to year 2554 fits.
    pub fn unix_nanos(&self) -> Option<u64> {
        let secs = u64::try_from(self.secs).ok()?;
        secs.checked_mul(1_000_000_000)?
            .checked_add(u64::from(self.nanos))
    }

    /// Seconds since the Unix epoch (negative before it) and the nanoseconds within that second.
    pub fn unix_parts(&self) -> (i64, u32) {
        (self.secs, self.nanos)
    }

    /// Whether this is Go's zero time.
    pub fn is_zero(&self) -> bool {
        *self == Self::ZERO
    }
}

/// Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's `days_from_civil`).
fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let m = i64::from(m);
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + i64::from(d) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The date of a day count since 1970-01-01 (inverse of [`days_from_civil`]).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

fn days_in_month(y: i64, m: u32) -> u32 {
    match m {
        4 | 6 | 9 | 11 => 30,
        2 if (y % 4 == 0 && y % 100 != 0) || y % 400 == 0 => 29,
        2 => 28,
        _ => 31,
    }
}

impl fmt::Display for Timestamp {
    /// RFC 3339 in UTC, fraction without trailing zeros, as Go's `time.RFC3339Nano`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let days = self.secs.div_euclid(86_400);
        let sod = self.secs.rem_euclid(86_400);
        let (y, m, d) = civil_from_days(days);
        write!(
            f,
            "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}",
            sod / 3600,
            sod / 60 % 60,
            sod % 60
        )?;
        if self.nanos != 0 {
            let frac = format!("{:09}", self.nanos);
            write!(f, ".{}", frac.trim_end_matches('0'))?;
        }
        f.write_str("Z")
    }
}

impl FromStr for Timestamp {
    type Err = ParseTimestampError;

    /// Parses `YYYY-MM-DDTHH:MM:SS[.fraction](Z|±HH:MM)` (RFC 3339; `t`/`z` accepted in lower
    /// case; 1 to 9 fraction digits). Offsets are folded into UTC.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let err = || ParseTimestampError(s.to_owned());
        let b = s.as_bytes();
        let num = |r: std::ops::Range<usize>| -> Result<i64, ParseTimestampError> {
            let part = b.get(r).ok_or_else(err)?;
            if part.is_empty() || !part.iter().all(u8::is_ascii_digit) {
                return Err(err());
            }
            Ok(part
                .iter()
                .fold(0i64, |acc, d| acc * 10 + i64::from(d - b'0')))
        };
        if b.len() < 20
            || b[4] != b'-'
            || b[7] != b'-'
            || !matches!(b[10], b'T' | b't')
            || b[13] != b':'
            || b[16] != b':'
        {
            return Err(err());
        }
        let (y, mo, d) = (num(0..4)?, num(5..7)? as u32, num(8..10)? as u32);
        let (h, mi, sec) = (num(11..13)?, num(14..16)?, num(17..19)?);
        if !(1..=12).contains(&mo)
            || d == 0
            || d > days_in_month(y, mo)
            || h > 23
            || mi > 59
            || sec > 59
        {
            return Err(err());
        }
        let mut i = 19;
        let mut nanos = 0u32;
        if b[i] == b'.' {
            let start = i + 1;
            let mut end = start;
            while end < b.len() && b[end].is_ascii_digit() {
                end += 1;
            }
            let digits = end - start;
            if digits == 0 || digits > 9 {
                return Err(err());
            }
            nanos = (num(start..end)? * 10i64.pow((9 - digits) as u32)) as u32;
            i = end;
        }
        let offset = match b.get(i..).ok_or_else(err)? {
            [b'Z' | b'z'] => 0,
            [sign @ (b'+' | b'-'), _, _, b':', _, _] => {
                let (oh, om) = (num(i + 1..i + 3)?, num(i + 4..i + 6)?);
                if oh > 23 || om > 59 {
                    return Err(err());
                }
                let o = oh * 3600 + om * 60;
                if *sign == b'-' {
                    -o
                } else {
                    o
                }
            }
            _ => return Err(err()),
        };
        let secs = days_from_civil(y, mo, d) * 86_400 + h * 3600 + mi * 60 + sec - offset;
        if !(ZERO_SECS..=MAX_SECS).contains(&secs) {
            return Err(err());
        }
        Ok(Self { secs, nanos })
    }
}

impl Serialize for Timestamp {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Timestamp {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = <std::borrow::Cow<'de, str>>::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}
