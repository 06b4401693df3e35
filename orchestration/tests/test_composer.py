"""The composer without builds: manifests, resolution, digests, recipes, progress."""

from __future__ import annotations

import ast
import base64
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from orchestration.composer import (
    Catalog,
    Manifest,
    ManifestError,
    Progress,
    ResolveError,
    compose,
    load_catalog,
    load_manifest,
    parse_requirement,
    render_argv,
    resolve,
    version_key,
)
from orchestration.composer.bake import NOVA_USER_DATA_MAX, gzip_b64
from orchestration.composer.recipe import UNPACK, lean_python

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = {
    "openfoam-core",
    "simplefoam",
    "pimplefoam",
    "pisofoam",
    "icofoam",
    "potentialfoam",
    "rhosimplefoam",
    "buoyantsimplefoam",
    "meshing",
    "decomposition",
    "windtunnel-agent",
}


def write(root: Path, name: str, body: str = "", **fields) -> Path:
    data = {
        "name": name,
        "version": "1.0",
        "description": f"package {name}",
        "depends": [],
        "provides": {"solvers": [], "utilities": []},
        "install": {"debian": [], "files": []},
        **fields,
    }
    folder = root / name
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "package.yaml"
    path.write_text(body or yaml.safe_dump(data, sort_keys=False))
    return path


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    (tmp_path / "packages").mkdir()
    return tmp_path / "packages"


# -- the shipped manifests ------------------------------------------------------------------


def _latest(catalog: Catalog, name: str) -> Manifest:
    manifest = catalog.latest(name)
    assert manifest is not None, name
    return manifest


def test_every_shipped_manifest_is_valid_and_the_required_set_is_there() -> None:
    catalog = load_catalog(ROOT / "packages")
    assert SHIPPED <= set(catalog.names())
    solvers = {s for n in catalog.names() for s in _latest(catalog, n).solvers}
    assert {"simpleFoam", "icoFoam", "rhoSimpleFoam", "buoyantSimpleFoam"} <= solvers
    for name in catalog.names():
        m = _latest(catalog, name)
        if m.solvers:  # every solver package has the three run configurations
            assert set(m.run_configurations) == {"usage", "serial", "mpi"}, name


def test_run_configurations_render_with_solver_and_processes() -> None:
    ico = load_manifest(ROOT / "packages/icofoam/package.yaml")
    mpi = ico.run_configurations["mpi"]
    argvs = [render_argv(s["argv"], solver="icoFoam", processes=4) for s in mpi["steps"]]
    assert argvs[1][-3:] == ["4", "icoFoam", "-parallel"]
    assert render_argv(ico.run_configurations["usage"]["argv"], solver="icoFoam", processes=1) == [
        "icoFoam",
        "-help",
    ]


def _imported(module: str, seen: set[str]) -> set[str]:
    """The files of `module` and of every orchestration module it imports (anywhere in it:
    the agent imports the renderer inside a function), as paths under the repository."""
    path = ROOT / (module.replace(".", "/") + ".py")
    if not path.exists():
        path = ROOT / module.replace(".", "/") / "__init__.py"
    if module in seen or not path.exists():
        return set()
    seen.add(module)
    files = {str(path.relative_to(ROOT))}
    for node in ast.walk(ast.parse(path.read_text())):
        names: list[str] = []
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("orchestration"):
            names = [node.module or "", *(f"{node.module}.{a.name}" for a in node.names)]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names if a.name.startswith("orchestration")]
        for name in names:
            files |= _imported(name, seen)
    return files


def test_the_agent_package_copies_what_the_agent_imports_and_nothing_else() -> None:
    agent = load_manifest(ROOT / "packages/windtunnel-agent/package.yaml")
    dests = {e.dest for e in agent.file_entries}
    assert not any("/tests/" in d or "/drivers/" in d or "/composer/" in d for d in dests)
    needed: set[str] = {"orchestration/__init__.py"}
    # left out (the package's exclude): imported lazily, where the portal's own host runs them
    # (an image's agent does without: main.py's import of resume is guarded)
    host_only = {"handover", "seccomp", "resume", "warm", "mapping"}
    assert {f"/opt/windtunnel/orchestration/agent/{m}.py" for m in host_only}.isdisjoint(dests)
    seen = {f"orchestration.agent.{m}" for m in host_only}  # not followed into
    for main in sorted((ROOT / "orchestration/agent").glob("*.py")):
        if main.stem not in host_only:
            needed |= _imported(f"orchestration.agent.{main.stem}", seen)
    missing = {f for f in needed if f"/opt/windtunnel/{f}" not in dests}
    assert missing == set(), "the agent imports these; add them to the package's include"


# -- validation: the file and the field are named ----------------------------------------------


@pytest.mark.parametrize(
    ("fields", "field", "words"),
    [
        ({"version": 1912}, "version", "is not of type 'string'"),
        ({"depends": ["openfoam-core >>1"]}, "depends[0]", "wrong form"),
        ({"provides": {"solvers": ["icoFoam"]}}, "provides", "'utilities' is required"),
        ({"install": {"debian": ["Bad Name"], "files": []}}, "install.debian[0]", "wrong form"),
        ({"colour": "blue"}, None, "unknown key(s) ('colour' was unexpected)"),
        (
            {"run_configurations": {"serial": {"argv": ["{solver}", "-case", "{dir}"]}}},
            "run_configurations.serial.argv[2]",
            "unknown placeholder {dir}",
        ),
        (
            {
                "run_configurations": {
                    "mpi": {"steps": [{"name": "x", "argv": ["x"], "role": "run"}]}
                }
            },
            "run_configurations.mpi.steps[0].role",
            "is not one of",
        ),
        (
            {"install": {"debian": [], "files": [{"src": "../../..", "dest": "/x"}]}},
            "install.files[0].src",
            "outside the repository",
        ),
        ({"depends": ["foo"], "name": "foo"}, "depends[0]", "cannot name itself"),
    ],
)
def test_invalid_manifests_name_the_file_and_the_field(repo: Path, fields, field, words) -> None:
    fields = dict(fields)
    path = write(repo, fields.pop("name", "pkg"), **fields)
    with pytest.raises(ManifestError) as info:
        load_manifest(path)
    assert info.value.path == str(path)
    assert info.value.field == field
    assert words in str(info.value)
    assert str(info.value).startswith(f"{path}: ")


def test_name_must_equal_the_folder(repo: Path) -> None:
    path = write(repo, "pkg")
    path.write_text(path.read_text().replace("name: pkg", "name: other"))
    with pytest.raises(ManifestError, match="must equal its folder name 'pkg'") as info:
        load_manifest(path)
    assert info.value.field == "name"


def test_broken_yaml_is_reported_with_the_file(repo: Path) -> None:
    path = write(repo, "pkg", body="name: [unclosed\n")
    with pytest.raises(ManifestError, match="not valid YAML") as info:
        load_manifest(path)
    assert info.value.path == str(path)


# -- versions and resolution ----------------------------------------------------------------------


def test_versions_compare_component_by_component() -> None:
    assert version_key("0.10") > version_key("0.9")
    assert version_key("2006") > version_key("1912")
    req = parse_requirement("openfoam-core >=1912, <2100")
    assert req.allows("2006") and not req.allows("2112") and not req.allows("1906")
    assert str(req) == "openfoam-core >=1912, <2100"


def _catalog(repo: Path, specs: dict[str, dict[str, Any]]) -> Catalog:
    for name, fields in specs.items():
        write(repo, name, **fields)
    return load_catalog(repo)


def test_diamond_dependencies_resolve_once_in_install_order(repo: Path) -> None:
    catalog = _catalog(
        repo,
        {
            "core": {},
            "left": {"depends": ["core >=1"]},
            "right": {"depends": ["core"]},
            "top": {"depends": ["left", "right"]},
        },
    )
    resolution = resolve(["top"], catalog)
    assert resolution.names == ["core", "left", "right", "top"]


def test_missing_package_lists_the_chain(repo: Path) -> None:
    catalog = _catalog(repo, {"top": {"depends": ["mid"]}, "mid": {"depends": ["ghost >=2"]}})
    with pytest.raises(ResolveError) as info:
        resolve(["top"], catalog)
    assert info.value.kind == "missing"
    assert "no package named 'ghost'" in str(info.value)
    assert "(needed by top 1.0 → mid 1.0 → ghost >=2)" in str(info.value)


def test_unsatisfiable_version_lists_every_requirement(repo: Path) -> None:
    catalog = _catalog(
        repo,
        {
            "core": {"version": "1912"},
            "new": {"depends": ["core >=2000"]},
            "top": {"depends": ["new"]},
        },
    )
    with pytest.raises(ResolveError) as info:
        resolve(["top"], catalog)
    assert info.value.kind == "unsatisfiable"
    assert "(top 1.0 → new 1.0 → core >=2000)" in str(info.value) and "available: 1912" in str(
        info.value
    )


def test_declared_conflicts_are_errors_naming_both_chains(repo: Path) -> None:
    catalog = _catalog(
        repo,
        {
            "of-com": {"conflicts": ["of-org"]},
            "of-org": {},
            "solver-a": {"depends": ["of-com"]},
            "solver-b": {"depends": ["of-org"]},
        },
    )
    with pytest.raises(ResolveError) as info:
        resolve(["solver-a", "solver-b"], catalog)
    assert info.value.kind == "conflict"
    text = str(info.value)
    assert "of-com 1.0 conflicts with of-org 1.0" in text
    assert "pulled in by solver-a 1.0 → of-com and solver-b 1.0 → of-org" in text
    assert len(info.value.chains) == 2


def test_cycles_are_errors_showing_the_cycle(repo: Path) -> None:
    catalog = _catalog(
        repo, {"a": {"depends": ["b"]}, "b": {"depends": ["c"]}, "c": {"depends": ["a"]}}
    )
    with pytest.raises(ResolveError) as info:
        resolve(["a"], catalog)
    assert info.value.kind == "cycle"
    assert str(info.value) == "dependency cycle: a 1.0 → b 1.0 → c 1.0 → a"


def test_packages_that_disagree_on_the_environment_conflict(repo: Path) -> None:
    catalog = _catalog(repo, {"x": {"env": {"P": "/a"}}, "y": {"env": {"P": "/b"}}})
    with pytest.raises(ResolveError, match="x sets P='/a' but y sets P='/b'"):
        resolve(["x", "y"], catalog)


def _m(name: str, version: str, depends: tuple[str, ...] = ()) -> Manifest:
    return Manifest(
        name=name,
        version=version,
        description=name,
        depends=tuple(parse_requirement(d) for d in depends),
        conflicts=(),
        solvers=(),
        utilities=(),
        debian=(),
        files=(),
        env={},
        run_configurations={},
        path=Path(f"/nowhere/{name}/package.yaml"),
        data={},
    )


def test_several_versions_pick_the_highest_that_fits_every_constraint() -> None:
    catalog = Catalog.of(
        [_m("core", "1.0"), _m("core", "2.0"), _m("core", "3.0"), _m("app", "1.0", ("core <3",))]
    )
    assert [str(m) for m in resolve(["app"], catalog).closure] == ["core 2.0", "app 1.0"]
    assert [str(m) for m in resolve(["core"], catalog).closure] == ["core 3.0"]
    assert [str(m) for m in resolve(["core", "app"], catalog).closure] == ["core 2.0", "app 1.0"]


# -- digests and recipes ----------------------------------------------------------------------------


def test_the_digest_is_stable_and_independent_of_request_order_and_spelling() -> None:
    catalog = load_catalog(ROOT / "packages")
    a = compose(["icofoam", "meshing"], catalog)
    b = compose(
        ["meshing", "icofoam", "openfoam-core", "windtunnel-agent"], load_catalog(ROOT / "packages")
    )
    assert a.digest == b.digest and a.digest.startswith("sha256:") and len(a.digest) == 71
    assert a.name == b.name == "openfoam-icofoam-meshing"
    assert a.requested == ("icofoam", "meshing")
    assert [p["name"] for p in a.packages] == [
        "openfoam-core",
        "windtunnel-agent",
        "decomposition",
        "meshing",
        "icofoam",
    ]


def test_the_digest_changes_with_what_changes_the_bits(repo: Path) -> None:
    agent_src = repo.parent / "src"
    agent_src.mkdir()
    (agent_src / "tool.py").write_text("print(1)\n")
    write(repo, "base-pkg", install={"debian": ["openfoam"], "files": []})
    write(
        repo,
        "tool",
        depends=["base-pkg"],
        install={"debian": [], "files": [{"src": "../../src", "dest": "/opt/tool"}]},
        env={"X": "1"},
    )
    first = compose(["tool"], load_catalog(repo), implicit=())
    (repo / "tool" / "package.yaml").write_text(
        (repo / "tool" / "package.yaml").read_text().replace("package tool", "a new description")
    )
    assert compose(["tool"], load_catalog(repo), implicit=()).digest == first.digest
    (agent_src / "tool.py").write_text("print(2)\n")
    second = compose(["tool"], load_catalog(repo), implicit=())
    assert second.digest != first.digest
    vm = compose(["tool"], load_catalog(repo), implicit=(), kind="vm")
    assert vm.digest != second.digest


def test_the_containerfile_installs_each_package_in_order_and_sets_the_environment() -> None:
    comp = compose(["icofoam"], load_catalog(ROOT / "packages"))
    lines = comp.recipe.splitlines()
    assert lines[1] == f"FROM {comp.base.ref}"
    runs = [line for line in lines if line.startswith("RUN ")]
    assert "openfoam openmpi-bin" in runs[0] and "python3-jinja2" in runs[1]
    assert "COPY files/windtunnel-agent/ /" in lines
    assert lines[-1].startswith("ENV ") and 'WM_PROJECT_DIR="/usr/share/openfoam"' in lines[-1]
    assert comp.labels["org.windtunnel.digest"] == comp.digest
    assert comp.labels["org.windtunnel.solvers"] == "icoFoam"


def test_the_build_context_holds_the_files_at_their_image_paths(tmp_path: Path) -> None:
    comp = compose(["icofoam"], load_catalog(ROOT / "packages"))
    ctx = comp.write_context(tmp_path / "ctx")
    assert (ctx / "Containerfile").read_text() == comp.recipe
    main = ctx / "files/windtunnel-agent/opt/windtunnel/orchestration/agent/main.py"
    assert main.read_text() == (ROOT / "orchestration/agent/main.py").read_text()


def test_the_vm_recipe_is_cloud_init_installing_the_same_closure(tmp_path: Path) -> None:
    comp = compose(["icofoam"], load_catalog(ROOT / "packages"), kind="vm")
    assert comp.recipe.startswith("#cloud-config\n")
    data = yaml.safe_load(comp.recipe)
    assert data["packages"] == [
        "openfoam",
        "openmpi-bin",
        "python3",
        "python3-jinja2",
    ]
    payload = next(f for f in data["write_files"] if f["path"].endswith("windtunnel-agent.tar.xz"))
    # the VM's runcmd unpacks it with python3; here into a folder of the test's
    unpack = next(c for c in data["runcmd"] if c[:3] == ["python3", "-c", UNPACK])
    assert unpack == ["python3", "-c", UNPACK, payload["path"], "/"]
    archive = tmp_path / "payload.tar.xz"
    archive.write_bytes(base64.b64decode(payload["content"]))
    subprocess.run([sys.executable, "-c", UNPACK, str(archive), str(tmp_path / "root")], check=True)
    main = tmp_path / "root/opt/windtunnel/orchestration/agent/main.py"
    assert main.read_bytes() == lean_python((ROOT / "orchestration/agent/main.py").read_bytes())
    env = next(f for f in data["write_files"] if f["path"] == "/etc/windtunnel/env")
    assert "WM_PROJECT_DIR=/usr/share/openfoam" in env["content"]
    assert data["power_state"]["mode"] == "poweroff"
    # Nova's user-data limit, on what the bake sends: the recipe gzipped, then base64
    assert len(gzip_b64(comp.recipe)) <= NOVA_USER_DATA_MAX


def test_lean_python_drops_function_annotations_and_type_checking_imports_only() -> None:
    src = (
        b"from __future__ import annotations\nimport dataclasses\nTYPE_CHECKING = False\n"
        b"if TYPE_CHECKING:\n    from typing import Any\n"
        b"@dataclasses.dataclass\nclass P:\n    x: int = 1\n"
        b"def f(a: int, *b: Any, c: str = 'c', **d: Any) -> list[Any]:\n"
        b"    n: int = a + 1\n    m: str\n    return [n, b, c, d, P(2).x]\n"
    )
    lean = lean_python(src)
    assert b"Any" not in lean and b"-> " not in lean and b"n: int" not in lean
    namespace: dict = {}
    exec(lean, namespace)
    assert namespace["f"](1, 2, c="x", k=3) == [2, (2,), "x", {"k": 3}, 2]
    assert dataclasses_fields(namespace["P"]) == ["x"]  # a dataclass's annotations stay


def dataclasses_fields(cls: type) -> list[str]:
    import dataclasses

    return [f.name for f in dataclasses.fields(cls)]


def test_lean_python_drops_docstrings_but_keeps_a_module_doc_the_module_reads() -> None:
    src = b'"""Module doc."""\n# a comment\ndef f():\n    """F doc."""\n    return 1\n'
    lean = lean_python(src)
    assert b"Module doc" not in lean and b"F doc" not in lean and b"comment" not in lean
    namespace: dict = {}
    exec(lean, namespace)  # the same program
    assert namespace["f"]() == 1
    reads = b'"""Usage: prog [--help]."""\nimport sys\nUSAGE = __doc__\n'
    kept: dict = {}
    exec(lean_python(reads), kept)
    assert kept["USAGE"] == "Usage: prog [--help]."


# -- progress ---------------------------------------------------------------------------------------


def test_progress_follows_steps_and_apt_and_never_goes_back() -> None:
    comp = compose(["icofoam"], load_catalog(ROOT / "packages"))
    seen: list[float] = []
    progress = Progress(comp.recipe, with_base=True, labels=2, report=seen.append)
    for line in ["I: Retrieving Release", "I: Extracting base-files", "I: Configuring apt"]:
        progress.base_line(line)
    progress.base_done()
    lines = [
        "STEP 1/7: FROM x",
        "STEP 2/7: RUN apt-get install",
        "0 upgraded, 4 newly installed, 0 to remove and 0 not upgraded.",
        *[f"Get:{i} http://deb x" for i in range(1, 5)],
        *[f"Unpacking p{i}" for i in range(4)],
        *[f"Setting up p{i}" for i in range(4)],
        "STEP 3/7: RUN apt-get install",
        "STEP 4/7: COPY files/windtunnel-agent/ /",
        "STEP 5/7: ENV A=1",
        "STEP 6/7: LABEL a=b",
        "STEP 7/7: LABEL c=d",
        "COMMIT localhost/x",
    ]
    for line in lines:
        progress.line(line)
    progress.finish()
    assert seen == sorted(seen) and seen[-1] == 1.0
    assert 0.2 < seen[2] < 0.5  # the base counts for a good part when it has to be made
    assert max(v for v in seen if v < 1.0) <= 0.99


def test_the_vm_payloads_python_is_the_same_program_less_comments_docs_and_annotations() -> None:
    import ast as ast_module
    from pathlib import Path

    from orchestration.composer.recipe import lean_python

    root = Path(__file__).resolve().parents[1]
    for path in [
        *sorted((root / "agent").glob("*.py")),
        root / "case" / "render.py",
        root / "results" / "dat.py",
    ]:
        source = path.read_bytes()
        lean = lean_python(source)
        assert len(lean) <= len(source), path.name
        assert not any(line.lstrip().startswith(b"# ") for line in lean.splitlines())
        # the same statements, only docstrings, annotations and TYPE_CHECKING imports gone
        before, after = ast_module.parse(source), ast_module.parse(lean)
        # the module's docstring only where the module reads it (--help)
        kept = ast_module.get_docstring(before) if b"__doc__" in source else None
        assert ast_module.get_docstring(after) == kept
        compile(lean, path.name, "exec")

        def functions(tree: ast_module.AST) -> set[str]:
            # what runs: a type checker's `if TYPE_CHECKING:` never does
            for node in ast_module.walk(tree):
                if isinstance(node, ast_module.If) and ast_module.unparse(node.test) == (
                    "TYPE_CHECKING"
                ):
                    node.body = []
            return {n.name for n in ast_module.walk(tree) if isinstance(n, ast_module.FunctionDef)}

        assert functions(before) == functions(after)
