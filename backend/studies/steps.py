"""A run's commands: the utilities run before the solver, and the solver package's run
configuration (serial, or decompose, mpirun and reconstruct). Always argv lists: nothing a
user writes is ever passed to a shell."""

from __future__ import annotations

from typing import Any

from catalog.models import CaseTemplate, Package
from studies.models import Upload
from studies.utility_options import prepare_check

DEFAULT_RUN_CONFIGURATIONS: dict[str, dict[str, Any]] = {
    "serial": {"argv": ["{solver}"]},
    "mpi": {
        "steps": [
            {"name": "decomposePar", "argv": ["decomposePar", "-force"], "role": "decompose"},
            {
                "name": "{solver}",
                "argv": [
                    "mpirun",
                    "--oversubscribe",
                    "-np",
                    "{processes}",
                    "{solver}",
                    "-parallel",
                ],
                "role": "solve",
            },
            {
                "name": "reconstructPar",
                "argv": ["reconstructPar", "-latestTime"],
                "role": "reconstruct",
            },
        ]
    },
}


def solver_package(solver: str, among: tuple[str, ...] | None = None) -> Package | None:
    """The package that provides `solver` (among an image's closure, when given)."""
    packages = Package.objects.filter(retired=False)
    if among is not None:  # the study's image: its closure's run configurations
        packages = packages.filter(name__in=among)
    for package in packages.order_by("name"):
        if solver in package.solvers:
            return package
    return None


def known_solvers() -> list[str]:
    """Every solver a package provides."""
    names: set[str] = set()
    for package in Package.objects.filter(retired=False):
        names.update(package.solvers)
    return sorted(names)


def run_steps(
    *, solver: str, processes: int, prepare: list[list[str]], package: Package | None
) -> list[dict[str, Any]]:
    """Each run's commands: the prepare utilities, then the solver package's run
    configuration (serial, or MPI with decompose and reconstruct), as argv lists."""
    configs = (package.run_configurations if package else None) or DEFAULT_RUN_CONFIGURATIONS
    fmt = {"solver": solver, "processes": str(processes), "np": str(processes)}

    def expand(argv: list[str], config: dict | None = None) -> list[str]:
        declared = (config or {}).get("parameters") or {}  # package-declared, with defaults
        values = {k: (v or {}).get("default") for k, v in declared.items()}
        return [str(a).format(**{**values, **fmt}) for a in argv]

    steps = [{"name": argv[0], "argv": list(argv), "role": "prepare"} for argv in prepare]
    if processes == 1:
        serial = configs.get("serial") or DEFAULT_RUN_CONFIGURATIONS["serial"]
        steps.append({"name": solver, "argv": expand(serial["argv"], serial), "role": "solve"})
    else:
        mpi = configs.get("mpi") or DEFAULT_RUN_CONFIGURATIONS["mpi"]
        for step in mpi["steps"]:
            steps.append(
                {
                    "name": str(step["name"]).format(**fmt),
                    "argv": expand(step["argv"], mpi),
                    "role": step.get("role", "other"),
                }
            )
    return steps


def prepare_commands(
    raw: Any, *, template: CaseTemplate | None, upload: Upload | None
) -> list[list[str]]:
    """The commands run before the solver: the spec's, the template's, or blockMesh for an
    uploaded case that has a blockMeshDict but no mesh; a 400 naming the step and option
    when one takes an option its utility's allow-list does not have
    (studies.utility_options)."""
    if raw is None:
        if template is not None:
            commands = [list(map(str, a)) for a in template.spec.get("prepare") or []]
        elif upload is not None and not upload.has_mesh and upload.has_block_mesh_dict:
            commands = [["blockMesh"]]
        else:
            commands = []
    else:
        commands = [list(map(str, argv)) for argv in raw]  # its shape: the schema's
    prepare_check(commands)  # each utility's options: its allow-list
    return commands
