//! Serde `with` module: [`Duration`] ⇄ integer nanoseconds, the JetStream API's unit for every
//! duration (`max_age`, `duplicate_window`, `ack_wait`, …), as Go's `time.Duration` marshals.
//!
//! ```
//! # use std::time::Duration;
//! #[derive(serde::Serialize, serde::Deserialize)]
//! struct Cfg {
//!     #[serde(with = "jsproto::api::nanos")]
//!     max_age: Duration,
//! }
//! let c: Cfg = serde_json::from_str(r#"{"max_age":30000000000}"#).unwrap();
//! assert_eq!(c.max_age, Duration::from_secs(30));
//! assert_eq!(serde_json::to_string(&c).unwrap(), r#"{"max_age":30000000000}"#);
//! ```
//!
//! * On the wire it is a JSON integer (Go's `int64`). Floats and strings are refused.
//! * Negative values are refused with the message [`NEGATIVE`]: a [`Duration`] cannot hold
//!   them. (The server refuses negative `max_age`/`duplicate_window` with its own 10052 text;
//!   [`crate::api::stream::StreamConfigRequest::decode`] maps those fields to that text.)
//! * Durations above `i64::MAX` ns (~292 years, Go's largest) serialise as `i64::MAX`.
//!
//! [`option`] does the same for `Option<Duration>` (`null`/absent ⇄ `None`).

use std::time::Duration;

use serde::{Deserialize, Deserializer, Serializer};

/// The error text for a negative duration.
pub const NEGATIVE: &str = "negative duration";

/// Nanoseconds of `d` as Go's `int64`, saturating at `i64::MAX`.
pub fn to_i64(d: Duration) -> i64 {
    i64::try_from(d.as_nanos()).unwrap_or(i64::MAX)
}

/// `n` nanoseconds, or `None` when negative.
pub fn from_i64(n: i64) -> Option<Duration> {
    u64::try_from(n).ok().map(Duration::from_nanos)
}

/// Writes `d` as integer nanoseconds.
pub fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_i64(to_i64(*d))
}

/// Reads integer nanoseconds; negative values are an error ([`NEGATIVE`]).
pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
    let n = i64::deserialize(d)?;
    from_i64(n).ok_or_else(|| serde::de::Error::custom(NEGATIVE))
}

/// `Option<Duration>` as integer nanoseconds; `null` reads as `None`, `None` writes `null`
/// (pair it with `skip_serializing_if = "Option::is_none"` for the server's `omitempty`).
pub mod option {
    use super::*;

    /// Writes `Some(d)` as integer nanoseconds and `None` as `null`.
    pub fn serialize<S: Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
        match d {
            Some(d) => s.serialize_i64(to_i64(*d)),
            None => s.serialize_none(),
        }
    }

    /// Reads integer nanoseconds or `null`; negative values are an error.
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Duration>, D::Error> {
        match Option::<i64>::deserialize(d)? {
            None => Ok(None),
            Some(n) => from_i64(n)
                .map(Some)
                .ok_or_else(|| serde::de::Error::custom(NEGATIVE)),
        }
    }
}
