"""Jobs: register, plan, read, stop, versions, scale and dispatch."""

from caravan import messages
from caravan.base import Calls
from caravan.errors import NotFound
from caravan.v1 import api_pb2

_SERVICE = "JobService"


class Jobs(Calls):
    """The JobService of the gateway (`client.jobs`)."""

    def register(self, job, check_revision=None):
        """Registers `job` (a Job message or a dict of its fields) as its next
        version and creates an evaluation for it. With `check_revision`, only
        if the job's current `job_modify_revision` is that (0: only if new),
        raising Conflict otherwise. Returns the RegisterJobResponse (`eval_id`,
        `job_modify_revision`, `warnings`).

        Not retried once sent: each registration makes an evaluation, and
        without `check_revision` a repeat could land a second version."""
        request = api_pb2.RegisterJobRequest(job=messages.job(job, self.namespace))
        if check_revision is not None:
            request.enforce_revision = True
            request.job_modify_revision = check_revision
        return self._write(_SERVICE, "RegisterJob", request)

    def validate(self, job):
        """The problems of `job` without registering it: a ValidateJobResponse
        with `errors` and `warnings`."""
        request = api_pb2.ValidateJobRequest(job=messages.job(job, self.namespace))
        return self._read(_SERVICE, "ValidateJob", request)

    def plan(self, job, diff=True):
        """What registering `job` would do, without doing it: a PlanJobResponse
        (placements, failed placements, and with `diff` a readable diff)."""
        request = api_pb2.PlanJobRequest(job=messages.job(job, self.namespace), diff=diff)
        return self._read(_SERVICE, "PlanJob", request)

    def get(self, job_id):
        """The newest version of a job; NotFound when there is none."""
        reply = self._read(_SERVICE, "GetJob", api_pb2.GetJobRequest(job_id=job_id, options=self._options()))
        if not reply.HasField("job"):
            raise NotFound(f"job {job_id!r} not found")
        return reply.job

    status = get

    def list(self, prefix=""):
        """The jobs of the namespace whose ID starts with `prefix`."""
        reply = self._read(_SERVICE, "ListJobs", api_pb2.ListJobsRequest(options=self._options(prefix)))
        return list(reply.jobs)

    def stop(self, job_id, purge=False):
        """Stops a job (Nomad's deregister); with `purge` removes it and its
        history too. Returns the DeregisterJobResponse (`eval_id`)."""
        request = api_pb2.DeregisterJobRequest(namespace=self.namespace, job_id=job_id, purge=purge)
        return self._write(_SERVICE, "DeregisterJob", request)

    deregister = stop

    def versions(self, job_id):
        """Every kept version of a job, newest first."""
        request = api_pb2.ListJobVersionsRequest(job_id=job_id, options=self._options())
        return list(self._read(_SERVICE, "ListJobVersions", request).versions)

    def revert(self, job_id, version, prior_version=None):
        """Registers version `version`'s specification as the newest version;
        with `prior_version`, only if the current version is that."""
        request = api_pb2.RevertJobRequest(namespace=self.namespace, job_id=job_id, job_version=version)
        if prior_version is not None:
            request.enforce_prior_version = True
            request.prior_version = prior_version
        return self._write(_SERVICE, "RevertJob", request)

    def set_stability(self, job_id, version, stable=True):
        """Marks one version stable (or not). Safe to repeat."""
        request = api_pb2.SetJobStabilityRequest(
            namespace=self.namespace, job_id=job_id, job_version=version, stable=stable
        )
        return self._write(_SERVICE, "SetJobStability", request, idempotent=True)

    def dispatch(self, job_id, payload=b"", meta=None):
        """Launches a child of a parameterized job: a DispatchJobResponse with
        the child's `dispatched_job_id` and `eval_id`."""
        if isinstance(payload, str):
            payload = payload.encode()
        request = api_pb2.DispatchJobRequest(
            namespace=self.namespace, job_id=job_id, payload=payload, meta=meta or {}
        )
        return self._write(_SERVICE, "DispatchJob", request)

    def force_periodic(self, job_id):
        """Launches a periodic job's child now."""
        request = api_pb2.ForcePeriodicJobRequest(namespace=self.namespace, job_id=job_id)
        return self._write(_SERVICE, "ForcePeriodicJob", request)

    def scale(self, job_id, group, count):
        """Sets the count of one task group (a new version and an evaluation)."""
        request = api_pb2.ScaleJobRequest(namespace=self.namespace, job_id=job_id, group=group, count=count)
        return self._write(_SERVICE, "ScaleJob", request)

    def evaluate(self, job_id, force_reschedule=False):
        """Creates a new evaluation of a job: an EvaluateJobResponse (`eval_id`)."""
        request = api_pb2.EvaluateJobRequest(
            namespace=self.namespace, job_id=job_id, force_reschedule=force_reschedule
        )
        return self._write(_SERVICE, "EvaluateJob", request)

    def summary(self, job_id):
        """Allocation counts per task group: a JobSummaryResponse whose
        `summary` maps group names to TaskGroupSummary."""
        request = api_pb2.JobSummaryRequest(job_id=job_id, options=self._options())
        return self._read(_SERVICE, "JobSummary", request)

    def allocations(self, job_id):
        """The allocations of a job."""
        request = api_pb2.JobAllocationsRequest(job_id=job_id, options=self._options())
        return list(self._read(_SERVICE, "JobAllocations", request).allocs)

    def evaluations(self, job_id):
        """The evaluations of a job."""
        request = api_pb2.JobEvaluationsRequest(job_id=job_id, options=self._options())
        return list(self._read(_SERVICE, "JobEvaluations", request).evals)
