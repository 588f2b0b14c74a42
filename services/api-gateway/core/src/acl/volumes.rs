//! Host volume rules on job register, as Nomad's `Job.Register` applies them:
//! a group that mounts a host volume read-only needs `mount-readonly` or
//! `mount-readwrite` on its source, one that mounts it writable needs
//! `mount-readwrite`.

use caravan_proto::Job;

use super::{Acl, Caller};
use crate::error::GatewayError;

/// Nomad's capability to mount a host volume read-only.
pub const MOUNT_READONLY: &str = "mount-readonly";
/// Nomad's capability to mount a host volume writable.
pub const MOUNT_READWRITE: &str = "mount-readwrite";

/// Whether `acl` may register `job` as far as its host volumes go.
pub fn may_mount(acl: &Acl, job: &Job) -> bool {
    job.task_groups.iter().all(|tg| {
        tg.volumes
            .values()
            .filter(|v| v.r#type == caravan_jobspec::VOLUME_TYPE_HOST)
            .all(|v| {
                acl.allow_host_volume_op(&v.source, MOUNT_READWRITE)
                    || (v.read_only && acl.allow_host_volume_op(&v.source, MOUNT_READONLY))
            })
    })
}

/// [`may_mount`] for a request's caller; without one ACLs are off.
pub fn check_job_volumes(caller: Option<&Caller>, job: &Job) -> Result<(), GatewayError> {
    match caller {
        Some(c) if !may_mount(&c.acl, job) => {
            Err(GatewayError::PermissionDenied("Permission denied".into()))
        }
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::acl::policy::parse;
    use caravan_proto::{TaskGroup, VolumeRequest};

    fn job(source: &str, read_only: bool) -> Job {
        let mut tg = TaskGroup::default();
        tg.volumes.insert(
            "v".into(),
            VolumeRequest {
                r#type: "host".into(),
                source: source.into(),
                read_only,
                per_alloc: false,
            },
        );
        Job {
            task_groups: vec![tg],
            ..Default::default()
        }
    }

    #[test]
    fn read_grants_read_only_mounts_and_write_grants_both() {
        let acl = Acl::compile([&parse(
            r#"
            host_volume "certs" { policy = "read" }
            host_volume "data-*" { policy = "write" }
            host_volume "data-secret" { policy = "deny" }
            "#,
        )
        .unwrap()]);
        assert!(may_mount(&acl, &job("certs", true)));
        assert!(!may_mount(&acl, &job("certs", false)));
        assert!(may_mount(&acl, &job("data-pg", false)));
        assert!(may_mount(&acl, &job("data-pg", true)));
        assert!(!may_mount(&acl, &job("data-secret", true)));
        assert!(!may_mount(&acl, &job("other", true)));
        assert!(may_mount(&Acl::management(), &job("other", false)));
        assert!(
            may_mount(&acl, &Job::default()),
            "no volumes, nothing to check"
        );
    }
}
