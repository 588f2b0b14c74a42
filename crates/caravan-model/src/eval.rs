//! When an evaluation is finished, and when it still waits.

use caravan_proto::EvalStatus;

/// Rules of an evaluation's status.
pub trait EvalStatusExt {
    /// Whether the evaluation is finished: complete, failed or canceled
    /// (Nomad's `TerminalStatus`). A blocked evaluation is not: it waits for
    /// capacity.
    fn is_terminal(&self) -> bool;

    /// Whether the evaluation still waits to be processed: pending, or
    /// blocked until capacity frees. Unlike `!is_terminal()`, an unset status
    /// does not wait.
    fn is_waiting(&self) -> bool;
}

impl EvalStatusExt for EvalStatus {
    fn is_terminal(&self) -> bool {
        matches!(*self, Self::Complete | Self::Failed | Self::Canceled)
    }

    fn is_waiting(&self) -> bool {
        matches!(*self, Self::Pending | Self::Blocked)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALL: [EvalStatus; 6] = [
        EvalStatus::Unspecified,
        EvalStatus::Pending,
        EvalStatus::Blocked,
        EvalStatus::Complete,
        EvalStatus::Failed,
        EvalStatus::Canceled,
    ];

    #[test]
    fn complete_failed_and_canceled_are_terminal() {
        for s in [
            EvalStatus::Complete,
            EvalStatus::Failed,
            EvalStatus::Canceled,
        ] {
            assert!(s.is_terminal(), "{s:?}");
        }
        for s in [
            EvalStatus::Unspecified,
            EvalStatus::Pending,
            EvalStatus::Blocked,
        ] {
            assert!(!s.is_terminal(), "{s:?}");
        }
    }

    #[test]
    fn pending_and_blocked_wait() {
        for s in ALL {
            let expected = matches!(s, EvalStatus::Pending | EvalStatus::Blocked);
            assert_eq!(s.is_waiting(), expected, "{s:?}");
            if s != EvalStatus::Unspecified {
                assert_ne!(s.is_waiting(), s.is_terminal(), "{s:?}");
            }
        }
        let unset = EvalStatus::Unspecified;
        assert!(!unset.is_waiting() && !unset.is_terminal());
    }
}
