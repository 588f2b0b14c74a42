//! Waiting for something that should happen soon: poll a condition until it
//! holds, and fail the test with the name of what never happened.

use std::future::Future;
use std::time::Duration;

/// How long a test waits for something that should happen promptly, on a
/// busy two-core machine.
pub const PATIENCE: Duration = Duration::from_secs(15);

/// How often a condition in this process is polled.
const POLL: Duration = Duration::from_millis(20);

/// How often [`wait_for`] looks at a cluster of processes.
const CLUSTER_POLL: Duration = Duration::from_millis(100);

/// What one look at a cluster found.
#[derive(Debug)]
pub enum Progress<T> {
    /// The awaited state, with what the caller wants from it.
    Done(T),
    /// Not yet; what was seen instead (reported if the deadline passes).
    Waiting(String),
}

/// Calls `probe` until it reports [`Progress::Done`] or `timeout` passes.
/// Errors from `probe` count as "not yet" (a service may be restarting);
/// the last observation or error is in the timeout's message.
///
/// # Errors
///
/// Fails naming `what` and the last observation when `timeout` passes.
pub async fn wait_for<T>(
    what: &str,
    timeout: Duration,
    mut probe: impl AsyncFnMut() -> anyhow::Result<Progress<T>>,
) -> anyhow::Result<T> {
    let start = tokio::time::Instant::now();
    loop {
        let last = match probe().await {
            Ok(Progress::Done(value)) => return Ok(value),
            Ok(Progress::Waiting(seen)) => seen,
            Err(err) => format!("error: {err:#}"),
        };
        if start.elapsed() >= timeout {
            anyhow::bail!("timed out after {timeout:?} waiting for {what}; last seen: {last}");
        }
        tokio::time::sleep(CLUSTER_POLL).await;
    }
}

/// Polls `probe` until it answers `Some`, and returns that answer.
///
/// # Panics
///
/// Panics naming `what` when `within` passes without an answer.
pub async fn eventually_some<T, F, Fut>(what: &str, within: Duration, mut probe: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + within;
    loop {
        if let Some(answer) = probe().await {
            return answer;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out after {within:?} waiting for {what}"
        );
        tokio::time::sleep(POLL).await;
    }
}

/// Polls `check` until it holds.
///
/// # Panics
///
/// Panics naming `what` when `within` passes first.
pub async fn eventually<F, Fut>(what: &str, within: Duration, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    eventually_some(what, within, || {
        let held = check();
        async move { held.await.then_some(()) }
    })
    .await;
}

/// Polls `cond`, a condition read without awaiting (shared state behind a
/// lock, a process table), until it holds.
///
/// # Panics
///
/// Panics naming `what` when `within` passes first.
pub async fn until(what: &str, within: Duration, mut cond: impl FnMut() -> bool) {
    eventually(what, within, || std::future::ready(cond())).await;
}

/// Polls `check` until it holds or `within` passes; tells which. For tests
/// that report the failure themselves or expect the condition never to hold.
pub async fn holds_within<F, Fut>(within: Duration, mut check: F) -> bool
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + within;
    loop {
        if check().await {
            return true;
        }
        if tokio::time::Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(POLL).await;
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use std::sync::atomic::{AtomicU32, Ordering};

    use super::*;

    #[tokio::test]
    async fn eventually_some_returns_the_first_answer() {
        let calls = AtomicU32::new(0);
        let answer = eventually_some("the third call", PATIENCE, || {
            let n = calls.fetch_add(1, Ordering::Relaxed) + 1;
            async move { (n == 3).then_some(n) }
        })
        .await;
        assert_eq!(answer, 3);
    }

    #[tokio::test]
    #[should_panic(expected = "waiting for a thing that never happens")]
    async fn eventually_names_what_never_happened() {
        eventually(
            "a thing that never happens",
            Duration::from_millis(50),
            || async { false },
        )
        .await;
    }

    #[tokio::test]
    async fn holds_within_tells_false_after_the_time() {
        let start = tokio::time::Instant::now();
        assert!(!holds_within(Duration::from_millis(60), || async { false }).await);
        assert!(start.elapsed() >= Duration::from_millis(60));
        assert!(holds_within(Duration::from_millis(60), || async { true }).await);
    }

    #[tokio::test]
    async fn wait_for_reports_the_last_observation() {
        let mut looks = 0;
        let err = wait_for("a quorum", Duration::from_millis(250), async || {
            looks += 1;
            if looks % 2 == 0 {
                anyhow::bail!("connection refused")
            }
            Ok(Progress::<()>::Waiting(format!("{looks} members")))
        })
        .await
        .unwrap_err()
        .to_string();
        assert!(err.contains("waiting for a quorum; last seen:"), "{err}");
        assert!(looks >= 2, "looked {looks} times");
        let done = wait_for("the answer", PATIENCE, async || Ok(Progress::Done(42))).await;
        assert_eq!(done.unwrap(), 42);
    }

    #[tokio::test]
    async fn until_polls_a_plain_condition() {
        let calls = AtomicU32::new(0);
        until("two calls", PATIENCE, || {
            calls.fetch_add(1, Ordering::Relaxed) >= 1
        })
        .await;
        assert_eq!(calls.load(Ordering::Relaxed), 2);
    }
}
