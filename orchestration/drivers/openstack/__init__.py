"""The OpenStack driver (registered as "openstack" on import) and what the portal uses of it.

- `driver`: OpenStackDriver, the Driver on top of the modules below;
- `settings`: a backend's settings, checked and normalised;
- `client`: the connection (one per cloud and credentials in a process) and API calls with
  retries, their failures as DriverError;
- `servers`: flavors (`smallest_flavor`), images, networks and servers, what the portal made
  (`windtunnel_kind` metadata) and its leaks;
- `boot`: a run server's user data (run.json and the agent's start);
- `heat`: multi-node MPI runs as one Heat stack per attempt.
"""

from orchestration.drivers.base import CloudLimits, SettingsError
from orchestration.drivers.openstack.boot import user_data, vm_run_json
from orchestration.drivers.openstack.driver import OpenStackDriver
from orchestration.drivers.openstack.heat import (
    STACK_TAG,
    TEMPLATE_PATH,
    delete_stack,
    head_run_json,
    load_template,
    mpi_argv,
    poll_stack,
    stack_events,
    stack_leaks,
    stack_name,
    stack_parameters,
    stack_tags,
    start_stack,
)
from orchestration.drivers.openstack.servers import (
    META_ATTEMPT,
    META_KIND,
    META_RUN,
    ServerClient,
    smallest_flavor,
)
from orchestration.drivers.openstack.settings import validate_settings

__all__ = [
    "META_ATTEMPT",
    "META_KIND",
    "META_RUN",
    "STACK_TAG",
    "TEMPLATE_PATH",
    "CloudLimits",
    "OpenStackDriver",
    "ServerClient",
    "SettingsError",
    "delete_stack",
    "head_run_json",
    "load_template",
    "mpi_argv",
    "poll_stack",
    "smallest_flavor",
    "stack_events",
    "stack_leaks",
    "stack_name",
    "stack_parameters",
    "stack_tags",
    "start_stack",
    "user_data",
    "validate_settings",
    "vm_run_json",
]
