#!/usr/bin/env python3
"""Check a Windtunnel case template: lint it, render it, run it, print its objectives.

Usage (from the repository root):

    .venv/bin/python templates/check.py airfoil2d                   # defaults, serial
    .venv/bin/python templates/check.py airfoil2d --tests --np 2    # tests settings, 2 MPI ranks
    .venv/bin/python templates/check.py airfoil2d -p aoa=8 -p iterations=100
    .venv/bin/python templates/check.py --lint                      # lint + render every template
    .venv/bin/python templates/check.py cavity --render-only --keep /tmp/cavity

Only the standard library, Jinja2 and PyYAML are used. Commands are argv lists (no shell).
Rendering follows the portal's rules: every text file containing ``{{`` is rendered with a
sandboxed Jinja2 (StrictUndefined) where the parameters, the derived values (evaluated in
order) and the math functions are variables; only ``{{ ... }}`` is template syntax.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml
from jinja2 import StrictUndefined, meta
from jinja2.sandbox import SandboxedEnvironment

TEMPLATES_DIR = Path(__file__).resolve().parent
OPENFOAM_DIR = "/usr/share/openfoam"

TEMPLATE_KEYS = {
    "name",
    "title",
    "description",
    "solver",
    "solvers",
    "resources",
    "prepare",
    "decompose_method",
    "parameters",
    "derived",
    "objectives",
    "demo",
    "tests",
}
OPTIONAL_KEYS = {"convergence"}  # the default convergence policy (docs/live.md)
PARAM_KEYS = {"type", "unit", "default", "min", "max", "choices", "description"}
PARAM_TYPES = {"float": float, "int": int, "str": str}

MATH_FUNCTIONS = {
    "sin": math.sin,
    "cos": math.cos,
    "tan": math.tan,
    "radians": math.radians,
    "degrees": math.degrees,
    "sqrt": math.sqrt,
    "exp": math.exp,
    "log": math.log,
    "pi": math.pi,
    "abs": abs,
    "min": min,
    "max": max,
    "round": round,
}


class TemplateError(Exception):
    pass


def make_env() -> SandboxedEnvironment:
    # Only {{ ... }} is syntax: block and comment delimiters are set to strings that never
    # occur in OpenFOAM files, so OpenFOAM's own "{", "#{ ... #}", "{#" pass through.
    return SandboxedEnvironment(
        undefined=StrictUndefined,
        block_start_string="<%windtunnel-block%",
        block_end_string="%windtunnel-block%>",
        comment_start_string="<%windtunnel-comment%",
        comment_end_string="%windtunnel-comment%>",
        keep_trailing_newline=True,
        autoescape=False,
    )


# --------------------------------------------------------------------------- template


def load_template(name: str) -> tuple[Path, dict]:
    root = Path(name) if Path(name).is_dir() else TEMPLATES_DIR / name
    spec = yaml.safe_load((root / "template.yaml").read_text())
    unknown = set(spec) - TEMPLATE_KEYS - OPTIONAL_KEYS
    missing = TEMPLATE_KEYS - set(spec)
    if unknown or missing:
        raise TemplateError(
            f"{root}: unknown keys {sorted(unknown)}, missing keys {sorted(missing)}"
        )
    if spec["name"] != root.name:
        raise TemplateError(f"{root}: name {spec['name']!r} != folder name {root.name!r}")
    if spec["solver"] not in spec["solvers"]:
        raise TemplateError(f"{root}: solver {spec['solver']!r} not in solvers")
    if spec["decompose_method"] not in ("simple", "hierarchical"):
        raise TemplateError(f"{root}: decompose_method must be simple or hierarchical")
    for pname, p in spec["parameters"].items():
        if set(p) - PARAM_KEYS:
            raise TemplateError(f"parameter {pname}: unknown keys {sorted(set(p) - PARAM_KEYS)}")
        if p.get("type") not in PARAM_TYPES:
            raise TemplateError(f"parameter {pname}: type must be float, int or str")
        coerce(pname, p, p["default"])
    for oname, o in spec["objectives"].items():
        if "expr" in o:
            continue
        if o.get("reduce") not in ("last", "mean_last"):
            raise TemplateError(f"objective {oname}: reduce must be last or mean_last")
        if o["reduce"] == "mean_last" and int(o.get("n", 0)) < 1:
            raise TemplateError(f"objective {oname}: mean_last needs n >= 1")
    return root, spec


def coerce(pname: str, p: dict, value):
    kind = p["type"]
    if kind == "str":
        value = str(value)
        if p.get("choices") and value not in p["choices"]:
            raise TemplateError(f"{pname}={value!r} not in {p['choices']}")
        return value
    if isinstance(value, str):
        value = float(value)
    if kind == "int":
        if float(value) != int(value):
            raise TemplateError(f"{pname}={value!r} is not an integer")
        value = int(value)
    else:
        value = float(value)
    if "min" in p and value < p["min"]:
        raise TemplateError(f"{pname}={value} < min {p['min']}")
    if "max" in p and value > p["max"]:
        raise TemplateError(f"{pname}={value} > max {p['max']}")
    return value


def build_context(spec: dict, overrides: dict) -> dict:
    params = {}
    for pname, p in spec["parameters"].items():
        params[pname] = coerce(pname, p, overrides.get(pname, p["default"]))
    unknown = set(overrides) - set(params)
    if unknown:
        raise TemplateError(f"unknown parameters {sorted(unknown)}")
    env = make_env()
    ctx = dict(MATH_FUNCTIONS)
    ctx.update(params)
    for dname, expr in (spec.get("derived") or {}).items():
        if dname in params or dname in MATH_FUNCTIONS:
            raise TemplateError(f"derived {dname} shadows a parameter or function")
        ctx[dname] = env.compile_expression(str(expr), undefined_to_none=False)(**ctx)
    return ctx


def template_files(root: Path):
    for path in sorted(root.rglob("*")):
        if path.is_file() and path.name not in ("template.yaml", "NOTICE"):
            yield path


def read_text(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        return None


def lint(root: Path, spec: dict) -> list[str]:
    """Problems: placeholders naming nothing, parameters or derived values used nowhere."""
    env = make_env()
    problems = []
    names = set(spec["parameters"]) | set(spec.get("derived") or {}) | set(MATH_FUNCTIONS)
    used: set[str] = set()
    for path in template_files(root):
        text = read_text(path)
        rel = path.relative_to(root)
        if text is None:
            problems.append(f"{rel}: not UTF-8 text (binary files are copied, never rendered)")
            continue
        if not text.startswith("/*--------------------------------*- C++ -*--"):
            problems.append(f"{rel}: no OpenFOAM license header")
        if "{{" not in text:
            continue
        refs = meta.find_undeclared_variables(env.parse(text))
        for ref in sorted(refs - names):
            problems.append(f"{rel}: placeholder refers to unknown name {ref!r}")
        used |= refs
    # derived expressions use names too; a derived value counts only if it is used itself
    derived = spec.get("derived") or {}
    deps = {
        d: meta.find_undeclared_variables(env.parse("{{ " + str(e) + " }}"))
        for d, e in derived.items()
    }
    changed = True
    while changed:
        changed = False
        for d, refs in deps.items():
            if d in used and not refs <= used:
                used |= refs
                changed = True
    for pname in spec["parameters"]:
        if pname not in used:
            problems.append(f"parameter {pname!r} is used by no case file (dead parameter)")
    for dname in derived:
        if dname not in used:
            problems.append(f"derived {dname!r} is used by no case file")
    for o in spec["objectives"].values():
        if "expr" in o:
            refs = meta.find_undeclared_variables(env.parse("{{ " + o["expr"] + " }}"))
            for ref in refs - set(spec["objectives"]) - set(MATH_FUNCTIONS):
                problems.append(f"objective expr {o['expr']!r} refers to unknown {ref!r}")
    return problems


def render_case(root: Path, ctx: dict, dest: Path) -> list[str]:
    env = make_env()
    rendered = []
    for path in template_files(root):
        target = dest / path.relative_to(root)
        target.parent.mkdir(parents=True, exist_ok=True)
        text = read_text(path)
        if text is not None and "{{" in text:
            target.write_text(env.from_string(text).render(**ctx), encoding="utf-8")
            rendered.append(str(path.relative_to(root)))
        else:
            shutil.copy2(path, target)
    return rendered


# --------------------------------------------------------------------------- running


def solver_env() -> dict:
    env = dict(os.environ)
    env.setdefault("WM_PROJECT_DIR", OPENFOAM_DIR)
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        env["OMPI_ALLOW_RUN_AS_ROOT"] = "1"
        env["OMPI_ALLOW_RUN_AS_ROOT_CONFIRM"] = "1"
    return env


DECOMPOSE_DICT = """\
/*--------------------------------*- C++ -*----------------------------------*\\
| =========                 |                                                 |
| \\\\      /  F ield         | OpenFOAM: The Open Source CFD Toolbox           |
|  \\\\    /   O peration     | Version:  v1912                                 |
|   \\\\  /    A nd           | Website:  www.openfoam.com                      |
|    \\\\/     M anipulation  |                                                 |
\\*---------------------------------------------------------------------------*/
FoamFile
{{
    version     2.0;
    format      ascii;
    class       dictionary;
    location    "system";
    object      decomposeParDict;
}}
// * * * * * * * * * * * * * * * * * * * * * * * * * * * * * * * * * * * * * //

numberOfSubdomains {n};

method          {method};

simpleCoeffs
{{
    n           ({n} 1 1);
    delta       0.001;
}}

hierarchicalCoeffs
{{
    n           ({n} 1 1);
    delta       0.001;
    order       xyz;
}}

// ************************************************************************* //
"""


def run_steps(case: Path, spec: dict, solver: str, np_: int, verbose: bool) -> list[dict]:
    steps: list[tuple[str, list[str]]] = []
    for argv in spec.get("prepare") or []:
        steps.append((argv[0], [str(a) for a in argv]))
    if np_ > 1:
        (case / "system" / "decomposeParDict").write_text(
            DECOMPOSE_DICT.format(n=np_, method=spec["decompose_method"])
        )
        steps.append(("decomposePar", ["decomposePar", "-force"]))
        steps.append(
            (
                solver,
                [
                    "mpirun",
                    "--oversubscribe",
                    "--bind-to",
                    "none",
                    "-np",
                    str(np_),
                    solver,
                    "-parallel",
                ],
            )
        )
        steps.append(("reconstructPar", ["reconstructPar", "-latestTime"]))
    else:
        steps.append((solver, [solver]))
    env = solver_env()
    env["PWD"] = str(case)  # else OpenFOAM warns "PWD is not the cwd()"
    timings = []
    for name, argv in steps:
        t0 = time.monotonic()
        with open(case / f"log.{name}", "w") as log:
            proc = subprocess.run(
                argv,
                cwd=case,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                check=False,
            )
        dt = time.monotonic() - t0
        timings.append(
            {"step": name, "argv": argv, "seconds": round(dt, 2), "exit": proc.returncode}
        )
        if verbose:
            print(f"  {name:<16} {dt:8.2f} s  exit {proc.returncode}", flush=True)
        if proc.returncode != 0:
            tail = (case / f"log.{name}").read_text(errors="replace").splitlines()[-30:]
            raise TemplateError(f"step {name} failed (exit {proc.returncode}):\n" + "\n".join(tail))
    return timings


# --------------------------------------------------------------------------- results

TOKEN = re.compile(r"\([^()]*\)|\S+")


def _split(line: str) -> list[str]:
    return TOKEN.findall(line)


def _time_key(p: Path) -> float:
    try:
        return float(p.name)
    except ValueError:
        return math.inf


def read_series(case: Path) -> tuple[dict[str, list[tuple[float, float]]], dict[str, list[str]]]:
    """Series from postProcessing/<fo>/<start>/*.dat, named as the agent names them."""
    series: dict[str, list[tuple[float, float]]] = {}
    headers: dict[str, list[str]] = {}
    pp = case / "postProcessing"
    if not pp.is_dir():
        return series, headers
    for fo in sorted(p for p in pp.iterdir() if p.is_dir()):
        for start in sorted((p for p in fo.iterdir() if p.is_dir()), key=_time_key):
            dats = sorted(start.glob("*.dat"))
            for i, dat in enumerate(dats):
                prefix = fo.name if i == 0 else f"{fo.name}.{dat.stem}"
                header: list[str] = []
                for line in dat.read_text(errors="replace").splitlines():
                    if line.startswith("#"):
                        tokens = _split(line[1:])
                        if tokens:
                            header = tokens
                        continue
                    values = _split(line)
                    if not values or not header:
                        continue
                    headers[str(dat.relative_to(case))] = header
                    try:
                        x = float(values[0])
                    except ValueError:
                        continue
                    for col, val in zip(header[1:], values[1:], strict=False):
                        try:
                            y = float(val)
                        except ValueError:
                            continue  # vectors "(x y z)" and words are not scalar series
                        series.setdefault(f"{prefix}.{col}", []).append((x, y))
    return series, headers


def read_residuals(log: Path) -> dict[str, list[tuple[float, float]]]:
    series: dict[str, list[tuple[float, float]]] = {}
    t = None
    seen: set[str] = set()
    pat = re.compile(r"Solving for (\w+), Initial residual = ([-+.\deE]+)")
    for line in log.read_text(errors="replace").splitlines():
        if line.startswith("Time = "):
            t = float(line.split("=")[1])
            seen = set()
            continue
        m = pat.search(line)
        if m and t is not None and m.group(1) not in seen:
            seen.add(m.group(1))
            series.setdefault(f"residual.{m.group(1)}", []).append((t, float(m.group(2))))
    return series


def objectives(spec: dict, series: dict) -> dict:
    values: dict = {}
    env = make_env()
    for oname, o in spec["objectives"].items():
        if "expr" in o:
            continue
        pts = series.get(o["series"])
        if not pts:
            values[oname] = None
            continue
        ys = [y for _, y in pts]
        if o["reduce"] == "last":
            values[oname] = ys[-1]
        else:
            tail = ys[-int(o["n"]) :]
            values[oname] = sum(tail) / len(tail)
    for oname, o in spec["objectives"].items():
        if "expr" in o:
            try:
                values[oname] = env.compile_expression(o["expr"], undefined_to_none=False)(
                    **MATH_FUNCTIONS, **values
                )
            except Exception as exc:  # division by zero, missing value
                values[oname] = f"error: {exc}"
    return values


# --------------------------------------------------------------------------- main


def parse_overrides(items: list[str]) -> dict:
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep:
            raise SystemExit(f"-p expects name=value, got {item!r}")
        out[key.strip()] = value.strip()
    return out


def lint_all(names: list[str]) -> int:
    failures = 0
    for name in names:
        root, spec = load_template(name)
        problems = lint(root, spec)
        for label, overrides in (
            ("defaults", {}),
            ("tests", spec["tests"].get("parameters") or {}),
        ):
            try:
                ctx = build_context(spec, overrides)
                with tempfile.TemporaryDirectory() as tmp:
                    render_case(root, ctx, Path(tmp))
            except Exception as exc:
                problems.append(f"render with {label} failed: {exc}")
        demo = spec["demo"].get("parameters") or {}
        for pname, space in demo.items():
            if pname not in spec["parameters"]:
                problems.append(f"demo varies unknown parameter {pname!r}")
                continue
            for v in space.get("values", []):
                try:
                    build_context(spec, {pname: v})
                except Exception as exc:
                    problems.append(f"demo value {pname}={v!r}: {exc}")
        status = "ok" if not problems else "FAILED"
        print(f"{name}: {status}")
        for p in problems:
            print(f"  - {p}")
        failures += bool(problems)
    return 1 if failures else 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("template", nargs="?", help="template name (folder under templates/) or path")
    ap.add_argument("-p", "--param", action="append", default=[], metavar="NAME=VALUE")
    ap.add_argument("--tests", action="store_true", help="start from the template's tests settings")
    ap.add_argument(
        "--np", type=int, default=1, help="MPI processes (decompose, mpirun, reconstruct)"
    )
    ap.add_argument("--solver", help="solver (default: the template's)")
    ap.add_argument("--keep", metavar="DIR", help="render/run in DIR and keep it")
    ap.add_argument("--render-only", action="store_true")
    ap.add_argument(
        "--lint", action="store_true", help="lint and render every template (or the one given)"
    )
    ap.add_argument("--json", action="store_true", help="print a JSON summary")
    args = ap.parse_args(argv)

    if args.lint:
        names = (
            [args.template]
            if args.template
            else sorted(p.name for p in TEMPLATES_DIR.iterdir() if (p / "template.yaml").is_file())
        )
        return lint_all(names)
    if not args.template:
        ap.error("template required")

    root, spec = load_template(args.template)
    problems = lint(root, spec)
    for p in problems:
        print(f"lint: {p}", file=sys.stderr)
    overrides = dict(spec["tests"].get("parameters") or {}) if args.tests else {}
    overrides.update(parse_overrides(args.param))
    ctx = build_context(spec, overrides)
    solver = args.solver or spec["solver"]
    if solver not in spec["solvers"]:
        raise TemplateError(f"solver {solver!r} not in {spec['solvers']}")
    params = {k: ctx[k] for k in spec["parameters"]}
    derived = {k: ctx[k] for k in spec.get("derived") or {}}

    if args.keep:
        case = Path(args.keep)
        if case.exists():
            shutil.rmtree(case)
        case.mkdir(parents=True)
        tmp = None
    else:
        tmp = tempfile.TemporaryDirectory(prefix=f"wt-{spec['name']}-")
        case = Path(tmp.name)
    try:
        rendered = render_case(root, ctx, case)
        if not args.json:
            print(f"template {spec['name']}  solver {solver}  np {args.np}  case {case}")
            print(f"  parameters {params}")
            print(f"  derived    {derived}")
            print(f"  rendered   {rendered}")
        if args.render_only:
            return 1 if problems else 0
        t0 = time.monotonic()
        timings = run_steps(case, spec, solver, args.np, verbose=not args.json)
        wall = time.monotonic() - t0
        series, headers = read_series(case)
        solve_log = case / f"log.{solver}"
        series.update(read_residuals(solve_log))
        objs = objectives(spec, series)
        last = {k: v[-1][1] for k, v in sorted(series.items())}
        iters = max((len(v) for k, v in series.items() if k.startswith("residual.")), default=0)
        summary = {
            "template": spec["name"],
            "solver": solver,
            "np": args.np,
            "parameters": params,
            "wall_seconds": round(wall, 2),
            "steps": timings,
            "solver_time_steps": iters,
            "dat_headers": headers,
            "last": last,
            "objectives": objs,
        }
        if args.json:
            print(json.dumps(summary, indent=2, default=str))
        else:
            print("  .dat headers:")
            for f, h in headers.items():
                print(f"    {f}: {h}")
            print("  last values:")
            for k, v in last.items():
                print(f"    {k:<40} {v:.6g}")
            print(f"  time steps {iters}")
            print(f"  objectives {objs}")
            print(f"  wall time  {wall:.2f} s")
        missing = [k for k, v in objs.items() if v is None or isinstance(v, str)]
        if missing:
            print(f"objectives without a value: {missing}", file=sys.stderr)
            return 1
        return 0
    finally:
        if tmp is not None:
            tmp.cleanup()


if __name__ == "__main__":
    try:
        sys.exit(main())
    except TemplateError as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(2)
