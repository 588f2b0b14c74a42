//! The store's health as the gateway reports it: whether etcd answers and
//! which alarms it has raised. A full etcd (its NOSPACE alarm) refuses every
//! write that adds data until an operator compacts, defragments and
//! disarms it; the gateway says so on `/v1/agent/health`, in the
//! `caravan_etcd_alarms` gauge and in one warning when the alarm is first
//! seen, rather than in a log line per refused request.

use std::collections::BTreeSet;
use std::sync::{Arc, LazyLock};
use std::time::{Duration, Instant};

use caravan_metrics::IntGaugeVec;
use caravan_store::{Store, StoreAlarm};
use parking_lot::Mutex;
use tokio_util::sync::CancellationToken;

/// How often the watch asks etcd for its alarms.
const ALARM_POLL: Duration = Duration::from_secs(2);
/// How long `/v1/agent/health` waits for etcd's alarm list when the watch
/// has none to offer.
const ALARM_TIMEOUT: Duration = Duration::from_secs(2);
/// How old the watch's last list may be for the health check to answer
/// from it: a few polls.
const READING_FRESH: Duration = Duration::from_secs(3 * ALARM_POLL.as_secs());

/// The alarm list the watch read last, shared with the health check so a
/// probe of `/v1/agent/health` costs etcd nothing.
#[derive(Debug, Default)]
pub struct Alarms(Mutex<Option<(Instant, Vec<StoreAlarm>)>>);

impl Alarms {
    fn record(&self, alarms: Vec<StoreAlarm>) {
        *self.0.lock() = Some((Instant::now(), alarms));
    }

    /// The last list, if it was read within `fresh`.
    fn recent(&self, fresh: Duration) -> Option<Vec<StoreAlarm>> {
        match &*self.0.lock() {
            Some((at, alarms)) if at.elapsed() <= fresh => Some(alarms.clone()),
            _ => None,
        }
    }
}

static ALARMS: LazyLock<IntGaugeVec> = LazyLock::new(|| {
    caravan_metrics::gauge_vec(
        "caravan_etcd_alarms",
        "etcd alarms active (raised and not disarmed), by kind: members reporting NOSPACE or CORRUPT.",
        &["alarm"],
    )
});

/// Registers the gauge in the process registry (at 0 for NOSPACE, so a
/// scrape shows it before any alarm).
pub fn register() {
    ALARMS.with_label_values(&["NOSPACE"]).set(0);
}

/// What an operator does about `alarm`.
fn remedy(alarm: &StoreAlarm) -> &'static str {
    match alarm.kind.as_str() {
        "NOSPACE" => {
            "etcd is at its backend quota and refuses writes: compact its history, \
             defragment and disarm the alarm (etcdctl compact <revision>; etcdctl defrag; \
             etcdctl alarm disarm)"
        }
        "CORRUPT" => "a member's data is corrupt: restore it from a healthy member",
        _ => "see etcd's documentation for this alarm",
    }
}

/// `alarms` as one message: each alarm, where, and what to do.
pub fn describe(alarms: &[StoreAlarm]) -> String {
    alarms
        .iter()
        .map(|a| format!("etcd alarm {a}: {}", remedy(a)))
        .collect::<Vec<_>>()
        .join("; ")
}

/// Whether the store has raised an alarm: `Ok` or which and what to do.
/// From `alarms` when the watch read none lately, else from `store`: an
/// alarm the reading holds is confirmed, so a disarm shows at once, not
/// at the watch's next reading.
pub async fn check_alarms(alarms: &Alarms, store: &dyn Store) -> Result<(), String> {
    if alarms.recent(READING_FRESH).is_some_and(|a| a.is_empty()) {
        return Ok(());
    }
    match tokio::time::timeout(ALARM_TIMEOUT, store.alarms()).await {
        Ok(Ok(alarms)) if alarms.is_empty() => Ok(()),
        Ok(Ok(alarms)) => Err(describe(&alarms)),
        Ok(Err(err)) => Err(format!("the store's alarms could not be read: {err}")),
        Err(_) => Err(format!(
            "the store did not list its alarms within {ALARM_TIMEOUT:?}"
        )),
    }
}

/// Follows the store's alarms until `shutdown`: the gauge, the list the
/// health check answers from (`reading`), and one warning when an alarm is
/// first seen (one notice when it is disarmed).
pub fn watch(store: Arc<dyn Store>, reading: Arc<Alarms>, shutdown: CancellationToken) {
    tokio::spawn(async move {
        let mut active: BTreeSet<(String, u64)> = BTreeSet::new();
        let mut kinds: BTreeSet<String> = BTreeSet::from(["NOSPACE".to_string()]);
        loop {
            match store.alarms().await {
                Ok(alarms) => {
                    let now: BTreeSet<(String, u64)> = alarms
                        .iter()
                        .map(|a| (a.kind.clone(), a.member_id))
                        .collect();
                    for a in alarms
                        .iter()
                        .filter(|a| !active.contains(&(a.kind.clone(), a.member_id)))
                    {
                        tracing::warn!(alarm = %a.kind, member = %format!("{:x}", a.member_id), "{}", describe(std::slice::from_ref(a)));
                    }
                    for (kind, member) in active.difference(&now) {
                        tracing::info!(alarm = %kind, member = %format!("{member:x}"), "etcd alarm disarmed");
                    }
                    kinds.extend(now.iter().map(|(k, _)| k.clone()));
                    for kind in &kinds {
                        let n = now.iter().filter(|(k, _)| k == kind).count();
                        ALARMS
                            .with_label_values(&[kind])
                            .set(i64::try_from(n).unwrap_or(i64::MAX));
                    }
                    active = now;
                    reading.record(alarms);
                }
                // An unreachable store is reported by the cache and the
                // health check; the gauge keeps its last reading.
                Err(err) => tracing::debug!(%err, "listing etcd's alarms"),
            }
            tokio::select! {
                () = shutdown.cancelled() => return,
                () = tokio::time::sleep(ALARM_POLL) => {}
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_health_check_answers_from_a_fresh_reading_only() {
        let alarms = Alarms::default();
        assert_eq!(alarms.recent(READING_FRESH), None, "nothing read yet");
        let nospace = StoreAlarm {
            member_id: 1,
            kind: "NOSPACE".into(),
        };
        alarms.record(vec![nospace.clone()]);
        assert_eq!(alarms.recent(READING_FRESH), Some(vec![nospace]));
        std::thread::sleep(Duration::from_millis(20));
        assert_eq!(alarms.recent(Duration::from_millis(10)), None, "stale");
    }

    #[test]
    fn a_nospace_alarm_names_the_member_and_the_remedy() {
        let text = describe(&[StoreAlarm {
            member_id: 0xabc,
            kind: "NOSPACE".into(),
        }]);
        for word in ["NOSPACE on member abc", "compact", "defrag", "alarm disarm"] {
            assert!(text.contains(word), "{word} missing from {text}");
        }
    }
}
