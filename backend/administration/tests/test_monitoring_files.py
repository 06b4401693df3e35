"""docker/'s monitoring profile (docs/metrics.md), checked without a Docker engine: the files
load, fit each other (mounts, the token's secret, the data source), and the Grafana dashboard
only asks for metrics the portal serves."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml
from django.conf import settings
from django.test import Client
from prometheus_client import Counter, Gauge, Histogram
from prometheus_client.parser import text_string_to_metric_families

from core import metrics

DOCKER = Path(__file__).resolve().parents[3] / "docker"
SAMPLE_SUFFIXES = {"counter": ["_total"], "histogram": ["_bucket", "_count", "_sum"]}


def compose() -> dict:
    return yaml.safe_load((DOCKER / "compose.yaml").read_text())


def served_sample_names() -> set[str]:
    """Every sample name /metrics can serve: what a scrape shows now, and the instruments
    with labels that show up once something is observed."""
    response = Client().get(
        "/metrics", HTTP_AUTHORIZATION=f"Bearer {settings.WINDTUNNEL['METRICS_TOKEN']}"
    )
    assert response.status_code == 200
    families = [(f.name, f.type) for f in text_string_to_metric_families(response.content.decode())]
    for instrument in vars(metrics).values():
        if isinstance(instrument, Counter | Gauge | Histogram):
            families += [(m.name, m.type) for m in instrument.describe()]
    return {name + suffix for name, kind in families for suffix in SAMPLE_SUFFIXES.get(kind, [""])}


@pytest.mark.django_db
def test_the_dashboard_asks_only_for_metrics_the_portal_serves():
    dashboard = json.loads((DOCKER / "grafana" / "dashboards" / "windtunnel.json").read_text())
    exprs = [t["expr"] for panel in dashboard["panels"] for t in panel.get("targets", [])] + [
        v["definition"] for v in dashboard["templating"]["list"]
    ]
    asked = {name for expr in exprs for name in re.findall(r"windtunnel_[a-z_]+", expr)}
    assert asked, "the dashboard has queries"
    assert asked - served_sample_names() == set()
    for needed in ("windtunnel_queue_length", "windtunnel_queue_oldest_wait_seconds"):
        assert needed in asked, "the queue is on a panel"
    datasource = yaml.safe_load(
        (DOCKER / "grafana" / "provisioning" / "datasources" / "prometheus.yaml").read_text()
    )["datasources"][0]
    assert {p["datasource"]["uid"] for p in dashboard["panels"] if "datasource" in p} == {
        datasource["uid"]
    }


def test_prometheus_scrapes_the_web_with_the_token_compose_hands_it():
    services = compose()["services"]
    config = yaml.safe_load((DOCKER / "prometheus" / "prometheus.yml").read_text())
    job = config["scrape_configs"][0]
    assert job["metrics_path"] == "/metrics"
    assert job["static_configs"][0]["targets"] == ["web:8000"]
    assert job["authorization"]["type"] == "Bearer"
    secret = services["prometheus"]["secrets"][0]
    assert job["authorization"]["credentials_file"] == f"/run/secrets/{secret}"
    assert compose()["secrets"][secret] == {"environment": "WINDTUNNEL_METRICS_TOKEN"}
    mounted = dict(v.split(":")[:2] for v in services["prometheus"]["volumes"])
    assert mounted["./prometheus/prometheus.yml"] == "/etc/prometheus/prometheus.yml"


def test_grafana_loads_the_provisioned_data_source_and_dashboard():
    grafana = compose()["services"]["grafana"]
    mounted = dict(v.split(":")[:2] for v in grafana["volumes"])
    provider = yaml.safe_load(
        (DOCKER / "grafana" / "provisioning" / "dashboards" / "windtunnel.yaml").read_text()
    )["providers"][0]
    assert mounted["./grafana/provisioning"] == "/etc/grafana/provisioning"
    assert mounted["./grafana/dashboards"] == provider["options"]["path"]
    home = grafana["environment"]["GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH"]
    assert home == provider["options"]["path"] + "/windtunnel.json"
    assert grafana["profiles"] == ["monitoring"]


def test_the_portal_services_restart_report_health_and_run_beat_apart():
    services = compose()["services"]
    for name in ("postgres", "redis", "web", "worker", "beat"):
        assert services[name]["restart"] == "unless-stopped", name
        assert "profiles" not in services[name], name
    assert "/healthz" in " ".join(services["web"]["healthcheck"]["test"])
    assert "inspect ping" in " ".join(services["worker"]["healthcheck"]["test"])
    assert " -B" not in services["worker"]["command"]
    assert services["beat"]["command"].startswith("celery -A config beat")
    # the worker's metrics files reach the web's /metrics through a shared volume, one that
    # is not the data directory (backups and restores of it leave the metrics alone)
    env = {n: services[n]["environment"] for n in ("web", "worker", "beat")}
    assert len({e["WINDTUNNEL_DATA_DIR"] for e in env.values()}) == 1
    assert len({e["WINDTUNNEL_METRICS_DIR"] for e in env.values()}) == 1
    assert not env["web"]["WINDTUNNEL_METRICS_DIR"].startswith(env["web"]["WINDTUNNEL_DATA_DIR"])
    for name in ("web", "worker", "beat"):
        assert services[name]["volumes"] == ["data:/data", "metrics:/metrics"], name
