from django.db import models


class Priority(models.IntegerChoices):
    """A study's priority within its tenant's queue (admission policies `priority` and
    `fair_share`; `fifo` ignores it)."""

    LOW = 0, "low"
    NORMAL = 1, "normal"
    HIGH = 2, "high"


class RunState(models.TextChoices):
    PENDING = "pending", "Queued"
    ADMITTED = "admitted", "Admitted"
    PROVISIONING = "provisioning", "Provisioning"
    RUNNING = "running", "Running"
    COMPLETED = "completed", "Completed"
    FAILED = "failed", "Failed"
    CANCELLED = "cancelled", "Cancelled"


HOLDING_STATES = (RunState.ADMITTED, RunState.PROVISIONING, RunState.RUNNING)
STARTED_STATES = (RunState.PROVISIONING, RunState.RUNNING)
TERMINAL_STATES = (RunState.COMPLETED, RunState.FAILED, RunState.CANCELLED)
ACTIVE_STATES = (RunState.PENDING, *HOLDING_STATES)


class StudyState(models.TextChoices):
    DRAFT = "draft", "Draft"
    SUBMITTED = "submitted", "Submitted"
    RUNNING = "running", "Running"
    COMPLETED = "completed", "Completed"
    COMPLETED_WITH_FAILURES = "completed_with_failures", "Completed with failures"
    CANCELLED = "cancelled", "Cancelled"
    # deleted by its user: hidden from every read at once, its runs and files removed in the
    # background (studies.deletion), then the row itself
    DELETING = "deleting", "Deleting"


ENDED_STUDY_STATES = (
    StudyState.COMPLETED,
    StudyState.COMPLETED_WITH_FAILURES,
    StudyState.CANCELLED,
)


class WaitReason(models.TextChoices):
    NONE = "", "—"
    QUEUED = "queued", "Waiting for the scheduler"
    QUOTA = "quota", "Tenant quota is in use"
    BACKEND = "backend_capacity", "Backend capacity is in use"
    RETRY = "retry", "Waiting to be retried"
    IMAGE = "image", "Waiting for its image to build"
    CLOUD = "cloud_limit", "Cloud project limit"
    POOL = "pool_worker", "Waiting for a pool worker"
    STORAGE = "storage", "Tenant storage quota is used up"
    BUDGET = "core_hour_budget", "Monthly core-hour budget is used up"


class EndReason(models.TextChoices):
    NONE = "", "—"
    SUCCESS = "success", "Finished"
    EXIT_CODE = "exit_code", "Solver failed"
    CANCELLED_BY_USER = "cancelled_by_user", "Cancelled by a user"
    DIVERGED = "diverged", "Diverged"
    AGENT_LOST = "agent_lost", "Agent lost (no heartbeat)"
    DISPATCH_FAILED = "dispatch_failed", "Backend refused to start the run"
    TERMINATED = "terminated", "Terminated by the backend"
    CONVERGED = "converged", "Stopped early: converged"
    MAX_WALL_TIME = "max_wall_time", "Stopped: maximum wall time"
    MEMORY_LIMIT = "memory_limit", "Stopped: over its memory"
    DISK_BUDGET = "disk_budget", "Stopped: over its disk budget"
    STALLED = "stalled", "Stopped: no progress"
    CANCELLED_BY_ADMIN = "cancelled_by_admin", "Stopped by an administrator"


# the ends after which a run's objectives are results: it ran to its end, or a convergence
# rule stopped it as converged. Every other end (cancelled, failed, stopped at its wall-time
# limit, over its memory or disk) left a partial series: its values are `partial_objectives`
COMPLETE_END_REASONS = (EndReason.SUCCESS, EndReason.CONVERGED)


def run_is_complete(*, state: str, end_reason: str) -> bool:
    """Whether a run that ended has results: it completed, to its end or converged early."""
    return state == RunState.COMPLETED and end_reason in COMPLETE_END_REASONS


class Reduce(models.TextChoices):
    LAST = "last", "Last value"
    MEAN_LAST = "mean_last", "Mean of the last n values"
    MIN = "min", "Minimum"
    MAX = "max", "Maximum"


class Combine(models.TextChoices):
    GRID = "grid", "Cartesian grid"
    ZIP = "zip", "Zipped lists"
    LHS = "lhs", "Latin hypercube sample"
    RANDOM = "random", "Uniform random sample"
    ADAPTIVE = "adaptive", "Adaptive sampling (Gaussian-process surrogate)"


class AdaptiveEnd(models.TextChoices):
    """Why an adaptive study made no further batch."""

    NONE = "", "—"
    BUDGET = "budget", "Budget of runs spent"
    TOLERANCE = "tolerance", "Tolerance met"
    CANCELLED = "cancelled", "Cancelled"
    NO_RESULTS = "no_results", "No completed run with objective values to learn from"
    EXHAUSTED = "exhausted", "No new point left to sample"
    ERROR = "error", "The next batch could not be made (its case, image or objectives changed)"


class Trust(models.TextChoices):
    UNKNOWN = "", "—"
    CONVERGED = "converged", "Converged"
    NOT_CONVERGED = "not_converged", "Not converged"
    ITERATION_LIMIT = "iteration_limit", "Iteration limit"
    DIVERGED = "diverged", "Diverged"
    UNSTEADY = "unsteady", "Unsteady (oscillating)"
