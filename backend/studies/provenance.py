"""A run's provenance (docs/provenance.md): enough to rerun its case by hand.

Two halves: what the portal knows (the identity and its inputs, the image and its package
versions, the backend, the job, the resources, the planned commands, the portal's version),
computed from the rows; and what the agent reported at the end of the attempt (the host(s),
the OpenFOAM build, each command line with its exit code and times, the environment the steps
saw, its version), stored on the run. The portal's half also travels to the agent in run.json,
which writes both halves to `windtunnel-provenance.json` in the case, so the run's archive
carries it.

A reused run's provenance is its source's (the computation that made the results it shows),
with `reused_from` naming it.
"""

from __future__ import annotations

import functools
import tomllib
from pathlib import Path
from typing import Any

from django.conf import settings

from orchestration.agent.rerun import rerun_lines
from orchestration.environment import environment_allowlist
from studies.models import Run, Study

PYPROJECT = Path(__file__).resolve().parents[2] / "pyproject.toml"


@functools.cache
def portal_version() -> str:
    """The portal's version (pyproject.toml's), with the deployment's build when it names
    one (WINDTUNNEL_BUILD: a commit, an image tag)."""
    try:
        with PYPROJECT.open("rb") as fh:
            version = str(tomllib.load(fh)["project"]["version"])
    except (OSError, KeyError, tomllib.TOMLDecodeError):
        version = "unknown"
    build = settings.WINDTUNNEL.get("BUILD") or ""
    return f"{version}+{build}" if build else version


def _image(study: Study) -> dict[str, Any] | None:
    image = study.image
    if image is None:
        return None
    return {
        "name": image.name,
        "kind": image.kind,
        "digest": image.digest,
        "packages": {str(p.get("name")): str(p.get("version")) for p in image.closure or []},
    }


def provenance_seed(*, run: Run, study: Study) -> dict[str, Any]:
    """The portal's half, for run.json (the agent writes it into the case with its own)."""
    inputs = study.identity_inputs or {}
    return {
        "portal_version": portal_version(),
        "run": str(run.pk),
        "study": str(study.pk),
        "study_name": study.name,
        "index": run.index,
        "attempt": run.attempt,
        "identity": run.identity,
        "identity_inputs": inputs,
        "solver": study.solver,
        "backend": {"name": run.backend.name, "kind": run.backend.kind},
        "image": _image(study),
        "packages": inputs.get("packages"),
        "processes": run.processes,
        "nodes": run.nodes,
        "decompose": study.decompose,
        "steps": study.steps,
        "env": study.env,
        "template": (study.spec or {}).get("template"),  # as named: no query per dispatch
        "upload": str(study.upload_id) if study.upload_id else None,
    }


def run_provenance(*, run: Run) -> dict[str, Any]:
    """The whole record the API shows (`provenance` on the run detail). `run` is the run
    whose results are shown: for a reused run, its source (studies.selectors
    .run_results_source), its shown run passing `reused_of`."""
    study = run.study
    agent = dict(run.provenance or {})
    seed = provenance_seed(run=run, study=study)
    openfoam = agent.get("openfoam") or {}
    planned = [
        {"name": s["name"], "role": s.get("role", ""), "argv": s["argv"]} for s in study.steps
    ]
    environment = agent.get("environment") or {
        "allowlist": environment_allowlist(),
        "set_by_run_configuration": study.env,
    }
    ran = agent.get("commands") or []
    return {
        "identity": {
            "hash": run.identity,
            "inputs": seed["identity_inputs"],
            "context": run.context,
        },
        "solver": study.solver,
        "openfoam_version": openfoam.get("version") or openfoam.get("build") or "",
        "openfoam": openfoam,
        "image": seed["image"],
        "packages": (seed["image"] or {}).get("packages") or seed["packages"] or {},
        "backend": seed["backend"],
        "hosts": agent.get("hosts") or ([agent["host"]] if agent.get("host") else []),
        "agent_host": agent.get("host", ""),
        "job_id": run.handle,
        "processes": run.processes,
        "nodes": run.nodes,
        "decompose": study.decompose,
        "commands": ran,
        "planned_commands": planned,
        # the steps as its agent ran them (as planned, before it reported), as shell lines
        "rerun": rerun_lines(
            ran or planned, dict(environment.get("set_by_run_configuration") or study.env or {})
        ),
        "environment": environment,
        "sandbox": agent.get("sandbox", ""),
        "limits": _limits(agent.get("limits")),
        "started_at": run.started_at,
        "finished_at": run.finished_at,
        "exit_code": run.exit_code,
        "end_reason": run.end_reason,
        "attempt": run.attempt,
        "agent_version": agent.get("agent_version", ""),
        "portal_version": portal_version(),
        "case": {
            "template": seed["template"],
            "upload": seed["upload"],
            "digest": (seed["identity_inputs"] or {}).get("case_digest", ""),
        },
        "run": str(run.pk),
        "study": str(study.pk),
        "study_name": study.name,
        "index": run.index,
        "resumed_from": _resumed_from(agent.get("resumed_from")),
    }


def _resumed_from(value: Any) -> dict[str, Any] | None:
    """The earlier attempt's write the attempt started from, as its agent recorded it."""
    if not isinstance(value, dict):
        return None
    settings = value.get("settings") if isinstance(value.get("settings"), dict) else {}
    blend = value.get("blend") if isinstance(value.get("blend"), dict) else None
    return {
        "blend": (
            {
                "source": str(blend.get("source")),
                "source_index": blend.get("source_index"),
                "weight": blend.get("weight"),
            }
            if blend
            else None
        ),
        "source": value.get("source") or None,
        "source_index": value.get("source_index"),
        "mapped": value.get("map") is True,
        "attempt": value.get("attempt"),
        "time": str(value.get("time") or ""),
        "iterations": value.get("iterations"),
        "end_time": value.get("end_time"),
        "settings": settings,
    }


def _limits(value: Any) -> dict[str, Any] | None:
    """The agent's limits record, in the API's shape (None: an agent that sent none)."""
    if not isinstance(value, dict):
        return None
    number = (int, float)
    peak = value.get("memory_peak_bytes")
    return {
        "cgroup": value.get("cgroup") is True,
        "detail": str(value.get("detail") or "")[:500],
        "memory_gb": float(value["memory_gb"]) if isinstance(value.get("memory_gb"), number) else 0,
        "cpus": float(value["cpus"]) if isinstance(value.get("cpus"), number) else 0,
        "processes": int(value["processes"]) if isinstance(value.get("processes"), int) else 0,
        "disk_gb": float(value["disk_gb"]) if isinstance(value.get("disk_gb"), number) else 0,
        "memory_peak_bytes": peak if isinstance(peak, int) and peak >= 0 else None,
    }
