"""Case uploads: checked before extraction; each rejection names the offending entry."""

import gzip
import io
import os
import tarfile
import zipfile

import pytest

from studies.models import Upload

CONTROL = b"application icoFoam;\nendTime {{ end_time }};\ndeltaT {{ dt * 2 }};\n"


def tgz(entries) -> bytes:
    buf = io.BytesIO()
    # mtime=0: the same entries make the same bytes, so every test worker collects the same ids
    with (
        gzip.GzipFile(fileobj=buf, mode="wb", mtime=0) as packed,
        tarfile.open(fileobj=packed, mode="w") as tar,
    ):
        for name, data, kind in entries:
            info = tarfile.TarInfo(name)
            if kind == "file":
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
            elif kind == "symlink":
                info.type, info.linkname = tarfile.SYMTYPE, data.decode()
                tar.addfile(info)
            elif kind == "hardlink":
                info.type, info.linkname = tarfile.LNKTYPE, data.decode()
                tar.addfile(info)
            elif kind == "device":
                info.type = tarfile.CHRTYPE
                tar.addfile(info)
    return buf.getvalue()


def upload(api, name, data):
    return api.post("/api/v1/uploads/", {"file": _named(data, name)}, format="multipart")


def _named(data: bytes, name: str):
    f = io.BytesIO(data)
    f.name = name
    return f


def test_a_good_case_is_extracted_and_its_placeholders_listed(api):
    data = tgz(
        [
            ("cavity/system/controlDict", CONTROL, "file"),
            ("cavity/system/blockMeshDict", b"x 1;\n", "file"),
            ("cavity/0/U", b"internalField uniform ({{ u }} 0 0);\n", "file"),
        ]
    )
    r = upload(api, "cavity.tar.gz", data)
    assert r.status_code == 201, r.json()
    body = r.json()
    assert body["placeholders"] == {"0/U": ["u"], "system/controlDict": ["dt", "end_time"]}
    assert body["has_block_mesh_dict"] is True and body["has_mesh"] is False
    up = Upload.objects.get(pk=body["id"])
    assert (__import__("pathlib").Path(up.path) / "system" / "controlDict").read_bytes() == CONTROL


def test_zip_uploads_work_too(api):
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("system/controlDict", CONTROL)
    assert upload(api, "case.zip", buf.getvalue()).status_code == 201


@pytest.mark.parametrize(
    ("entries", "needle"),
    [
        ([("../evil", b"x", "file"), ("system/controlDict", CONTROL, "file")], "'../evil'"),
        ([("/etc/passwd", b"x", "file"), ("system/controlDict", CONTROL, "file")], "absolute path"),
        (
            [("system/controlDict", CONTROL, "file"), ("link", b"/etc/passwd", "symlink")],
            "'link' is a link",
        ),
        (
            [("system/controlDict", CONTROL, "file"), ("hard", b"system/controlDict", "hardlink")],
            "'hard' is a link",
        ),
        ([("system/controlDict", CONTROL, "file"), ("dev", b"", "device")], "'dev' is a device"),
        ([("constant/x", b"x", "file")], "no system/controlDict"),
        ([("system/controlDict", b"endTime {{ end_time ;\n", "file")], "placeholder"),
    ],
)
def test_dangerous_or_broken_archives_are_refused_naming_the_entry(api, entries, needle):
    r = upload(api, "case.tar.gz", tgz(entries))
    assert r.status_code == 400, r.json()
    assert needle in r.json()["message"], r.json()
    assert Upload.objects.count() == 0


def test_zip_slip_and_zip_symlinks_are_refused(api):
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("system/controlDict", CONTROL)
        z.writestr("../../outside", b"x")
    r = upload(api, "case.zip", buf.getvalue())
    assert r.status_code == 400 and "'../../outside'" in r.json()["message"]
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("system/controlDict", CONTROL)
        info = zipfile.ZipInfo("lnk")
        info.external_attr = 0o120777 << 16
        z.writestr(info, "/etc/passwd")
    r = upload(api, "case.zip", buf.getvalue())
    assert r.status_code == 400 and "is a link" in r.json()["message"]


def test_archive_bombs_are_refused_before_extraction(api, settings):
    settings.WINDTUNNEL = {**settings.WINDTUNNEL, "UPLOAD_MAX_RATIO": 50.0}
    bomb = tgz([("system/controlDict", CONTROL, "file"), ("zeros", b"\0" * 30_000_000, "file")])
    r = upload(api, "bomb.tar.gz", bomb)
    assert r.status_code == 400 and "archive bomb" in r.json()["message"]
    settings.WINDTUNNEL = {**settings.WINDTUNNEL, "UPLOAD_MAX_UNPACKED_BYTES": 1000}
    r = upload(
        api,
        "big.tar.gz",
        tgz([("system/controlDict", CONTROL, "file"), ("x", b"a" * 5000, "file")]),
    )
    assert r.status_code == 400 and "unpacks to" in r.json()["message"]


def test_wrong_type_size_and_missing_file_are_clear_errors(api, settings):
    assert "upload a .tar.gz" in upload(api, "case.rar", b"x").json()["message"]
    assert "not a readable" in upload(api, "case.tar.gz", b"garbage").json()["message"]
    r = api.post("/api/v1/uploads/", {}, format="multipart")
    assert r.status_code == 400 and "'file'" in r.json()["message"]
    settings.WINDTUNNEL = {**settings.WINDTUNNEL, "UPLOAD_MAX_BYTES": 10}
    assert (
        "at most"
        in upload(api, "case.tar.gz", tgz([("system/controlDict", CONTROL, "file")])).json()[
            "message"
        ]
    )


def test_a_study_on_an_upload_must_give_every_placeholder_a_value(api):
    data = tgz([("system/controlDict", CONTROL, "file")])
    up = upload(api, "c.tar.gz", data).json()
    spec = {
        "name": "u",
        "case": up["id"],
        "solver": "icoFoam",
        "parameters": {"end_time": {"values": [0.1, 0.2]}},
    }
    r = api.post("/api/v1/studies/preview/", spec, format="json")
    assert r.status_code == 400 and "{{ dt }}" in r.json()["message"]
    spec["derived"] = {"dt": "end_time / 100"}
    r = api.post("/api/v1/studies/preview/", spec, format="json")
    assert r.status_code == 200 and r.json()["run_count"] == 2
    assert r.json()["rows"][1]["context"]["dt"] == pytest.approx(0.002)


def test_a_placeholder_the_sandbox_refuses_is_a_400_before_anything_runs(api):
    """Preview, a saved draft and a submission all render the case once: an expression the
    sandbox refuses is an error now, not a failure of every run later."""
    control = b"application icoFoam;\nendTime {{ end_time.__class__.__mro__ }};\n"
    up = upload(api, "c.tar.gz", tgz([("system/controlDict", control, "file")])).json()
    spec = {"name": "u", "case": up["id"], "solver": "icoFoam", "parameters": {"end_time": 1}}
    for path, extra in (
        ("/api/v1/studies/preview/", {}),
        ("/api/v1/studies/", {"draft": True}),
        ("/api/v1/studies/", {}),
    ):
        r = api.post(path, {**spec, **extra}, format="json")
        assert r.status_code == 400, (path, r.content)
        body = r.json()
        assert body["field"] == "case" and "system/controlDict" in body["message"], body
        assert "cannot be filled" in body["message"], body


def test_uploads_of_another_tenant_are_invisible(api, make_tenant):
    from rest_framework.test import APIClient

    up = upload(api, "c.tar.gz", tgz([("system/controlDict", CONTROL, "file")])).json()
    other = APIClient()
    other.force_authenticate(make_tenant().user)
    assert other.get(f"/api/v1/uploads/{up['id']}/").status_code == 404
    r = other.post(
        "/api/v1/studies/preview/",
        {"name": "x", "case": up["id"], "solver": "icoFoam"},
        format="json",
    )
    assert r.status_code == 400 and r.json()["field"] == "case"


def _zip(entries: list[tuple[str, bytes]], *, compression=zipfile.ZIP_STORED) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=compression) as z:
        for name, data in entries:
            z.writestr(name, data)
    return buf.getvalue()


def _damaged_crc() -> bytes:
    """A stored member whose bytes no longer match its CRC (headers intact)."""
    data = bytearray(_zip([("system/controlDict", CONTROL), ("constant/data", b"A" * 200)]))
    at = data.index(b"A" * 200)
    data[at + 10] = ord("B")
    return bytes(data)


def _damaged_deflate() -> bytes:
    """A deflated member whose compressed stream is garbage (headers intact)."""
    payload = bytes(range(256)) * 40
    data = bytearray(
        _zip(
            [("system/controlDict", CONTROL), ("constant/data", payload)],
            compression=zipfile.ZIP_DEFLATED,
        )
    )
    start = data.index(b"constant/data") + len(b"constant/data")  # its local header's name
    for i in range(start + 5, start + 60):
        data[i] = 0xFF
    return bytes(data)


UNPACKABLE = [
    (
        "clash.tar.gz",
        tgz(
            [
                ("c/system/controlDict", CONTROL, "file"),
                ("c/constant", b"x", "file"),
                ("c/constant/transportProperties", b"nu 1;", "file"),
            ]
        ),
        "'c/constant' is both a file and a folder",
    ),
    (
        "clash.zip",
        _zip(
            [
                ("system/controlDict", CONTROL),
                ("constant", b"x"),
                ("constant/transportProperties", b"nu 1;"),
            ]
        ),
        "'constant' is both a file and a folder",
    ),
    (
        "twice.tar.gz",
        tgz(
            [
                ("system/controlDict", CONTROL, "file"),
                ("constant/x", b"1", "file"),
                ("constant/x", b"2", "file"),
            ]
        ),
        "'constant/x' appears twice",
    ),
    (
        "long.tar.gz",
        tgz([("system/controlDict", CONTROL, "file"), ("constant/" + "n" * 300, b"x", "file")]),
        "longer than 255 bytes",
    ),
    ("crc.zip", _damaged_crc(), "damaged at entry 'constant/data'"),
    ("deflate.zip", _damaged_deflate(), "damaged at entry 'constant/data'"),
    (
        "latin1.tar.gz",
        tgz(
            [
                ("system/controlDict", CONTROL, "file"),
                ("constant/notes", "viscosité {{ nu }}\n".encode("latin-1"), "file"),
            ]
        ),
        "constant/notes has {{ placeholders }} but is not UTF-8",
    ),
]


@pytest.mark.parametrize(("name", "data", "needle"), UNPACKABLE, ids=[c[0] for c in UNPACKABLE])
def test_archives_that_cannot_be_unpacked_as_they_are_are_clear_400s(api, name, data, needle):
    """Names a file system refuses, a name that is a file and a folder, damaged member data
    and placeholders in a file that is not UTF-8: a 400 naming the entry, nothing kept."""
    r = upload(api, name, data)
    assert r.status_code == 400, (r.status_code, r.content[:300])
    assert needle in r.json()["message"], r.json()
    assert Upload.objects.count() == 0


def test_a_zip_made_on_windows_is_not_taken_for_special_files(api):
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        info = zipfile.ZipInfo("system/controlDict")
        info.create_system = 0  # MS-DOS: the high bits of external_attr mean nothing
        info.external_attr = (0o170000 << 16) | 0x20
        z.writestr(info, CONTROL)
    assert upload(api, "win.zip", buf.getvalue()).status_code == 201


def test_text_parameters_cannot_change_the_case_syntax_and_csv_cells_run_no_formula(api):
    """A text value is rendered into a dictionary: quotes, #, $ and the like are refused. A
    value a spreadsheet would run as a formula is quoted in results.csv, whose file name
    keeps a non-Latin study name (RFC 6266 filename*)."""
    control = b"application icoFoam;\nmodel {{ model }};\nendTime 1;\n"
    up = upload(api, "c.tar.gz", tgz([("system/controlDict", control, "file")])).json()
    spec = {"name": "翼型 study", "case": up["id"], "solver": "icoFoam"}
    for bad in ['kEpsilon"; #include "/etc/passwd', "a$HOME", "x\ny", "a;b"]:
        r = api.post(
            "/api/v1/studies/preview/", {**spec, "parameters": {"model": [bad]}}, format="json"
        )
        assert r.status_code == 400 and r.json()["field"] == "parameters.model", (bad, r.json())
    r = api.post(
        "/api/v1/studies/", {**spec, "parameters": {"model": ["=1+2", "kOmegaSST"]}}, format="json"
    )
    assert r.status_code == 201, r.json()
    r = api.get(f"/api/v1/studies/{r.json()['id']}/results-csv/")
    assert r.status_code == 200
    text = b"".join(r.streaming_content).decode()
    assert "'=1+2" in text and ",kOmegaSST," in text
    assert "filename*=utf-8''%E7%BF%BC%E5%9E%8B-study-results.csv" in r["Content-Disposition"]


@pytest.mark.parametrize(
    ("directive", "ok"),
    [
        ('#include "include/initialConditions"', True),
        ('#include "$FOAM_CASE/constant/extra"', True),
        ('#includeEtc "caseDicts/setConstraintTypes"', True),
        ('#include "../constant/extra"', True),  # from system/: still inside the case
        ('#include "/etc/passwd"', False),
        ('#includeIfPresent "../../../../etc/passwd"', False),
        ('#sinclude "$HOME/.ssh/id_rsa"', False),
        ('#include "~/secret"', False),
        ('#include "$FOAM_CASE/../other-tenant/case/constant/x"', False),
        ('#includeEtc "../../../etc/shadow"', False),
        ('  #include "{{ where }}"', False),
        # a directive hidden after a statement, after a comment, or written by a placeholder
        ('x 1; #include "/etc/passwd"', False),
        ('/* note */ #include "/etc/passwd"', False),
        ("{{ '#include' }} \"/etc/passwd\"", False),
    ],
)
def test_a_case_may_include_its_own_files_only(api, directive, ok):
    """An #include outside the case would read the portal host's files into a tenant's run
    (and its error messages would show them): refused at upload, naming file and line."""
    control = f"application icoFoam;\nendTime 1;\n{directive}\n".encode()
    data = tgz(
        [
            ("system/controlDict", control, "file"),
            ("system/include/initialConditions", b"x 1;\n", "file"),
            ("constant/extra", b"y 2;\n", "file"),
        ]
    )
    r = upload(api, "inc.tar.gz", data)
    if ok:
        assert r.status_code == 201, r.json()
    else:
        assert r.status_code == 400, r.json()
        assert "system/controlDict line 3" in r.json()["message"], r.json()
        assert Upload.objects.count() == 0


def test_a_directive_in_a_latin1_or_gzipped_file_is_checked_too(api):
    """A file that is not UTF-8 gets the include check too: OpenFOAM reads it all the same."""
    latin1 = 'note "caf\xe9";\n#include "/etc/passwd"\n'.encode("latin-1")
    r = upload(api, "l.tar.gz", tgz([("system/controlDict", latin1, "file")]))
    assert r.status_code == 400 and "system/controlDict line 2" in r.json()["message"], r.json()
    packed = gzip.compress(b'x 1;\n#include "/etc/passwd"\n')
    control = ("system/controlDict", b"application icoFoam;\n", "file")
    r = upload(api, "g.tar.gz", tgz([control, ("constant/transportProperties.gz", packed, "file")]))
    assert r.status_code == 400, r.json()
    assert "constant/transportProperties.gz line 2" in r.json()["message"], r.json()


def test_a_placeholder_that_renders_an_include_is_refused_before_anything_runs(api):
    control = b"application icoFoam;\nendTime 1;\n{{ '#inc' ~ 'lude' }} \"/etc/passwd\"\n"
    up = upload(api, "p.tar.gz", tgz([("system/controlDict", control, "file")]))
    assert up.status_code == 201, up.json()  # no directive in the text as uploaded
    spec = {"name": "p", "case": up.json()["id"], "solver": "icoFoam"}
    r = api.post("/api/v1/studies/preview/", spec, format="json")
    assert r.status_code == 400, r.json()
    assert "value cannot contain '#'" in r.json()["message"], r.json()


@pytest.mark.parametrize(
    ("entries", "needle"),
    [
        ([("lib/x.so", b"\x7fELF\x02\x01\x01" + bytes(64), "file")], "lib/x.so is a compiled"),
        ([("Allrun", b"\x7fELF" + bytes(16), "file")], "Allrun is a compiled"),
        (
            [("system/controlDict", b'application icoFoam;\nlibs ("./lib/x.so");\n', "file")],
            "system/controlDict line 2: libs names './lib/x.so'",
        ),
        (
            [
                (
                    "system/controlDict",
                    b"libs\n(\n    fieldFunctionObjects\n    $FOAM_CASE/x.so\n);\n",
                    "file",
                )
            ],
            "system/controlDict line 1: libs holds $FOAM_CASE/x.so",
        ),
        (
            [("system/functions", b'f { type coded; libs ("/tmp/evil.so"); }\n', "file")],
            "system/functions line 1: libs names '/tmp/evil.so'",
        ),
    ],
)
def test_a_case_brings_no_native_code(api, entries, needle):
    """No shared library in an upload (the sandbox is the wall, this a second one): one named
    by controlDict's libs would be loaded by every solver step."""
    names = {name for name, _, _ in entries}
    base = [] if "system/controlDict" in names else [("system/controlDict", b"x 1;\n", "file")]
    r = upload(api, "n.tar.gz", tgz([*base, *entries]))
    assert r.status_code == 400, r.json()
    assert needle in r.json()["message"], r.json()
    assert Upload.objects.count() == 0


def test_libraries_by_name_are_fine(api):
    control = b'application simpleFoam;\nlibs ("libfieldFunctionObjects.so" turbulenceModels);\n'
    r = upload(api, "ok.tar.gz", tgz([("system/controlDict", control, "file")]))
    assert r.status_code == 201, r.json()


def test_a_case_that_would_use_up_the_storage_quota_is_refused_before_it_is_stored(api):
    """Uploads count in the tenant's storage: one that would take it to its quota is a 400
    naming storage_gb and the figures, and nothing is written; one that fits is kept."""
    from quotas.services import quota_set

    quota_set(tenant=api.tenant, limits={"storage_gb": 0.001})  # 1 MiB (1,048,576 bytes)
    small = tgz([("c/system/controlDict", CONTROL, "file")])
    assert upload(api, "small.tar.gz", small).status_code == 201
    padding = b"0" * 1_100_000  # compresses well, unpacks past the quota
    big = tgz([("c/system/controlDict", CONTROL, "file"), ("c/constant/data", padding, "file")])
    r = upload(api, "big.tar.gz", big)
    assert r.status_code == 400
    body = r.json()
    assert body["code"] == "quota_exceeded" and body["field"] == "storage_gb"
    assert body["message"].startswith("the case unpacks to 1.0 MB and your tenant's storage")
    assert "over the storage quota of 0.001 GB" in body["message"]
    assert Upload.objects.filter(tenant=api.tenant).count() == 1


# dictionaries a search line by line misses: OpenFOAM reads /etc/passwd or opens the case's
# library with each (orchestration/tests/test_casecheck.py shows OpenFOAM v1912 doing it)
BYPASSES = [
    ('#sincludeEtc "/etc/passwd"', 3),
    ('dd "..";\n#includeEtc "caseDicts/$dd/$dd/$dd/$dd/$dd/etc/passwd"', 4),
    ('"libs" ("./lib/x.so");', 3),
    ('mylibs ("./lib/x.so");\nlibs $mylibs;', 4),
    ('libs /* ours */ ("./lib/x.so");', 3),
    ('/* ours ( */ libs ("./lib/x.so");', 3),
    # and more forms OpenFOAM reads
    ('"l.bs" ("./lib/x.so");', 3),
    ('"functions/f/libs" ("./lib/x.so");', 3),
    ('( libs ("./lib/x.so"); )', 3),
    ('#/* */include "/etc/passwd"', 3),
    ('#include "$nope/etc/passwd"', 3),
    ('#if 1 /*\n#include "/etc/passwd"\n*/', 4),
]


@pytest.mark.parametrize(("control", "line"), BYPASSES)
def test_a_case_that_would_read_outside_itself_or_load_its_own_library_is_refused(
    api, control, line
):
    body = f"application icoFoam;\nendTime 1;\n{control}\n".encode()
    r = upload(api, "c.tar.gz", tgz([("system/controlDict", body, "file")]))
    assert r.status_code == 400, r.json()
    assert r.json()["message"].startswith(f"system/controlDict line {line}: "), r.json()
    assert r.json()["field"] == "file" and r.json()["details"] == {"entry": "system/controlDict"}
    assert Upload.objects.count() == 0


def test_an_include_hidden_behind_a_nul_byte_or_16_mb_is_found(api):
    """OpenFOAM reads a whole file, past a NUL byte in a comment and past 16 MB: so does the
    check."""
    hidden = b"/* \x00 */\n" + b'#include "/etc/passwd"\n'
    r = upload(api, "n.tar.gz", tgz([("system/controlDict", hidden, "file")]))
    assert r.status_code == 400 and r.json()["message"].startswith("system/controlDict line 2:")
    digits = os.urandom(17 * 2**20).translate(bytes(b"0123456789 "[i % 11] for i in range(256)))
    late = b"values\n(\n" + digits + b"\n);\n" + b'#include "/etc/passwd"\n'
    control = ("system/controlDict", b"application icoFoam;\n", "file")
    r = upload(api, "l.tar.gz", tgz([control, ("constant/values", late, "file")]))
    assert r.status_code == 400, r.json()
    assert r.json()["message"].startswith("constant/values line 5:"), r.json()


@pytest.mark.parametrize(
    ("control", "values"),
    [
        # the keyword is a placeholder: `libs` for this study's values
        (b'application icoFoam;\n{{ key }} ("./lib/x.so");\n', {"key": ["libs"]}),
        # a comment at upload that the values open
        (
            b'application icoFoam;\n/* {{ c }} libs ("./lib/x.so"); {{ d }} */\n',
            {"c": ["*/"], "d": ["/*"]},
        ),
    ],
)
def test_what_a_runs_values_render_is_checked_before_the_study_is_saved(api, control, values):
    up = upload(api, "t.tar.gz", tgz([("system/controlDict", control, "file")]))
    assert up.status_code == 201, up.json()  # as uploaded, no libs names a file
    spec = {"name": "t", "case": up.json()["id"], "solver": "icoFoam", "parameters": values}
    for path in ("/api/v1/studies/preview/", "/api/v1/studies/"):
        r = api.post(path, spec, format="json")
        assert r.status_code == 400, r.json()
        assert r.json()["field"] == "case", r.json()
        assert "system/controlDict line 2: libs names './lib/x.so'" in r.json()["message"]
