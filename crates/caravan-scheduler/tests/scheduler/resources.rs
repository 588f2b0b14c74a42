//! Resource scenarios: exclusive cores, reserved node resources, disk.
#![allow(clippy::unwrap_used)]

use crate::common::*;
use caravan_proto::{EphemeralDisk, Resources};

#[test]
fn cores_are_exclusive_and_count_as_cpu() {
    let mut j = service("web", 2);
    j.task_groups[0].tasks[0].resources = Some(Resources {
        cores: 2,
        memory_mb: 256,
        ..Default::default()
    });
    let mut n = node("n0", "dc1", 4000, 8192);
    n.resources.as_mut().unwrap().core_ids = vec![0, 1, 2, 3];
    n.reserved.as_mut().unwrap().core_ids = vec![0];
    let mut h = cluster(vec![reclass(n)], &j);
    h.process(&eval("e1", &j, "job-register")).unwrap();
    let p = placed(&h);
    assert_eq!(p.len(), 1);
    let t = &p[0].allocated_resources.as_ref().unwrap().tasks["server"];
    assert_eq!(t.reserved_cores, vec![1, 2]);
    assert_eq!(t.cpu_mhz, 2000);
    let e = h.last_update().unwrap();
    // Three usable cores: the second alloc finds one left (CPU would fit).
    assert_eq!(e.failed_tg_allocs["web"].dimension_exhausted["cores"], 1);
}

#[test]
fn reserved_node_resources_are_not_handed_out() {
    let j = service("web", 1);
    let mut n = node("n0", "dc1", 4000, 8192);
    n.reserved.as_mut().unwrap().memory_mb = 8000;
    let mut h = cluster(vec![reclass(n), node("n1", "dc1", 4000, 8192)], &j);
    h.process(&eval("e1", &j, "job-register")).unwrap();
    assert_eq!(
        names_nodes(&placed(&h)),
        vec![("web.web[0]".into(), "n1".into())]
    );

    let mut n = node("n0", "dc1", 4000, 8192);
    n.reserved.as_mut().unwrap().cpu_mhz = 3600;
    let mut h = cluster(vec![reclass(n)], &j);
    h.process(&eval("e1", &j, "job-register")).unwrap();
    assert!(h.plans.is_empty());
    assert_eq!(
        h.last_update().unwrap().failed_tg_allocs["web"].dimension_exhausted["cpu"],
        1
    );
}

#[test]
fn disk_and_existing_allocs_plus_the_plan_are_counted() {
    let mut j = service("web", 3);
    j.task_groups[0].ephemeral_disk = Some(EphemeralDisk {
        size_mb: 40_000,
        ..Default::default()
    });
    // 100 GB of disk: two fit beside each other, the third does not.
    let mut h = cluster(vec![node("n0", "dc1", 64000, 65536)], &j);
    h.process(&eval("e1", &j, "job-register")).unwrap();
    assert_eq!(placed(&h).len(), 2);
    let e = h.last_update().unwrap();
    assert_eq!(e.failed_tg_allocs["web"].dimension_exhausted["disk"], 1);
    assert_eq!(
        placed(&h)[0]
            .allocated_resources
            .as_ref()
            .unwrap()
            .shared
            .as_ref()
            .unwrap()
            .disk_mb,
        40_000
    );
}
