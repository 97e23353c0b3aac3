//! [`Pct`]: a share of operations (`--read-pct`, the key-value mix), given
//! as a percentage with up to four decimals (`95`, `99.9`, `99.99`) and kept
//! exactly as parts per million, so `99.9` prints, sorts, names files and
//! compares as `99.9`.

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::rng::MILLION;

/// A share of operations, exact to 0.0001%.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Pct(u32);

/// Parts per million in one percent.
const PPM_PER_PCT: u32 = 10_000;

impl Pct {
    /// `ppm` parts per million (at most a million).
    pub const fn from_ppm(ppm: u32) -> Pct {
        assert!(ppm <= MILLION);
        Pct(ppm)
    }

    /// Whole percent `p` (at most 100).
    pub const fn whole(p: u32) -> Pct {
        assert!(p <= 100);
        Pct(p * PPM_PER_PCT)
    }

    /// Parses `95`, `99.9`, `0.5`: a number from 0 to 100 with at most four
    /// decimals. The error says what is wrong, for `--read-pct: ...`.
    pub fn parse(s: &str) -> Result<Pct, String> {
        let bad = || format!("'{s}' is not a percentage (0-100, up to 4 decimals, e.g. 99.9)");
        let (int, frac) = s.trim().split_once('.').unwrap_or((s.trim(), ""));
        let digits = |t: &str| t.bytes().all(|b| b.is_ascii_digit());
        if int.is_empty() || !digits(int) || !digits(frac) || (s.contains('.') && frac.is_empty()) {
            return Err(bad());
        }
        if frac.len() > 4 {
            return Err(format!(
                "'{s}' has more than 4 decimals (the finest share is 0.0001%)"
            ));
        }
        let int: u32 = int.parse().map_err(|_| bad())?;
        let frac_ppm: u32 = format!("{frac:0<4}").parse().map_err(|_| bad())?;
        if int > 100 || (int == 100 && frac_ppm > 0) {
            return Err(format!("'{s}' is more than 100"));
        }
        Ok(Pct(int * PPM_PER_PCT + frac_ppm))
    }

    /// Parts per million (`99.9%` = 999,000).
    pub fn ppm(self) -> u32 {
        self.0
    }

    /// The share as a number (`99.9`).
    pub fn as_f64(self) -> f64 {
        f64::from(self.0) / f64::from(PPM_PER_PCT)
    }

    /// Whether it is a whole percentage.
    fn is_whole(self) -> bool {
        self.0.is_multiple_of(PPM_PER_PCT)
    }
}

/// `95`, `99.9`, `99.99` (no trailing zeros, no `%`).
impl fmt::Display for Pct {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (int, frac) = (self.0 / PPM_PER_PCT, self.0 % PPM_PER_PCT);
        if frac == 0 {
            write!(f, "{int}")
        } else {
            let frac = format!("{frac:04}");
            write!(f, "{int}.{}", frac.trim_end_matches('0'))
        }
    }
}

/// JSON: a whole share stays an integer (`95`, as before fractions were
/// accepted), a fraction is a number (`99.9`).
impl Serialize for Pct {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        if self.is_whole() {
            s.serialize_u32(self.0 / PPM_PER_PCT)
        } else {
            s.serialize_f64(self.as_f64())
        }
    }
}

impl<'de> Deserialize<'de> for Pct {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let v = f64::deserialize(d)?;
        if (0.0..=100.0).contains(&v) {
            Ok(Pct((v * f64::from(PPM_PER_PCT)).round() as u32))
        } else {
            Err(serde::de::Error::custom(format!(
                "read_pct {v} is not 0-100"
            )))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_prints_fractions_exactly() {
        for (s, ppm, shown) in [
            ("95", 950_000, "95"),
            ("99.9", 999_000, "99.9"),
            ("99.99", 999_900, "99.99"),
            ("99.9999", 999_999, "99.9999"),
            ("0.5", 5_000, "0.5"),
            ("100", 1_000_000, "100"),
            ("100.0", 1_000_000, "100"),
            ("0", 0, "0"),
            ("50.10", 501_000, "50.1"),
        ] {
            let p = Pct::parse(s).unwrap();
            assert_eq!((p.ppm(), p.to_string().as_str()), (ppm, shown), "{s}");
        }
        for s in [
            "", "101", "100.5", "-1", "abc", "9x", "99.", ".5", "99.12345", "NaN", "1e2",
        ] {
            assert!(Pct::parse(s).is_err(), "{s} accepted");
        }
        assert!(Pct::parse("99.9").unwrap() > Pct::whole(99));
    }

    #[test]
    fn json_keeps_whole_shares_integers() {
        let v = serde_json::to_value([Pct::whole(95), Pct::parse("99.9").unwrap()]);
        assert_eq!(v.unwrap().to_string(), "[95,99.9]");
        let back: Vec<Pct> = serde_json::from_str("[95,99.9]").unwrap();
        assert_eq!(back[1].to_string(), "99.9");
    }
}
