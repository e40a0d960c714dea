//! Amounts of resources: fixed-point milli-units and the name → amount maps jobs and nodes carry.
//!
//! Quotas are written with up to three decimals (`nominal_quota: 0.5`); summing `f64`s over
//! thousands of jobs drifts, so every amount is an `i64` of thousandths. All arithmetic
//! saturates: a hostile or absurd number must never panic the admission loop.

use std::fmt;
use std::sync::Arc;

/// A shared, cheaply cloned name (job id, queue, flavor, node, resource).
pub type Name = Arc<str>;

/// An amount in thousandths of a unit: `Milli(1500)` is 1.5 CPUs or 1.5 GB.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Milli(pub i64);

impl Milli {
    /// Zero.
    pub const ZERO: Milli = Milli(0);
    /// Stands for "no limit" in quota tables; never produced from a config number.
    pub const UNLIMITED: Milli = Milli(i64::MAX);

    /// Whole units: `Milli::units(2)` is 2.000.
    pub const fn units(n: i64) -> Milli {
        Milli(n.saturating_mul(1000))
    }

    /// Converts a config or API number, rounding to three decimals; `None` when not finite.
    pub fn from_f64(x: f64) -> Option<Milli> {
        if !x.is_finite() {
            return None;
        }
        // `as` saturates out-of-range floats, so huge numbers cannot wrap.
        Some(Milli((x * 1000.0).round() as i64))
    }

    /// The amount as a float, for charts and percentages only.
    pub fn as_f64(self) -> f64 {
        self.0 as f64 / 1000.0
    }

    /// Saturating sum.
    pub fn plus(self, o: Milli) -> Milli {
        Milli(self.0.saturating_add(o.0))
    }

    /// Saturating difference.
    pub fn minus(self, o: Milli) -> Milli {
        Milli(self.0.saturating_sub(o.0))
    }
}

impl fmt::Display for Milli {
    /// Prints like the config is written: `64`, `1.5`, `0.25`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if *self == Milli::UNLIMITED {
            return f.write_str("unlimited");
        }
        let v = self.0;
        let (sign, abs) = if v < 0 { ("-", v.unsigned_abs()) } else { ("", v as u64) };
        let (whole, frac) = (abs / 1000, abs % 1000);
        if frac == 0 {
            write!(f, "{sign}{whole}")
        } else {
            let digits = format!("{frac:03}");
            write!(f, "{sign}{whole}.{}", digits.trim_end_matches('0'))
        }
    }
}

/// Amounts per resource name (`cpu`, `gpu`, `memory_gb` or any custom name).
///
/// Kept sorted by name with duplicates summed and zero amounts dropped, so `{cpu: 0}` is the
/// same as `{}` — "requests no resources at all". Immutable once built, and shared: a clone
/// (the admission loop offers every pending job's request to each cycle) copies no pairs.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct Resources(Arc<[(Name, Milli)]>);

impl Resources {
    /// Builds from any `(name, amount)` pairs.
    pub fn new<N: Into<Name>>(pairs: impl IntoIterator<Item = (N, Milli)>) -> Resources {
        let mut v: Vec<(Name, Milli)> = pairs.into_iter().map(|(n, a)| (n.into(), a)).collect();
        v.sort_by(|a, b| a.0.cmp(&b.0));
        let mut out: Vec<(Name, Milli)> = Vec::with_capacity(v.len());
        for (n, a) in v {
            match out.last_mut() {
                Some(last) if last.0 == n => last.1 = last.1.plus(a),
                _ => out.push((n, a)),
            }
        }
        out.retain(|(_, a)| *a != Milli::ZERO);
        Resources(out.into())
    }

    /// Builds from whole units: `Resources::units(&[("cpu", 2), ("gpu", 1)])`.
    pub fn units(pairs: &[(&str, i64)]) -> Resources {
        Resources::new(pairs.iter().map(|&(n, a)| (n, Milli::units(a))))
    }

    /// The amount of one resource (zero when absent).
    pub fn get(&self, name: &str) -> Milli {
        self.0.iter().find(|(n, _)| &**n == name).map_or(Milli::ZERO, |(_, a)| *a)
    }

    /// `(name, amount)` pairs in name order, zero amounts excluded.
    pub fn iter(&self) -> impl Iterator<Item = (&Name, Milli)> + '_ {
        self.0.iter().map(|(n, a)| (n, *a))
    }

    /// True when nothing is requested.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// At least as much of every resource as `other` (both lists are sorted by name).
    pub fn covers(&self, other: &Resources) -> bool {
        if Arc::ptr_eq(&self.0, &other.0) {
            return true;
        }
        let mut mine = self.0.iter().peekable();
        other.0.iter().all(|(name, want)| {
            while mine.next_if(|(n, _)| n < name).is_some() {}
            mine.next_if(|(n, _)| n == name).is_some_and(|(_, have)| have >= want)
        })
    }
}

impl fmt::Display for Resources {
    /// `cpu 8, gpu 1`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, (n, a)) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{n} {a}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn milli_prints_like_config_numbers() {
        let cases = [(64_000, "64"), (1_500, "1.5"), (250, "0.25"), (1, "0.001"), (-2_500, "-2.5"), (0, "0")];
        for (v, want) in cases {
            assert_eq!(Milli(v).to_string(), want);
        }
        assert_eq!(Milli::UNLIMITED.to_string(), "unlimited");
    }

    #[test]
    fn from_f64_rounds_to_three_decimals_without_drift() {
        assert_eq!(Milli::from_f64(0.1), Some(Milli(100)));
        assert_eq!(Milli::from_f64(20.0), Some(Milli(20_000)));
        assert_eq!(Milli::from_f64(f64::NAN), None);
        assert_eq!(Milli::from_f64(1e300), Some(Milli(i64::MAX)));
        // Ten thousand 0.1s add up to exactly 1000, which f64 does not.
        let sum = (0..10_000).fold(Milli::ZERO, |s, _| s.plus(Milli::from_f64(0.1).unwrap()));
        assert_eq!(sum, Milli::units(1000));
    }

    #[test]
    fn resources_normalize() {
        let r = Resources::new([("gpu", Milli::units(1)), ("cpu", Milli(0)), ("gpu", Milli(500))]);
        assert_eq!(r.to_string(), "gpu 1.5");
        assert_eq!(r.get("cpu"), Milli::ZERO);
        assert!(Resources::units(&[("cpu", 0)]).is_empty());
    }
}
