"""A warm start from a run of another mesh: OpenFOAM's mapFields maps the source run's write
onto this case's mesh, once the case's prepare steps have made it (stdlib only; imported by
an attempt that maps, orchestration/agent/resume.py's `map_from`).

The step runs like any other, in the run's sandbox, with the source case read-only
(Sandbox.add_source). It maps into the case's start time folder, the fields' boundary
conditions staying this case's own. `-consistent` (the same geometry and patches, only the
cells differ, as between the levels of a mesh study) unless the case has its own
system/mapFieldsDict, which then says how patches and regions correspond. A warm start is
a head start only: when mapFields fails, the start time folder is put back as the case
rendered it and the run starts cold, saying so in its log."""

from __future__ import annotations

import os

from orchestration import nofollow
from orchestration.agent.archive import time_names
from orchestration.agent.procs import describe_exit
from orchestration.agent.spec import AgentStep

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

    from orchestration.agent.outcome import StepResult
    from orchestration.agent.sandbox import Sandbox

__all__ = ["MAP_STEP", "MAX_SNAPSHOT_BYTES", "MappedStart", "StartSnapshot"]

MAP_STEP = "mapFields"
MAX_SNAPSHOT_BYTES = 256 * 1024 * 1024  # a start folder larger than this is not kept aside


class StartSnapshot:
    """The regular files of the case's start time folder as they were before mapFields, to
    put back when it fails (files it added are removed, the ones it changed rewritten; they
    keep the run's ownership)."""

    def __init__(self, case_fd: int, start: str) -> None:
        self.start = start
        self.files: dict[str, bytes] | None = {}
        fd = nofollow.open_dir(start, dir_fd=case_fd)
        try:
            total = 0
            for rel, parent, st in nofollow.walk_files(fd):
                total += st.st_size
                if total > MAX_SNAPSHOT_BYTES:
                    self.files = None
                    return
                name = os.path.basename(rel)
                self.files[rel] = nofollow.read_file(parent, name, max_bytes=st.st_size + 1)
        finally:
            os.close(fd)

    def restore(self, case_fd: int, *, owner: int | None) -> bool:
        """Put the start folder back (its files `owner`'s, the run's uid); False when it was
        too large to keep aside."""
        if self.files is None:
            return False
        fd = nofollow.open_dir(self.start, dir_fd=case_fd)
        try:
            added = [rel for rel, _p, _st in nofollow.walk_files(fd) if rel not in self.files]
            for rel in added:
                nofollow.unlink(fd, rel)
            for rel, data in self.files.items():
                out = nofollow.create_file(fd, rel, owner=owner)
                try:
                    view = memoryview(data)
                    while view:
                        view = view[os.write(out, view) :]
                finally:
                    os.close(out)
        finally:
            os.close(fd)
        return True


class MappedStart:
    """The mapFields step of an attempt that starts warm from another mesh's run, placed
    after the case's prepare steps (before the first that decomposes or solves: the mapped
    fields are then decomposed like the case's own)."""

    def __init__(self, *, case_fd: int, sandbox: Sandbox, resumed: Any) -> None:
        self.case_fd, self.sandbox, self.resumed = case_fd, sandbox, resumed
        argv = ["mapFields", sandbox.add_source(resumed.map_from), "-sourceTime", resumed.time]
        try:
            os.stat("system/mapFieldsDict", dir_fd=case_fd, follow_symlinks=False)
        except OSError:
            argv.append("-consistent")
        self.step = AgentStep(MAP_STEP, tuple(argv), "prepare")
        self.snapshot: StartSnapshot | None = None

    def steps(self, steps: tuple[AgentStep, ...]) -> tuple[AgentStep, ...]:
        at = next((i for i, s in enumerate(steps) if s.role != "prepare"), len(steps))
        return (*steps[:at], self.step, *steps[at:])

    def keep_start(self) -> None:
        """Keep the start folder aside, as the prepare steps left it, before mapFields."""
        starts = time_names(self.case_fd)
        try:
            self.snapshot = StartSnapshot(self.case_fd, starts[0]) if starts else None
        except OSError:
            self.snapshot = None

    def mapped(self, *, say: Callable[[str], None]) -> None:
        """mapFields mapped the source's write: the case's own boundary conditions back
        (orchestration/agent/warm.py keep_own_boundaries)."""
        from orchestration.agent.warm import keep_own_boundaries  # lazy: its parsing

        snapshot = self.snapshot
        if snapshot is None or snapshot.files is None:
            too_large = "the start folder was too large to keep aside"
            say(f"warm start: {too_large}; its boundary values are as mapFields wrote them")
            return
        fd = nofollow.open_dir(snapshot.start, dir_fd=self.case_fd)
        try:
            warmed, notes = keep_own_boundaries(fd, snapshot.files, owner=self.sandbox.uid)
        finally:
            os.close(fd)
        say(
            f"warm start: mapFields mapped {warmed} fields of time {self.resumed.time} onto this "
            "mesh, each keeping this case's boundary conditions"
            + "".join(f"; {note}" for note in notes)
        )

    def failed(self, result: StepResult, *, say: Callable[[str], None]) -> Any:
        """mapFields failed: the start folder put back, and the attempt's resume (Resumed)
        now that it starts cold."""
        snapshot = self.snapshot
        restored = snapshot is not None and snapshot.restore(self.case_fd, owner=self.sandbox.uid)
        why = result.fatal_error or describe_exit(MAP_STEP, result.returncode)
        kept = "" if restored else " from what mapFields left in its start folder"
        say(f"warm start: mapFields failed ({why}); the run starts cold{kept}")
        return self.resumed._replace(note="", attempt=0, time="", map_from="")
