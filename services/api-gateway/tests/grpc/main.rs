//! The gateway over gRPC, in-process, against the embedded store and etcd:
//! job writes and reads, blocking queries, and the node-facing API. Each
//! case starts its own gateway and checks one behaviour; every case runs on
//! both stores (`mem::…` and `etcd::…`).
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "../common/mod.rs"]
mod common;
mod fixtures;

mod allocations;
mod blocking;
mod drains;
mod errors;
mod heartbeat_listener;
mod identity;
mod jobs;
mod nodes;
mod plans;
mod services;
mod status;

caravan_testkit::backend_cases!(backend => crate {
    jobs {
        registering_a_job_stores_it_as_version_zero,
        registering_a_job_writes_a_pending_job_register_eval,
        the_same_spec_again_keeps_the_version_and_adds_an_eval,
        each_new_spec_is_a_new_version_and_six_are_kept,
        kept_versions_are_listed_newest_first,
        an_enforced_register_with_a_stale_revision_fails_its_precondition,
        an_enforced_register_with_the_current_revision_is_a_new_version,
        deregistering_stops_the_job_in_a_new_version_with_an_eval,
        purging_removes_the_job_and_its_versions,
        purging_a_purged_job_is_not_found,
    },
    errors {
        a_negative_count_is_invalid_and_writes_nothing,
        zero_cpu_is_invalid_and_writes_nothing,
        a_request_without_job_is_invalid_and_writes_nothing,
        a_body_that_does_not_decode_is_invalid_and_writes_nothing,
    },
    blocking {
        an_idle_blocking_read_times_out_at_the_same_revision,
        a_change_wakes_a_blocking_read_with_the_new_job,
    },
    plans {
        validation_names_a_bad_count_and_writes_nothing,
        validation_of_a_good_job_has_no_errors_and_writes_nothing,
        a_plan_without_nodes_reports_the_failed_group_and_its_diff,
        a_plan_writes_nothing,
    },
    nodes {
        registration_grants_the_configured_heartbeat_ttl,
        a_registered_node_is_ready_with_a_computed_class,
        the_heartbeat_key_rides_the_nodes_lease,
        heartbeats_keep_the_lease_past_its_ttl,
        re_registration_moves_the_heartbeat_key_to_a_new_lease,
        silence_expires_the_heartbeat_key_and_later_heartbeats_are_not_found,
        a_heartbeat_from_an_unknown_node_is_not_found,
        a_node_without_datacenter_is_invalid,
    },
    allocations {
        an_alloc_stream_starts_with_the_whole_empty_set,
        a_placed_alloc_is_streamed_with_the_job_version_it_runs,
        a_stream_asked_from_a_revision_starts_from_a_view_that_new,
        a_nodes_own_status_report_is_not_streamed_back,
        a_job_version_is_streamed_once_per_stream,
        a_stopped_alloc_is_streamed_with_its_desired_stop,
        a_deleted_alloc_is_streamed_as_removed,
        a_failed_report_is_stored_with_its_description,
        a_report_keeps_the_placement_metrics,
        a_failed_report_writes_an_alloc_failure_eval_in_the_same_txn,
        a_report_on_another_nodes_alloc_is_refused,
        a_finished_alloc_is_never_reported_running_again,
    },
    heartbeat_listener {
        heartbeats_are_answered_while_the_gateway_runtime_is_busy,
        the_heartbeat_listener_takes_heartbeats_only,
    },
    identity {
        a_node_id_is_not_registered_again_with_another_secret,
        a_new_node_must_present_a_secret,
        heartbeats_with_a_wrong_or_missing_secret_are_refused,
        updates_and_alloc_streams_with_a_wrong_secret_are_refused,
        a_node_stored_before_secrets_records_the_first_one_presented,
        the_secret_hash_never_leaves_the_servers,
    },
    drains {
        an_empty_node_is_drained_at_once_and_stays_ineligible,
        a_node_with_a_running_alloc_keeps_draining,
        a_drain_completes_when_the_last_alloc_finishes,
    },
    services {
        services_are_listed_with_tags_and_read_by_name_and_tag,
        a_blocking_get_service_is_woken_by_a_new_instance,
    },
    status {
        no_leaders_are_reported_before_any_election,
        an_elected_leader_is_reported_by_service,
    },
});
