"""What a run's agent and solver steps see of the portal's environment."""

from __future__ import annotations

from pathlib import Path

from orchestration.environment import agent_environment, step_environment

PORTAL = {
    "PATH": "/usr/bin:/bin",
    "HOME": "/root",
    "LANG": "C.UTF-8",
    "LC_NUMERIC": "C",
    "DATABASE_URL": "postgres://u:pw@db/wt",
    "REDIS_URL": "redis://r/0",
    "SECRET_KEY": "s",
    "WINDTUNNEL_SECRETS_KEY": "k",
    "AWS_SECRET_ACCESS_KEY": "a",
    "WM_PROJECT_DIR": "/usr/share/openfoam",
    "FOAM_SIGFPE": "1",
    "OMPI_ALLOW_RUN_AS_ROOT": "1",
    "SLURM_JOB_ID": "42",
    "PYTHONPATH": "/srv/windtunnel",
    "https_proxy": "http://proxy:3128",
}
SECRETS = {
    "DATABASE_URL",
    "REDIS_URL",
    "SECRET_KEY",
    "WINDTUNNEL_SECRETS_KEY",
    "AWS_SECRET_ACCESS_KEY",
}


def test_an_agent_gets_what_runs_need_and_its_way_to_the_portal_but_no_secrets():
    env = agent_environment(PORTAL)
    assert not SECRETS & env.keys()
    assert env["PYTHONPATH"] == "/srv/windtunnel" and env["https_proxy"] == "http://proxy:3128"
    assert env["WM_PROJECT_DIR"] and env["OMPI_ALLOW_RUN_AS_ROOT"] and env["SLURM_JOB_ID"]


def test_a_step_gets_a_home_of_its_own_that_turns_system_operations_off(tmp_path: Path):
    env = step_environment(PORTAL, {"FOAM_EXTRA": "x"}, home=str(tmp_path / "home"))
    assert not SECRETS & env.keys()
    assert "PYTHONPATH" not in env and "https_proxy" not in env  # the agent's, not the solver's
    assert env["FOAM_EXTRA"] == "x" and env["LC_NUMERIC"] == "C"
    assert env["HOME"] == str(tmp_path / "home")
    switch = (tmp_path / "home/.OpenFOAM/controlDict").read_text()
    assert "allowSystemOperations   0;" in switch


def test_a_deployment_that_trusts_its_users_keeps_home_and_writes_no_switch(tmp_path: Path):
    env = step_environment(PORTAL, {}, home=str(tmp_path / "home"), allow_system_operations=True)
    assert env["HOME"] == "/root" and not (tmp_path / "home").exists()
    assert not SECRETS & env.keys()
