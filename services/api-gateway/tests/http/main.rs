//! The Nomad-compatible HTTP API, in-process, against the embedded store and
//! etcd: Nomad JSON in and out, blocking queries, the 400s that write
//! nothing, plans, node operations and the logs proxy. Each case starts its
//! own gateway and checks one behaviour; every case runs on both stores
//! (`mem::…` and `etcd::…`).
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "../common/mod.rs"]
mod common;
mod fixtures;

mod agent;
mod allocations;
mod blocking;
mod busy_runtime;
mod deployments;
mod errors;
mod jobs;
mod logs;
mod namespaces;
mod nodes;
mod operator;
mod plans;
mod query_params;
mod scaling;
mod search;
mod services;
mod submissions;
mod vars;

caravan_testkit::backend_cases!(backend => crate {
    jobs {
        registering_a_job_answers_its_eval_and_modify_index,
        a_registered_job_reads_back_in_nomad_json,
        the_job_list_filters_by_prefix_and_carries_summaries,
        a_registered_job_has_a_pending_job_register_eval,
        a_new_job_has_no_allocations,
        a_new_job_lists_version_zero,
        a_job_summary_names_its_job,
        a_job_posted_under_another_jobs_path_is_400,
        reading_an_unknown_job_is_404,
        purging_a_job_answers_an_eval_and_removes_it,
        stopping_an_unknown_job_answers_no_eval,
    },
    errors {
        malformed_json_is_400_and_writes_nothing,
        a_task_without_driver_is_400_and_writes_nothing,
        a_negative_count_is_400_and_writes_nothing,
        more_allocations_than_the_limit_are_400_and_write_nothing,
        a_bad_constraint_regexp_is_400_and_writes_nothing,
        zero_cpu_is_400_and_writes_nothing,
        a_body_without_job_is_400_and_writes_nothing,
        a_10mb_job_is_refused_before_parsing_and_writes_nothing,
        a_non_numeric_index_is_400,
        an_unparseable_wait_is_400,
    },
    busy_runtime {
        http_is_answered_while_the_gateway_runtime_is_busy,
    },
    blocking {
        an_idle_blocking_query_waits_out_its_wait_and_keeps_the_index,
        a_new_job_wakes_a_blocking_query_with_a_higher_index,
    },
    plans {
        hcl_parses_to_nomad_json,
        parse_answers_the_job_as_written_unless_canonicalized,
        unparseable_hcl_is_400,
        a_refused_block_is_400_from_parse_register_and_validate,
        a_plan_places_every_instance_and_diffs_the_job_as_added,
        a_plan_writes_no_job_and_no_eval,
        validation_reports_problems_in_a_200_and_writes_nothing,
        validation_of_a_good_job_has_no_errors_and_writes_nothing,
    },
    nodes {
        nodes_list_with_their_status_and_resources,
        node_stubs_add_resources_and_os_only_when_asked,
        a_nodes_allocations_embed_their_job,
        an_unknown_eligibility_is_400,
        a_node_marked_ineligible_reads_back_ineligible,
        a_drain_evaluates_each_job_on_the_node,
        a_drained_node_reads_back_ineligible_with_its_deadline,
        a_draining_node_cannot_be_made_eligible,
        cancelling_a_drain_with_mark_eligible_records_it_canceled,
        reading_an_unknown_node_is_404,
        a_node_can_be_evaluated_on_demand,
        purging_a_node_removes_it_and_its_heartbeat,
        purging_a_purged_node_is_404,
    },
    allocations {
        allocations_list_as_stubs_with_client_status_and_job_type,
        stopping_an_allocation_migrates_it_with_an_alloc_stop_eval,
        stopping_an_unknown_allocation_is_404,
        a_whole_allocation_carries_its_placement_metrics,
    },
    logs {
        plain_logs_are_proxied_from_the_node,
        framed_logs_carry_the_nodes_offsets,
        logs_of_an_unknown_task_are_400,
        logs_of_an_unknown_allocation_are_404,
        grpc_read_logs_streams_the_nodes_log,
    },
    operator {
        the_default_scheduler_config_binpacks_and_preempts_system_jobs,
        an_unknown_scheduler_algorithm_is_400,
        a_check_and_set_config_write_applies_once,
        reject_job_registration_refuses_new_jobs_with_403,
    },
    deployments {
        a_stored_deployment_reads_back_in_nomad_json,
        a_promotion_is_forwarded_to_the_watcher_leader,
        the_watchers_refusal_is_passed_on_as_400,
        promoting_an_unknown_deployment_is_404,
        steering_a_terminal_deployment_is_refused_in_nomads_words,
        allocation_health_checks_its_arguments_before_the_deployment,
    },
    query_params {
        purge_accepts_gos_capitalised_true,
        purge_false_only_stops_the_job,
        a_bad_boolean_is_400_naming_it_and_stops_nothing,
        stale_reads_as_a_boolean_on_every_read,
        waits_and_indexes_read_as_go_does,
        lists_page_by_next_token_and_filter_by_expression,
    },
    search {
        prefix_search_finds_ids_in_each_context,
        prefix_search_truncates_at_twenty,
        fuzzy_search_matches_names_with_their_scope,
        searches_refuse_unknown_contexts_and_short_text,
        namespaces_without_jobs_are_found,
    },
    scaling {
        without_scaling_blocks_there_are_no_policies,
        a_groups_policy_is_listed_and_read_by_a_stable_id,
        policies_filter_by_job_and_type,
        a_scaling_block_out_of_bounds_is_400_and_writes_nothing,
        scaling_outside_the_policy_bounds_is_400,
    },
    agent {
        the_leader_is_the_gateways_grpc_address,
        the_agent_reports_itself_alive,
        the_agent_has_one_member,
        the_only_region_is_the_configured_one,
        the_servers_are_this_gateways_address,
        joining_reports_what_joined_like_nomad,
        force_leave_checks_its_arguments,
        the_raft_configuration_lists_the_store_members,
        json_metrics_count_registered_nodes,
        prometheus_metrics_count_registered_nodes,
        metrics_are_served_as_text_and_count_job_registrations,
    },
    namespaces {
        namespaces_are_objects_with_a_default_that_stays,
        fields_caravan_does_not_honour_are_refused_by_name,
        jobs_need_their_namespace_to_exist,
        node_pools_are_objects_beside_the_built_in_ones,
        variable_locks_are_taken_renewed_and_released,
    },
    submissions {
        a_submission_is_kept_with_its_version,
        parse_applies_the_variables_file,
    },
    services {
        instances_read_by_name_listed_with_tags_and_deleted,
        a_blocking_read_wakes_when_an_instance_registers,
        a_nodes_instance_rides_its_status_reports_until_deregistered,
    },
    vars {
        a_variable_reads_back_with_its_items_and_indexes,
        items_are_encrypted_at_rest_and_metadata_is_not,
        a_gateway_with_another_key_refuses_clearly,
        check_and_set_conflicts_answer_409_with_the_current_variable,
        concurrent_check_and_set_writes_let_exactly_one_win,
        lists_filter_by_prefix_and_namespace,
        writes_need_their_namespace_to_exist,
        bad_paths_and_bodies_are_400_naming_the_field,
        a_blocking_list_wakes_on_a_variable_change_only,
    },
});
