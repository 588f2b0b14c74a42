//! The garbage collector of one leadership term: a sweep every
//! `gc.interval_ms`, and one on demand (`ForceGc`), plus a sweep of service
//! registrations alone every `gc.registrations_interval_ms`. A sweep picks
//! its garbage from the watch cache ([`super::select`]) and deletes it in
//! fenced transactions, each delete compared on the mod revision it was
//! judged at, so anything that changed since (an eval rewritten, a job
//! registered again) stays until a later sweep judges it anew.

use std::sync::Arc;

use caravan_state::{Keyspace, status_guard};
use caravan_store::{Compare, CompareOp, Op, Range};
use tokio::time::{Instant, MissedTickBehavior, interval_at};

use crate::error::BrokerError;
use crate::gc::{Doomed, GcCounts, GcCutoffs, GcUnit, registrations, select, status_batches};
use crate::term::{LeaderTerm, now};
use crate::writes::GuardedUnit;

/// Sweeps every `gc.interval_ms`, and registrations alone every
/// `gc.registrations_interval_ms`, until the term stops; an error means
/// leadership was lost.
pub async fn run(term: Arc<LeaderTerm>) -> Result<(), BrokerError> {
    let every = |period| {
        let mut ticks = interval_at(Instant::now() + period, period);
        ticks.set_missed_tick_behavior(MissedTickBehavior::Delay);
        ticks
    };
    let mut full = every(term.config.gc.interval());
    let mut quick = every(term.config.gc.registrations_interval());
    loop {
        let outcome = tokio::select! {
            _ = term.stop.cancelled() => return Ok(()),
            _ = full.tick() => sweep(&term, GcCutoffs::at(now().unix_ns, &term.config.gc)).await,
            _ = quick.tick() => sweep_registrations(&term).await.map(|registrations| GcCounts {
                registrations,
                ..GcCounts::default()
            }),
        };
        match outcome {
            Ok(counts) if counts.is_empty() => {
                tracing::debug!("garbage collection: nothing to collect")
            }
            Ok(counts) => tracing::info!(?counts, "garbage collected"),
            Err(err) if err.is_deposed() => return Err(err),
            Err(err) => {
                tracing::warn!(error = %err, "garbage collection failed; trying at the next sweep")
            }
        }
    }
}

/// Runs one sweep with `cut`; returns what it deleted. Sweeps of one term
/// take turns.
pub async fn sweep(term: &LeaderTerm, cut: GcCutoffs) -> Result<GcCounts, BrokerError> {
    let _turn = term.gc_turn.lock().await;
    let result = async {
        let revision = term.writer.current_revision().await?;
        term.informer
            .wait_for_revision(revision, registrations::CATCH_UP)
            .await?;
        let units = select(&term.informer.snapshot(), cut, now().unix_ns);
        let mut counts = delete(term, &units).await?;
        counts.registrations = registrations::collect(term).await?;
        counts.status_batches = status_batches::free(term).await?;
        Ok(counts)
    }
    .await;
    fence(term, result)
}

/// Sweeps the service registrations alone; returns how many it deleted.
pub async fn sweep_registrations(term: &LeaderTerm) -> Result<u64, BrokerError> {
    let _turn = term.gc_turn.lock().await;
    let result = registrations::collect(term).await;
    fence(term, result)
}

/// Ends the term when a sweep found it deposed.
fn fence<T>(term: &LeaderTerm, result: Result<T, BrokerError>) -> Result<T, BrokerError> {
    if let Err(err) = &result
        && err.is_deposed()
    {
        term.stop.cancel();
    }
    result
}

/// Deletes the units: independent ones first, batched, then those that
/// wait for others, when all of those went.
async fn delete(term: &LeaderTerm, units: &[GcUnit]) -> Result<GcCounts, BrokerError> {
    let writer = &term.writer;
    let limit = writer.unit_limit();
    let mut done = vec![false; units.len()];
    let mut counts = GcCounts::default();
    for phase in [false, true] {
        let mut small: Vec<(usize, GuardedUnit)> = Vec::new();
        for (i, unit) in units.iter().enumerate() {
            if unit.after.is_empty() == phase {
                continue;
            }
            if unit
                .after
                .iter()
                .any(|dep| !done.get(*dep).copied().unwrap_or(false))
            {
                continue;
            }
            let mut pieces = pieces(writer.keyspace(), unit, limit);
            if pieces.len() == 1 {
                small.extend(pieces.pop().map(|p| (i, p)));
                continue;
            }
            // Too big for one transaction: piece by piece, what belonged to
            // the job first, the job itself last, stopping at a piece that
            // found something changed.
            let mut all = true;
            for piece in &pieces {
                let (ok, _) = writer.write_units(std::slice::from_ref(piece)).await?;
                if !ok.first().copied().unwrap_or(false) {
                    all = false;
                    break;
                }
            }
            if all {
                done[i] = true;
                counts.add(unit);
            }
        }
        let guarded: Vec<GuardedUnit> = small.iter().map(|(_, g)| g.clone()).collect();
        let (ok, _) = writer.write_units(&guarded).await?;
        for ((i, _), committed) in small.iter().zip(ok) {
            if committed {
                done[*i] = true;
                counts.add(&units[*i]);
            }
        }
    }
    Ok(counts)
}

/// The guarded deletes of one unit, in pieces of at most `limit` slots.
fn pieces(ks: &Keyspace, unit: &GcUnit, limit: usize) -> Vec<GuardedUnit> {
    let mut out = Vec::new();
    let mut piece = GuardedUnit::default();
    for object in &unit.objects {
        let next = deletes(ks, object);
        if !piece.is_empty() && piece.size() + next.size() > limit {
            out.push(std::mem::take(&mut piece));
        }
        piece.guards.extend(next.guards);
        piece.ops.extend(next.ops);
    }
    if !piece.is_empty() {
        out.push(piece);
    }
    out
}

fn deletes(ks: &Keyspace, object: &Doomed) -> GuardedUnit {
    let mut unit = GuardedUnit::default();
    let mut guarded_delete = |key: Vec<u8>, revision| {
        unit.push(
            Compare::mod_revision(key.clone(), CompareOp::Equal, revision),
            Op::delete(key),
        );
    };
    match object {
        Doomed::Eval(e) => guarded_delete(ks.eval(&e.id), e.modify_revision),
        Doomed::Alloc(a) => {
            // Its record and its client's status go together, each as read.
            guarded_delete(ks.alloc(&a.id), a.modify_revision);
            unit.push(status_guard(ks, a), Op::delete(ks.alloc_status(&a.id)));
        }
        Doomed::Deployment(d) => guarded_delete(ks.deployment(&d.id), d.modify_revision),
        Doomed::OrphanStatus(id, revision) => guarded_delete(ks.alloc_status(id), *revision),
        Doomed::Node(n) => {
            guarded_delete(ks.node(&n.id), n.modify_revision);
            unit.guards.push(Compare::absent(ks.heartbeat(&n.id)));
        }
        Doomed::Job(j) => {
            guarded_delete(ks.job(&j.namespace, &j.id), j.modify_revision);
            // Versions change only with the job key (stability marks
            // aside), so the job's guard covers them.
            unit.ops.push(Op::Delete(Range::prefix(
                ks.job_versions_of(&j.namespace, &j.id),
            )));
            unit.ops.push(Op::delete(ks.job_plan(&j.namespace, &j.id)));
            // Its allocations went in the pieces before (the job goes last),
            // and with them whatever its status batches held.
            unit.ops.push(Op::Delete(Range::prefix(
                ks.job_status_of(&j.namespace, &j.id),
            )));
        }
    }
    unit
}

#[cfg(test)]
mod tests {
    use caravan_proto::{EvalStatus, JobType};

    use super::*;
    use crate::testing::{eval, job};

    fn unit(evals: usize, with_job: bool) -> GcUnit {
        let mut objects: Vec<Doomed> = (0..evals)
            .map(|i| {
                Doomed::Eval(Arc::new(eval(
                    &format!("e{i}"),
                    "j",
                    "batch",
                    EvalStatus::Complete,
                    0,
                )))
            })
            .collect();
        if with_job {
            objects.push(Doomed::Job(Arc::new(job("j", JobType::Batch))));
        }
        GcUnit {
            objects,
            after: Vec::new(),
        }
    }

    #[test]
    fn a_unit_too_big_for_one_txn_is_cut_with_the_job_last() {
        let ks = Keyspace::new("/t");
        let small = pieces(&ks, &unit(3, true), 10);
        assert_eq!(small.len(), 1);
        assert_eq!(small[0].guards.len(), 4);
        assert_eq!(
            small[0].ops.len(),
            7,
            "the job's versions, plan mark and status batches go with it"
        );

        let big = pieces(&ks, &unit(9, true), 4);
        assert!(big.iter().all(|p| p.size() <= 4), "{big:?}");
        let total: usize = big.iter().map(|p| p.guards.len()).sum();
        assert_eq!(total, 10);
        let last = big.last().expect("a last piece");
        assert!(
            last.ops
                .iter()
                .any(|op| matches!(op, Op::Delete(r) if r.start == ks.job("default", "j"))),
            "the job goes in the last piece"
        );
        let batches = ks.job_status_of("default", "j");
        assert!(
            last.ops
                .iter()
                .any(|op| matches!(op, Op::Delete(r) if r.start == batches)),
            "and its status batches with it, after its allocations"
        );
    }

    #[test]
    fn a_node_delete_also_needs_its_heartbeat_gone() {
        let ks = Keyspace::new("/t");
        let node = caravan_proto::Node {
            id: "n1".into(),
            modify_revision: 7,
            ..Default::default()
        };
        let unit = deletes(&ks, &Doomed::Node(Arc::new(node)));
        assert_eq!(
            unit.guards,
            vec![
                Compare::mod_revision(ks.node("n1"), CompareOp::Equal, 7),
                Compare::absent(ks.heartbeat("n1")),
            ]
        );
        assert_eq!(unit.ops, vec![Op::delete(ks.node("n1"))]);
    }
}
