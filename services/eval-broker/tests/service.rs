//! The eval broker's service tests: every case in `cases/` on the embedded
//! store (`mem::…`) and on the real etcd named by `CARAVAN_TEST_ETCD`
//! (`etcd::…`; `scripts/test` starts one, and without it those fail).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod cases;

caravan_testkit::backend_cases!(store => crate::cases {
    delivery {
        restores_evals_written_before_it_starts,
        dequeue_long_poll_times_out_empty_and_wakes_on_new_evals,
        a_dequeue_acks_the_delivery_it_carries,
        outstanding_resets_answer_each_eval_on_its_own,
        worker_writes_need_the_live_token,
        ack_cancels_older_waiting_evals,
        the_next_eval_of_a_job_waits_for_the_acked_writes,
        delivery_limit_fails_the_eval_with_a_follow_up,
        nack_timeout_redelivers_and_reset_extends_it,
        a_completed_but_unacked_eval_is_not_redelivered,
        metrics_show_the_queues_and_time_each_delivery,
    },
    blocked {
        a_blocked_eval_unblocks_when_a_node_registers,
        a_newer_blocked_eval_cancels_the_older,
        a_later_complete_eval_cancels_the_blocked_one,
        a_reblocked_eval_waits_for_capacity_again,
        plan_failure_blocks_are_retried_periodically,
    },
    failover {
        a_standby_names_the_leader_and_takes_over,
        a_crashed_leader_loses_nothing,
    },
    nodes {
        a_lost_heartbeat_marks_the_node_down_with_evals,
        a_node_without_heartbeat_at_restore_goes_down,
        a_node_with_many_jobs_goes_down_in_several_txns,
        a_crash_after_marking_a_node_down_loses_none_of_its_evals,
        a_nodes_pending_fan_out_is_finished_once,
        a_mass_heartbeat_loss_waits_a_grace_before_marking_nodes_down,
    },
    periodic {
        children_launch_on_schedule_with_version_and_eval,
        prohibit_overlap_waits_for_the_running_child,
        a_failover_catches_up_once_and_never_launches_twice,
        force_periodic_launches_now_and_checks_its_job,
    },
    gc {
        force_gc_takes_terminal_objects_and_keeps_what_lives,
        a_sweep_removes_the_registrations_of_allocs_no_longer_live,
        a_sweep_frees_superseded_status_batches_and_allocations_read_alike,
        instances_on_a_node_that_went_down_go_at_the_next_short_sweep,
        the_sweep_runs_on_its_interval_with_the_thresholds,
        the_leader_compacts_the_history_its_cache_has_seen,
    },
    drain {
        a_passed_deadline_migrates_what_is_left_then_completes,
        a_drain_without_deadline_is_never_forced,
    },
});
