"""What a run's processes see of the environment they were started from (stdlib only: the
run agent imports it).

The portal's processes hold database URLs, the secret key and the key that decrypts stored
backend credentials in their environment. A case is the tenant's own text, and OpenFOAM
expands `$VARIABLES` in file names and can read files, so nothing of that may reach a solver.
Agents and solver steps get an allowlist: what the system, OpenFOAM, MPI and Slurm need.

A solver step also gets a HOME of its own, whose `.OpenFOAM/controlDict` turns OpenFOAM's
`allowSystemOperations` off: a case cannot run shell commands (`systemCall` function
objects) nor compile and load code (`#codeStream`, `#calc`, coded boundary conditions and
function objects). A deployment that trusts its users can allow them
(`WINDTUNNEL_CASE_SYSTEM_OPERATIONS=1`).
"""

from __future__ import annotations

import os
import signal

TYPE_CHECKING = False  # typing is not imported at run time (every Slurm job starts an agent)
if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = ["agent_environment", "environment_allowlist", "step_environment"]

# names passed as they are
_NAMES = frozenset(
    {
        "PATH",
        "USER",
        "LOGNAME",
        "SHELL",
        "LANG",
        "LANGUAGE",
        "TZ",
        "TMPDIR",
        "TERM",
        "HOSTNAME",
        "LD_LIBRARY_PATH",
    }
)
# families of names: locale, OpenFOAM, MPI implementations and their launchers, Slurm, OpenMP
_PREFIXES = (
    "LC_",
    "WM_",
    "FOAM_",
    "MPI_",
    "OMPI_",
    "OPAL_",
    "PMIX_",
    "PMI_",
    "PRTE_",
    "HWLOC_",
    "UCX_",
    "FI_",
    "PSM2_",
    "I_MPI_",
    "MPICH_",
    "HYDRA_",
    "SLURM_",
    "SLURMD_",
    "OMP_",
    "CUDA_",
)
# what the agent itself needs beyond that: its code, and its way to the portal
_AGENT_NAMES = frozenset(
    {
        "HOME",
        "PYTHONPATH",
        "PYTHONUNBUFFERED",
        "PYTHONDONTWRITEBYTECODE",
        "http_proxy",
        "https_proxy",
        "no_proxy",
        "HTTP_PROXY",
        "HTTPS_PROXY",
        "NO_PROXY",
        "SSL_CERT_FILE",
        "SSL_CERT_DIR",
        # test-only (orchestration.agent.main.TEST_ONLY_SLOWDOWN_VAR): unset outside one test
        "WINDTUNNEL_TEST_ONLY_AGENT_SLOWDOWN",
    }
)

# on it a solver writes the time step it is on and ends, as at its endTime (OpenFOAM's
# stopAtWriteNowSignal, set below): a run stopped with its results kept (cancelled, at its
# wall-time limit, its job or node ending) loses at most a time step
WRITE_NOW_SIGNAL = signal.SIGUSR1
_NO_SYSTEM_OPERATIONS = f"""FoamFile
{{
    version     2.0;
    format      ascii;
    class       dictionary;
    object      controlDict;
}}
// Written by the Windtunnel run agent: a case may not run shell commands nor compile code.
InfoSwitches
{{
    allowSystemOperations   0;
}}
// on this signal a solver writes the time step it is on and ends (a run stopped by the portal)
OptimisationSwitches
{{
    stopAtWriteNowSignal    {int(WRITE_NOW_SIGNAL)};
}}
"""


def _passed(name: str) -> bool:
    return name in _NAMES or name.startswith(_PREFIXES)


def environment_allowlist() -> dict[str, list[str]]:
    """The allowlist in force for solver steps, as a record (a run's provenance): the names
    passed as they are and the prefixes of the families passed."""
    return {"names": sorted(_NAMES), "prefixes": list(_PREFIXES)}


def agent_environment(base: Mapping[str, str]) -> dict[str, str]:
    """The environment a run agent starts with, from the portal process's own."""
    return {k: v for k, v in base.items() if _passed(k) or k in _AGENT_NAMES}


def step_environment(
    base: Mapping[str, str],
    extra: Mapping[str, str],
    *,
    home: str,
    allow_system_operations: bool = False,
) -> dict[str, str]:
    """The environment of a solver step: the allowlist of `base`, the run configuration's
    own variables (`extra`, from the solver package), and a private HOME."""
    env = {k: v for k, v in base.items() if _passed(k)}
    env.update(extra)
    if allow_system_operations:
        if "HOME" in base:
            env["HOME"] = base["HOME"]
        return env
    config = os.path.join(home, ".OpenFOAM")
    os.makedirs(config, exist_ok=True)
    with open(os.path.join(config, "controlDict"), "w", encoding="utf-8") as fh:
        fh.write(_NO_SYSTEM_OPERATIONS)
    env["HOME"] = home
    return env
