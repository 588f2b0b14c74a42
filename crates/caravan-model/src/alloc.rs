//! When an allocation is finished: for its client, for the servers, and for
//! the node it holds resources on.

use caravan_proto::{AllocClientStatus, AllocDesiredStatus, Allocation};

/// Rules of the status a client reports for an allocation.
pub trait AllocClientStatusExt {
    /// Whether the client is done with the allocation for good: it completed,
    /// failed or was lost (Nomad's `ClientTerminalStatus`). Pending, running
    /// and unknown (a disconnected node's) are not.
    fn is_terminal(&self) -> bool;
}

impl AllocClientStatusExt for AllocClientStatus {
    fn is_terminal(&self) -> bool {
        matches!(*self, Self::Complete | Self::Failed | Self::Lost)
    }
}

/// Rules of the status the servers want an allocation in.
pub trait AllocDesiredStatusExt {
    /// Whether the servers asked the allocation to stop or be evicted
    /// (Nomad's `ServerTerminalStatus`). An unset status is not terminal.
    fn is_terminal(&self) -> bool;
}

impl AllocDesiredStatusExt for AllocDesiredStatus {
    fn is_terminal(&self) -> bool {
        matches!(*self, Self::Stop | Self::Evict)
    }
}

/// Rules of an allocation.
pub trait AllocExt {
    /// Whether its client is done with it: complete, failed or lost.
    fn is_client_terminal(&self) -> bool;

    /// Whether the servers asked it to stop or be evicted.
    fn is_server_terminal(&self) -> bool;

    /// Whether it no longer holds its resources, as Nomad's `TerminalStatus`:
    /// terminal for the servers or for its client.
    fn is_terminal(&self) -> bool;

    /// Whether it still counts as running: the servers want it to run
    /// (desired status exactly `run`) and its client has not finished it.
    /// Unlike `!is_terminal()`, an allocation with no desired status set is
    /// not live.
    fn is_live(&self) -> bool;

    /// Whether a reschedule policy applies to it at all: its client reports
    /// it failed and the servers have not stopped it. An evicted allocation
    /// still may be replaced, as in Nomad.
    fn is_reschedule_candidate(&self) -> bool;

    /// Nomad's `ModifyIndex`: the revision of the last write of either of
    /// its keys, the servers' record or the client's status.
    fn modify_index(&self) -> i64;
}

impl AllocExt for Allocation {
    fn modify_index(&self) -> i64 {
        self.modify_revision.max(self.client_modify_revision)
    }

    fn is_client_terminal(&self) -> bool {
        self.client_status().is_terminal()
    }

    fn is_server_terminal(&self) -> bool {
        self.desired_status().is_terminal()
    }

    fn is_terminal(&self) -> bool {
        self.is_server_terminal() || self.is_client_terminal()
    }

    fn is_live(&self) -> bool {
        self.desired_status() == AllocDesiredStatus::Run && !self.is_client_terminal()
    }

    fn is_reschedule_candidate(&self) -> bool {
        self.desired_status() != AllocDesiredStatus::Stop
            && self.client_status() == AllocClientStatus::Failed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CLIENT: [AllocClientStatus; 7] = [
        AllocClientStatus::Unspecified,
        AllocClientStatus::Pending,
        AllocClientStatus::Running,
        AllocClientStatus::Complete,
        AllocClientStatus::Failed,
        AllocClientStatus::Lost,
        AllocClientStatus::Unknown,
    ];

    const DESIRED: [AllocDesiredStatus; 4] = [
        AllocDesiredStatus::Unspecified,
        AllocDesiredStatus::Run,
        AllocDesiredStatus::Stop,
        AllocDesiredStatus::Evict,
    ];

    fn alloc(desired: AllocDesiredStatus, client: AllocClientStatus) -> Allocation {
        let mut a = Allocation::default();
        a.set_desired_status(desired);
        a.set_client_status(client);
        a
    }

    #[test]
    fn client_terminal_is_complete_failed_or_lost() {
        use AllocClientStatus as C;
        for s in CLIENT {
            let expected = matches!(s, C::Complete | C::Failed | C::Lost);
            assert_eq!(s.is_terminal(), expected, "{s:?}");
        }
    }

    #[test]
    fn server_terminal_is_stop_or_evict() {
        use AllocDesiredStatus as D;
        for s in DESIRED {
            let expected = matches!(s, D::Stop | D::Evict);
            assert_eq!(s.is_terminal(), expected, "{s:?}");
        }
    }

    #[test]
    fn terminal_is_either_side() {
        use AllocClientStatus as C;
        use AllocDesiredStatus as D;
        for d in DESIRED {
            for c in CLIENT {
                let a = alloc(d, c);
                let server = matches!(d, D::Stop | D::Evict);
                let client = matches!(c, C::Complete | C::Failed | C::Lost);
                assert_eq!(a.is_server_terminal(), server, "{d:?}/{c:?}");
                assert_eq!(a.is_client_terminal(), client, "{d:?}/{c:?}");
                assert_eq!(a.is_terminal(), server || client, "{d:?}/{c:?}");
            }
        }
    }

    #[test]
    fn live_wants_run_and_an_unfinished_client() {
        use AllocClientStatus as C;
        use AllocDesiredStatus as D;
        for d in DESIRED {
            for c in CLIENT {
                let expected = d == D::Run && !matches!(c, C::Complete | C::Failed | C::Lost);
                assert_eq!(alloc(d, c).is_live(), expected, "{d:?}/{c:?}");
            }
        }
        // The one place live and non-terminal part: nothing desired yet.
        let unset = alloc(D::Unspecified, C::Running);
        assert!(!unset.is_live() && !unset.is_terminal());
    }

    #[test]
    fn reschedule_candidates_failed_and_not_stopped() {
        use AllocClientStatus as C;
        use AllocDesiredStatus as D;
        for d in DESIRED {
            for c in CLIENT {
                let expected = c == C::Failed && d != D::Stop;
                assert_eq!(
                    alloc(d, c).is_reschedule_candidate(),
                    expected,
                    "{d:?}/{c:?}"
                );
            }
        }
        assert!(alloc(D::Evict, C::Failed).is_reschedule_candidate());
    }
}
