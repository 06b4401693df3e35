"""Operator API for backends: staff only, per-kind validation, write-only encrypted secrets,
and a check action that reaches the (test) Slurm cluster, locally or over SSH."""

from __future__ import annotations

import subprocess
from typing import Any

import pytest

from catalog.models import Backend
from core.crypto import decrypt_json
from orchestration.tests.test_slurm_cluster import (
    needs_slurm,
    needs_ssh,
    slurm_settings,
    ssh_secrets,
    ssh_settings,
)

URL = "/api/v1/admin/backends/"


def _key() -> str:
    return subprocess.run(
        [
            "bash",
            "-c",
            "d=$(mktemp -d); ssh-keygen -q -t ed25519 -N '' -f $d/k; cat $d/k; rm -r $d",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout


KNOWN = "login.example.org ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIN7kWXOmx1gGzmps/Qv8hoJp/jP7+a1lmz7mFZWOAwrm"


def _ssh_body(**extra):
    body = {
        "name": "cluster",
        "kind": "slurm",
        "settings": {
            "transport": "ssh",
            "host": "login.example.org",
            "user": "cfd",
            "partition": "compute",
            "account": "aero",
            "modules": ["openfoam/2312"],
            "work_root": "/scratch/cfd/windtunnel",
        },
        "secrets": {"private_key": _key(), "known_hosts": KNOWN},
        "cores": 256,
        "memory_gb": 1024,
        "max_nodes": 8,
    }
    body.update(extra)
    return body


def test_members_who_are_not_staff_cannot_see_or_change_backends(api):
    assert api.get(URL).status_code == 403
    assert api.post(URL, _ssh_body(), format="json").status_code == 403


def test_secrets_are_write_only_and_stored_encrypted(ops, db):
    body = _ssh_body()
    r = ops.post(URL, body, format="json")
    assert r.status_code == 201, r.json()
    out = r.json()
    assert out["has_key"] is True and out["secrets_set"] == ["known_hosts", "private_key"]
    assert "secrets" not in out and "PRIVATE KEY" not in r.content.decode()
    row = Backend.objects.get(name="cluster")
    assert "PRIVATE KEY" not in row.secrets and "PRIVATE KEY" not in str(row.settings)
    assert decrypt_json(row.secrets)["private_key"].startswith("-----BEGIN OPENSSH PRIVATE KEY")
    material = KNOWN.split()[-1].encode()
    for got in (ops.get(URL).content, ops.get(f"{URL}cluster/").content):
        assert b"PRIVATE KEY" not in got and material not in got
    assert ops.get(f"{URL}cluster/").json()["settings"]["partition"] == "compute"


@pytest.mark.parametrize(
    ("change", "field", "words"),
    [
        ({"settings": {"transport": "telnet"}}, "settings.transport", "unknown transport"),
        ({"settings": {"transport": "ssh", "user": "cfd"}}, "settings.host", "host name"),
        ({"settings": {"partition": "big;reboot"}}, "settings.partition", "partition name"),
        ({"settings": {"partiton": "x"}}, "settings.partiton", "unknown setting"),
        (
            {"settings": {"extra_directives": ["--output=/tmp/x"]}},
            "settings.extra_directives",
            "set by the driver",
        ),
        ({"settings": {"private_key": "x"}}, "settings.private_key", "is a secret"),
        (
            {"secrets": {"private_key": "not a key", "known_hosts": KNOWN}},
            "secrets.private_key",
            "private key",
        ),
        ({"secrets": {"password": "x"}}, "secrets.password", "unknown secret"),
        ({"secrets": {"known_hosts": KNOWN}}, "secrets.private_key", "needs a private key"),
        (
            {"secrets": {"private_key": None, "known_hosts": ""}},
            "secrets.private_key",
            "needs a private key",
        ),
    ],
)
def test_bad_settings_are_clear_400s(ops, db, change, field, words):
    body = _ssh_body()
    if "settings" in change:
        body["settings"] = {**body["settings"], **change["settings"]}
        if change["settings"].get("transport") == "ssh":
            body["settings"].pop("host")
    if "secrets" in change:
        body["secrets"] = change["secrets"]
    r = ops.post(URL, body, format="json")
    assert r.status_code == 400, r.json()
    assert r.json()["field"] == field and words in r.json()["message"], r.json()
    assert not Backend.objects.filter(name="cluster").exists()


@pytest.mark.parametrize(
    ("known_hosts", "words"),
    [
        (
            "[127.0.0.1]:43193 ssh-ed25519 AAAAC",
            "line 1 (host '[127.0.0.1]:43193') is not a host key",
        ),
        ("# scanned\nlogin.example.org ssh-rsa", "line 2 (host 'login.example.org') is not"),
        (None, "known_hosts holds a private key"),
    ],
)
def test_a_bad_known_hosts_is_a_400_that_echoes_no_key(ops, db, known_hosts, words):
    """A damaged line, or the private key pasted in the wrong box: a 400 on
    secrets.known_hosts naming the line, and no key material in the answer (create and
    PATCH alike)."""
    key = _key()
    body = _ssh_body(secrets={"private_key": key, "known_hosts": known_hosts or key})
    r = ops.post(URL, body, format="json")
    assert r.status_code == 400, r.content
    assert r.json()["field"] == "secrets.known_hosts" and words in r.json()["message"], r.json()
    secret_lines = [line for line in key.splitlines() if line and "-----" not in line]
    assert not any(line[:20] in r.content.decode() for line in secret_lines)
    assert ops.post(URL, _ssh_body(), format="json").status_code == 201
    r = ops.patch(f"{URL}cluster/", {"secrets": {"known_hosts": known_hosts or key}}, format="json")
    assert r.status_code == 400 and r.json()["field"] == "secrets.known_hosts", r.content
    assert not any(line[:20] in r.content.decode() for line in secret_lines)


def test_ssh_needs_a_known_host_key(ops, db):
    body = _ssh_body(secrets={"private_key": _key()})
    r = ops.post(URL, body, format="json")
    assert r.status_code == 400 and r.json()["field"] == "secrets.known_hosts"
    assert "never trusts an unknown host key" in r.json()["message"]


def test_patch_merges_settings_and_secrets_and_delete_is_refused_with_history(ops, db, make_tenant):
    assert ops.post(URL, _ssh_body(), format="json").status_code == 201
    r = ops.patch(
        f"{URL}cluster/",
        {"settings": {"qos": "long", "account": None}, "enabled": False, "tenants": ["ops"]},
        format="json",
    )
    assert r.status_code == 200, r.json()
    body = r.json()
    assert body["settings"]["qos"] == "long" and "account" not in body["settings"]
    assert body["settings"]["partition"] == "compute" and body["has_key"] is True
    assert body["enabled"] is False and body["tenants"] == ["ops"]
    r = ops.patch(f"{URL}cluster/", {"kind": "local"}, format="json")
    assert r.status_code == 400
    r = ops.patch(f"{URL}cluster/", {"secrets": {"private_key": "oops"}}, format="json")
    assert r.status_code == 400 and r.json()["field"] == "secrets.private_key"
    assert ops.get(f"{URL}cluster/").json()["has_key"] is True  # the old key stays
    assert ops.delete(f"{URL}cluster/").status_code == 204
    assert ops.get(f"{URL}cluster/").status_code == 404


def test_the_admission_policy_is_chosen_per_backend_and_a_wrong_one_names_the_choices(ops, db):
    assert ops.post(URL, _ssh_body(), format="json").status_code == 201
    assert ops.get(f"{URL}cluster/").json()["admission_policy"] == ""  # the portal default
    r = ops.patch(
        f"{URL}cluster/",
        {"admission_policy": "fair_share", "fair_share_half_life": 600},
        format="json",
    )
    assert r.status_code == 200, r.content
    assert (r.json()["admission_policy"], r.json()["fair_share_half_life"]) == ("fair_share", 600)
    r = ops.patch(f"{URL}cluster/", {"admission_policy": "lottery"}, format="json")
    assert r.status_code == 400 and r.json()["field"] == "admission_policy", r.content
    assert "lottery" in r.json()["message"]
    r = ops.patch(f"{URL}cluster/", {"fair_share_half_life": -1}, format="json")
    assert r.status_code == 400 and r.json()["field"] == "fair_share_half_life", r.content
    assert ops.get(f"{URL}cluster/").json()["admission_policy"] == "fair_share"


def test_check_reports_an_unreachable_cluster_as_an_error(ops, db):
    body = _ssh_body()
    body["settings"] = {**body["settings"], "host": "127.0.0.1", "port": 1, "retries": 0}
    assert ops.post(URL, body, format="json").status_code == 201
    r = ops.post(f"{URL}cluster/check/")
    assert r.status_code == 200
    assert r.json()["ok"] is False and "cannot connect" in r.json()["error"]


@needs_slurm
@pytest.mark.xdist_group("cluster")
def test_capacity_ask_takes_it_from_sinfo_and_check_reports_partitions(ops, db):
    body = {"name": "lab", "kind": "slurm", "settings": slurm_settings(capacity="ask")}
    r = ops.post(URL, body, format="json")
    assert r.status_code == 201, r.json()
    assert r.json()["cores"] >= 1 and r.json()["memory_gb"] > 0 and r.json()["max_nodes"] == 1
    report = ops.post(f"{URL}lab/check/").json()
    assert report["ok"] is True and report["transport"] == "local"
    assert report["partitions"][0]["partition"].rstrip("*") == "debug"
    bad: dict[str, Any] = {
        "name": "lab2",
        "kind": "slurm",
        "settings": slurm_settings(partition="nope"),
    }
    bad["cores"], bad["memory_gb"] = 2, 2
    assert ops.post(URL, bad, format="json").status_code == 201
    report = ops.post(f"{URL}lab2/check/").json()
    assert report["ok"] is False and "partition 'nope' does not exist" in report["error"]


@needs_ssh
@pytest.mark.xdist_group("cluster")
def test_check_over_ssh_with_the_stored_key(ops, db):
    body = {
        "name": "remote",
        "kind": "slurm",
        "settings": ssh_settings(capacity="ask"),
        "secrets": ssh_secrets(),
    }
    r = ops.post(URL, body, format="json")
    assert r.status_code == 201, r.json()
    report = ops.post(f"{URL}remote/check/").json()
    assert report["ok"] is True and report["transport"] == "ssh", report
    assert report["capacity"]["cores"] == r.json()["cores"]


# -- OpenStack ----------------------------------------------------------------------------


def _os_body(**settings):
    return {
        "name": "cloud",
        "kind": "openstack",
        "cores": 16,
        "memory_gb": 64,
        "max_nodes": 4,
        "settings": settings,
    }


@pytest.mark.parametrize(
    ("settings", "field", "words"),
    [
        ({}, "settings.cloud", "clouds.yaml"),
        ({"cloud": "x", "network": ""}, "settings.network", '"none"'),
        ({"cloud": "x", "network": "net; rm -rf /"}, "settings.network", "name or id"),
        ({"cloud": "x", "vm_work_root": "relative/dir"}, "settings.vm_work_root", "absolute"),
        ({"cloud": "x", "boot_timeout": -1}, "settings.boot_timeout", "number"),
        ({"auth_url": "ftp://x"}, "settings.auth_url", "Keystone URL"),
        ({"cloud": "x", "bake_timeout": "soon"}, "settings.bake_timeout", "bake_timeout"),
    ],
)
def test_openstack_settings_are_checked_field_by_field(ops, settings, field, words):
    r = ops.post(URL, _os_body(**settings), format="json")
    assert r.status_code == 400, r.content
    assert r.json()["field"] == field
    assert words in r.json()["message"]
    assert not Backend.objects.filter(name="cloud").exists()


def test_openstack_credentials_need_their_secret_and_stay_secret(ops):
    body = _os_body(
        auth_url="https://keystone.example.org:5000/v3", application_credential_id="abc123"
    )
    r = ops.post(URL, body, format="json")
    assert r.status_code == 400 and r.json()["field"] == "secrets.application_credential_secret"
    body["secrets"] = {"application_credential_secret": "s3cret-value"}
    r = ops.post(URL, body, format="json")
    assert r.status_code == 201, r.content
    assert "s3cret-value" not in r.content.decode()
    stored = Backend.objects.get(name="cloud")
    assert "s3cret-value" not in stored.secrets  # encrypted at rest
    assert decrypt_json(stored.secrets) == {"application_credential_secret": "s3cret-value"}
