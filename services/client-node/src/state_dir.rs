//! What the client keeps on disk between restarts: its node id and secret,
//! and one record per alloc (task states and the driver handles needed to
//! re-attach).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use caravan_proto::{TaskEvent, TaskState};
use serde::{Deserialize, Serialize};

use crate::driver::HandleState;
use crate::error::ClientError;

/// The client's directory of persisted state, `<data_dir>/client`.
#[derive(Debug, Clone)]
pub struct StateDir {
    root: PathBuf,
}

/// The persisted state of one alloc.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AllocRecord {
    /// The alloc id.
    pub alloc_id: String,
    /// Last client status computed (the proto enum's number).
    pub client_status: i32,
    /// Per task: its reported state and the live driver handle, if any.
    pub tasks: BTreeMap<String, TaskRecord>,
    /// The alloc's modify revision as the client last received it (0 in
    /// records written before it was kept): a restarted client asks for a
    /// view of the servers at least this new.
    #[serde(default)]
    pub revision: i64,
}

/// The persisted state of one task.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TaskRecord {
    /// The state reported to the servers.
    pub state: TaskStateRecord,
    /// The handle of the running task; `None` when nothing runs.
    pub handle: Option<HandleState>,
}

/// A serializable mirror of `TaskState`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TaskStateRecord {
    /// `pending`, `running` or `dead`.
    pub state: String,
    /// Whether the task failed.
    pub failed: bool,
    /// Restarts so far.
    pub restarts: u64,
    /// Last restart time.
    pub last_restart_unix_ns: i64,
    /// Last start time.
    pub started_at_unix_ns: i64,
    /// When it died.
    pub finished_at_unix_ns: i64,
    /// Recent events.
    pub events: Vec<TaskEventRecord>,
}

/// A serializable mirror of `TaskEvent`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TaskEventRecord {
    /// Event type.
    pub kind: String,
    /// When.
    pub time_unix_ns: i64,
    /// Human message.
    pub message: String,
    /// Exit code, for `Terminated`.
    pub exit_code: i32,
    /// Signal, for `Terminated`.
    pub signal: i32,
    /// Driver error text.
    pub driver_error: String,
    /// Restart delay, for `Restarting`.
    pub restart_delay_ns: i64,
    /// Whether the event failed the task.
    pub fails_task: bool,
}

impl From<&TaskState> for TaskStateRecord {
    fn from(s: &TaskState) -> Self {
        TaskStateRecord {
            state: s.state.clone(),
            failed: s.failed,
            restarts: s.restarts,
            last_restart_unix_ns: s.last_restart_unix_ns,
            started_at_unix_ns: s.started_at_unix_ns,
            finished_at_unix_ns: s.finished_at_unix_ns,
            events: s
                .events
                .iter()
                .map(|e| TaskEventRecord {
                    kind: e.r#type.clone(),
                    time_unix_ns: e.time_unix_ns,
                    message: e.message.clone(),
                    exit_code: e.exit_code,
                    signal: e.signal,
                    driver_error: e.driver_error.clone(),
                    restart_delay_ns: e.restart_delay_ns,
                    fails_task: e.fails_task,
                })
                .collect(),
        }
    }
}

impl From<&TaskStateRecord> for TaskState {
    fn from(r: &TaskStateRecord) -> Self {
        TaskState {
            state: r.state.clone(),
            failed: r.failed,
            restarts: r.restarts,
            last_restart_unix_ns: r.last_restart_unix_ns,
            started_at_unix_ns: r.started_at_unix_ns,
            finished_at_unix_ns: r.finished_at_unix_ns,
            events: r
                .events
                .iter()
                .map(|e| TaskEvent {
                    r#type: e.kind.clone(),
                    time_unix_ns: e.time_unix_ns,
                    message: e.message.clone(),
                    exit_code: e.exit_code,
                    signal: e.signal,
                    driver_error: e.driver_error.clone(),
                    restart_delay_ns: e.restart_delay_ns,
                    fails_task: e.fails_task,
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        }
    }
}

impl StateDir {
    /// Opens (creating) `<data_dir>/client`.
    pub fn open(data_dir: &Path) -> Result<StateDir, ClientError> {
        let root = data_dir.join("client");
        let allocs = root.join("allocs");
        std::fs::create_dir_all(&allocs).map_err(|e| ClientError::io("create", &allocs, e))?;
        Ok(StateDir { root })
    }

    /// The node id, created on first start and kept for the life of the data dir.
    pub fn node_id(&self) -> Result<String, ClientError> {
        self.stable_id("node-id")
    }

    /// The node's secret (Nomad's `SecretID`): created with the node id and
    /// readable by the client's user only. The servers record its hash at the
    /// first registration and refuse any other secret for this node id, so
    /// losing this file means registering as a new node.
    pub fn node_secret(&self) -> Result<String, ClientError> {
        self.stable_secret("secret-id")
    }

    /// A stable random secret stored under `name`, mode 0600 (simulated
    /// nodes derive theirs from one).
    pub fn stable_secret(&self, name: &str) -> Result<String, ClientError> {
        self.stable(name, Access::Private)
    }

    /// A stable random id stored under `name` (simulated nodes derive theirs from one).
    pub fn stable_id(&self, name: &str) -> Result<String, ClientError> {
        self.stable(name, Access::Shared)
    }

    fn stable(&self, name: &str, access: Access) -> Result<String, ClientError> {
        let path = self.root.join(name);
        match std::fs::read_to_string(&path) {
            Ok(text) => {
                let id = text.trim();
                uuid::Uuid::parse_str(id).map_err(|e| ClientError::CorruptState {
                    path: path.clone(),
                    problem: e.to_string(),
                })?;
                Ok(id.to_string())
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                let id = uuid::Uuid::new_v4().to_string();
                write_atomic(&path, id.as_bytes(), access)?;
                Ok(id)
            }
            Err(e) => Err(ClientError::io("read", path, e)),
        }
    }

    fn record_path(&self, alloc_id: &str) -> PathBuf {
        self.root.join("allocs").join(format!("{alloc_id}.json"))
    }

    /// Saves an alloc's record, replacing the previous one atomically.
    pub fn save(&self, record: &AllocRecord) -> Result<(), ClientError> {
        let path = self.record_path(&record.alloc_id);
        let bytes = serde_json::to_vec(record).map_err(|e| ClientError::CorruptState {
            path: path.clone(),
            problem: e.to_string(),
        })?;
        write_atomic(&path, &bytes, Access::Shared)
    }

    /// Forgets an alloc.
    pub fn remove(&self, alloc_id: &str) -> Result<(), ClientError> {
        let path = self.record_path(alloc_id);
        match std::fs::remove_file(&path) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(ClientError::io("remove", path, e)),
        }
    }

    /// Every alloc record on disk. A record that doesn't decode is reported and skipped.
    pub fn load_all(&self) -> Result<BTreeMap<String, AllocRecord>, ClientError> {
        let dir = self.root.join("allocs");
        let mut out = BTreeMap::new();
        let entries = std::fs::read_dir(&dir).map_err(|e| ClientError::io("list", &dir, e))?;
        for entry in entries.flatten() {
            let path = entry.path();
            if path.extension().is_none_or(|x| x != "json") {
                continue;
            }
            let parsed = std::fs::read(&path)
                .map_err(|e| e.to_string())
                .and_then(|b| serde_json::from_slice::<AllocRecord>(&b).map_err(|e| e.to_string()));
            match parsed {
                Ok(r) => {
                    out.insert(r.alloc_id.clone(), r);
                }
                Err(problem) => {
                    tracing::warn!(path = %path.display(), %problem, "skipping unreadable alloc record");
                }
            }
        }
        Ok(out)
    }
}

/// Who may read a file the client keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Access {
    /// As the umask allows.
    Shared,
    /// The client's user only (0600), whatever a stale temporary file had.
    Private,
}

/// Writes through a temporary file and a rename, so a crash leaves the old or
/// the new contents, never half of one.
fn write_atomic(path: &Path, bytes: &[u8], access: Access) -> Result<(), ClientError> {
    use std::io::Write;
    use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
    let tmp = path.with_extension("tmp");
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    if access == Access::Private {
        options.mode(0o600);
    }
    options
        .open(&tmp)
        .and_then(|mut f| {
            if access == Access::Private {
                f.set_permissions(std::fs::Permissions::from_mode(0o600))?;
            }
            f.write_all(bytes)
        })
        .map_err(|e| ClientError::io("write", &tmp, e))?;
    std::fs::rename(&tmp, path).map_err(|e| ClientError::io("rename", path, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_id_is_stable_across_opens() {
        let dir = tempfile::tempdir().unwrap();
        let a = StateDir::open(dir.path()).unwrap().node_id().unwrap();
        let b = StateDir::open(dir.path()).unwrap().node_id().unwrap();
        assert_eq!(a, b);
        assert!(uuid::Uuid::parse_str(&a).is_ok());
    }

    #[test]
    fn node_secret_is_stable_private_and_not_the_id() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let s = StateDir::open(dir.path()).unwrap();
        let secret = s.node_secret().unwrap();
        assert_eq!(
            StateDir::open(dir.path()).unwrap().node_secret().unwrap(),
            secret
        );
        assert_ne!(secret, s.node_id().unwrap());
        let mode = std::fs::metadata(dir.path().join("client/secret-id"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600, "{mode:o}");
        // A readable leftover of a crashed write does not make it readable.
        let other = tempfile::tempdir().unwrap();
        let s = StateDir::open(other.path()).unwrap();
        let stale = other.path().join("client/secret-id.tmp");
        std::fs::write(&stale, "old").unwrap();
        std::fs::set_permissions(&stale, std::fs::Permissions::from_mode(0o644)).unwrap();
        s.node_secret().unwrap();
        let mode = std::fs::metadata(other.path().join("client/secret-id"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600, "{mode:o}");
    }

    #[test]
    fn corrupt_node_id_is_an_error_not_a_new_identity() {
        let dir = tempfile::tempdir().unwrap();
        let s = StateDir::open(dir.path()).unwrap();
        std::fs::write(dir.path().join("client/node-id"), "nonsense").unwrap();
        assert!(matches!(s.node_id(), Err(ClientError::CorruptState { .. })));
    }

    #[test]
    fn records_round_trip_and_bad_ones_are_skipped() {
        let dir = tempfile::tempdir().unwrap();
        let s = StateDir::open(dir.path()).unwrap();
        let state = TaskState {
            state: "running".into(),
            restarts: 2,
            events: vec![TaskEvent {
                r#type: "Started".into(),
                time_unix_ns: 5,
                ..Default::default()
            }],
            ..Default::default()
        };
        let mut tasks = BTreeMap::new();
        tasks.insert(
            "web".to_string(),
            TaskRecord {
                state: TaskStateRecord::from(&state),
                handle: Some(HandleState::new("raw_exec", 1, br#"{"pid":42}"#.to_vec())),
            },
        );
        let rec = AllocRecord {
            alloc_id: "a1".into(),
            client_status: 2,
            tasks,
            revision: 7,
        };
        s.save(&rec).unwrap();
        std::fs::write(dir.path().join("client/allocs/bad.json"), b"{").unwrap();
        let all = s.load_all().unwrap();
        assert_eq!(all.len(), 1);
        assert_eq!(all["a1"], rec);
        assert_eq!(TaskState::from(&all["a1"].tasks["web"].state), state);
        s.remove("a1").unwrap();
        s.remove("a1").unwrap();
        assert!(s.load_all().unwrap().is_empty());
    }

    #[test]
    fn records_of_clients_before_opaque_handles_still_load() {
        let dir = tempfile::tempdir().unwrap();
        let s = StateDir::open(dir.path()).unwrap();
        let old = r#"{"alloc_id":"a2","client_status":2,"tasks":{"web":{"state":{"state":"running","failed":false,"restarts":0,"last_restart_unix_ns":0,"started_at_unix_ns":1,"finished_at_unix_ns":0,"events":[]},"handle":{"driver":"raw_exec","pid":42,"start_ticks":7,"started_at_unix_ns":9}}}}"#;
        std::fs::write(dir.path().join("client/allocs/a2.json"), old).unwrap();
        let all = s.load_all().unwrap();
        let h = all["a2"].tasks["web"].handle.as_ref().unwrap();
        assert_eq!(h.driver(), "raw_exec");
        assert_eq!(h.version(), 0);
    }
}
