"""The Slurm driver (registered as "slurm" on import) and what the portal uses of it.

- `driver`: SlurmDriver, the Driver on top of the modules below;
- `cluster`: the Slurm commands through a transport, retried and cached;
- `script`: the batch script and its #SBATCH directives;
- `settings`: a backend's settings, checked and normalised;
- `states`: handles, job states, pending reasons, exit codes, squeue/sacct parsing.
"""

from orchestration.drivers.base import SettingsError
from orchestration.drivers.slurm.driver import SlurmDriver
from orchestration.drivers.slurm.settings import SECRET_FIELDS, validate_settings
from orchestration.drivers.slurm.states import explain_reason, parse_exit_code, parse_handle

__all__ = [
    "SECRET_FIELDS",
    "SettingsError",
    "SlurmDriver",
    "explain_reason",
    "parse_exit_code",
    "parse_handle",
    "validate_settings",
]
