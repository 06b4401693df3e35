"""scripts/backup and scripts/restore: a real study backed up from the running stack,
restored into a fresh database and data directory, and served again by a fresh web server;
damaged archives refused before anything changes; a target in use only with --force."""

from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
from django.conf import settings
from psycopg import sql

from core.stack import Stack
from core.testing import wait_for

pytestmark = [pytest.mark.slow]
ROOT = Path(__file__).resolve().parents[2]
SECRETS = ROOT / ".data" / "secrets.env"
PARTS = ["manifest.json", "manifest.json.sha256", "database.dump", "files.tar.gz"]


def _database_url(name: str | None = None) -> str:
    """The test database's URL (config.settings.test points DATABASE_URL at it), or that of
    another database on the same server."""
    url = os.environ["DATABASE_URL"]
    return url if name is None else f"{url.rsplit('/', 1)[0]}/{name}"


def _script(name: str, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    """Run scripts/<name>; `env` adds to this process's environment (the test settings)."""
    return subprocess.run(
        [str(ROOT / "scripts" / name), *args],
        env={**os.environ, **env},
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )


def _restore(
    archive: Path, database: str, data_dir: Path, *flags: str
) -> subprocess.CompletedProcess[str]:
    # the restore migrates with the test settings, which take TEST_DATABASE_URL
    return _script(
        "restore",
        str(archive),
        *flags,
        DATABASE_URL=database,
        TEST_DATABASE_URL=database,
        WINDTUNNEL_DATA_DIR=str(data_dir),
    )


@pytest.fixture
def new_database() -> Iterator[Callable[[], str]]:
    """Makes new, empty databases on the test server (their URLs), dropped afterwards."""
    made: list[str] = []

    def make() -> str:
        made.append(f"wt_restore_{uuid.uuid4().hex[:12]}")
        with psycopg.connect(_database_url("postgres"), autocommit=True) as conn:
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(made[-1])))
        return _database_url(made[-1])

    yield make
    with psycopg.connect(_database_url("postgres"), autocommit=True) as conn:
        for name in made:
            conn.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
            )


@pytest.fixture
def fresh_database(new_database) -> str:
    return new_database()


def _relations(url: str) -> int:
    with psycopg.connect(url) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname NOT IN ('pg_catalog', 'information_schema') "
            "AND n.nspname !~ '^pg_'"
        ).fetchone()
    assert row is not None
    return row[0]


def _snapshot(url: str) -> dict[str, list[tuple[Any, ...]]]:
    """What a restore must bring back, read from the database at `url`."""
    queries = {
        "tenants": "SELECT id, name FROM tenancy_tenant ORDER BY id",
        "users": "SELECT id, username, password FROM auth_user ORDER BY id",
        "tokens": "SELECT id, user_id, name, key_hash FROM tenancy_apitoken ORDER BY id",
        "uploads": "SELECT id, filename, size_bytes, files_count, placeholders "
        "FROM studies_upload ORDER BY id",
        "studies": "SELECT id, tenant_id, name, state, spec, objectives, run_count, finished_at "
        "FROM studies_study ORDER BY id",
        "runs": 'SELECT id, study_id, "index", parameters, state, attempt, end_reason, '
        "objectives, iterations, started_at, finished_at, archive_bytes "
        "FROM studies_run ORDER BY id",
        "series": "SELECT run_id, attempt, name, count(*), sum(cardinality(xs)), "
        "sum(cardinality(ys)) FROM telemetry_serieschunk GROUP BY 1, 2, 3 ORDER BY 1, 2, 3",
        "logs": "SELECT run_id, attempt, count(*), sum(cardinality(lines)) "
        "FROM telemetry_logchunk GROUP BY 1, 2 ORDER BY 1, 2",
        "migrations": "SELECT app, name FROM django_migrations ORDER BY app, name",
    }
    with psycopg.connect(url) as conn:
        return {key: conn.execute(query).fetchall() for key, query in queries.items()}


def _paths(url: str) -> dict[str, list[tuple[str, ...]]]:
    with psycopg.connect(url) as conn:
        return {
            "runs": conn.execute(
                "SELECT id::text, archive_path, results_dir FROM studies_run ORDER BY id"
            ).fetchall(),
            "uploads": conn.execute(
                "SELECT id::text, path FROM studies_upload ORDER BY id"
            ).fetchall(),
        }


def _tree(root: Path) -> dict[str, str]:
    """sha256 of every file under `root`, by relative path."""
    return {
        str(path.relative_to(root)): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(root.rglob("*"))
        if path.is_file() and not path.is_symlink()
    }


def _cavity_case() -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for sub in ("0", "constant", "system"):
            tar.add(ROOT / "templates" / "cavity" / sub, arcname=f"mycavity/{sub}")
    return buf.getvalue()


def _finished(client: httpx.Client, study_id: str) -> dict[str, Any]:
    def done():
        body = client.get(f"/api/v1/studies/{study_id}/").json()
        return body if body["state"] in ("completed", "completed_with_failures") else None

    # generous: the machine may be shared with benchmarks
    return wait_for(done, timeout=1800, what=f"study {study_id} to finish")


@pytest.mark.solver
def test_a_restore_into_a_fresh_stack_brings_back_every_study_run_series_and_archive(
    live, tmp_path, fresh_database
):
    upload = live.post(
        "/api/v1/uploads/",
        files={"file": ("mycavity.tar.gz", _cavity_case(), "application/gzip")},
    )
    assert upload.status_code == 201, upload.text
    spec = {
        "name": "backed up",
        "template": "cavity",
        "parameters": {"cells": 10, "end_time": {"values": [0.1, 0.2]}},
    }
    created = live.post("/api/v1/studies/", json=spec)
    assert created.status_code == 201, created.text
    study = _finished(live, created.json()["id"])
    assert study["state"] == "completed", study
    runs = live.get(f"/api/v1/studies/{study['id']}/runs/").json()["results"]
    # a local run's result archive is made on its first download, and kept
    archives = {run["id"]: live.get(f"/api/v1/runs/{run['id']}/archive/").content for run in runs}
    assert len(archives) == 2 and all(archives.values())
    results = live.get(f"/api/v1/studies/{study['id']}/results/").json()
    telemetry = {
        run_id: live.get(f"/api/v1/runs/{run_id}/telemetry/", params={"since_seq": 0}).json()
        for run_id in archives
    }

    source, data_dir = _database_url(), Path(settings.DATA_DIR)
    before, paths_before = _snapshot(source), _paths(source)
    assert [run[4] for run in before["runs"]] == ["completed", "completed"]
    assert all("u_min" in run[7] for run in before["runs"])
    assert before["series"] and all(row[4] > 0 for row in before["series"])
    ours = [f"runs/{run_id}" for run_id in archives] + [f"archives/{run_id}" for run_id in archives]
    ours.append(f"uploads/{upload.json()['id']}")
    files_before = {sub: _tree(data_dir / sub) for sub in ours}
    assert all(files_before.values())

    archive = tmp_path / "backup.tar"
    made = _script("backup", str(archive), DATABASE_URL=source, WINDTUNNEL_DATA_DIR=str(data_dir))
    assert made.returncode == 0, made.stderr
    assert f"[backup] wrote {archive}" in made.stdout
    with tarfile.open(archive) as tar:
        assert tar.getnames() == PARTS  # no secrets.env without --with-secrets

    target = tmp_path / "restored-files"
    target.mkdir()
    restored = _restore(archive, fresh_database, target)
    assert restored.returncode == 0, restored.stdout + restored.stderr
    assert "[restore] archive verified" in restored.stdout
    assert ", 2 runs (2 completed), " in restored.stdout

    # every row as it was
    after = _snapshot(fresh_database)
    for key, rows in before.items():
        assert after[key] == rows, key
    # its paths moved to the new data directory, where its files are, byte for byte
    paths_after = _paths(fresh_database)
    old, new = str(data_dir), str(target)
    for kind, rows in paths_before.items():
        expected = [tuple(p.replace(old, new, 1) for p in row) for row in rows]
        assert paths_after[kind] == expected, kind
    for run_id, archive_path, results_dir in paths_after["runs"]:
        if run_id in archives:
            assert Path(archive_path).read_bytes() == archives[run_id]
            assert Path(results_dir).is_dir()
    for sub, files in files_before.items():
        assert _tree(target / sub) == files, sub

    # and a fresh web server on them serves the same study, telemetry and archives
    fresh = Stack()
    fresh.env.update(
        TEST_DATABASE_URL=fresh_database,
        WINDTUNNEL_DATA_DIR=str(target),
        CELERY_QUEUE=f"windtunnel-restored-{uuid.uuid4().hex[:8]}",
    )
    fresh.start_web()
    try:
        with httpx.Client(
            base_url=fresh.url, headers={"Authorization": live.headers["Authorization"]}, timeout=60
        ) as client:
            assert client.get(f"/api/v1/studies/{study['id']}/results/").json() == results
            for run_id, content in archives.items():
                assert client.get(f"/api/v1/runs/{run_id}/archive/").content == content
                answer = client.get(f"/api/v1/runs/{run_id}/telemetry/", params={"since_seq": 0})
                assert answer.json() == telemetry[run_id]
    finally:
        fresh.stop()


@pytest.fixture(scope="module")
def backup_archive(django_db_setup, tmp_path_factory) -> Path:
    """A backup, with its keys, of the test database and a small data directory of its own."""
    data_dir = tmp_path_factory.mktemp("files")
    (data_dir / "runs" / "r1" / "attempt-1").mkdir(parents=True)
    (data_dir / "runs" / "r1" / "attempt-1" / "log.icoFoam").write_text("Time = 0.1\n" * 1000)
    (data_dir / "archives" / "r1").mkdir(parents=True)
    (data_dir / "archives" / "r1" / "attempt-1.tar.gz").write_bytes(os.urandom(64 * 1024))
    archive = tmp_path_factory.mktemp("backup") / "backup.tar"
    made = _script(
        "backup",
        str(archive),
        "--with-secrets",
        DATABASE_URL=_database_url(),
        WINDTUNNEL_DATA_DIR=str(data_dir),
    )
    assert made.returncode == 0, made.stderr
    assert "[backup] WARNING: this archive holds .data/secrets.env" in made.stderr
    return archive


def test_secrets_go_into_a_backup_only_when_asked_for(backup_archive):
    with tarfile.open(backup_archive) as tar:
        assert tar.getnames() == [*PARTS, "secrets.env"]
        keys = tar.extractfile("secrets.env")
        assert keys is not None and keys.read() == SECRETS.read_bytes()


def _damage(archive: Path, copy: Path, how: str) -> None:
    """A copy of `archive` with one byte changed in the middle of one part, or cut short."""
    shutil.copy(archive, copy)
    if how == "truncated":
        os.truncate(copy, copy.stat().st_size * 2 // 3)
        return
    with tarfile.open(archive) as tar:
        member = tar.getmember(how)
    offset = member.offset_data + member.size // 2
    with copy.open("r+b") as fh:
        fh.seek(offset)
        byte = fh.read(1)[0]
        fh.seek(offset)
        fh.write(bytes([byte ^ 0x01]))


@pytest.mark.parametrize(
    ("how", "says"),
    [
        ("database.dump", "database.dump does not match the manifest"),
        ("files.tar.gz", "files.tar.gz does not match the manifest"),
        ("secrets.env", "secrets.env does not match the manifest"),
        ("manifest.json", "manifest.json does not match its checksum"),
        ("truncated", "it is damaged or truncated"),
    ],
)
def test_a_damaged_archive_is_refused_and_the_target_left_untouched(
    backup_archive, tmp_path, fresh_database, how, says
):
    damaged = tmp_path / "damaged.tar"
    _damage(backup_archive, damaged, how)
    target = tmp_path / "files"
    target.mkdir()
    refused = _restore(damaged, fresh_database, target)
    assert refused.returncode != 0
    assert says in refused.stderr and "Nothing was restored." in refused.stderr, refused.stderr
    assert _relations(fresh_database) == 0
    assert list(target.iterdir()) == []


def test_a_restore_whose_django_settings_use_another_database_is_refused(
    backup_archive, tmp_path, new_database
):
    target, other = new_database(), new_database()
    refused = _script(
        "restore",
        str(backup_archive),
        DATABASE_URL=target,
        TEST_DATABASE_URL=other,  # what config.settings.test hands Django
        WINDTUNNEL_DATA_DIR=str(tmp_path / "files"),
    )
    assert refused.returncode != 0
    other_name = other.rsplit("/", 1)[1]
    assert f"Django uses database {other_name}" in refused.stderr, refused.stderr
    assert "Nothing was restored." in refused.stderr
    assert _relations(target) == 0 and _relations(other) == 0
    assert not (tmp_path / "files").exists()


def test_a_restore_over_a_database_or_data_directory_in_use_needs_force(
    backup_archive, tmp_path, fresh_database
):
    with psycopg.connect(fresh_database, autocommit=True) as conn:
        conn.execute("CREATE TABLE earlier (id int)")
    target = tmp_path / "files"
    target.mkdir()
    (target / "earlier.txt").write_text("kept aside, not lost")

    with psycopg.connect(fresh_database):  # a portal still running on it
        busy = _restore(backup_archive, fresh_database, target, "--force")
    assert busy.returncode != 0
    assert "1 other session(s) use database" in busy.stderr, busy.stderr

    refused = _restore(backup_archive, fresh_database, target)
    assert refused.returncode != 0
    name = fresh_database.rsplit("/", 1)[1]
    assert f"database {name} is not empty" in refused.stderr, refused.stderr
    assert "--force" in refused.stderr
    assert _relations(fresh_database) == 1
    assert [p.name for p in target.iterdir()] == ["earlier.txt"]

    forced = _restore(backup_archive, fresh_database, target, "--force")
    assert forced.returncode == 0, forced.stdout + forced.stderr
    # the keys in the archive are this installation's: nothing to install, nothing written
    assert "already holds the archive's keys" in forced.stdout
    assert not SECRETS.with_name("secrets.env.from-backup").exists()
    with psycopg.connect(fresh_database) as conn:
        tables = {row[0] for row in conn.execute("SELECT tablename FROM pg_tables")}
    assert "earlier" not in tables and "studies_run" in tables
    aside = [p for p in target.iterdir() if p.name.startswith(".before-restore-")]
    assert len(aside) == 1 and (aside[0] / "earlier.txt").read_text() == "kept aside, not lost"
    assert (target / "archives" / "r1" / "attempt-1.tar.gz").stat().st_size == 64 * 1024
    assert (target / "runs" / "r1" / "attempt-1" / "log.icoFoam").read_text().count("\n") == 1000


def test_an_older_backup_is_brought_up_to_this_portals_schema(new_database, tmp_path):
    older = new_database()
    env = {"DATABASE_URL": older, "TEST_DATABASE_URL": older}
    for args in (["migrate"], ["migrate", "telemetry", "0002_chunk_extremes"]):
        done = subprocess.run(
            [sys.executable, "manage.py", *args, "-v0"],
            env={**os.environ, **env},
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=False,
        )
        assert done.returncode == 0, done.stderr
    archive = tmp_path / "older.tar"
    # a portal that has stored no file yet has no data directory
    made = _script("backup", str(archive), **env, WINDTUNNEL_DATA_DIR=str(tmp_path / "none"))
    assert made.returncode == 0, made.stderr
    assert "there is no data directory" in made.stdout
    with tarfile.open(archive) as tar:
        member = tar.extractfile("manifest.json")
        assert member is not None
        manifest = json.load(member)
    assert manifest["database"]["migration_heads"]["telemetry"] == "0002_chunk_extremes"

    target = new_database()
    restored = _restore(archive, target, tmp_path / "files")
    assert restored.returncode == 0, restored.stdout + restored.stderr
    assert "migrations: " in restored.stdout and " applied (the backup was older" in restored.stdout
    assert _snapshot(target)["migrations"] == _snapshot(_database_url())["migrations"]
