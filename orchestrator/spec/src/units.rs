//! Human units as they appear in a job spec: byte sizes ("10GiB"), durations ("1h30m") and
//! USDC amounts ("12.50"). Every parse is exact integer arithmetic: a value that cannot be
//! represented exactly (a fraction of a byte, a seventh decimal of USDC) is an error, never
//! rounded, because these values end up in a hashed spec and on chain.

use std::borrow::Cow;
use std::fmt;
use std::str::FromStr;

use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Why a unit string was refused; the message says how to write it instead.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct UnitError(pub String);

fn err<T>(msg: impl Into<String>) -> Result<T, UnitError> {
    Err(UnitError(msg.into()))
}

pub const KIB: u64 = 1 << 10;
pub const MIB: u64 = 1 << 20;
pub const GIB: u64 = 1 << 30;
pub const TIB: u64 = 1 << 40;
pub const PIB: u64 = 1 << 50;

/// Units accepted by [`ByteSize`], case-sensitive.
const BYTE_UNITS: &[(&str, u64)] = &[
    ("PiB", PIB),
    ("TiB", TIB),
    ("GiB", GIB),
    ("MiB", MIB),
    ("KiB", KIB),
    ("PB", 1_000_000_000_000_000),
    ("TB", 1_000_000_000_000),
    ("GB", 1_000_000_000),
    ("MB", 1_000_000),
    ("KB", 1_000),
    ("B", 1),
];

const BYTE_SIZE_HINT: &str = "write a whole or decimal number followed by one of B, KB, MB, GB, TB, PB (powers of 1000) or KiB, MiB, GiB, TiB, PiB (powers of 1024), e.g. \"10GiB\"";

/// A size in bytes, written "10GiB", "512MiB", "10GB" or "1.5GiB".
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct ByteSize(pub u64);

impl ByteSize {
    pub fn bytes(self) -> u64 {
        self.0
    }

    /// Whole MiB, rounded up: a requirement of 1 byte more than 4 GiB needs 4097 MiB.
    pub fn mib_ceil(self) -> u64 {
        self.0.div_ceil(MIB)
    }

    /// Whole GiB, rounded up.
    pub fn gib_ceil(self) -> u64 {
        self.0.div_ceil(GIB)
    }
}

/// Splits "1.5GiB" into ("1", Some("5"), "GiB"). Only ASCII digits and one optional '.'
/// between digits are accepted, so signs, exponents and whitespace are refused.
fn split_decimal(s: &str) -> Option<(&str, Option<&str>, &str)> {
    let number_end = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    let (number, rest) = s.split_at(number_end);
    let (whole, frac) = match number.split_once('.') {
        Some((w, f)) => (w, Some(f)),
        None => (number, None),
    };
    if whole.is_empty() || frac.is_some_and(|f| f.is_empty() || f.contains('.')) {
        return None;
    }
    Some((whole, frac, rest))
}

/// `whole.frac * multiplier` exactly, or None when it is not a whole number or overflows u64.
fn exact_scaled(whole: &str, frac: Option<&str>, multiplier: u64) -> Result<u64, &'static str> {
    let frac = frac.unwrap_or("");
    // Trailing zeros of the fraction change nothing; dropping them keeps 10^len small.
    let frac = frac.trim_end_matches('0');
    if frac.len() > 18 || whole.len() > 39 {
        return Err("too many digits");
    }
    let digits = format!("{whole}{frac}");
    let mantissa: u128 = digits.parse().map_err(|_| "too large")?;
    let scale = 10u128.pow(frac.len() as u32);
    let scaled = mantissa
        .checked_mul(u128::from(multiplier))
        .ok_or("too large")?;
    if scaled % scale != 0 {
        return Err("not whole");
    }
    u64::try_from(scaled / scale).map_err(|_| "too large")
}

impl FromStr for ByteSize {
    type Err = UnitError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if s.starts_with('-') {
            return err(format!(
                "size {s:?} is negative; sizes are 0 or more, e.g. \"10GiB\""
            ));
        }
        let Some((whole, frac, unit)) = split_decimal(s) else {
            return err(format!("size {s:?} is not understood; {BYTE_SIZE_HINT}"));
        };
        if unit.is_empty() {
            return err(format!(
                "size {s:?} has no unit; add one, e.g. \"{s}GiB\" (1024-based) or \"{s}GB\" (1000-based)"
            ));
        }
        let Some(&(_, multiplier)) = BYTE_UNITS.iter().find(|(name, _)| *name == unit) else {
            // "10G", "10gb", "10Gb" are ambiguous (binary or decimal? bits or bytes?).
            return err(format!(
                "size {s:?} has unknown or ambiguous unit {unit:?}; {BYTE_SIZE_HINT}"
            ));
        };
        match exact_scaled(whole, frac, multiplier) {
            Ok(bytes) => Ok(ByteSize(bytes)),
            Err("not whole") => err(format!(
                "size {s:?} is not a whole number of bytes; use fewer decimals or a smaller unit"
            )),
            Err(_) => err(format!("size {s:?} is too large; the maximum is 16383PiB")),
        }
    }
}

impl fmt::Display for ByteSize {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0 == 0 {
            return f.write_str("0B");
        }
        // The unit that divides exactly and gives the shortest number: 10GB stays "10GB".
        let (name, multiplier) = BYTE_UNITS
            .iter()
            .filter(|(_, m)| self.0 % m == 0)
            .max_by_key(|(_, m)| *m)
            .expect("every size is a multiple of 1 byte");
        write!(f, "{}{}", self.0 / multiplier, name)
    }
}

const DURATION_UNITS: &[(char, u64)] = &[('d', 86_400), ('h', 3_600), ('m', 60), ('s', 1)];
const DURATION_HINT: &str = "write whole numbers with units d, h, m, s in that order, e.g. \"15m\", \"48h\", \"1h30m\", \"2d\"";

/// A duration in whole seconds, written "15m", "48h", "90s", "1h30m" or "2d".
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct HumanDuration(pub u64);

impl HumanDuration {
    pub fn secs(self) -> u64 {
        self.0
    }
}

impl FromStr for HumanDuration {
    type Err = UnitError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if s.is_empty() {
            return err(format!("duration is empty; {DURATION_HINT}"));
        }
        if s.starts_with('-') {
            return err(format!("duration {s:?} is negative; {DURATION_HINT}"));
        }
        let mut total: u64 = 0;
        let mut rest = s;
        // Each unit at most once and largest first, so "30m1h" or "1h1h" cannot mean two things.
        let mut next_unit = 0;
        while !rest.is_empty() {
            let digits_end = rest
                .find(|c: char| !c.is_ascii_digit())
                .unwrap_or(rest.len());
            if digits_end == 0 {
                return err(format!("duration {s:?} is not understood; {DURATION_HINT}"));
            }
            let (digits, after) = rest.split_at(digits_end);
            let Some(unit) = after.chars().next() else {
                return err(format!(
                    "duration {s:?} ends without a unit; add one, e.g. \"{s}s\" or \"{s}m\""
                ));
            };
            let Some(position) = DURATION_UNITS.iter().position(|(u, _)| *u == unit) else {
                return err(format!(
                    "duration {s:?} has unknown unit {unit:?}; {DURATION_HINT}"
                ));
            };
            if position < next_unit {
                return err(format!(
                    "duration {s:?} repeats a unit or has them out of order; {DURATION_HINT}"
                ));
            }
            next_unit = position + 1;
            let too_long = || UnitError(format!("duration {s:?} is too long"));
            let amount: u64 = digits.parse().map_err(|_| too_long())?;
            total = amount
                .checked_mul(DURATION_UNITS[position].1)
                .and_then(|secs| total.checked_add(secs))
                .ok_or_else(too_long)?;
            rest = &after[unit.len_utf8()..];
        }
        Ok(HumanDuration(total))
    }
}

impl fmt::Display for HumanDuration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0 == 0 {
            return f.write_str("0s");
        }
        let mut rest = self.0;
        for (unit, secs) in DURATION_UNITS {
            let amount = rest / secs;
            rest %= secs;
            if amount > 0 {
                write!(f, "{amount}{unit}")?;
            }
        }
        Ok(())
    }
}

/// USDC has 6 decimals on chain.
pub const USDC_DECIMALS: u32 = 6;
const USDC_ONE: u64 = 1_000_000;

/// An amount of USDC in base units (6 decimals), written "12.50": never a float.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Usdc(pub u64);

impl Usdc {
    pub fn base_units(self) -> u64 {
        self.0
    }
}

impl FromStr for Usdc {
    type Err = UnitError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if s.starts_with('-') {
            return err(format!(
                "amount {s:?} is negative; amounts are 0 or more, e.g. \"12.50\""
            ));
        }
        let Some((whole, frac, rest)) = split_decimal(s) else {
            return err(format!(
                "amount {s:?} is not understood; write USDC as a decimal string, e.g. \"12.50\""
            ));
        };
        if !rest.is_empty() {
            return err(format!(
                "amount {s:?} has trailing text {rest:?}; write the USDC amount alone, e.g. \"12.50\""
            ));
        }
        if frac.is_some_and(|f| f.len() > USDC_DECIMALS as usize) {
            return err(format!(
                "amount {s:?} has more than {USDC_DECIMALS} decimals; USDC has {USDC_DECIMALS}"
            ));
        }
        match exact_scaled(whole, frac, USDC_ONE) {
            Ok(units) => Ok(Usdc(units)),
            Err(_) => err(format!("amount {s:?} is too large")),
        }
    }
}

impl fmt::Display for Usdc {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let whole = self.0 / USDC_ONE;
        let frac = format!("{:06}", self.0 % USDC_ONE);
        // Cents always shown, further decimals only when present: "12.50", "0.000001".
        let trimmed = frac.trim_end_matches('0');
        let shown = if trimmed.len() < 2 {
            &frac[..2]
        } else {
            trimmed
        };
        write!(f, "{whole}.{shown}")
    }
}

macro_rules! string_unit {
    ($ty:ident, $name:literal, $pattern:literal, $description:literal, $expecting:literal) => {
        impl Serialize for $ty {
            fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                serializer.collect_str(self)
            }
        }

        impl<'de> Deserialize<'de> for $ty {
            fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                struct Visitor;
                impl serde::de::Visitor<'_> for Visitor {
                    type Value = $ty;
                    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                        f.write_str($expecting)
                    }
                    fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<$ty, E> {
                        v.parse().map_err(E::custom)
                    }
                }
                deserializer.deserialize_str(Visitor)
            }
        }

        impl JsonSchema for $ty {
            fn schema_name() -> Cow<'static, str> {
                Cow::Borrowed($name)
            }

            fn json_schema(_: &mut SchemaGenerator) -> Schema {
                json_schema!({
                    "type": "string",
                    "pattern": $pattern,
                    "description": $description,
                })
            }
        }
    };
}

string_unit!(
    ByteSize,
    "ByteSize",
    "^[0-9]+(\\.[0-9]+)?(B|KB|MB|GB|TB|PB|KiB|MiB|GiB|TiB|PiB)$",
    "A size in bytes: a number and a unit, B/KB/MB/GB/TB/PB (powers of 1000) or KiB/MiB/GiB/TiB/PiB (powers of 1024), e.g. \"10GiB\", \"1.5GiB\"; must be a whole number of bytes.",
    "a size such as \"10GiB\""
);
string_unit!(
    HumanDuration,
    "HumanDuration",
    "^([0-9]+d([0-9]+h)?([0-9]+m)?([0-9]+s)?|[0-9]+h([0-9]+m)?([0-9]+s)?|[0-9]+m([0-9]+s)?|[0-9]+s)$",
    "A duration in whole seconds: numbers with units d, h, m, s in that order, e.g. \"15m\", \"48h\", \"1h30m\", \"2d\".",
    "a duration such as \"15m\""
);
string_unit!(
    Usdc,
    "Usdc",
    "^[0-9]+(\\.[0-9]{1,6})?$",
    "An amount of USDC as a decimal string with at most 6 decimals, e.g. \"12.50\"; never a JSON number.",
    "a USDC amount such as \"12.50\""
);

#[cfg(test)]
mod tests {
    use super::*;

    fn size(s: &str) -> u64 {
        s.parse::<ByteSize>().unwrap().0
    }

    #[test]
    fn byte_sizes_parse_exactly_in_binary_and_decimal_units() {
        assert_eq!(size("10GiB"), 10 * GIB);
        assert_eq!(size("512MiB"), 512 * MIB);
        assert_eq!(size("10GB"), 10_000_000_000);
        assert_eq!(size("1.5GiB"), 1_610_612_736);
        assert_eq!(size("0B"), 0);
        assert_eq!(size("2.50KB"), 2_500);
        assert_eq!(size("16383PiB"), 16383 * PIB);
    }

    #[test]
    fn byte_sizes_refuse_ambiguity_negatives_fractions_and_overflow() {
        for bad in [
            "10G",
            "10gb",
            "10Gb",
            "10",
            "-1GiB",
            "1.GiB",
            ".5GiB",
            "0.1B",
            "1.0000000001KiB",
            "16384PiB",
            "99999999999999999999999GiB",
            "10 GiB",
            " 10GiB",
            "1e3B",
            "+1B",
            "",
            "1..5GiB",
        ] {
            assert!(
                bad.parse::<ByteSize>().is_err(),
                "{bad:?} should be refused"
            );
        }
        let message = "10G".parse::<ByteSize>().unwrap_err().0;
        assert!(message.contains("ambiguous"), "{message}");
        let message = "10".parse::<ByteSize>().unwrap_err().0;
        assert!(message.contains("\"10GiB\""), "{message}");
    }

    #[test]
    fn byte_sizes_display_in_the_largest_exact_unit_and_round_trip() {
        assert_eq!(ByteSize(10 * GIB).to_string(), "10GiB");
        assert_eq!(ByteSize(1_610_612_736).to_string(), "1536MiB");
        assert_eq!(ByteSize(10_000_000_000).to_string(), "10GB");
        assert_eq!(ByteSize(1001).to_string(), "1001B");
        for n in [
            0,
            1,
            999,
            1024,
            1536,
            10 * GIB + 1,
            u64::MAX,
            u64::MAX - 1,
            5 * PIB,
        ] {
            let shown = ByteSize(n).to_string();
            assert_eq!(shown.parse::<ByteSize>().unwrap(), ByteSize(n), "{shown}");
        }
    }

    #[test]
    fn byte_size_rounds_up_to_whole_mib_and_gib() {
        assert_eq!(ByteSize(4 * GIB + 1).mib_ceil(), 4097);
        assert_eq!(ByteSize(80 * GIB).mib_ceil(), 81_920);
        assert_eq!(ByteSize(2 * TIB).gib_ceil(), 2048);
        assert_eq!(ByteSize(1).gib_ceil(), 1);
    }

    fn secs(s: &str) -> u64 {
        s.parse::<HumanDuration>().unwrap().0
    }

    #[test]
    fn durations_parse_each_unit_and_combinations() {
        assert_eq!(secs("15m"), 900);
        assert_eq!(secs("48h"), 172_800);
        assert_eq!(secs("90s"), 90);
        assert_eq!(secs("1h30m"), 5_400);
        assert_eq!(secs("2d"), 172_800);
        assert_eq!(secs("1d2h3m4s"), 93_784);
        assert_eq!(secs("0s"), 0);
    }

    #[test]
    fn durations_refuse_out_of_order_repeats_fractions_and_bare_numbers() {
        for bad in [
            "",
            "15",
            "30m1h",
            "1h1h",
            "1.5h",
            "-5m",
            "5 m",
            "1w",
            "5ms",
            "m",
            "99999999999999999999d",
            "213503982334602d",
        ] {
            assert!(
                bad.parse::<HumanDuration>().is_err(),
                "{bad:?} should be refused"
            );
        }
    }

    #[test]
    fn durations_display_and_round_trip() {
        assert_eq!(HumanDuration(90).to_string(), "1m30s");
        assert_eq!(HumanDuration(172_800).to_string(), "2d");
        assert_eq!(HumanDuration(0).to_string(), "0s");
        for n in [0, 1, 59, 60, 3_599, 86_401, u64::MAX] {
            let shown = HumanDuration(n).to_string();
            assert_eq!(shown.parse::<HumanDuration>().unwrap().0, n, "{shown}");
        }
    }

    #[test]
    fn usdc_parses_to_base_units_without_floats() {
        assert_eq!("12.50".parse::<Usdc>().unwrap(), Usdc(12_500_000));
        assert_eq!("12".parse::<Usdc>().unwrap(), Usdc(12_000_000));
        assert_eq!("0.000001".parse::<Usdc>().unwrap(), Usdc(1));
        assert_eq!(
            "18446744073709.551615".parse::<Usdc>().unwrap(),
            Usdc(u64::MAX)
        );
        for bad in [
            "12.5000001",
            "-1",
            "1e3",
            "12.",
            ".5",
            "12,50",
            "18446744073709.551616",
            "12.50 USDC",
            "",
        ] {
            assert!(bad.parse::<Usdc>().is_err(), "{bad:?} should be refused");
        }
        assert!(
            "1.1234567"
                .parse::<Usdc>()
                .unwrap_err()
                .0
                .contains("more than 6 decimals")
        );
    }

    #[test]
    fn usdc_displays_cents_and_round_trips() {
        assert_eq!(Usdc(12_500_000).to_string(), "12.50");
        assert_eq!(Usdc(12_000_000).to_string(), "12.00");
        assert_eq!(Usdc(1).to_string(), "0.000001");
        assert_eq!(Usdc(12_345_600).to_string(), "12.3456");
        for n in [0, 1, 10, 999_999, 1_000_000, u64::MAX] {
            let shown = Usdc(n).to_string();
            assert_eq!(shown.parse::<Usdc>().unwrap(), Usdc(n), "{shown}");
        }
    }

    #[test]
    fn units_serialize_as_their_strings_and_refuse_json_numbers() {
        assert_eq!(
            serde_json::to_string(&Usdc(12_500_000)).unwrap(),
            "\"12.50\""
        );
        assert_eq!(
            serde_json::from_str::<ByteSize>("\"10GiB\"").unwrap(),
            ByteSize(10 * GIB)
        );
        assert!(serde_json::from_str::<Usdc>("12.5").is_err());
        assert!(serde_json::from_str::<HumanDuration>("900").is_err());
    }
}
