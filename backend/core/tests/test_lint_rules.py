"""`make lint` fails on what the layering forbids: an upward import, the driver interface
imported around compute, Django in orchestration, a project import inside a function, a
private name taken from another module. Each rule is checked here on the real import graph
with one forbidden import added, so a contract that stopped checking would fail this test."""

from __future__ import annotations

import ast
import functools
import importlib.util
import sys
import tomllib
from pathlib import Path
from typing import Any

import grimp
import pytest
from importlinter import configuration
from importlinter.contracts.forbidden import ForbiddenContract
from importlinter.contracts.layers import LayersContract

ROOT = Path(__file__).resolve().parents[3]
CONFIG = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
configuration.configure()  # import-linter's own settings (timers, printers) as lint-imports has


@functools.cache
def _graph() -> grimp.ImportGraph:
    return grimp.build_graph(*CONFIG["root_packages"], include_external_packages=True)


def _contract(name_starts: str) -> Any:
    (options,) = [c for c in CONFIG["contracts"] if c["name"].startswith(name_starts)]
    kinds = {"layers": LayersContract, "forbidden": ForbiddenContract}
    kind = kinds[options["type"]]
    options = {k: v for k, v in options.items() if k not in ("name", "type")}
    options = {k: str(v).lower() if isinstance(v, bool) else v for k, v in options.items()}
    return kind(
        name=name_starts,
        session_options={
            "root_packages": CONFIG["root_packages"],
            "include_external_packages": True,
        },
        contract_options=options,
    )


def _kept_with(contract: Any, *, importer: str, imported: str) -> bool:
    graph = _graph()
    graph.add_import(importer=importer, imported=imported, line_number=1, line_contents="x")
    try:
        return contract.check(graph, verbose=False).kept
    finally:
        graph.remove_import(importer=importer, imported=imported)


@pytest.mark.parametrize(
    ("contract", "importer", "imported"),
    [
        ("Backend apps sit in layers", "catalog.models", "studies.models"),
        ("Backend apps sit in layers", "studies.transitions", "dispatch.start"),
        ("Backend apps sit in layers", "core.jobs", "config.settings.base"),
        ("compute is the backend's one importer", "runs.services", "orchestration.drivers.local"),
        ("orchestration is plain Python", "orchestration.agent.main", "django"),
        ("orchestration is plain Python", "orchestration.composer.build", "studies.models"),
    ],
)
def test_the_contracts_hold_now_and_refuse_a_forbidden_import(contract, importer, imported):
    checker = _contract(contract)
    assert checker.check(_graph(), verbose=False).kept, f"{contract}: broken already"
    assert not _kept_with(checker, importer=importer, imported=imported)


def _import_checker() -> Any:
    spec = importlib.util.spec_from_file_location(
        "check_imports", ROOT / "scripts/check_imports.py"
    )
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules["check_imports"] = module
    spec.loader.exec_module(module)
    return module


def _problems(tmp_path: Path, name: str, source: str) -> list[str]:
    checker_module = _import_checker()
    path = ROOT / "backend" / "catalog" / name  # where it would live; never written there
    checker = checker_module.Checker(path, source)
    checker.visit(ast.parse(source))
    return checker.problems


def test_a_project_import_inside_a_function_is_refused_unless_lazy_or_app_ready(tmp_path):
    hidden = "def f():\n    from studies.models import Run\n    return Run\n"
    assert "project import inside a function" in _problems(tmp_path, "x.py", hidden)[0]
    lazy = "def f():\n    from studies import models  # lazy: measured start-up cost\n"
    assert _problems(tmp_path, "x.py", lazy) == []
    third_party = "def f():\n    import openstack\n"
    assert _problems(tmp_path, "x.py", third_party) == []
    ready = (
        "from django.apps import AppConfig\n\nclass C(AppConfig):\n"
        "    def ready(self):\n        from catalog import signals\n"
    )
    assert _problems(tmp_path, "apps.py", ready) == []


def test_a_private_name_from_another_module_is_refused_also_within_a_package(tmp_path):
    assert (
        "private name _fail" in _problems(tmp_path, "x.py", "from catalog.images import _fail\n")[0]
    )
    assert _problems(tmp_path, "x.py", "from catalog.images import image_label\n") == []
