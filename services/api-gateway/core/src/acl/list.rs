//! Lists over several namespaces keep to what the caller may read: the
//! gRPC guard hands a list method's handler a [`ListScope`] (with ACLs on
//! and a token that is not management), and the handler keeps the items
//! [`Need::shows`] allows. The HTTP guard filters its JSON lists with the
//! same check.

use std::sync::Arc;

use super::check::Acl;
use super::need::Need;

/// What a list answer may show its caller.
#[derive(Debug, Clone)]
pub struct ListScope {
    /// The caller's ACL.
    pub acl: Arc<Acl>,
    /// What the list method needs; its capability decides each item.
    pub need: Need,
}

impl ListScope {
    /// Keeps the `items` this scope shows, each placed by `place` as its
    /// namespace and (for variables) its path. Without a scope (ACLs off,
    /// or a management token) every item stays.
    pub fn keep<T>(
        scope: Option<&ListScope>,
        items: &mut Vec<T>,
        place: impl Fn(&T) -> (&str, &str),
    ) {
        let Some(scope) = scope else {
            return;
        };
        items.retain(|item| {
            let (ns, path) = place(item);
            scope.need.shows(&scope.acl, ns, path)
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::acl::policy::parse;

    #[test]
    fn only_items_in_readable_namespaces_stay() {
        let policy = parse(r#"namespace "a" { policy = "read" }"#).unwrap();
        let scope = ListScope {
            acl: Arc::new(Acl::compile([&policy])),
            need: Need::Ns("list-jobs"),
        };
        let mut items = vec![("a", "x"), ("b", "y"), ("a", "z")];
        ListScope::keep(Some(&scope), &mut items, |(ns, _)| (ns, ""));
        assert_eq!(items, vec![("a", "x"), ("a", "z")]);
        let mut all = vec![("b", "y")];
        ListScope::keep(None, &mut all, |(ns, _)| (ns, ""));
        assert_eq!(all.len(), 1);
    }
}
