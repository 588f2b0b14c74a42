//! When an evaluation is finished.

use caravan_proto::EvalStatus;

/// Rules of an evaluation's status.
pub trait EvalStatusExt {
    /// Whether the evaluation is finished: complete, failed or canceled
    /// (Nomad's `TerminalStatus`). A blocked evaluation is not: it waits for
    /// capacity.
    fn is_terminal(&self) -> bool;
}

impl EvalStatusExt for EvalStatus {
    fn is_terminal(&self) -> bool {
        matches!(*self, Self::Complete | Self::Failed | Self::Canceled)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
