//! Paged lists, as Nomad's list endpoints page them: `per_page`,
//! `next_token` (the token of the first item of the next page, answered in
//! `X-Nomad-NextToken`), `reverse`, and `filter` (see [`super::filter`]).
//!
//! A list is ordered by its tokens — `namespace.id` for jobs and
//! variables, the id for nodes, and the create index then the id for
//! allocations, evaluations and deployments (the id when `prefix` is set)
//! — and a page starts at the first item whose token is not before
//! `next_token` (not after it, in reverse). Only the items of the page are
//! rendered, unless a filter has to read the others.

use std::cmp::Ordering;

use axum::http::HeaderValue;
use axum::response::Response;
use caravan_proto::QueryMeta;
use serde_json::Value;

use crate::filter::Filter;
use crate::{ApiError, Params, flag, read_answer};

/// How a list's items are tokenized and ordered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Tokens {
    /// `<id>`.
    Id,
    /// `<namespace>.<id>`.
    NamespaceId,
    /// `<create index>.<id>`, compared as a number then a string.
    CreateIndexId,
}

/// What identifies one listed item to the paginator.
pub(crate) struct Key<'a> {
    pub(crate) namespace: &'a str,
    pub(crate) id: &'a str,
    pub(crate) create_index: u64,
}

impl Tokens {
    /// The list endpoints of allocations, evaluations and deployments
    /// order by id when a prefix is given, else by creation.
    pub(crate) fn by_creation_unless_prefix(params: &Params) -> Tokens {
        if params.get("prefix").is_some_and(|p| !p.is_empty()) {
            Tokens::Id
        } else {
            Tokens::CreateIndexId
        }
    }

    fn token(self, key: &Key<'_>) -> String {
        match self {
            Tokens::Id => key.id.to_string(),
            Tokens::NamespaceId => format!("{}.{}", key.namespace, key.id),
            Tokens::CreateIndexId => format!("{}.{}", key.create_index, key.id),
        }
    }

    fn order(self, a: &Key<'_>, b: &Key<'_>) -> Ordering {
        match self {
            Tokens::Id => a.id.cmp(b.id),
            Tokens::NamespaceId => (a.namespace, a.id).cmp(&(b.namespace, b.id)),
            Tokens::CreateIndexId => (a.create_index, a.id).cmp(&(b.create_index, b.id)),
        }
    }

    /// How `key` compares with the `target` token a client sent back.
    fn compare(self, key: &Key<'_>, target: &str) -> Ordering {
        if self == Tokens::CreateIndexId
            && let Some((index, id)) = target.split_once('.')
            && let Ok(index) = index.parse::<u64>()
        {
            return (key.create_index, key.id).cmp(&(index, id));
        }
        self.token(key).as_str().cmp(target)
    }
}

/// The paging options of a list request.
pub(crate) struct PageOptions {
    per_page: Option<usize>,
    next_token: Option<String>,
    reverse: bool,
    filter: Option<Filter>,
}

impl PageOptions {
    /// Reads `per_page`, `next_token`, `reverse` and `filter`; each
    /// refusal names its parameter.
    pub(crate) fn read(params: &Params) -> Result<PageOptions, ApiError> {
        let per_page = match params.get("per_page").map(String::as_str) {
            None | Some("") => None,
            Some(text) => match text.parse::<i64>() {
                Ok(n) if n > 0 => Some(usize::try_from(n).unwrap_or(usize::MAX)),
                Ok(0) => None,
                _ => {
                    return Err(ApiError::field(
                        "per_page",
                        format!("invalid per_page {text:?}: expected a positive integer"),
                    ));
                }
            },
        };
        let filter =
            Filter::parse(params.get("filter").map_or("", String::as_str)).map_err(|err| {
                ApiError::field("filter", format!("failed to read filter expression: {err}"))
            })?;
        Ok(PageOptions {
            per_page,
            next_token: params.get("next_token").filter(|t| !t.is_empty()).cloned(),
            reverse: flag(params, "reverse")?,
            filter,
        })
    }

    /// Whether the list is read as it always was: every item, in the
    /// order its endpoint keeps.
    fn is_plain(&self) -> bool {
        self.per_page.is_none()
            && self.next_token.is_none()
            && !self.reverse
            && self.filter.is_none()
    }
}

/// One page of a list.
pub(crate) struct Page {
    /// The page's items, rendered.
    pub(crate) items: Vec<Value>,
    /// The token of the next page's first item, when there is one.
    pub(crate) next_token: Option<String>,
}

/// A list answer: the page's items with Nomad's query headers and
/// `X-Nomad-NextToken`.
pub(crate) fn answer(meta: &QueryMeta, page: Page) -> Response {
    let next_token = page.next_token;
    let mut response = read_answer(meta, Value::Array(page.items));
    if let Some(token) = next_token
        && let Ok(value) = HeaderValue::from_str(&token)
    {
        response.headers_mut().insert("X-Nomad-NextToken", value);
    }
    response
}

/// The page of `items` that `options` ask for, each rendered by `render`.
pub(crate) fn page<T>(
    mut items: Vec<T>,
    options: &PageOptions,
    tokens: Tokens,
    key: impl Fn(&T) -> Key<'_>,
    render: impl Fn(&T) -> Value,
) -> Page {
    if options.is_plain() {
        return Page {
            items: items.iter().map(render).collect(),
            next_token: None,
        };
    }
    items.sort_by(|a, b| tokens.order(&key(a), &key(b)));
    if options.reverse {
        items.reverse();
    }
    let before_target = |item: &T| match &options.next_token {
        None => false,
        Some(target) => {
            let ord = tokens.compare(&key(item), target);
            if options.reverse {
                ord == Ordering::Greater
            } else {
                ord == Ordering::Less
            }
        }
    };
    let limit = options.per_page.unwrap_or(usize::MAX);
    let mut out = Vec::new();
    let mut next_token = None;
    for item in items.iter().skip_while(|item| before_target(item)) {
        let rendered = match &options.filter {
            Some(filter) => {
                let value = render(item);
                if !filter.matches(&value) {
                    continue;
                }
                Some(value)
            }
            None => None,
        };
        if out.len() == limit {
            next_token = Some(tokens.token(&key(item)));
            break;
        }
        out.push(rendered.unwrap_or_else(|| render(item)));
    }
    Page {
        items: out,
        next_token,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    struct Item {
        ns: &'static str,
        id: &'static str,
        index: u64,
    }

    fn items() -> Vec<Item> {
        vec![
            Item {
                ns: "default",
                id: "c",
                index: 12,
            },
            Item {
                ns: "default",
                id: "a",
                index: 102,
            },
            Item {
                ns: "prod",
                id: "b",
                index: 5,
            },
            Item {
                ns: "default",
                id: "d",
                index: 7,
            },
        ]
    }

    fn key(item: &Item) -> Key<'_> {
        Key {
            namespace: item.ns,
            id: item.id,
            create_index: item.index,
        }
    }

    fn options(pairs: &[(&str, &str)]) -> PageOptions {
        let params: Params = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        PageOptions::read(&params).unwrap_or_else(|_| panic!("{pairs:?} reads"))
    }

    fn ids(page: &Page) -> Vec<&str> {
        page.items
            .iter()
            .map(|v| v["ID"].as_str().unwrap_or(""))
            .collect()
    }

    fn run(pairs: &[(&str, &str)], tokens: Tokens) -> Page {
        page(
            items(),
            &options(pairs),
            tokens,
            key,
            |i| json!({"ID": i.id, "Namespace": i.ns}),
        )
    }

    #[test]
    fn pages_follow_the_token_order_and_chain_by_next_token() {
        let first = run(&[("per_page", "2")], Tokens::CreateIndexId);
        assert_eq!(ids(&first), ["b", "d"]);
        // Create indexes compare as numbers: 12 before 102.
        assert_eq!(first.next_token.as_deref(), Some("12.c"));
        let second = run(
            &[("per_page", "2"), ("next_token", "12.c")],
            Tokens::CreateIndexId,
        );
        assert_eq!(ids(&second), ["c", "a"]);
        assert_eq!(second.next_token, None);

        let by_ns = run(&[("per_page", "3")], Tokens::NamespaceId);
        assert_eq!(ids(&by_ns), ["a", "c", "d"]);
        assert_eq!(by_ns.next_token.as_deref(), Some("prod.b"));
    }

    #[test]
    fn reverse_walks_backwards_from_the_token() {
        let first = run(&[("per_page", "1"), ("reverse", "true")], Tokens::Id);
        assert_eq!(ids(&first), ["d"]);
        assert_eq!(first.next_token.as_deref(), Some("c"));
        let rest = run(&[("reverse", "true"), ("next_token", "c")], Tokens::Id);
        assert_eq!(ids(&rest), ["c", "b", "a"]);
    }

    #[test]
    fn the_filter_applies_before_the_page_is_cut() {
        let page = run(
            &[("per_page", "1"), ("filter", r#"Namespace == "default""#)],
            Tokens::Id,
        );
        assert_eq!(ids(&page), ["a"]);
        assert_eq!(page.next_token.as_deref(), Some("c"));
    }

    #[test]
    fn without_paging_options_the_list_keeps_its_order() {
        let page = run(&[], Tokens::Id);
        assert_eq!(ids(&page), ["c", "a", "b", "d"]);
    }

    #[test]
    fn bad_options_name_their_parameter() {
        for (name, value) in [
            ("per_page", "-1"),
            ("per_page", "x"),
            ("filter", "Status ="),
            ("reverse", "maybe"),
        ] {
            let params: Params = [(name.to_string(), value.to_string())]
                .into_iter()
                .collect();
            let err = PageOptions::read(&params)
                .err()
                .unwrap_or_else(|| panic!("{name}={value}"));
            assert!(format!("{:?}", err.0).contains(name), "{name}: {:?}", err.0);
        }
    }
}
