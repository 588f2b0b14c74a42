//! Why placements failed, from a task group's `AllocMetric`: the `* …` lines
//! under `Task Group "x" (failed to place N allocations):`.

use std::collections::BTreeMap;

use caravan_proto::AllocMetric;

use crate::format::short_id;

/// The metric lines of one task group, each starting with `prefix`, joined by
/// newlines.
pub fn alloc_metrics(m: &AllocMetric, prefix: &str) -> String {
    let mut lines = Vec::new();
    if m.nodes_evaluated == 0 {
        lines.push(format!("{prefix}* No nodes were eligible for evaluation"));
    }
    for (dc, available) in &m.nodes_available {
        if *available == 0 {
            lines.push(format!(
                "{prefix}* No nodes are available in datacenter {dc:?}"
            ));
        }
    }
    for (class, n) in &m.class_filtered {
        lines.push(format!(
            "{prefix}* Class {class:?}: {n} nodes excluded by filter"
        ));
    }
    for (constraint, n) in &m.constraint_filtered {
        lines.push(format!(
            "{prefix}* Constraint {constraint:?}: {n} nodes excluded by filter"
        ));
    }
    if m.nodes_exhausted > 0 {
        lines.push(format!(
            "{prefix}* Resources exhausted on {} nodes",
            m.nodes_exhausted
        ));
    }
    for (class, n) in &m.class_exhausted {
        lines.push(format!("{prefix}* Class {class:?} exhausted on {n} nodes"));
    }
    for (dimension, n) in &m.dimension_exhausted {
        lines.push(format!(
            "{prefix}* Dimension {dimension:?} exhausted on {n} nodes"
        ));
    }
    for quota in m.quota_exhausted.keys() {
        lines.push(format!("{prefix}* Quota limit hit {quota:?}"));
    }
    lines.join("\n")
}

/// `Task Group "web" (failed to place 2 allocations):`.
pub fn group_header(group: &str, m: &AllocMetric) -> String {
    let n = u64::from(m.coalesced_failures) + 1;
    let noun = if m.coalesced_failures > 0 {
        "allocations"
    } else {
        "allocation"
    };
    format!("Task Group {group:?} (failed to place {n} {noun}):")
}

/// The `Failed Placements` block of `eval status`: a header per task group
/// with its metrics, and the blocked eval that waits for capacity.
pub fn failed_placements(failed: &BTreeMap<String, AllocMetric>, blocked_eval: &str) -> String {
    let mut out = String::from("Failed Placements\n");
    for (group, m) in failed {
        out.push_str(&group_header(group, m));
        out.push('\n');
        let metrics = alloc_metrics(m, "  ");
        if !metrics.is_empty() {
            out.push_str(&metrics);
            out.push('\n');
        }
        out.push('\n');
    }
    if !blocked_eval.is_empty() {
        out.push_str(&waiting_for_capacity(blocked_eval));
        out.push('\n');
    }
    out.trim_end().to_string()
}

/// `Evaluation "abcd1234" waiting for additional capacity to place remainder`.
pub fn waiting_for_capacity(blocked_eval: &str) -> String {
    format!(
        "Evaluation {:?} waiting for additional capacity to place remainder",
        short_id(blocked_eval)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn exhausted() -> AllocMetric {
        AllocMetric {
            nodes_evaluated: 3,
            nodes_exhausted: 2,
            dimension_exhausted: [("memory".to_string(), 2)].into(),
            constraint_filtered: [("${attr.kernel.name} = windows".to_string(), 1)].into(),
            coalesced_failures: 1,
            ..Default::default()
        }
    }

    #[test]
    fn metrics_name_filters_and_exhausted_dimensions() {
        assert_eq!(
            alloc_metrics(&exhausted(), "  "),
            "  * Constraint \"${attr.kernel.name} = windows\": 1 nodes excluded by filter\n  \
             * Resources exhausted on 2 nodes\n  \
             * Dimension \"memory\" exhausted on 2 nodes"
        );
    }

    #[test]
    fn no_eligible_nodes_and_missing_drivers() {
        let m = AllocMetric {
            nodes_available: [("dc9".to_string(), 0)].into(),
            ..Default::default()
        };
        assert_eq!(
            alloc_metrics(&m, ""),
            "* No nodes were eligible for evaluation\n* No nodes are available in datacenter \"dc9\""
        );
        let m = AllocMetric {
            nodes_evaluated: 1,
            nodes_filtered: 1,
            constraint_filtered: [("missing drivers".to_string(), 1)].into(),
            ..Default::default()
        };
        assert_eq!(
            alloc_metrics(&m, "  "),
            "  * Constraint \"missing drivers\": 1 nodes excluded by filter"
        );
    }

    #[test]
    fn the_block_counts_coalesced_failures() {
        let failed: BTreeMap<String, AllocMetric> = [
            ("web".to_string(), exhausted()),
            (
                "db".to_string(),
                AllocMetric {
                    nodes_evaluated: 1,
                    nodes_exhausted: 1,
                    ..Default::default()
                },
            ),
        ]
        .into();
        let out = failed_placements(&failed, "0d142ec3-aaaa-bbbb-cccc-dddddddddddd");
        assert_eq!(
            out,
            "Failed Placements\n\
             Task Group \"db\" (failed to place 1 allocation):\n  \
             * Resources exhausted on 1 nodes\n\n\
             Task Group \"web\" (failed to place 2 allocations):\n  \
             * Constraint \"${attr.kernel.name} = windows\": 1 nodes excluded by filter\n  \
             * Resources exhausted on 2 nodes\n  \
             * Dimension \"memory\" exhausted on 2 nodes\n\n\
             Evaluation \"0d142ec3\" waiting for additional capacity to place remainder"
        );
    }
}
