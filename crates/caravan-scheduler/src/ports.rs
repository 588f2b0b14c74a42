//! Host ports: reserved ranges and dynamic port selection.

use crate::rng::Rng;

/// Lower bound of the default dynamic port range.
pub const DEFAULT_MIN_DYNAMIC: u32 = 20000;
/// Upper bound of the default dynamic port range.
pub const DEFAULT_MAX_DYNAMIC: u32 = 32000;

/// How many random probes before falling back to a scan.
const RANDOM_PROBES: usize = 20;

/// A set of ports as sorted, disjoint inclusive ranges.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PortSet {
    ranges: Vec<(u32, u32)>,
}

/// A port specification that does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid port specification {0:?}")]
pub struct PortSpecError(pub String);

impl PortSet {
    /// Parses `"22,80,8000-8100"`.
    pub fn parse(spec: &str) -> Result<Self, PortSpecError> {
        let mut ranges = Vec::new();
        for part in spec.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let bad = || PortSpecError(part.to_string());
            let (lo, hi) = match part.split_once('-') {
                Some((a, b)) => (
                    a.trim().parse::<u32>().map_err(|_| bad())?,
                    b.trim().parse::<u32>().map_err(|_| bad())?,
                ),
                None => {
                    let p = part.parse::<u32>().map_err(|_| bad())?;
                    (p, p)
                }
            };
            if lo > hi || hi > 65535 {
                return Err(bad());
            }
            ranges.push((lo, hi));
        }
        ranges.sort_unstable();
        let mut merged: Vec<(u32, u32)> = Vec::with_capacity(ranges.len());
        for (lo, hi) in ranges {
            match merged.last_mut() {
                Some(last) if lo <= last.1.saturating_add(1) => last.1 = last.1.max(hi),
                _ => merged.push((lo, hi)),
            }
        }
        Ok(Self { ranges: merged })
    }

    /// Parses, ignoring a malformed specification (a node's fingerprint is trusted).
    pub fn parse_lenient(spec: &str) -> Self {
        Self::parse(spec).unwrap_or_default()
    }

    /// Whether `port` is in the set.
    pub fn contains(&self, port: u32) -> bool {
        let i = self.ranges.partition_point(|r| r.1 < port);
        self.ranges.get(i).is_some_and(|r| r.0 <= port)
    }

    /// How many ports of `lo..=hi` are in the set.
    pub fn count_in(&self, lo: u32, hi: u32) -> u64 {
        self.ranges
            .iter()
            .map(|&(a, b)| {
                let (a, b) = (a.max(lo), b.min(hi));
                if a > b { 0 } else { u64::from(b - a) + 1 }
            })
            .sum()
    }
}

/// Picks `n` free dynamic ports in `lo..=hi`: random probes first, then a scan.
pub fn pick_dynamic(
    rng: &mut Rng,
    lo: u32,
    hi: u32,
    n: usize,
    taken: impl Fn(u32) -> bool,
) -> Option<Vec<u32>> {
    if hi < lo {
        return None;
    }
    let span = (hi - lo) as usize + 1;
    let mut out: Vec<u32> = Vec::with_capacity(n);
    'next: while out.len() < n {
        for _ in 0..RANDOM_PROBES {
            let p = lo + rng.below(span) as u32;
            if !taken(p) && !out.contains(&p) {
                out.push(p);
                continue 'next;
            }
        }
        let p = (lo..=hi).find(|p| !taken(*p) && !out.contains(p))?;
        out.push(p);
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_queries_ranges() {
        let s = PortSet::parse("22, 80,8000-8100,8050-8200").unwrap();
        assert!(s.contains(22) && s.contains(8150) && !s.contains(81));
        assert_eq!(s.count_in(8000, 8009), 10);
        assert!(PortSet::parse("80-x").is_err());
        assert!(PortSet::parse("90-80").is_err());
    }

    #[test]
    fn dynamic_ports_avoid_taken_ones() {
        let mut rng = Rng::from_seed_parts(&[b"p"]);
        let got = pick_dynamic(&mut rng, 100, 104, 4, |p| p == 102).unwrap();
        assert_eq!(got.len(), 4);
        assert!(!got.contains(&102));
        assert!(pick_dynamic(&mut rng, 100, 101, 3, |_| false).is_none());
    }
}
