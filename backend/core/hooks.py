"""Steps a lower layer calls in a higher one, in its own transaction, by name.

A job (core.jobs) runs later, in the worker; some steps must run now, inside the caller's
transaction: deleting a study first hands the results other studies' runs reuse over to
them and deletes its runs' telemetry (the runs app's and telemetry's rows), and editing a
study's objectives recomputes each finished run's objectives from its stored series
(telemetry's). The lower layer names such a step here, as a `Hook`, and calls it; the app
that owns the step registers its implementation in its AppConfig.ready(). A hook has
exactly one implementation (`core/tests/test_hooks.py`), from the app its name starts with.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from typing import Any

from django.core.exceptions import ImproperlyConfigured


class Hook(enum.StrEnum):
    # runs: before a study's runs are deleted (in that transaction), the results other
    # studies' runs reuse handed over to them, the runs' series and log deleted
    # (keyword arguments: study)
    STUDY_DELETING = "runs.study_deleting"
    # telemetry: a finished run's objectives, iterations and trust flag set on the run from
    # its stored series, not saved (keyword arguments: run, solver_converged, iterations,
    # last_time)
    RUN_RESULTS_RECOMPUTE = "telemetry.run_results_recompute"
    # scheduler: whether a backend's admission policy takes a tenant's queued runs by their
    # studies' priority before their order of submission (queue positions count as it
    # does; keyword arguments: policy, the backend's admission_policy, blank for the default)
    QUEUE_BY_PRIORITY = "scheduler.queue_by_priority"


_IMPLEMENTATIONS: dict[Hook, Callable[..., Any]] = {}


def register(hook: Hook, implementation: Callable[..., Any]) -> None:
    """Make `implementation` the step `hook` names (from the owning app's ready()). A second,
    different implementation is refused: a hook does one thing."""
    current = _IMPLEMENTATIONS.get(hook)
    if current is not None and current is not implementation:
        raise ImproperlyConfigured(
            f"hook {hook} has an implementation already ({current.__module__}."
            f"{current.__qualname__}); {implementation.__module__}."
            f"{implementation.__qualname__} cannot be a second"
        )
    _IMPLEMENTATIONS[hook] = implementation


def implementation(hook: Hook) -> Callable[..., Any]:
    """What runs when `hook` is called; ImproperlyConfigured when its app registered none."""
    try:
        return _IMPLEMENTATIONS[hook]
    except KeyError:
        raise ImproperlyConfigured(
            f"hook {hook} has no implementation: the app {hook.split('.')[0]} registers it in "
            "its AppConfig.ready() (is it in INSTALLED_APPS?)"
        ) from None


def call(hook: Hook, /, **kwargs: Any) -> Any:
    """Run the step `hook` names now, in the caller's transaction."""
    return implementation(hook)(**kwargs)
