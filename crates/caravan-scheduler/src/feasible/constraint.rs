//! Constraint operators, compiled once per evaluation and checked per node.

use std::cmp::Ordering;

use caravan_proto::Node;
use regex::Regex;

use super::target::{self, resolve};
use super::version::{Version, VersionReq};

/// A constraint or affinity operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operator {
    /// `=`, `==`, `is`.
    Eq,
    /// `!=`, `not`.
    Ne,
    /// `<`.
    Lt,
    /// `<=`.
    Le,
    /// `>`.
    Gt,
    /// `>=`.
    Ge,
    /// `regexp`.
    Regexp,
    /// `version`.
    Version,
    /// `semver`.
    Semver,
    /// `set_contains` and `set_contains_all`.
    SetContainsAll,
    /// `set_contains_any`.
    SetContainsAny,
    /// `is_set`.
    IsSet,
    /// `is_not_set`.
    IsNotSet,
    /// `distinct_hosts`.
    DistinctHosts,
    /// `distinct_property`.
    DistinctProperty,
}

impl Operator {
    /// Parses an operand; an empty one means `=`.
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s.trim() {
            "" | "=" | "==" | "is" => Self::Eq,
            "!=" | "not" => Self::Ne,
            "<" => Self::Lt,
            "<=" => Self::Le,
            ">" => Self::Gt,
            ">=" => Self::Ge,
            "regexp" => Self::Regexp,
            "version" => Self::Version,
            "semver" => Self::Semver,
            "set_contains" | "set_contains_all" => Self::SetContainsAll,
            "set_contains_any" => Self::SetContainsAny,
            "is_set" => Self::IsSet,
            "is_not_set" => Self::IsNotSet,
            "distinct_hosts" => Self::DistinctHosts,
            "distinct_property" => Self::DistinctProperty,
            _ => return None,
        })
    }

    /// Whether the operator looks at the plan rather than at one node.
    pub fn is_distinct(self) -> bool {
        matches!(self, Self::DistinctHosts | Self::DistinctProperty)
    }
}

/// Why a constraint does not compile.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CompileError {
    /// Unknown operand.
    Operator(String),
    /// Bad regular expression.
    Regex(String),
    /// Bad version requirement.
    Version(String),
    /// Bad `distinct_property` limit.
    Limit(String),
}

impl std::fmt::Display for CompileError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Operator(s) => write!(f, "unknown operator {s:?}"),
            Self::Regex(s) => write!(f, "invalid regular expression: {s}"),
            Self::Version(s) => write!(f, "invalid version constraint {s:?}"),
            Self::Limit(s) => write!(f, "invalid distinct_property limit {s:?}"),
        }
    }
}

/// A constraint ready to check.
#[derive(Debug, Clone)]
pub struct Compiled {
    /// Left target.
    pub l_target: String,
    /// Right target.
    pub r_target: String,
    /// The operator.
    pub op: Operator,
    regex: Option<Regex>,
    req: Option<VersionReq>,
    /// Human-readable form used in metrics.
    pub label: String,
    /// Refers to a unique node attribute (no class caching).
    pub unique: bool,
}

impl Compiled {
    /// Compiles `l op r`; literal right targets are parsed once here.
    pub fn new(l: &str, r: &str, operand: &str) -> Result<Self, CompileError> {
        let op = Operator::parse(operand).ok_or_else(|| CompileError::Operator(operand.into()))?;
        let literal_r = !r.contains("${");
        let mut regex = None;
        let mut req = None;
        if literal_r {
            match op {
                Operator::Regexp => {
                    regex = Some(Regex::new(r).map_err(|e| CompileError::Regex(e.to_string()))?);
                }
                Operator::Version | Operator::Semver => {
                    req = Some(
                        VersionReq::parse(r, op == Operator::Semver)
                            .ok_or_else(|| CompileError::Version(r.into()))?,
                    );
                }
                Operator::DistinctProperty if !r.is_empty() => {
                    r.parse::<u32>()
                        .ok()
                        .filter(|n| *n > 0)
                        .ok_or_else(|| CompileError::Limit(r.into()))?;
                }
                _ => {}
            }
        }
        Ok(Self {
            l_target: l.to_string(),
            r_target: r.to_string(),
            op,
            regex,
            req,
            label: format!("{l} {operand} {r}").trim().to_string(),
            unique: target::is_unique(l) || target::is_unique(r),
        })
    }

    /// Whether the node satisfies the constraint (distinct operators always do here).
    pub fn check(&self, node: &Node) -> bool {
        if self.op.is_distinct() {
            return true;
        }
        let l = resolve(&self.l_target, node);
        let r = resolve(&self.r_target, node);
        match self.op {
            Operator::Eq => matches!((&l, &r), (Some(a), Some(b)) if a == b),
            Operator::Ne => l != r,
            Operator::IsSet => l.is_some(),
            Operator::IsNotSet => l.is_none(),
            _ => {
                let (Some(l), Some(r)) = (l, r) else {
                    return false;
                };
                match self.op {
                    Operator::Lt | Operator::Le | Operator::Gt | Operator::Ge => {
                        let o = order(&l, &r);
                        match self.op {
                            Operator::Lt => o == Ordering::Less,
                            Operator::Le => o != Ordering::Greater,
                            Operator::Gt => o == Ordering::Greater,
                            _ => o != Ordering::Less,
                        }
                    }
                    Operator::Regexp => match &self.regex {
                        Some(re) => re.is_match(&l),
                        None => Regex::new(&r).is_ok_and(|re| re.is_match(&l)),
                    },
                    Operator::Version | Operator::Semver => {
                        let strict = self.op == Operator::Semver;
                        let Some(v) = Version::parse(&l, strict) else {
                            return false;
                        };
                        match &self.req {
                            Some(req) => req.matches(&v),
                            None => VersionReq::parse(&r, strict).is_some_and(|q| q.matches(&v)),
                        }
                    }
                    Operator::SetContainsAll => {
                        let have: Vec<&str> = split_set(&l).collect();
                        split_set(&r).all(|x| have.contains(&x))
                    }
                    Operator::SetContainsAny => {
                        let have: Vec<&str> = split_set(&l).collect();
                        split_set(&r).any(|x| have.contains(&x))
                    }
                    _ => false,
                }
            }
        }
    }
}

fn split_set(s: &str) -> impl Iterator<Item = &str> {
    s.split(',').map(str::trim).filter(|x| !x.is_empty())
}

/// Numeric comparison when both sides are numbers, lexical otherwise.
fn order(l: &str, r: &str) -> Ordering {
    if let (Ok(a), Ok(b)) = (l.parse::<i64>(), r.parse::<i64>()) {
        return a.cmp(&b);
    }
    if let (Ok(a), Ok(b)) = (l.parse::<f64>(), r.parse::<f64>()) {
        return a.partial_cmp(&b).unwrap_or(Ordering::Equal);
    }
    l.cmp(r)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node() -> Node {
        let mut n = Node {
            id: "n1".into(),
            datacenter: "dc1".into(),
            ..Default::default()
        };
        for (k, v) in [
            ("kernel.name", "linux"),
            ("cpu.numcores", "8"),
            ("driver.docker.version", "20.10.7"),
            ("os.version", "5.4.0-beta"),
            ("tags", "a,b, c"),
        ] {
            n.attributes.insert(k.into(), v.into());
        }
        n
    }

    /// One row per operator: (left, operand, right, expected).
    #[test]
    fn operators_one_by_one() {
        let rows: &[(&str, &str, &str, bool)] = &[
            ("${attr.kernel.name}", "=", "linux", true),
            ("${attr.kernel.name}", "==", "windows", false),
            ("${attr.kernel.name}", "is", "linux", true),
            ("${attr.kernel.name}", "", "linux", true),
            ("${attr.kernel.name}", "!=", "windows", true),
            ("${attr.kernel.name}", "not", "linux", false),
            ("${attr.missing}", "!=", "x", true),
            ("${attr.missing}", "=", "x", false),
            ("${attr.cpu.numcores}", "<", "10", true),
            ("${attr.cpu.numcores}", "<=", "8", true),
            ("${attr.cpu.numcores}", ">", "10", false),
            ("${attr.cpu.numcores}", ">=", "8", true),
            ("${attr.kernel.name}", ">", "abc", true),
            ("${attr.missing}", "<", "10", false),
            ("${attr.kernel.name}", "regexp", "^lin", true),
            ("${attr.kernel.name}", "regexp", "^win", false),
            (
                "${attr.driver.docker.version}",
                "version",
                ">= 20.0, < 21",
                true,
            ),
            ("${attr.driver.docker.version}", "version", "~> 19.3", false),
            (
                "${attr.driver.docker.version}",
                "semver",
                ">= 20.10.0",
                true,
            ),
            (
                "${attr.driver.docker.version}",
                "semver",
                "< 20.10.7",
                false,
            ),
            ("${attr.tags}", "set_contains", "a,c", true),
            ("${attr.tags}", "set_contains_all", "a,d", false),
            ("${attr.tags}", "set_contains_any", "d,b", true),
            ("${attr.tags}", "set_contains_any", "d,e", false),
            ("${attr.kernel.name}", "is_set", "", true),
            ("${attr.missing}", "is_set", "", false),
            ("${attr.missing}", "is_not_set", "", true),
            ("${attr.kernel.name}", "is_not_set", "", false),
            ("${node.datacenter}", "=", "dc1", true),
            ("", "distinct_hosts", "", true),
            ("${meta.rack}", "distinct_property", "2", true),
        ];
        let n = node();
        for (l, op, r, want) in rows {
            let c = Compiled::new(l, r, op).unwrap();
            assert_eq!(c.check(&n), *want, "{l} {op} {r}");
        }
    }

    #[test]
    fn bad_input_is_an_error_not_a_panic() {
        assert!(matches!(
            Compiled::new("${attr.a}", "([", "regexp"),
            Err(CompileError::Regex(_))
        ));
        assert!(matches!(
            Compiled::new("${attr.a}", ">= x.y", "version"),
            Err(CompileError::Version(_))
        ));
        assert!(matches!(
            Compiled::new("${attr.a}", "1.2", "semver"),
            Err(CompileError::Version(_))
        ));
        assert!(matches!(
            Compiled::new("${attr.a}", "x", "bogus"),
            Err(CompileError::Operator(_))
        ));
        assert!(matches!(
            Compiled::new("${meta.rack}", "0", "distinct_property"),
            Err(CompileError::Limit(_))
        ));
        // Interpolated right sides are checked per node and fail closed.
        let mut n = node();
        n.meta.insert("re".into(), "([".into());
        let c = Compiled::new("${attr.kernel.name}", "${meta.re}", "regexp").unwrap();
        assert!(!c.check(&n));
    }
}
