"""Post-processing of a finished case: its final flow fields on a plane, and Cp on the body.

Stdlib only. The agent runs it inside the run's sandbox, by the run's own unprivileged uid, as
`python3 -I -B -c <fields_argv's program>` with the case as its working directory (a tenant's
case is hostile: its files are read only there). It reads the case's ASCII polyMesh and the
latest time's fields and writes one compact JSON artifact (docs/agent-protocol.md#flow-fields):

- a 2-D case (one cell thick, with `empty` patches) is cut at the middle of its thin axis,
  a 3-D case by the plane z = middle of its bounding box; each cell the plane crosses gives a
  polygon, and the fields are sampled (cell values) on a regular grid of at most
  GRID_POINTS points per region ("domain", and "body" around the force patches when there
  are any), null outside the mesh (`plane`);
- the outline of the wall and force patches on that plane (`plane`);
- the surface pressure coefficient along the patches of the case's forces/forceCoeffs
  function object: Cp = (p - pRef) / (1/2 rhoInf magUInf^2) (rhoInf only when p is not
  kinematic), against x/c with c the patches' extent along the plane's first axis
  (`surface`).

`foamfiles` reads OpenFOAM's files, `artifact` puts the pieces together.
"""

from __future__ import annotations

GRID_POINTS = 20_000  # per field and region
MAX_CP_POINTS = 4_000
MAX_OUTLINE_SEGMENTS = 20_000
MAX_EXTRA_FIELDS = 8
# the converter is plain Python: past this much mesh text (about 1.5 million cells) it would
# hold the run's slot for minutes, so such a case gets its VTK files only
MAX_MESH_BYTES = 400 * 1024 * 1024
DEFAULT_FIELDS = ("p", "U")
VERSION = 1
ARTIFACT = "windtunnel/fields.json"  # relative to the case


def fields_argv(
    python: str, package_root: str, extra_fields: tuple[str, ...] = (), *, out: str = ARTIFACT
) -> list[str]:
    """The command that writes the artifact of the case in the current folder to `out` (a
    path in the case, or "-": standard output) (run in the sandbox, from the case:
    `package_root` is where the sandbox shows the folder holding `orchestration/`)."""
    program = (
        "import sys; sys.path.insert(0, sys.argv[1]); "
        "from orchestration.results.fields.artifact import main; sys.exit(main(sys.argv[2:]))"
    )
    argv = [python, "-I", "-B", "-c", program, package_root, "--out", out]
    if extra_fields:
        argv += ["--fields", ",".join(extra_fields)]
    return argv
