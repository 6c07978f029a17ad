//! proto3-JSON scalar forms used by the message model: 64-bit integers as decimal strings,
//! bytes as standard base64, `google.protobuf.Timestamp` as RFC 3339 in UTC.
//!
//! On input the usual proto3-JSON leniency applies: a 64-bit integer may also be a JSON
//! number.

use std::fmt;

use serde::de::{self, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// `i64` as a decimal string; reads a string or a number.
pub(crate) mod int64 {
    use super::*;

    pub fn serialize<S: Serializer>(v: &i64, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(v)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<i64, D::Error> {
        d.deserialize_any(IntVisitor::<i64>::default())
    }
}

/// `u64` as a decimal string; reads a string or a number.
pub(crate) mod uint64 {
    use super::*;

    pub fn serialize<S: Serializer>(v: &u64, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(v)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
        d.deserialize_any(IntVisitor::<u64>::default())
    }
}

/// `Option<i64>` as a decimal string when set (a proto3 `optional int64`).
pub(crate) mod int64_opt {
    use super::*;

    pub fn serialize<S: Serializer>(v: &Option<i64>, s: S) -> Result<S::Ok, S::Error> {
        match v {
            Some(v) => s.collect_str(v),
            None => s.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<i64>, D::Error> {
        struct Opt;
        impl<'de> Visitor<'de> for Opt {
            type Value = Option<i64>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an int64 as a string or a number, or null")
            }
            fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
                Ok(None)
            }
            fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
                Ok(None)
            }
            fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
                d.deserialize_any(IntVisitor::<i64>::default()).map(Some)
            }
        }
        d.deserialize_option(Opt)
    }
}

struct IntVisitor<T>(std::marker::PhantomData<T>);

impl<T> Default for IntVisitor<T> {
    fn default() -> Self {
        IntVisitor(std::marker::PhantomData)
    }
}

impl<T> Visitor<'_> for IntVisitor<T>
where
    T: TryFrom<i64> + TryFrom<u64> + std::str::FromStr,
{
    type Value = T;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a 64-bit integer as a decimal string or a number")
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<T, E> {
        T::try_from(v).map_err(|_| E::custom("integer out of range"))
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<T, E> {
        T::try_from(v).map_err(|_| E::custom("integer out of range"))
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<T, E> {
        // proto3-JSON accepts exponent notation for integers, e.g. 1e3.
        if v.fract() != 0.0 || !v.is_finite() || v.abs() > 9.007_199_254_740_992e15 {
            return Err(E::custom("not an exact integer"));
        }
        // In range and integral: the cast is exact.
        #[allow(clippy::cast_possible_truncation)]
        let i = v as i64;
        T::try_from(i).map_err(|_| E::custom("integer out of range"))
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<T, E> {
        v.parse::<T>()
            .map_err(|_| E::custom("not a decimal 64-bit integer"))
    }
}

/// `Option<Vec<u8>>` as standard base64 (with padding).
pub(crate) mod bytes_opt {
    use base64::Engine as _;
    use base64::engine::general_purpose::STANDARD;

    use super::*;

    pub fn serialize<S: Serializer>(v: &Option<Vec<u8>>, s: S) -> Result<S::Ok, S::Error> {
        match v {
            Some(b) => s.serialize_str(&STANDARD.encode(b)),
            None => s.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Vec<u8>>, D::Error> {
        let s: Option<String> = Option::deserialize(d)?;
        s.map(|s| super::decode_base64(&s).map_err(de::Error::custom))
            .transpose()
    }
}

/// `Vec<u8>` as standard base64 (with padding).
pub(crate) mod bytes {
    use base64::Engine as _;
    use base64::engine::general_purpose::STANDARD;

    use super::*;

    pub fn serialize<S: Serializer>(v: &[u8], s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&STANDARD.encode(v))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
        let s = String::deserialize(d)?;
        super::decode_base64(&s).map_err(de::Error::custom)
    }
}

/// proto3-JSON readers accept standard and URL-safe base64, padded or not.
fn decode_base64(s: &str) -> Result<Vec<u8>, base64::DecodeError> {
    use base64::Engine as _;
    use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};
    const LENIENT: GeneralPurposeConfig =
        GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::Indifferent);
    const STD: GeneralPurpose = GeneralPurpose::new(&base64::alphabet::STANDARD, LENIENT);
    const URL: GeneralPurpose = GeneralPurpose::new(&base64::alphabet::URL_SAFE, LENIENT);
    STD.decode(s).or_else(|_| URL.decode(s))
}

/// A point in time as `google.protobuf.Timestamp`: seconds and nanoseconds since the Unix
/// epoch, UTC. In JSON it is RFC 3339 with a `Z` and 0, 3, 6 or 9 fractional digits, as
/// proto3-JSON writes it.
///
/// Sans-IO code never reads the clock: the application passes timestamps in.
///
/// ```
/// use harness_core::Timestamp;
///
/// let t = Timestamp::new(1_700_000_000, 0);
/// assert_eq!(t.to_string(), "2023-11-14T22:13:20Z");
/// assert_eq!("2023-11-14T22:13:20.5Z".parse::<Timestamp>().unwrap(), Timestamp::new(1_700_000_000, 500_000_000));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Timestamp {
    /// Seconds since 1970-01-01T00:00:00Z.
    pub seconds: i64,
    /// Nanoseconds within the second, 0 to 999,999,999.
    pub nanos: i32,
}

/// The first and last seconds proto3 allows (0001-01-01 to 9999-12-31).
const MIN_SECONDS: i64 = -62_135_596_800;
const MAX_SECONDS: i64 = 253_402_300_799;

impl Timestamp {
    /// A timestamp from seconds and nanoseconds since the Unix epoch.
    pub fn new(seconds: i64, nanos: i32) -> Self {
        Timestamp { seconds, nanos }
    }

    /// A timestamp from a `SystemTime` (which the application reads, not the library).
    pub fn from_system_time(t: std::time::SystemTime) -> Self {
        match t.duration_since(std::time::UNIX_EPOCH) {
            Ok(d) => Timestamp {
                seconds: i64::try_from(d.as_secs()).unwrap_or(i64::MAX),
                nanos: i32::try_from(d.subsec_nanos()).unwrap_or(0),
            },
            Err(e) => {
                let d = e.duration();
                let secs = i64::try_from(d.as_secs()).unwrap_or(i64::MAX);
                let nanos = i32::try_from(d.subsec_nanos()).unwrap_or(0);
                if nanos == 0 {
                    Timestamp::new(-secs, 0)
                } else {
                    Timestamp::new(-secs - 1, 1_000_000_000 - nanos)
                }
            }
        }
    }
}

// Howard Hinnant's days-from-civil and civil-from-days.
fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let m = i64::from(m);
    let mp = if m > 2 { m - 3 } else { m + 9 };
    let doy = (153 * mp + 2) / 5 + i64::from(d) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = if m <= 2 { y + 1 } else { y };
    // d in 1..=31 and m in 1..=12 by construction.
    (
        y,
        u32::try_from(m).unwrap_or(1),
        u32::try_from(d).unwrap_or(1),
    )
}

impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let days = self.seconds.div_euclid(86_400);
        let secs = self.seconds.rem_euclid(86_400);
        let (y, mo, d) = civil_from_days(days);
        write!(
            f,
            "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}",
            y,
            mo,
            d,
            secs / 3600,
            secs / 60 % 60,
            secs % 60
        )?;
        let n = self.nanos;
        if n != 0 {
            if n % 1_000_000 == 0 {
                write!(f, ".{:03}", n / 1_000_000)?;
            } else if n % 1_000 == 0 {
                write!(f, ".{:06}", n / 1_000)?;
            } else {
                write!(f, ".{n:09}")?;
            }
        }
        f.write_str("Z")
    }
}

/// A string that is not an RFC 3339 timestamp proto3 can hold.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("not an RFC 3339 timestamp: {0}")]
pub struct TimestampError(String);

impl std::str::FromStr for Timestamp {
    type Err = TimestampError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let err = || TimestampError(s.chars().take(64).collect());
        let b = s.as_bytes();
        let num = |r: std::ops::Range<usize>| -> Result<i64, TimestampError> {
            let part = b.get(r).ok_or_else(err)?;
            if part.is_empty() || !part.iter().all(u8::is_ascii_digit) {
                return Err(err());
            }
            Ok(part.iter().fold(0i64, |a, d| a * 10 + i64::from(d - b'0')))
        };
        if b.len() < 20 || b[4] != b'-' || b[7] != b'-' || !matches!(b[10], b'T' | b't') {
            return Err(err());
        }
        if b[13] != b':' || b[16] != b':' {
            return Err(err());
        }
        let (y, mo, d) = (num(0..4)?, num(5..7)?, num(8..10)?);
        let (h, mi, sec) = (num(11..13)?, num(14..16)?, num(17..19)?);
        if !(1..=12).contains(&mo) || !(1..=31).contains(&d) || h > 23 || mi > 59 || sec > 60 {
            return Err(err());
        }
        let mut i = 19;
        let mut nanos = 0i64;
        if b.get(i) == Some(&b'.') {
            i += 1;
            let start = i;
            while i < b.len() && b[i].is_ascii_digit() {
                i += 1;
            }
            let digits = i - start;
            if digits == 0 || digits > 9 {
                return Err(err());
            }
            nanos = num(start..i)? * 10i64.pow(u32::try_from(9 - digits).unwrap_or(0));
        }
        let offset = match b.get(i..) {
            Some([b'Z' | b'z']) => 0,
            Some([sign @ (b'+' | b'-'), rest @ ..]) if rest.len() == 5 && rest[2] == b':' => {
                let oh = num(i + 1..i + 3)?;
                let om = num(i + 4..i + 6)?;
                if oh > 23 || om > 59 {
                    return Err(err());
                }
                let o = oh * 3600 + om * 60;
                if *sign == b'+' { o } else { -o }
            }
            _ => return Err(err()),
        };
        // m and d were range-checked above.
        let days = days_from_civil(y, mo as u32, d as u32);
        let (cy, cm, cd) = civil_from_days(days);
        if (cy, i64::from(cm), i64::from(cd)) != (y, mo, d) {
            return Err(err()); // e.g. February 30
        }
        let seconds = days * 86_400 + h * 3600 + mi * 60 + sec.min(59) - offset;
        if !(MIN_SECONDS..=MAX_SECONDS).contains(&seconds) {
            return Err(err());
        }
        Ok(Timestamp {
            seconds,
            nanos: i32::try_from(nanos).map_err(|_| err())?,
        })
    }
}

impl Serialize for Timestamp {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Timestamp {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = std::borrow::Cow::<'de, str>::deserialize(d)?;
        s.parse().map_err(de::Error::custom)
    }
}
