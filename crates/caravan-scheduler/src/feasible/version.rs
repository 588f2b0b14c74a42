//! Version and semver constraints (`>= 1.2, < 2.0`, `~> 1.4`).

use std::cmp::Ordering;

/// A parsed version: numeric segments, an optional pre-release.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Version {
    segments: Vec<u64>,
    pre: Option<String>,
    /// Segments written (before padding), for `~>`.
    written: usize,
}

impl Version {
    /// Parses `v1.2.3-beta+meta`; `strict` demands exactly three segments (semver).
    pub fn parse(s: &str, strict: bool) -> Option<Self> {
        let s = s.trim();
        let s = if strict {
            s
        } else {
            s.strip_prefix('v').unwrap_or(s)
        };
        let s = s.split_once('+').map_or(s, |(a, _)| a);
        let (core, pre) = match s.split_once('-') {
            Some((c, p)) if !p.is_empty() => (c, Some(p.to_string())),
            Some(_) => return None,
            None => (s, None),
        };
        let segments: Vec<u64> = core
            .split('.')
            .map(|x| {
                if x.is_empty() || !x.bytes().all(|b| b.is_ascii_digit()) {
                    None
                } else {
                    x.parse().ok()
                }
            })
            .collect::<Option<_>>()?;
        if segments.is_empty() || (strict && segments.len() != 3) {
            return None;
        }
        let written = segments.len();
        Some(Self {
            segments,
            pre,
            written,
        })
    }

    fn seg(&self, i: usize) -> u64 {
        self.segments.get(i).copied().unwrap_or(0)
    }
}

impl Ord for Version {
    fn cmp(&self, other: &Self) -> Ordering {
        let n = self.segments.len().max(other.segments.len());
        for i in 0..n {
            match self.seg(i).cmp(&other.seg(i)) {
                Ordering::Equal => {}
                o => return o,
            }
        }
        match (&self.pre, &other.pre) {
            (None, None) => Ordering::Equal,
            (None, Some(_)) => Ordering::Greater,
            (Some(_), None) => Ordering::Less,
            (Some(a), Some(b)) => cmp_pre(a, b),
        }
    }
}

impl PartialOrd for Version {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

fn cmp_pre(a: &str, b: &str) -> Ordering {
    for (x, y) in a.split('.').zip(b.split('.')) {
        let o = match (x.parse::<u64>(), y.parse::<u64>()) {
            (Ok(p), Ok(q)) => p.cmp(&q),
            (Ok(_), Err(_)) => Ordering::Less,
            (Err(_), Ok(_)) => Ordering::Greater,
            (Err(_), Err(_)) => x.cmp(y),
        };
        if o != Ordering::Equal {
            return o;
        }
    }
    a.split('.').count().cmp(&b.split('.').count())
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Eq,
    Ne,
    Gt,
    Ge,
    Lt,
    Le,
    Pessimistic,
}

/// A conjunction of version terms.
#[derive(Debug, Clone)]
pub struct VersionReq {
    terms: Vec<(Op, Version)>,
}

impl VersionReq {
    /// Parses `">= 1.2, < 2"`; `strict` for semver.
    pub fn parse(s: &str, strict: bool) -> Option<Self> {
        let mut terms = Vec::new();
        for part in s.split(',') {
            let part = part.trim();
            let (op, rest) = [
                ("~>", Op::Pessimistic),
                (">=", Op::Ge),
                ("<=", Op::Le),
                ("!=", Op::Ne),
                ("=", Op::Eq),
                (">", Op::Gt),
                ("<", Op::Lt),
            ]
            .iter()
            .find_map(|(p, op)| part.strip_prefix(p).map(|r| (*op, r)))
            .unwrap_or((Op::Eq, part));
            if strict && op == Op::Pessimistic {
                return None;
            }
            terms.push((op, Version::parse(rest, strict)?));
        }
        (!terms.is_empty()).then_some(Self { terms })
    }

    /// Whether `v` satisfies every term.
    pub fn matches(&self, v: &Version) -> bool {
        self.terms.iter().all(|(op, c)| {
            // A pre-release only satisfies terms that name the same release line with
            // a pre-release, so `>= 1.0` does not pick up `2.0-beta`.
            if v.pre.is_some() && (c.pre.is_none() || c.segments != v.segments) && *op != Op::Ne {
                return false;
            }
            match op {
                Op::Eq => v == c || v.cmp(c) == Ordering::Equal,
                Op::Ne => v.cmp(c) != Ordering::Equal,
                Op::Gt => v > c,
                Op::Ge => v >= c,
                Op::Lt => v < c,
                Op::Le => v <= c,
                Op::Pessimistic => {
                    if v < c {
                        return false;
                    }
                    // `~> 1.2.3` pins 1.2; `~> 1.2` pins 1.
                    let pinned = c.written.saturating_sub(1).max(1);
                    (0..pinned).all(|i| v.seg(i) == c.seg(i))
                }
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(req: &str, v: &str, strict: bool) -> bool {
        VersionReq::parse(req, strict)
            .unwrap()
            .matches(&Version::parse(v, strict).unwrap())
    }

    #[test]
    fn version_constraints() {
        assert!(m(">= 1.2, < 2.0", "1.5.3", false));
        assert!(!m(">= 1.2, < 2.0", "2.0.0", false));
        assert!(m("~> 1.2", "1.9", false));
        assert!(!m("~> 1.2.3", "1.3.0", false));
        assert!(m("~> 1.2.3", "1.2.9", false));
        assert!(m("= 1.0", "v1.0.0", false));
        assert!(m("!= 1.0", "1.1", false));
        assert!(!m(">= 1.0", "2.0.0-beta", false));
        assert!(m(">= 1.0.0-alpha", "1.0.0-beta", true));
        assert!(Version::parse("1.2", true).is_none());
        assert!(VersionReq::parse("~> 1.2.0", true).is_none());
        assert!(VersionReq::parse(">= abc", false).is_none());
    }
}
