//! When a deployment still moves and when it is over.

use caravan_proto::DeploymentStatus;

/// Rules of a deployment's status.
pub trait DeploymentStatusExt {
    /// Whether the deployment may still change, as Nomad's `Active`:
    /// running, paused, pending, blocked, unblocking or initializing.
    fn is_active(&self) -> bool;

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
    fn unset_is_neither() {
        assert!(!DeploymentStatus::Unspecified.is_active());
        assert!(!DeploymentStatus::Unspecified.is_terminal());
    }
}
