//! The lease renewal loop's timing, on tokio's paused clock.

use std::sync::atomic::AtomicUsize;

use super::*;

const TTL: Duration = Duration::from_secs(3);

/// Runs the renewal loop for `run` of paused time, the renewals answering
/// after `delays` in turn (later ones at once); returns why leadership was
/// lost, if it was, and how many renewals were sent.
async fn renewing(delays: Vec<Duration>, run: Duration) -> (Option<String>, usize) {
    let delays = Arc::new(Mutex::new(delays.into_iter()));
    let sent = Arc::new(AtomicUsize::new(0));
    let renew = {
        let (delays, sent) = (delays.clone(), sent.clone());
        move || {
            let delay = delays.lock().next().unwrap_or_default();
            sent.fetch_add(1, Ordering::Relaxed);
            async move {
                tokio::time::sleep(delay).await;
                Ok(TTL.as_secs() as i64)
            }
        }
    };
    let (loss, stop) = (LossSignal::default(), CancellationToken::new());
    let task = tokio::spawn(renew_until_lost(
        renew,
        0x1,
        TTL,
        loss.clone(),
        stop.clone(),
    ));
    tokio::time::sleep(run).await;
    stop.cancel();
    task.await.unwrap();
    let lost = loss.token.is_cancelled().then(|| loss.reason());
    (lost, sent.load(Ordering::Relaxed))
}

/// A renewal answered after 0.9 s renewed the lease (it was sent 0.375 s
/// into the 1.5 s window): the next one goes out at once and the term goes
/// on. Renewals spaced a quarter TTL from their answers lost this term.
#[tokio::test(start_paused = true)]
async fn a_renewal_slower_than_the_pause_between_renewals_keeps_the_term() {
    let (lost, sent) = renewing(vec![Duration::from_millis(900)], Duration::from_secs(10)).await;
    assert_eq!(lost, None);
    assert!(
        sent >= 24,
        "renewals went on every eighth of the TTL: {sent}"
    );
}

/// A renewal still unanswered half a TTL after the last one that was
/// answered ends the term, and the reason says so.
#[tokio::test(start_paused = true)]
async fn a_renewal_unanswered_for_half_the_ttl_ends_the_term() {
    let delays = vec![Duration::from_millis(200), Duration::from_secs(2)];
    let (lost, sent) = renewing(delays, Duration::from_secs(10)).await;
    let lost = lost.expect("the term ends");
    assert!(lost.contains("unrenewed for half its TTL"), "{lost}");
    assert!(lost.contains("unanswered"), "{lost}");
    assert_eq!(sent, 2, "no renewal after the loss");
}
