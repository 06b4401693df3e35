"""Helpers for tests on the real stack: waiting for it, and the cases users upload."""

import gzip
import io
import tarfile
import time
from pathlib import Path

import pytest


def wait_for(predicate, *, timeout: float = 120, interval: float = 0.5, what: str = "condition"):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = predicate()
        if last:
            return last
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}; last value {last!r}")


PITZDAILY = Path("/usr/share/doc/openfoam-examples/examples/incompressible/simpleFoam/pitzDaily")
# an areaAverage of p on the inlet, named inletP, for pitzDaily's controlDict functions
INLET_P = """
    inletP
    {
        type            surfaceFieldValue;
        libs            ("libfieldFunctionObjects.so");
        regionType      patch;
        name            inlet;
        operation       areaAverage;
        fields          (p);
        writeFields     false;
    }
"""


def pitzdaily_archive(*, end_time: int | None = None) -> bytes:
    """OpenFOAM's pitzDaily tutorial as a new user would change it, as a .tar.gz upload: the
    inlet velocity a placeholder (`Uin`) and an areaAverage of p on the inlet, named inletP,
    among the controlDict's functions; with `end_time`, it ends (and writes) there. Skips the
    test when the tutorials are not installed."""
    if not PITZDAILY.is_dir():
        pytest.skip("the OpenFOAM tutorials are not installed")
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for path in sorted(PITZDAILY.rglob("*")):
            if not path.is_file():
                continue
            data = path.read_bytes()
            rel = path.relative_to(PITZDAILY).as_posix()
            if rel.endswith(".gz"):
                data, rel = gzip.decompress(data), rel[:-3]
            if rel == "0/U":
                data = data.replace(b"uniform (10 0 0)", b"uniform ({{ Uin }} 0 0)", 1)
            if rel == "system/controlDict":
                data = data.replace(b"#includeFunc streamlines", INLET_P.encode(), 1)
                if end_time is not None:
                    data = data.replace(b"endTime         2000;", b"endTime         %d;" % end_time)
                    data = data.replace(b"writeInterval   100;", b"writeInterval   %d;" % end_time)
            info = tarfile.TarInfo(f"pitzDaily/{rel}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()
