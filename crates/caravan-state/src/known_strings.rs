//! Strings nearly every stored status repeats, stored as their place in a
//! fixed list: the types and usual messages of task events, the
//! descriptions clients give an allocation's status, and a task's state. A
//! running allocation's status carries three events (`Received`, `Task
//! Setup`, `Started`) whose types and messages are about 100 of its 210
//! bytes; stored by number they are a dozen. Every status a client reports
//! is written once and read by every watcher of the store, so those bytes
//! are paid in etcd's log, its database and each watch.
//!
//! [`pack_status`] runs where a status is encoded for the store, and
//! [`unpack_status`] where one is decoded: nothing above the store sees a
//! number (docs/state-layout.md, "Allocation status"). A value stored
//! before this packing has no numbers and decodes as it always did.

use caravan_proto::{AllocStatus, TaskEvent};

/// The strings stored by number, a string's number being its place from 1.
/// Append only: stored values name entries by position, so an entry is
/// never removed, moved or changed; a binary that meets a number beyond its
/// list keeps it (and an empty string) and writes it back unchanged.
const KNOWN: &[&str] = &[
    // Task event types (the client's `events` module).
    "Received",
    "Task Setup",
    "Started",
    "Terminated",
    "Restarting",
    "Not Restarting",
    "Killing",
    "Killed",
    "Driver Failure",
    "Setup Failure",
    "Sibling Task Failed",
    "Leader Task Dead",
    "Servers Unreachable",
    "Main Tasks Dead",
    "Task Lost",
    "Restart Signaled",
    "Signaling",
    "Waiting for shutdown delay",
    // Event messages a client repeats word for word.
    "Task received by client",
    "Building Task Directory",
    "Task started by client",
    "Task successfully killed",
    "Task killed before it ran",
    "User requested restart",
    "Exit Code: 0, Signal: 0",
    "Restart within policy",
    "Policy allows no restarts",
    "Error was unrecoverable",
    "Exceeded allowed attempts, applying a delay",
    "Main tasks of the group are dead",
    // Client descriptions of an allocation's status.
    "Tasks are running",
    "All tasks have completed",
    "Failed tasks",
    "No tasks have started",
    "No tasks",
    // A task's state.
    "pending",
    "running",
    "dead",
];

/// The number `s` is stored as; 0 when it is not in the list (or empty).
fn code_of(s: &str) -> u32 {
    if s.is_empty() {
        return 0;
    }
    KNOWN
        .iter()
        .position(|k| *k == s)
        .map_or(0, |i| i as u32 + 1)
}

/// The string stored as `code`; `None` for a number beyond the list.
fn string_of(code: u32) -> Option<&'static str> {
    KNOWN.get((code as usize).checked_sub(1)?).copied()
}

/// Moves `s` into `code` when it is a known string.
fn pack(s: &mut String, code: &mut u32) {
    let known = code_of(s);
    if known != 0 {
        *code = known;
        s.clear();
    }
}

/// Puts the string of `code` back into `s`; a number beyond the list stays.
fn unpack(s: &mut String, code: &mut u32) {
    if *code == 0 || !s.is_empty() {
        return;
    }
    if let Some(known) = string_of(*code) {
        s.push_str(known);
        *code = 0;
    }
}

fn pack_event(e: &mut TaskEvent) {
    pack(&mut e.r#type, &mut e.type_code);
    pack(&mut e.message, &mut e.message_code);
}

fn unpack_event(e: &mut TaskEvent) {
    unpack(&mut e.r#type, &mut e.type_code);
    unpack(&mut e.message, &mut e.message_code);
}

/// `status` as the store keeps it: its known strings as numbers.
pub(crate) fn pack_status(status: &mut AllocStatus) {
    pack(
        &mut status.client_description,
        &mut status.client_description_code,
    );
    for state in status.task_states.values_mut() {
        pack(&mut state.state, &mut state.state_code);
        state.events.iter_mut().for_each(pack_event);
    }
}

/// A stored `status` as readers see it: its numbers back as strings.
pub(crate) fn unpack_status(status: &mut AllocStatus) {
    unpack(
        &mut status.client_description,
        &mut status.client_description_code,
    );
    for state in status.task_states.values_mut() {
        unpack(&mut state.state, &mut state.state_code);
        state.events.iter_mut().for_each(unpack_event);
    }
}

#[cfg(test)]
mod tests {
    use caravan_proto::TaskState;
    use prost::Message;

    use super::*;

    fn event(kind: &str, message: &str) -> TaskEvent {
        TaskEvent {
            r#type: kind.into(),
            time_unix_ns: 1_795_849_817_989_526_586,
            message: message.into(),
            ..Default::default()
        }
    }

    fn running() -> AllocStatus {
        let mut status = AllocStatus {
            client_status: 2,
            client_description: "Tasks are running".into(),
            running_since_unix_ns: 1_795_849_817_989_526_586,
            modify_time_unix_ns: 1_795_849_817_989_526_586,
            ..Default::default()
        };
        status.task_states.insert(
            "t".into(),
            TaskState {
                state: "running".into(),
                started_at_unix_ns: 1_795_849_817_989_526_586,
                events: vec![
                    event("Received", "Task received by client"),
                    event("Task Setup", "Building Task Directory"),
                    event("Started", "Task started by client"),
                    event("Terminated", "Exit Code: 3, Signal: 0"),
                    event("Custom", ""),
                ],
                ..Default::default()
            },
        );
        status
    }

    #[test]
    fn a_packed_status_unpacks_to_what_was_written() {
        let written = running();
        let mut stored = written.clone();
        pack_status(&mut stored);
        let bytes = stored.encode_to_vec();
        let mut read = AllocStatus::decode(bytes.as_slice()).unwrap();
        unpack_status(&mut read);
        assert_eq!(read, written);
        assert!(
            bytes.len() * 2 < written.encode_to_vec().len() + 60,
            "{} bytes packed against {} written",
            bytes.len(),
            written.encode_to_vec().len()
        );
    }

    #[test]
    fn what_is_not_known_is_stored_as_written() {
        let mut stored = running();
        pack_status(&mut stored);
        let events = &stored.task_states["t"].events;
        assert_eq!((events[0].r#type.as_str(), events[0].type_code), ("", 1));
        assert_eq!(events[3].message, "Exit Code: 3, Signal: 0");
        assert_eq!(events[3].message_code, 0);
        assert_eq!(
            (events[4].r#type.as_str(), events[4].type_code),
            ("Custom", 0)
        );
        assert_eq!(stored.client_description, "");
        let task = &stored.task_states["t"];
        assert_eq!(
            (task.state.as_str(), task.state_code),
            ("", code_of("running"))
        );
    }

    #[test]
    fn a_status_stored_before_packing_reads_as_it_was() {
        let old = running();
        let mut read = AllocStatus::decode(old.encode_to_vec().as_slice()).unwrap();
        unpack_status(&mut read);
        assert_eq!(read, old);
    }

    #[test]
    fn a_number_beyond_the_list_is_kept_and_written_back() {
        let mut stored = AllocStatus {
            client_description_code: 10_000,
            ..Default::default()
        };
        unpack_status(&mut stored);
        assert_eq!(stored.client_description, "");
        assert_eq!(stored.client_description_code, 10_000);
        pack_status(&mut stored);
        assert_eq!(stored.client_description_code, 10_000);
    }

    #[test]
    fn the_list_has_no_repeats() {
        let mut seen = std::collections::HashSet::new();
        for s in KNOWN {
            assert!(seen.insert(*s), "{s:?} is listed twice");
            assert_eq!(string_of(code_of(s)), Some(*s));
        }
    }
}
