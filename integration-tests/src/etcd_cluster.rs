//! A throwaway etcd cluster of several members on loopback, each its own
//! `etcd` process with its own data dir, for runs that take members away:
//! killed, stopped (SIGSTOP, as behind a partition) and restarted with their
//! data, while the others keep a quorum; optionally with each member's data
//! dir on a disk of its own that can be frozen or slowed ([`FuseDisk`]).
//! Stopped and removed (disks unmounted) when dropped.
//!
//! Started with [`EtcdCluster::start_partitionable`], every member advertises
//! its peer URL through a [`FaultProxy`] that knows each connection's sender
//! (etcd names it in `X-PeerURLs`), so one member can be cut off from the
//! others ([`EtcdCluster::isolate`]) or made unheard while it still hears
//! them ([`EtcdCluster::silence`]), with its client URL left reachable.

use std::path::Path;
use std::time::Duration;

use nix::sys::signal::Signal;
use tempfile::TempDir;

use crate::etcd::{self, Member};
use crate::fault_proxy::FaultProxy;
use crate::fuse_disk::FuseDisk;
use crate::process::{self, ServiceProcess};

/// How long one member may take to answer its status.
const STATUS_TIMEOUT: Duration = Duration::from_secs(2);
/// How long handing the leadership to a chosen member may take.
const LEADER_MOVE_TIMEOUT: Duration = Duration::from_secs(20);

/// How the members of an [`EtcdCluster`] are set up.
#[derive(Clone, Copy, Debug, Default)]
pub struct EtcdClusterOptions {
    /// Each member's data dir on a FUSE disk of its own, so that one
    /// member's disk can be frozen or slowed ([`EtcdCluster::freeze_disk`]).
    pub fuse_disks: bool,
    /// A cuttable link in front of every member's peer port
    /// ([`EtcdCluster::isolate`], [`EtcdCluster::silence`]).
    pub peer_links: bool,
}

/// One member: how it is started, its process while it runs, and its disk
/// when on one of its own.
#[derive(Debug)]
struct Running {
    member: Member,
    process: Option<ServiceProcess>,
    paused: bool,
    disk: Option<FuseDisk>,
}

/// An etcd cluster of `n` members, each on free loopback ports.
#[derive(Debug)]
pub struct EtcdCluster {
    members: Vec<Running>,
    /// The cuttable link in front of each member's peer port, by index
    /// (empty unless started partitionable).
    peer_links: Vec<FaultProxy>,
    // Dropped after the processes have stopped (see `Drop`).
    dir: TempDir,
}

impl EtcdCluster {
    /// Starts `n` members and waits until every one reports itself healthy
    /// (the cluster has a leader); retries with other ports when another
    /// process took one first.
    pub async fn start(n: usize) -> anyhow::Result<EtcdCluster> {
        EtcdCluster::start_with(n, EtcdClusterOptions::default()).await
    }

    /// [`EtcdCluster::start`] with a cuttable link in front of every
    /// member's peer port, for partitions among members.
    pub async fn start_partitionable(n: usize) -> anyhow::Result<EtcdCluster> {
        EtcdCluster::start_with(
            n,
            EtcdClusterOptions {
                peer_links: true,
                ..Default::default()
            },
        )
        .await
    }

    /// [`EtcdCluster::start`] with `options`.
    pub async fn start_with(n: usize, options: EtcdClusterOptions) -> anyhow::Result<EtcdCluster> {
        let links = options.peer_links;
        anyhow::ensure!(n > 0, "an etcd cluster needs at least one member");
        for _ in 0..3 {
            let dir = tempfile::Builder::new()
                .prefix("caravan-etcd-cluster-")
                .tempdir()?;
            let mut addrs = Vec::with_capacity(n);
            for _ in 0..n {
                addrs.push((process::free_addr()?, process::free_addr()?));
            }
            let mut peer_links = Vec::new();
            if links {
                for (_, peer) in &addrs {
                    peer_links.push(FaultProxy::start_sniffing(*peer, "X-PeerURLs").await?);
                }
            }
            let advertised: Vec<_> = (0..n)
                .map(|i| peer_links.get(i).map_or(addrs[i].1, FaultProxy::addr))
                .collect();
            let initial_cluster = (0..n)
                .map(|i| format!("etcd-{i}=http://{}", advertised[i]))
                .collect::<Vec<_>>()
                .join(",");
            let mut members = Vec::with_capacity(n);
            for (i, (client, peer)) in addrs.into_iter().enumerate() {
                let data_dir = dir.path().join(format!("etcd-{i}"));
                // The backing dir and the daemon's log sit beside the
                // mount, outside it: reading a log must not block on a
                // frozen disk.
                let disk = if options.fuse_disks {
                    Some(FuseDisk::mount(
                        &dir.path().join(format!("etcd-{i}.disk")),
                        &data_dir,
                        &dir.path().join(format!("etcd-{i}.bindfs.log")),
                    )?)
                } else {
                    None
                };
                let member = Member {
                    name: format!("etcd-{i}"),
                    data_dir,
                    client,
                    peer,
                    advertise_peer: links.then_some(advertised[i]),
                    initial_cluster: initial_cluster.clone(),
                    existing: false,
                    tls: None,
                    quota_backend_bytes: etcd::DEFAULT_QUOTA_BACKEND_BYTES,
                };
                let process = member.spawn(log_of(dir.path(), i))?;
                members.push(Running {
                    member,
                    process: Some(process),
                    paused: false,
                    disk,
                });
            }
            let mut cluster = EtcdCluster {
                members,
                peer_links,
                dir,
            };
            match cluster.wait_all_healthy().await {
                Ok(()) => {
                    for m in &mut cluster.members {
                        m.member.existing = true;
                    }
                    return Ok(cluster);
                }
                // Dropping it stops the half-made members and their dirs.
                Err(_) if cluster.lost_port_race() => continue,
                Err(err) => {
                    let logs = cluster.logs(20);
                    return Err(err.context(format!("starting an etcd cluster; logs:\n{logs}")));
                }
            }
        }
        anyhow::bail!("the etcd cluster lost the race for free ports three times")
    }

    /// How many members the cluster has (running or not).
    pub fn len(&self) -> usize {
        self.members.len()
    }

    /// Whether the cluster has no members (never, once started).
    pub fn is_empty(&self) -> bool {
        self.members.is_empty()
    }

    /// Every member's client URL, e.g. `http://127.0.0.1:41234`, by index.
    pub fn endpoints(&self) -> Vec<String> {
        self.members
            .iter()
            .map(|m| format!("http://{}", m.member.client))
            .collect()
    }

    /// [`EtcdCluster::endpoints`] joined by commas, as services take them.
    pub fn endpoints_joined(&self) -> String {
        self.endpoints().join(",")
    }

    /// Member `i`'s process id while it runs.
    pub fn pid(&self, i: usize) -> Option<u32> {
        self.members
            .get(i)?
            .process
            .as_ref()
            .and_then(ServiceProcess::pid)
    }

    /// Every running member's process id, by index.
    pub fn pids(&self) -> Vec<Option<u32>> {
        (0..self.len()).map(|i| self.pid(i)).collect()
    }

    /// Whether member `i` runs and is not paused.
    pub fn is_up(&mut self, i: usize) -> bool {
        self.members.get_mut(i).is_some_and(|m| {
            !m.paused && m.process.as_mut().is_some_and(ServiceProcess::is_running)
        })
    }

    /// The data and log directory.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// Leaves the data and log directory on disk when dropped.
    pub fn keep_files(&mut self) {
        self.dir.disable_cleanup(true);
    }

    /// SIGKILLs member `i`, as a crash or a lost machine; it stays down
    /// until [`EtcdCluster::restart`].
    pub fn kill(&mut self, i: usize) -> anyhow::Result<()> {
        let m = self.member_mut(i)?;
        if let Some(mut p) = m.process.take() {
            p.kill_hard();
        }
        m.paused = false;
        Ok(())
    }

    /// SIGSTOPs member `i`: it keeps its connections but answers nothing,
    /// as behind a network partition.
    pub fn pause(&mut self, i: usize) -> anyhow::Result<()> {
        let m = self.member_mut(i)?;
        if let Some(p) = &m.process {
            p.signal(Signal::SIGSTOP);
            m.paused = true;
        }
        Ok(())
    }

    /// SIGCONTs member `i` after [`EtcdCluster::pause`].
    pub fn resume(&mut self, i: usize) -> anyhow::Result<()> {
        let m = self.member_mut(i)?;
        if let Some(p) = &m.process {
            p.signal(Signal::SIGCONT);
        }
        m.paused = false;
        Ok(())
    }

    /// Freezes member `i`'s disk: its every read, write and fsync blocks
    /// until [`EtcdCluster::thaw_disk`]. The process runs on, its network
    /// answering, as on a machine whose disk stopped answering.
    pub fn freeze_disk(&mut self, i: usize) -> anyhow::Result<()> {
        self.disk_mut(i)?.freeze()
    }

    /// Makes member `i`'s disk slow: frozen for `frozen`, answering for
    /// `running`, in turn, until [`EtcdCluster::thaw_disk`].
    pub fn slow_disk(
        &mut self,
        i: usize,
        frozen: Duration,
        running: Duration,
    ) -> anyhow::Result<()> {
        self.disk_mut(i)?.stutter(frozen, running)
    }

    /// Thaws member `i`'s disk after [`EtcdCluster::freeze_disk`] or
    /// [`EtcdCluster::slow_disk`].
    pub fn thaw_disk(&mut self, i: usize) -> anyhow::Result<()> {
        self.disk_mut(i)?.thaw()
    }

    /// Brings member `i` back: SIGCONT if it was paused, else starts it
    /// again on its ports with its data (killing it first if it still
    /// runs), and waits until it is healthy.
    pub async fn restart(&mut self, i: usize) -> anyhow::Result<()> {
        let dir = self.dir.path().to_path_buf();
        let m = self.member_mut(i)?;
        if m.paused {
            if let Some(p) = &m.process {
                p.signal(Signal::SIGCONT);
            }
            m.paused = false;
        } else {
            if let Some(mut p) = m.process.take() {
                p.kill_hard();
            }
            m.process = Some(m.member.spawn(log_of(&dir, i))?);
        }
        let client = m.member.client;
        let Some(process) = m.process.as_mut() else {
            anyhow::bail!("etcd member {i} has no process");
        };
        etcd::wait_healthy(process, client)
            .await
            .map_err(|err| err.context(format!("restarting etcd member {i}")))
    }

    /// Cuts member `i` off from every other member, both ways: the
    /// connections they dial to it and those it dials to them are dropped
    /// and new ones held. Its client URL still answers.
    pub fn isolate(&self, i: usize) -> anyhow::Result<()> {
        let me = self.peer_link(i)?;
        me.cut();
        let name = me.addr().to_string();
        for (j, link) in self.peer_links.iter().enumerate() {
            if j != i {
                link.cut_sender(&name);
            }
        }
        Ok(())
    }

    /// Cuts member `i` off one way: the others no longer hear it (what it
    /// writes on their connections to it, and what it sends on its own
    /// connections to them, is dropped) while it still hears them.
    pub fn silence(&self, i: usize) -> anyhow::Result<()> {
        let me = self.peer_link(i)?;
        me.cut_replies();
        let name = me.addr().to_string();
        for (j, link) in self.peer_links.iter().enumerate() {
            if j != i {
                link.mute_sender(&name);
            }
        }
        Ok(())
    }

    /// Lifts every cut among the members.
    pub fn heal(&self) {
        for link in &self.peer_links {
            link.heal();
        }
    }

    fn peer_link(&self, i: usize) -> anyhow::Result<&FaultProxy> {
        self.peer_links.get(i).ok_or_else(|| {
            anyhow::anyhow!("etcd member {i} has no peer link (start the cluster partitionable)")
        })
    }

    /// Each member's applied raft index as it reports it (`None` for one
    /// that does not answer within a short timeout), by index.
    pub async fn raft_indexes(&self) -> Vec<Option<u64>> {
        let mut out = Vec::with_capacity(self.len());
        for endpoint in self.endpoints() {
            let status = etcd::status(std::slice::from_ref(&endpoint), STATUS_TIMEOUT).await;
            out.push(status.ok().map(|s| s.raft_index()));
        }
        out
    }

    /// Member `i`'s raft id, as it reports it.
    pub async fn member_id(&self, i: usize) -> anyhow::Result<u64> {
        let endpoint = self.endpoints().get(i).cloned();
        let endpoint = endpoint.ok_or_else(|| anyhow::anyhow!("no etcd member {i}"))?;
        let status = etcd::status(&[endpoint], STATUS_TIMEOUT).await?;
        status
            .header()
            .map(|h| h.member_id())
            .ok_or_else(|| anyhow::anyhow!("etcd member {i} named no id"))
    }

    /// The raft id of the leader member `i` follows, as it reports it
    /// (`None` when it answers nothing or knows no leader).
    pub async fn leader_seen_by(&self, i: usize) -> Option<u64> {
        let endpoint = self.endpoints().get(i).cloned()?;
        let status = etcd::status(&[endpoint], STATUS_TIMEOUT).await.ok()?;
        Some(status.leader()).filter(|id| *id != 0)
    }

    /// The index of the member that is the raft leader now, as the members
    /// that answer say (each asked for its own status, with a short
    /// timeout); `None` while there is none or none answers.
    pub async fn leader(&mut self) -> Option<usize> {
        let endpoints = self.endpoints();
        for (i, endpoint) in endpoints.iter().enumerate() {
            if !self.is_up(i) {
                continue;
            }
            let Ok(status) = etcd::status(std::slice::from_ref(endpoint), STATUS_TIMEOUT).await
            else {
                continue;
            };
            let me = status.header().map(|h| h.member_id());
            if status.leader() != 0 && me == Some(status.leader()) {
                return Some(i);
            }
        }
        None
    }

    /// Hands the raft leadership to member `i` (etcd's MoveLeader, asked
    /// of the current leader) and waits until it leads, so a test can
    /// choose which member a fault hits as leader.
    pub async fn move_leader(&mut self, i: usize) -> anyhow::Result<()> {
        let endpoints = self.endpoints();
        let target = endpoints
            .get(i)
            .ok_or_else(|| anyhow::anyhow!("no etcd member {i}"))?;
        let status = etcd::status(std::slice::from_ref(target), STATUS_TIMEOUT).await?;
        let target_id = status
            .header()
            .map(|h| h.member_id())
            .ok_or_else(|| anyhow::anyhow!("etcd member {i} named no member id"))?;
        let started = std::time::Instant::now();
        loop {
            match self.leader().await {
                Some(leader) if leader == i => return Ok(()),
                Some(leader) => {
                    let ask = async {
                        let mut client =
                            etcd_client::Client::connect([endpoints[leader].as_str()], None)
                                .await?;
                        anyhow::Ok(client.move_leader(target_id).await?)
                    };
                    // A leadership that moved meanwhile fails the request:
                    // ask again whoever leads now.
                    let _ = tokio::time::timeout(LEADER_MOVE_TIMEOUT, ask).await;
                }
                None => {}
            }
            anyhow::ensure!(
                started.elapsed() < LEADER_MOVE_TIMEOUT,
                "etcd member {i} did not become leader within {LEADER_MOVE_TIMEOUT:?}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// The last `lines` lines of every member's log.
    pub fn logs(&self, lines: usize) -> String {
        (0..self.len())
            .map(|i| {
                let log = log_of(self.dir.path(), i);
                format!(
                    "----- etcd-{i} ({}) -----\n{}\n",
                    log.display(),
                    process::tail_file(&log, lines)
                )
            })
            .collect()
    }

    fn member_mut(&mut self, i: usize) -> anyhow::Result<&mut Running> {
        let n = self.members.len();
        self.members
            .get_mut(i)
            .ok_or_else(|| anyhow::anyhow!("no etcd member {i} (the cluster has {n})"))
    }

    fn disk_mut(&mut self, i: usize) -> anyhow::Result<&mut FuseDisk> {
        self.member_mut(i)?.disk.as_mut().ok_or_else(|| {
            anyhow::anyhow!("etcd member {i} has no disk of its own (start with fuse_disks)")
        })
    }

    async fn wait_all_healthy(&mut self) -> anyhow::Result<()> {
        for (i, m) in self.members.iter_mut().enumerate() {
            let client = m.member.client;
            let Some(process) = m.process.as_mut() else {
                anyhow::bail!("etcd member {i} has no process");
            };
            etcd::wait_healthy(process, client)
                .await
                .map_err(|err| err.context(format!("etcd member {i}")))?;
        }
        Ok(())
    }

    fn lost_port_race(&mut self) -> bool {
        self.members.iter_mut().any(|m| {
            m.process
                .as_mut()
                .is_some_and(|p| p.exited().is_some() && process::lost_port_race(&p.log))
        })
    }
}

impl Drop for EtcdCluster {
    fn drop(&mut self) {
        // Stop first: the temp dir is removed when the fields drop. A
        // paused member, or one whose disk is frozen, would sit out the
        // grace before its SIGKILL. Its disk is unmounted once it stopped.
        for m in &mut self.members {
            if let Some(disk) = m.disk.as_mut() {
                let _ = disk.thaw();
            }
            if let Some(mut p) = m.process.take() {
                p.signal(Signal::SIGCONT);
                p.stop();
            }
            drop(m.disk.take());
        }
    }
}

fn log_of(dir: &Path, i: usize) -> std::path::PathBuf {
    dir.join(format!("etcd-{i}.log"))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;
    use crate::wait::{Progress, wait_for};

    async fn wait_leader(cluster: &mut EtcdCluster, not: Option<usize>) -> usize {
        wait_for("an etcd leader", Duration::from_secs(30), async || {
            Ok(match cluster.leader().await {
                Some(i) if Some(i) != not => Progress::Done(i),
                other => Progress::Waiting(format!("leader {other:?}")),
            })
        })
        .await
        .unwrap()
    }

    /// Three members elect a leader; with it killed the other two elect
    /// another, and it rejoins with its data when restarted.
    #[tokio::test]
    async fn a_killed_leader_is_replaced_and_rejoins() {
        let mut cluster = EtcdCluster::start(3).await.unwrap();
        assert_eq!(cluster.endpoints().len(), 3);
        assert!(cluster.pids().iter().all(Option::is_some));
        let first = wait_leader(&mut cluster, None).await;
        cluster.kill(first).unwrap();
        assert_eq!(cluster.pid(first), None);
        let second = wait_leader(&mut cluster, Some(first)).await;
        assert_ne!(first, second);
        cluster.restart(first).await.unwrap();
        assert!(cluster.is_up(first));
        let other = (0..3).find(|&i| i != second).unwrap();
        cluster.pause(other).unwrap();
        assert!(!cluster.is_up(other));
        cluster.restart(other).await.unwrap();
        assert!((0..3).all(|i| cluster.is_up(i)));
    }
}
