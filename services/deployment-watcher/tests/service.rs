//! The deployment watcher's service tests: every case in `cases/` on the embedded
//! store (`mem::…`) and on the real etcd named by `CARAVAN_TEST_ETCD`
//! (`etcd::…`; `scripts/test` starts one, and without it those fail).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod cases;

caravan_testkit::backend_cases!(store => crate::cases {
    rollout {
        healthy_allocs_are_counted_and_roll_the_next_batch,
        a_healthy_deployment_succeeds_and_its_version_turns_stable,
        a_success_written_by_the_scheduler_marks_the_version_stable,
        a_new_leader_writes_the_eval_a_healthy_batch_was_owed,
        a_backlog_of_deployments_is_written_several_at_a_time,
    },
    failure {
        an_unhealthy_alloc_fails_and_reverts_to_the_stable_version,
        without_auto_revert_a_failure_only_evaluates,
        the_progress_deadline_fails_a_stalled_deployment,
    },
    canaries {
        canaries_wait_for_promotion,
        auto_promote_promotes_healthy_canaries,
        a_failed_canary_deployment_evaluates_to_stop_its_canaries,
        healthy_canaries_outlive_the_progress_deadline,
    },
    steering {
        promote_by_group_then_all,
        pause_holds_evals_and_resume_evaluates,
        manual_fail_and_alloc_health,
        bad_requests_name_the_field,
    },
    failover {
        a_standby_names_the_leader_and_takes_over,
        a_killed_leaders_work_is_picked_up,
        a_deposed_leaders_write_is_refused,
    },
});
