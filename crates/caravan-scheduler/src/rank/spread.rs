//! Spread scoring: a boost toward attribute values that hold fewer allocations
//! than their target, computed in O(1) per candidate from incremental counts.

use caravan_proto::Spread;

use crate::property::{MISSING, PropertyCounts};

/// The implicit share of values no target names.
#[derive(Debug, Clone)]
pub struct SpreadSpec {
    /// Index of the property counter in the context.
    pub counter: usize,
    /// The spread's weight (default 50).
    pub weight: f64,
    /// Desired allocations per value id; empty for an even spread.
    pub desired: Vec<Option<f64>>,
    /// Desired allocations of values no target names.
    pub implicit: Option<f64>,
    /// Whether explicit targets were given.
    pub targeted: bool,
}

impl SpreadSpec {
    /// Builds the spec; target values are interned in `counts` so they have ids.
    pub fn new(spread: &Spread, count: u32, counter: usize, counts: &mut PropertyCounts) -> Self {
        let weight = if spread.weight == 0 {
            50.0
        } else {
            f64::from(spread.weight)
        };
        let mut desired: Vec<Option<f64>> = Vec::new();
        let mut sum = 0.0;
        for t in &spread.targets {
            let id = counts.intern(t.value.clone()) as usize;
            if desired.len() <= id {
                desired.resize(id + 1, None);
            }
            let d = f64::from(t.percent) / 100.0 * f64::from(count);
            desired[id] = Some(d);
            sum += d;
        }
        let total = f64::from(count);
        let implicit = (sum > 0.0 && sum < total).then_some(total - sum);
        Self {
            counter,
            weight,
            desired,
            implicit,
            targeted: !spread.targets.is_empty(),
        }
    }
}

/// Per-select snapshot of an even spread's counts.
#[derive(Debug, Clone, Copy)]
pub struct EvenState {
    min_max: Option<(u32, u32)>,
}

impl EvenState {
    /// Reads the counts once per selection.
    pub fn of(counts: &PropertyCounts) -> Self {
        Self {
            min_max: counts.min_max_used(),
        }
    }
}

/// The boost of placing on a node whose value id is `value`.
pub fn boost(
    spec: &SpreadSpec,
    counts: &PropertyCounts,
    even: EvenState,
    value: u32,
    weight_sum: f64,
) -> f64 {
    if !spec.targeted {
        let Some((min, max)) = even.min_max else {
            return 0.0;
        };
        if value == MISSING {
            return -1.0;
        }
        let cur = counts.count(value);
        let (min_f, cur_f, max_f) = (f64::from(min), f64::from(cur), f64::from(max));
        if cur != min {
            return (min_f - cur_f) / min_f;
        }
        if min == max {
            return -1.0;
        }
        return (max_f - min_f) / min_f;
    }
    if value == MISSING {
        return -1.0;
    }
    let used = f64::from(counts.count(value)) + 1.0;
    let desired = match spec.desired.get(value as usize).copied().flatten() {
        Some(d) => d,
        None => match spec.implicit {
            Some(d) => d,
            None => return -1.0,
        },
    };
    let share = spec.weight / weight_sum;
    if desired == 0.0 {
        return -share;
    }
    (desired - used) / desired * share
}

#[cfg(test)]
mod tests {
    use super::*;
    use caravan_proto::SpreadTarget;

    #[test]
    fn targeted_boost_follows_the_formula() {
        let mut c = PropertyCounts::new("${node.datacenter}", None, 0);
        let spread = Spread {
            attribute: "${node.datacenter}".into(),
            weight: 100,
            targets: vec![SpreadTarget {
                value: "dc1".into(),
                percent: 70,
            }],
        };
        let spec = SpreadSpec::new(&spread, 10, 0, &mut c);
        let dc1 = c.lookup("dc1").unwrap();
        let dc2 = c.intern("dc2".into());
        // dc1 wants 7, has 0: (7 - 1) / 7.
        let b = boost(&spec, &c, EvenState::of(&c), dc1, 100.0);
        assert!((b - 6.0 / 7.0).abs() < 1e-9);
        // dc2 falls to the implicit 3: (3 - 1) / 3.
        let b = boost(&spec, &c, EvenState::of(&c), dc2, 100.0);
        assert!((b - 2.0 / 3.0).abs() < 1e-9);
        assert_eq!(boost(&spec, &c, EvenState::of(&c), MISSING, 100.0), -1.0);
    }

    #[test]
    fn even_boost_prefers_the_least_used_value() {
        let mut c = PropertyCounts::new("${meta.rack}", None, 0);
        let spec = SpreadSpec::new(
            &Spread {
                attribute: "${meta.rack}".into(),
                weight: 0,
                targets: vec![],
            },
            10,
            0,
            &mut c,
        );
        let r1 = c.intern("r1".into());
        let r2 = c.intern("r2".into());
        let r3 = c.intern("r3".into());
        assert_eq!(boost(&spec, &c, EvenState::of(&c), r1, 50.0), 0.0);
        c.bump(r1, true);
        c.bump(r1, true);
        c.bump(r2, true);
        let e = EvenState::of(&c);
        assert_eq!(boost(&spec, &c, e, r3, 50.0), 1.0);
        assert_eq!(boost(&spec, &c, e, r2, 50.0), 1.0);
        assert_eq!(boost(&spec, &c, e, r1, 50.0), -1.0);
        c.bump(r2, true);
        assert_eq!(boost(&spec, &c, EvenState::of(&c), r1, 50.0), -1.0);
    }
}
