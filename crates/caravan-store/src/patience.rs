//! How long one etcd member may take to answer, set by the caller for the
//! requests it makes within a scope.
//!
//! The store gives every member its whole request timeout before it moves a
//! request on to the next one, which suits bulk writes. Leadership cannot
//! wait that long: a member that holds its connections and says nothing (a
//! frozen process) would keep a lease unrenewed, or a candidate stuck, for
//! several TTLs. Within [`with_member_timeout`], a member that does not
//! answer in time counts as failed: the request goes on to the next member,
//! and so do the requests after it.

use std::future::Future;
use std::time::Duration;

tokio::task_local! {
    static MEMBER_TIMEOUT: Duration;
}

/// Runs `work` with each store request in it giving one etcd member at most
/// `timeout` (never more than the store's own request timeout) before moving
/// on to the next member, doubled after each round of all of them. A store
/// of one member gives it its whole request timeout, there being no other
/// to move on to; the embedded store answers at once and ignores it.
pub async fn with_member_timeout<F: Future>(timeout: Duration, work: F) -> F::Output {
    MEMBER_TIMEOUT.scope(timeout, work).await
}

/// The member timeout of the current scope, if one was set.
pub(crate) fn member_timeout() -> Option<Duration> {
    MEMBER_TIMEOUT.try_with(|timeout| *timeout).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_timeout_holds_inside_its_scope_only() {
        assert_eq!(member_timeout(), None);
        let inside = with_member_timeout(Duration::from_millis(300), async {
            tokio::task::yield_now().await;
            member_timeout()
        })
        .await;
        assert_eq!(inside, Some(Duration::from_millis(300)));
        assert_eq!(member_timeout(), None);
    }
}
