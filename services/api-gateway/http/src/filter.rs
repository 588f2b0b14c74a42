//! The `filter` query parameter of Nomad's list endpoints: a boolean
//! expression in the go-bexpr language (`Status == "running" and
//! Meta.team in "web"`), parsed once per request and evaluated on each
//! listed object as the HTTP API renders it.
//!
//! The language: selectors (`A.B`, `A["key with spaces"]`, or a JSON
//! pointer in quotes, `"/A/B"`), the match operators `==`, `!=`, `in`,
//! `not in`, `contains`, `not contains`, `matches`, `not matches`,
//! `is empty`, `is not empty`, and `and`, `or`, `not` with parentheses.
//! A value is compared in the selected field's own type (a number, a
//! boolean or a string); `in` reads a string as its substrings, a list as
//! its elements and an object as its keys. A selector that reaches
//! nothing matches no positive operator (and every negated one), so
//! `Meta.team == "web"` keeps only the objects with that key.
//!
//! Pure (std, `regex` and `serde_json`): no gateway types.

use std::fmt;

use regex::Regex;
use serde_json::Value;

/// A parsed filter expression.
#[derive(Debug, Clone)]
pub(crate) struct Filter(Expr);

/// Why a filter expression does not parse or cannot be applied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FilterError(pub String);

impl fmt::Display for FilterError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[derive(Debug, Clone)]
enum Expr {
    Or(Box<Expr>, Box<Expr>),
    And(Box<Expr>, Box<Expr>),
    Not(Box<Expr>),
    Match(Match),
}

#[derive(Debug, Clone)]
struct Match {
    selector: Vec<String>,
    op: Op,
    negated: bool,
}

#[derive(Debug, Clone)]
enum Op {
    Equal(String),
    In(String),
    Matches(Regex),
    Empty,
}

impl Filter {
    /// Parses `text`; an empty text is no filter.
    pub(crate) fn parse(text: &str) -> Result<Option<Filter>, FilterError> {
        if text.trim().is_empty() {
            return Ok(None);
        }
        let tokens = lex(text)?;
        let mut parser = Parser { tokens, at: 0 };
        let expr = parser.or()?;
        if let Some(tok) = parser.peek() {
            return Err(FilterError(format!(
                "unexpected {tok} after the expression"
            )));
        }
        Ok(Some(Filter(expr)))
    }

    /// Whether `object` passes the filter.
    pub(crate) fn matches(&self, object: &Value) -> bool {
        eval(&self.0, object)
    }
}

fn eval(expr: &Expr, object: &Value) -> bool {
    match expr {
        Expr::Or(a, b) => eval(a, object) || eval(b, object),
        Expr::And(a, b) => eval(a, object) && eval(b, object),
        Expr::Not(e) => !eval(e, object),
        Expr::Match(m) => {
            let field = select(object, &m.selector);
            let positive = match (&m.op, field) {
                (Op::Empty, None | Some(Value::Null)) => true,
                (Op::Empty, Some(v)) => is_empty(v),
                (_, None) => false,
                (Op::Equal(want), Some(v)) => equals(v, want),
                (Op::In(want), Some(v)) => holds(v, want),
                (Op::Matches(re), Some(Value::String(s))) => re.is_match(s),
                (Op::Matches(_), Some(_)) => false,
            };
            positive != m.negated
        }
    }
}

fn select<'a>(object: &'a Value, path: &[String]) -> Option<&'a Value> {
    path.iter().try_fold(object, |v, key| match v {
        Value::Object(map) => map.get(key),
        Value::Array(items) => key.parse::<usize>().ok().and_then(|i| items.get(i)),
        _ => None,
    })
}

fn is_empty(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::String(s) => s.is_empty(),
        Value::Array(a) => a.is_empty(),
        Value::Object(o) => o.is_empty(),
        Value::Bool(_) | Value::Number(_) => false,
    }
}

/// `field == want`, `want` read in the field's type.
fn equals(field: &Value, want: &str) -> bool {
    match field {
        Value::String(s) => s == want,
        Value::Bool(b) => parse_bool(want) == Some(*b),
        Value::Number(n) => match (n.as_i64(), n.as_u64(), n.as_f64()) {
            (Some(i), _, _) if want.parse::<i64>().is_ok() => want.parse::<i64>() == Ok(i),
            (_, Some(u), _) if want.parse::<u64>().is_ok() => want.parse::<u64>() == Ok(u),
            (_, _, Some(f)) => want.parse::<f64>().is_ok_and(|w| w == f),
            _ => false,
        },
        Value::Null => want.is_empty(),
        Value::Array(_) | Value::Object(_) => false,
    }
}

/// `want in field`: a substring, an element or a key.
fn holds(field: &Value, want: &str) -> bool {
    match field {
        Value::String(s) => s.contains(want),
        Value::Array(items) => items.iter().any(|item| equals(item, want)),
        Value::Object(map) => map.contains_key(want),
        _ => false,
    }
}

/// Go's `strconv.ParseBool`.
fn parse_bool(text: &str) -> Option<bool> {
    match text {
        "1" | "t" | "T" | "TRUE" | "true" | "True" => Some(true),
        "0" | "f" | "F" | "FALSE" | "false" | "False" => Some(false),
        _ => None,
    }
}

#[derive(Debug, Clone, PartialEq)]
enum Token {
    /// An unquoted word: a selector part, a keyword or a bare value.
    Word(String),
    /// A double-quoted or backquoted string.
    Quoted(String),
    Dot,
    Open,
    Close,
    OpenBracket,
    CloseBracket,
    Equal,
    NotEqual,
}

impl fmt::Display for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Token::Word(w) => write!(f, "{w:?}"),
            Token::Quoted(q) => write!(f, "string {q:?}"),
            Token::Dot => f.write_str("\".\""),
            Token::Open => f.write_str("\"(\""),
            Token::Close => f.write_str("\")\""),
            Token::OpenBracket => f.write_str("\"[\""),
            Token::CloseBracket => f.write_str("\"]\""),
            Token::Equal => f.write_str("\"==\""),
            Token::NotEqual => f.write_str("\"!=\""),
        }
    }
}

fn lex(text: &str) -> Result<Vec<Token>, FilterError> {
    let mut out = Vec::new();
    let mut chars = text.char_indices().peekable();
    while let Some(&(at, c)) = chars.peek() {
        match c {
            c if c.is_whitespace() => {
                chars.next();
            }
            '(' | ')' | '[' | ']' | '.' => {
                chars.next();
                out.push(match c {
                    '(' => Token::Open,
                    ')' => Token::Close,
                    '[' => Token::OpenBracket,
                    ']' => Token::CloseBracket,
                    _ => Token::Dot,
                });
            }
            '=' | '!' => {
                chars.next();
                if chars.next().map(|(_, c)| c) != Some('=') {
                    return Err(FilterError(format!("expected \"{c}=\" at offset {at}")));
                }
                out.push(if c == '=' {
                    Token::Equal
                } else {
                    Token::NotEqual
                });
            }
            '"' => {
                chars.next();
                let mut s = String::new();
                loop {
                    match chars.next() {
                        None => {
                            return Err(FilterError(format!(
                                "unterminated string starting at offset {at}"
                            )));
                        }
                        Some((_, '"')) => break,
                        Some((_, '\\')) => match chars.next() {
                            Some((_, 'n')) => s.push('\n'),
                            Some((_, 't')) => s.push('\t'),
                            Some((_, other)) => s.push(other),
                            None => {
                                return Err(FilterError(format!(
                                    "unterminated string starting at offset {at}"
                                )));
                            }
                        },
                        Some((_, other)) => s.push(other),
                    }
                }
                out.push(Token::Quoted(s));
            }
            '`' => {
                chars.next();
                let mut s = String::new();
                loop {
                    match chars.next() {
                        None => {
                            return Err(FilterError(format!(
                                "unterminated string starting at offset {at}"
                            )));
                        }
                        Some((_, '`')) => break,
                        Some((_, other)) => s.push(other),
                    }
                }
                out.push(Token::Quoted(s));
            }
            c if is_word_char(c) => {
                let mut w = String::new();
                while let Some(&(_, c)) = chars.peek() {
                    if !is_word_char(c) {
                        break;
                    }
                    w.push(c);
                    chars.next();
                }
                out.push(Token::Word(w));
            }
            other => {
                return Err(FilterError(format!(
                    "unexpected character {other:?} at offset {at}"
                )));
            }
        }
    }
    Ok(out)
}

fn is_word_char(c: char) -> bool {
    c.is_alphanumeric() || matches!(c, '_' | '-' | '/' | ':' | '+')
}

struct Parser {
    tokens: Vec<Token>,
    at: usize,
}

impl Parser {
    fn peek(&self) -> Option<&Token> {
        self.tokens.get(self.at)
    }

    fn next(&mut self) -> Option<Token> {
        let tok = self.tokens.get(self.at).cloned();
        self.at += 1;
        tok
    }

    fn word_is(&self, offset: usize, word: &str) -> bool {
        matches!(self.tokens.get(self.at + offset), Some(Token::Word(w)) if w == word)
    }

    fn or(&mut self) -> Result<Expr, FilterError> {
        let mut left = self.and()?;
        while self.word_is(0, "or") {
            self.at += 1;
            left = Expr::Or(Box::new(left), Box::new(self.and()?));
        }
        Ok(left)
    }

    fn and(&mut self) -> Result<Expr, FilterError> {
        let mut left = self.not()?;
        while self.word_is(0, "and") {
            self.at += 1;
            left = Expr::And(Box::new(left), Box::new(self.not()?));
        }
        Ok(left)
    }

    fn not(&mut self) -> Result<Expr, FilterError> {
        if self.word_is(0, "not") {
            self.at += 1;
            return Ok(Expr::Not(Box::new(self.not()?)));
        }
        if self.peek() == Some(&Token::Open) {
            self.at += 1;
            let inner = self.or()?;
            return match self.next() {
                Some(Token::Close) => Ok(inner),
                Some(tok) => Err(FilterError(format!("expected \")\", found {tok}"))),
                None => Err(FilterError("expected \")\" at the end".to_string())),
            };
        }
        self.matching().map(Expr::Match)
    }

    /// `Selector op Value`, `Selector is [not] empty` or
    /// `Value [not] in Selector`.
    fn matching(&mut self) -> Result<Match, FilterError> {
        // `Value in Selector`: a value (quoted or bare) followed by `in`
        // or `not in`.
        let value_first = match (self.tokens.get(self.at), self.tokens.get(self.at + 1)) {
            (Some(Token::Quoted(_) | Token::Word(_)), Some(Token::Word(w))) => {
                w == "in" || (w == "not" && self.word_is(2, "in"))
            }
            _ => false,
        };
        if value_first {
            let value = self.value()?;
            let negated = self.word_is(0, "not");
            self.at += if negated { 2 } else { 1 };
            let selector = self.selector()?;
            return Ok(Match {
                selector,
                op: Op::In(value),
                negated,
            });
        }
        let selector = self.selector()?;
        match self.next() {
            Some(Token::Equal) => Ok(Match {
                selector,
                op: Op::Equal(self.value()?),
                negated: false,
            }),
            Some(Token::NotEqual) => Ok(Match {
                selector,
                op: Op::Equal(self.value()?),
                negated: true,
            }),
            Some(Token::Word(w)) => {
                let negated = w == "not";
                let op_word = if negated {
                    match self.next() {
                        Some(Token::Word(w)) => w,
                        other => return Err(expected_operator(other)),
                    }
                } else {
                    w
                };
                let op = match op_word.as_str() {
                    "contains" => Op::In(self.value()?),
                    "matches" => {
                        let pattern = self.value()?;
                        Op::Matches(Regex::new(&pattern).map_err(|e| {
                            FilterError(format!("invalid regular expression {pattern:?}: {e}"))
                        })?)
                    }
                    "is" if !negated => {
                        let not_empty = self.word_is(0, "not");
                        if not_empty {
                            self.at += 1;
                        }
                        match self.next() {
                            Some(Token::Word(w)) if w == "empty" => {}
                            other => {
                                return Err(FilterError(format!(
                                    "expected \"empty\" after \"is\", found {}",
                                    describe(other)
                                )));
                            }
                        }
                        return Ok(Match {
                            selector,
                            op: Op::Empty,
                            negated: not_empty,
                        });
                    }
                    _ => return Err(expected_operator(Some(Token::Word(op_word)))),
                };
                Ok(Match {
                    selector,
                    op,
                    negated,
                })
            }
            other => Err(expected_operator(other)),
        }
    }

    /// `A.B["c d"].E`, or a JSON pointer in quotes (`"/A/B"`).
    fn selector(&mut self) -> Result<Vec<String>, FilterError> {
        let mut path = match self.next() {
            Some(Token::Word(w)) if !w.starts_with('/') => vec![w],
            Some(Token::Quoted(q)) if q.starts_with('/') => {
                return Ok(q[1..]
                    .split('/')
                    .map(|part| part.replace("~1", "/").replace("~0", "~"))
                    .collect());
            }
            other => {
                return Err(FilterError(format!(
                    "expected a selector, found {}",
                    describe(other)
                )));
            }
        };
        loop {
            match self.peek() {
                Some(Token::Dot) => {
                    self.at += 1;
                    match self.next() {
                        Some(Token::Word(w)) => path.push(w),
                        other => {
                            return Err(FilterError(format!(
                                "expected a field name after \".\", found {}",
                                describe(other)
                            )));
                        }
                    }
                }
                Some(Token::OpenBracket) => {
                    self.at += 1;
                    let key = match self.next() {
                        Some(Token::Quoted(q)) => q,
                        other => {
                            return Err(FilterError(format!(
                                "expected a quoted key after \"[\", found {}",
                                describe(other)
                            )));
                        }
                    };
                    if self.next() != Some(Token::CloseBracket) {
                        return Err(FilterError(format!("expected \"]\" after {key:?}")));
                    }
                    path.push(key);
                }
                _ => return Ok(path),
            }
        }
    }

    /// A quoted string or a bare word (numbers, booleans, identifiers).
    fn value(&mut self) -> Result<String, FilterError> {
        match self.next() {
            Some(Token::Quoted(q)) => Ok(q),
            Some(Token::Word(w)) => {
                // A bare number may carry a decimal point: `1.5`.
                let mut w = w;
                while self.peek() == Some(&Token::Dot) {
                    match self.tokens.get(self.at + 1) {
                        Some(Token::Word(frac)) => {
                            w = format!("{w}.{frac}");
                            self.at += 2;
                        }
                        _ => break,
                    }
                }
                Ok(w)
            }
            other => Err(FilterError(format!(
                "expected a value, found {}",
                describe(other)
            ))),
        }
    }
}

fn describe(tok: Option<Token>) -> String {
    tok.map_or_else(|| "the end".to_string(), |t| t.to_string())
}

fn expected_operator(tok: Option<Token>) -> FilterError {
    FilterError(format!(
        "expected an operator (==, !=, in, not in, contains, not contains, matches, \
         not matches, is empty, is not empty), found {}",
        describe(tok)
    ))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn job() -> Value {
        json!({
            "ID": "web-api",
            "Type": "service",
            "Status": "running",
            "Priority": 50,
            "Stop": false,
            "Datacenters": ["dc1", "dc2"],
            "Meta": {"team": "payments", "tier name": "gold"},
            "Periodic": null,
        })
    }

    fn passes(expr: &str) -> bool {
        Filter::parse(expr)
            .unwrap_or_else(|e| panic!("{expr}: {e}"))
            .expect("a filter")
            .matches(&job())
    }

    #[test]
    fn equality_reads_the_value_in_the_fields_type() {
        assert!(passes(r#"Status == "running""#));
        assert!(!passes(r#"Status != "running""#));
        assert!(passes("Priority == 50"));
        assert!(!passes("Priority == 51"));
        assert!(passes("Stop == false"));
        assert!(passes("Stop != true"));
        assert!(passes("Type == service"));
    }

    #[test]
    fn in_and_contains_read_lists_strings_and_maps() {
        assert!(passes(r#""dc2" in Datacenters"#));
        assert!(!passes(r#""dc3" in Datacenters"#));
        assert!(passes(r#""dc3" not in Datacenters"#));
        assert!(passes(r#"Datacenters contains "dc1""#));
        assert!(passes(r#"Datacenters not contains "dc9""#));
        assert!(passes(r#""api" in ID"#));
        assert!(passes(r#""team" in Meta"#));
    }

    #[test]
    fn selectors_reach_into_maps_by_dot_bracket_and_pointer() {
        assert!(passes(r#"Meta.team == "payments""#));
        assert!(passes(r#"Meta["tier name"] == "gold""#));
        assert!(passes(r#""/Meta/team" == "payments""#));
        // A key that is not there matches no positive operator.
        assert!(!passes(r#"Meta.owner == "x""#));
        assert!(passes(r#"Meta.owner != "x""#));
        assert!(passes("Meta.owner is empty"));
    }

    #[test]
    fn emptiness_matching_and_logic() {
        assert!(passes("Periodic is empty"));
        assert!(passes("Datacenters is not empty"));
        assert!(passes(r#"ID matches "^web-""#));
        assert!(passes(r#"ID not matches "^db-""#));
        assert!(passes(
            r#"Status == "running" and (Type == "batch" or Priority == 50)"#
        ));
        assert!(!passes(r#"not (Status == "running")"#));
        assert!(passes(r#"Status == "dead" or "dc1" in Datacenters"#));
    }

    #[test]
    fn bad_expressions_say_what_is_wrong() {
        for (expr, says) in [
            ("Status = running", "expected \"==\""),
            ("Status", "expected an operator"),
            ("Status == ", "expected a value"),
            (r#"(Status == "x""#, "expected \")\""),
            (r#"Status == "x"#, "unterminated string"),
            (r#"ID matches "(""#, "invalid regular expression"),
            ("Status is full", "expected \"empty\""),
            (r#"Status == "a" "b""#, "unexpected"),
        ] {
            let err = Filter::parse(expr).expect_err(expr);
            assert!(err.0.contains(says), "{expr}: {err}");
        }
        assert!(Filter::parse("  ").expect("empty").is_none());
    }
}
