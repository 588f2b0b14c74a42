//! A stored status's times, kept relative to its own modify time. A
//! running allocation's status holds six or more times (when it runs, its
//! task's start, the time of each task event), each a Unix time in
//! nanoseconds that takes nine bytes as a varint. They lie within
//! milliseconds to seconds of the status's modify time, so stored as the
//! distance from it each takes three to five.
//!
//! [`pack_times`] runs where a status is encoded for the store and
//! [`unpack_times`] where one is decoded, beside the known strings
//! (docs/state-layout.md, "Values"). A packed status says so in its
//! storage-only `times_relative`; one stored before this packing has it
//! unset and decodes as it always did.

use caravan_proto::AllocStatus;

/// The stored form of time `t` against `base`: 0 stays 0 (no time), a time
/// at or before `base` is `base - t + 1` (positive), a later one `base - t`
/// (negative). `None` when that does not fit an `i64`.
fn relative(base: i64, t: i64) -> Option<i64> {
    if t == 0 {
        return Some(0);
    }
    let d = base.checked_sub(t)?;
    if d >= 0 { d.checked_add(1) } else { Some(d) }
}

/// The time stored as `s` against `base` (the inverse of [`relative`]). A
/// damaged value wraps rather than panics.
fn absolute(base: i64, s: i64) -> i64 {
    match s {
        0 => 0,
        s if s > 0 => base.wrapping_sub(s - 1),
        s => base.wrapping_sub(s),
    }
}

/// Calls `f` on every time of `status` but its modify time.
fn each_time(status: &mut AllocStatus, mut f: impl FnMut(&mut i64)) {
    f(&mut status.running_since_unix_ns);
    f(&mut status.deployment_timestamp_unix_ns);
    for state in status.task_states.values_mut() {
        f(&mut state.last_restart_unix_ns);
        f(&mut state.started_at_unix_ns);
        f(&mut state.finished_at_unix_ns);
        state.events.iter_mut().for_each(|e| f(&mut e.time_unix_ns));
    }
}

/// `status` as the store keeps it: its times relative to its modify time,
/// unless it has none or a time is too far from it to fit, when every
/// time is stored as written.
pub(crate) fn pack_times(status: &mut AllocStatus) {
    let base = status.modify_time_unix_ns;
    if base == 0 || status.times_relative {
        return;
    }
    let mut fits = true;
    each_time(status, |t| fits &= relative(base, *t).is_some());
    if !fits {
        return;
    }
    each_time(status, |t| *t = relative(base, *t).unwrap_or(*t));
    status.times_relative = true;
}

/// A stored `status` as readers see it: its times absolute again.
pub(crate) fn unpack_times(status: &mut AllocStatus) {
    if !status.times_relative {
        return;
    }
    let base = status.modify_time_unix_ns;
    each_time(status, |t| *t = absolute(base, *t));
    status.times_relative = false;
}

#[cfg(test)]
mod tests {
    use caravan_proto::{TaskEvent, TaskState};
    use prost::Message;

    use super::*;

    const NOW: i64 = 1_795_849_817_989_526_586;

    fn event(at: i64) -> TaskEvent {
        TaskEvent {
            time_unix_ns: at,
            type_code: 3,
            ..Default::default()
        }
    }

    /// A running status as a client reports it: the events a few
    /// milliseconds apart, the report a little later.
    fn running() -> AllocStatus {
        let started = NOW - 180_000_000;
        let mut status = AllocStatus {
            client_status: 2,
            running_since_unix_ns: started,
            modify_time_unix_ns: NOW,
            deployment_healthy: Some(true),
            deployment_timestamp_unix_ns: NOW - 1_000,
            ..Default::default()
        };
        status.task_states.insert(
            "t".into(),
            TaskState {
                state_code: 2,
                started_at_unix_ns: started,
                events: vec![
                    event(started - 4_000_000),
                    event(started - 2_500_000),
                    event(started),
                ],
                ..Default::default()
            },
        );
        status
    }

    fn round_trip(written: &AllocStatus) -> (AllocStatus, usize) {
        let mut stored = written.clone();
        pack_times(&mut stored);
        let bytes = stored.encode_to_vec();
        let mut read = AllocStatus::decode(bytes.as_slice()).unwrap();
        unpack_times(&mut read);
        (read, bytes.len())
    }

    #[test]
    fn relative_times_read_back_as_written_and_shorter() {
        let written = running();
        let (read, len) = round_trip(&written);
        assert_eq!(read, written);
        let before = written.encode_to_vec().len();
        // Six times of nine bytes each become three or four.
        assert!(len + 25 <= before, "{len} bytes packed against {before}");
    }

    #[test]
    fn times_either_side_of_the_modify_time_and_unset_ones_read_back() {
        let mut written = running();
        let task = written.task_states.get_mut("t").unwrap();
        task.finished_at_unix_ns = NOW + 1;
        task.last_restart_unix_ns = NOW;
        task.events.push(event(NOW + 5_000_000_000));
        task.events.push(event(1));
        task.events.push(event(-7));
        written.running_since_unix_ns = 0;
        assert_eq!(round_trip(&written).0, written);
    }

    #[test]
    fn times_too_far_apart_are_stored_as_written() {
        let mut written = running();
        written.running_since_unix_ns = i64::MIN + 5;
        let mut stored = written.clone();
        pack_times(&mut stored);
        assert!(!stored.times_relative);
        assert_eq!(stored, written);
        assert_eq!(round_trip(&written).0, written);
        // Without a modify time there is nothing to measure from.
        let mut bare = running();
        bare.modify_time_unix_ns = 0;
        let mut stored = bare.clone();
        pack_times(&mut stored);
        assert_eq!(stored, bare);
    }

    #[test]
    fn a_status_stored_before_reads_as_it_was() {
        let old = running();
        let mut read = AllocStatus::decode(old.encode_to_vec().as_slice()).unwrap();
        unpack_times(&mut read);
        assert_eq!(read, old);
    }

    #[test]
    fn a_damaged_time_reads_without_panicking() {
        let mut stored = AllocStatus {
            modify_time_unix_ns: i64::MIN,
            running_since_unix_ns: i64::MAX,
            deployment_timestamp_unix_ns: i64::MIN,
            times_relative: true,
            ..Default::default()
        };
        unpack_times(&mut stored);
        assert!(!stored.times_relative);
    }
}
