//! When a deployment still moves and when it is over.

use caravan_proto::DeploymentStatus;

/// Rules of a deployment's status.
pub trait DeploymentStatusExt {
    /// Whether the deployment may still change, as Nomad's `Active`:
    /// running, paused, pending, blocked, unblocking or initializing.
    fn is_active(&self) -> bool;

    /// Whether the deployment watcher follows it: running, paused or
    /// pending. Narrower than [`is_active`](Self::is_active): a blocked,
    /// unblocking or initializing deployment is active but not followed.
    fn is_followed(&self) -> bool;

    /// Whether the deployment ended: successful, failed or cancelled. An
    /// unset status is neither active nor terminal.
    fn is_terminal(&self) -> bool;
}

impl DeploymentStatusExt for DeploymentStatus {
    fn is_active(&self) -> bool {
        matches!(
            *self,
            Self::Running
                | Self::Paused
                | Self::Pending
                | Self::Blocked
                | Self::Unblocking
                | Self::Initializing
        )
    }

    fn is_followed(&self) -> bool {
        matches!(*self, Self::Running | Self::Paused | Self::Pending)
    }

    fn is_terminal(&self) -> bool {
        matches!(*self, Self::Successful | Self::Failed | Self::Cancelled)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALL: [DeploymentStatus; 10] = [
        DeploymentStatus::Unspecified,
        DeploymentStatus::Running,
        DeploymentStatus::Paused,
        DeploymentStatus::Failed,
        DeploymentStatus::Successful,
        DeploymentStatus::Cancelled,
        DeploymentStatus::Pending,
        DeploymentStatus::Blocked,
        DeploymentStatus::Unblocking,
        DeploymentStatus::Initializing,
    ];

    #[test]
    fn every_set_status_is_active_or_terminal() {
        use DeploymentStatus as D;
        for s in ALL {
            let terminal = matches!(s, D::Successful | D::Failed | D::Cancelled);
            assert_eq!(s.is_terminal(), terminal, "{s:?}");
            assert_eq!(s.is_active(), s != D::Unspecified && !terminal, "{s:?}");
        }
    }

    #[test]
    fn the_watcher_follows_running_paused_and_pending() {
        use DeploymentStatus as D;
        for s in ALL {
            let expected = matches!(s, D::Running | D::Paused | D::Pending);
            assert_eq!(s.is_followed(), expected, "{s:?}");
            assert!(!s.is_followed() || s.is_active(), "{s:?}");
        }
        for s in [D::Blocked, D::Unblocking, D::Initializing] {
            assert!(s.is_active() && !s.is_followed(), "{s:?}");
        }
    }

    #[test]
    fn unset_is_neither() {
        assert!(!DeploymentStatus::Unspecified.is_active());
        assert!(!DeploymentStatus::Unspecified.is_terminal());
        assert!(!DeploymentStatus::Unspecified.is_followed());
    }
}
