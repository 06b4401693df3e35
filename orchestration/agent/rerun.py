"""How to rerun a run's case by hand: the commands its agent ran, in order, as shell lines,
and the README the agent writes into the case (so into its archive). The run page's "Rerun
by hand" block shows the same lines (studies.provenance). Stdlib only.
"""

from __future__ import annotations

import shlex

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence
    from typing import Any

__all__ = ["readme_text", "rerun_lines"]

# the agent's own steps after the solver (flow fields, VTK): not part of the case's run
_OWN_ROLES = ("post",)


def rerun_lines(commands: Sequence[Mapping[str, Any]], env: Mapping[str, str]) -> list[str]:
    """Shell lines that rerun the case from its unpacked folder: the run configuration's
    variables exported, then each step the agent ran (its argv; its post-processing left
    out), in order, its output to log.<step> as the agent wrote it, stopping at a failure."""
    lines = [f"export {name}={shlex.quote(str(value))}" for name, value in sorted(env.items())]
    for command in commands:
        argv = command.get("argv")
        if command.get("role") in _OWN_ROLES or not isinstance(argv, list) or not argv:
            continue
        name = str(command.get("name") or argv[0])
        lines.append(f"{shlex.join(str(a) for a in argv)} > {shlex.quote('log.' + name)} 2>&1")
    return lines


def readme_text(record: Mapping[str, Any], env: Mapping[str, str]) -> str:
    """The archive's README: what the archive holds, what may be left out and how to make it
    again, and how to rerun the case by hand (from the agent's provenance `record`)."""
    portal = record.get("portal") or {}
    commands = record.get("commands") or []
    image = (portal.get("image") or {}).get("name") or "none (the host's OpenFOAM)"
    openfoam = record.get("openfoam") or {}
    meshing = [str(c.get("name")) for c in commands if c.get("role") == "prepare"]
    mesh = (
        f"it is made again by {', '.join(meshing)} (the first commands below)"
        if meshing
        else "it came with the case: copy constant/polyMesh of the case the study ran "
        "(its template, or the case you uploaded) into constant/ first"
    )
    run = f"run {portal.get('index', '?')} of study {portal.get('study_name', '?')}"
    return "\n".join(
        [
            f"Windtunnel: {run} ({portal.get('run', '')}, attempt {portal.get('attempt', '?')})",
            "",
            "This archive holds the case as it ran: system/, constant/, the initial conditions",
            "as they were rendered for this run (the earliest time folder, e.g. 0/), the log of",
            "every step (log.*), postProcessing/, the latest time folder and",
            "windtunnel-provenance.json (how it ran: host, commands, exit codes, times).",
            "",
            "Left out:",
            f"- constant/polyMesh when it is larger than 20 MB: {mesh}.",
            "- processor*/ folders of a parallel run: decomposePar makes them again.",
            "- windtunnel-archive.txt, when present, lists what else did not fit the archive's",
            "  size limit.",
            "",
            f"OpenFOAM: {openfoam.get('version') or '?'} (build {openfoam.get('build') or '?'});"
            f" image: {image}.",
            "",
            "Rerun by hand, from the folder this archive was unpacked into (it writes the",
            "time folders and logs anew):",
            "",
            *[f"    {line}" for line in rerun_lines(commands, env)],
            "",
        ]
    )
