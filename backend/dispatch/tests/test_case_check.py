"""Every run's case, rendered with its own values, is checked before it starts."""

from __future__ import annotations

import io
import tarfile

from dispatch.start import runs_dispatch
from scheduler.admission import admit
from studies.models import Run

# the keyword is a placeholder: an ordinary keyword for the first run, libs for the second
CONTROL = b'application icoFoam;\n{{ key }} ("./lib/x.so");\n'


def _upload(api) -> str:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        info = tarfile.TarInfo("case/system/controlDict")
        info.size = len(CONTROL)
        tar.addfile(info, io.BytesIO(CONTROL))
    f = io.BytesIO(buf.getvalue())
    f.name = "case.tar.gz"
    r = api.post("/api/v1/uploads/", {"file": f}, format="multipart")
    assert r.status_code == 201, r.json()
    return r.json()["id"]


def test_a_run_whose_values_write_a_library_path_fails_before_it_starts_saying_why(api):
    spec = {
        "name": "keys",
        "case": _upload(api),
        "solver": "icoFoam",
        "parameters": {"key": ["extraLibs", "libs"]},
    }
    r = api.post("/api/v1/studies/", spec, format="json")
    assert r.status_code == 201, r.json()  # the first run's values render an ordinary keyword
    second = Run.objects.get(study_id=r.json()["id"], index=1)
    assert second.pk in admit(tenant_id=api.tenant.id)
    assert runs_dispatch(run_ids=[str(second.pk)]) == 0
    second.refresh_from_db()
    assert second.state == "failed" and second.end_reason == "dispatch_failed"
    assert second.message.startswith(
        "the case as this run's values render it is refused: system/controlDict line 2: libs "
        "names './lib/x.so'"
    ), second.message
