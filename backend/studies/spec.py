"""The study spec (docs/study-spec.md): validated and resolved against the catalog.

One function, `spec_resolve`, turns what a user wrote (API JSON, CLI YAML, the UI) into a
`ResolvedSpec` or raises an ApplicationError naming the field and what to change.
"""

from __future__ import annotations

import dataclasses
import keyword
import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from django.conf import settings

from catalog.images import study_image_resolve
from catalog.models import Backend, CaseTemplate, Package
from core.exceptions import ApplicationError, ErrorCode
from orchestration import render
from orchestration.composer import IMPLICIT_PACKAGES
from studies.choices import Reduce
from studies.models import Upload
from studies.space import Space, SpaceError, Value, parse_space
from telemetry.convergence import policy_validate

NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")
TOP_LEVEL_KEYS = {
    "name",
    "description",
    "template",
    "case",
    "solver",
    "backend",
    "resources",
    "parameters",
    "combine",
    "samples",
    "seed",
    "derived",
    "objectives",
    "prepare",
    "image",
    "packages",
    "convergence",
}
# Utilities a spec may run before the solver (argv only, never a shell).
PREPARE_UTILITIES = {
    "blockMesh",
    "snappyHexMesh",
    "surfaceFeatureExtract",
    "surfaceFeatures",
    "extrudeMesh",
    "setFields",
    "topoSet",
    "createPatch",
    "checkMesh",
    "renumberMesh",
    "refineMesh",
    "transformPoints",
    "mirrorMesh",
    "createBaffles",
    "potentialFoam",
    "mapFields",
    "changeDictionary",
}
DEFAULT_RUN_CONFIGURATIONS = {
    "serial": {"argv": ["{solver}"]},
    "mpi": {
        "steps": [
            {"name": "decomposePar", "argv": ["decomposePar", "-force"], "role": "decompose"},
            {
                "name": "{solver}",
                "argv": [
                    "mpirun",
                    "--oversubscribe",
                    "-np",
                    "{processes}",
                    "{solver}",
                    "-parallel",
                ],
                "role": "solve",
            },
            {
                "name": "reconstructPar",
                "argv": ["reconstructPar", "-latestTime"],
                "role": "reconstruct",
            },
        ]
    },
}


def _invalid(
    message: str, field: str | None = None, code: ErrorCode = ErrorCode.INVALID
) -> ApplicationError:
    return ApplicationError(message, code=code, field=field)


@dataclasses.dataclass(frozen=True, kw_only=True)
class ParameterDef:
    name: str
    type: str = "float"
    default: Value | None = None
    min: float | None = None
    max: float | None = None
    choices: tuple[Value, ...] = ()
    unit: str = ""

    def check(self, value: Value, where: str) -> Value:
        if self.type in ("float", "int"):
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise _invalid(f"{where}: {self.name} must be a number, got {value!r}", where)
            if self.type == "int":
                if isinstance(value, float) and not value.is_integer():
                    raise _invalid(
                        f"{where}: {self.name} must be a whole number, got {value!r}", where
                    )
                value = int(value)
            if self.min is not None and value < self.min:
                raise _invalid(
                    f"{where}: {self.name} = {value} is below its minimum {self.min:g}{self.unit and ' ' + self.unit}",
                    where,
                )
            if self.max is not None and value > self.max:
                raise _invalid(
                    f"{where}: {self.name} = {value} is above its maximum {self.max:g}{self.unit and ' ' + self.unit}",
                    where,
                )
        elif self.type == "str":
            if not isinstance(value, str):
                raise _invalid(f"{where}: {self.name} must be text, got {value!r}", where)
            if self.choices and value not in self.choices:
                raise _invalid(
                    f"{where}: {self.name} must be one of {', '.join(map(str, self.choices))}; got {value!r}",
                    where,
                )
        return value


@dataclasses.dataclass(frozen=True, kw_only=True)
class ResolvedSpec:
    name: str
    description: str
    template: CaseTemplate | None
    upload: Upload | None
    case_dir: str
    solver: str
    backend: Backend
    processes: int
    nodes: int
    memory_gb: float
    space: Space
    definitions: Mapping[str, ParameterDef]
    constants: Mapping[str, Value]
    derived: Mapping[str, str]
    objectives: Mapping[str, dict[str, Any]]
    steps: list[dict[str, Any]]
    decompose: dict[str, Any] | None
    env: dict[str, str]
    convergence: dict[str, Any] = dataclasses.field(default_factory=dict)
    image: Any = None  # catalog.images.StudyImage for backends that run images, else None

    @property
    def run_count(self) -> int:
        return self.space.count()

    def check(self) -> None:
        """Every point checked (bounds, derived values) and the case's templates rendered
        with the first point's values, in the sandbox: a spec that could not run is refused
        when it is saved, previewed or submitted, not when its runs fail."""
        first = None
        for _, context in self.points():
            if first is None:
                first = context
        if first is not None:
            self.check_case(first)

    def check_case(self, context: Mapping[str, Any]) -> None:
        """The case's templates rendered with `context` in the sandbox, or a 400 saying why."""
        try:
            render.render_files(Path(self.case_dir), context)
        except render.RenderError as exc:
            raise _invalid(
                f"the case's placeholders cannot be filled (with run 0's values): {exc}",
                "case" if self.upload else "template",
                ErrorCode.EXPRESSION,
            ) from exc

    def points(self) -> Iterator[tuple[dict[str, Value], dict[str, Any]]]:
        """(parameters, context) for every run, validated against the parameter definitions."""
        for i, point in enumerate(self.space.points()):
            params = {}
            for name, value in point.items():
                definition = self.definitions.get(name)
                params[name] = (
                    definition.check(value, f"parameters.{name}") if definition else value
                )
            values = {**self.constants, **params}
            try:
                derived = render.evaluate_derived(self.derived, values)
            except render.RenderError as exc:
                field = f"derived.{exc.name}" if isinstance(exc, render.DerivedError) else "derived"
                raise _invalid(
                    f"run {i} ({_describe(params)}): {exc}", field, ErrorCode.EXPRESSION
                ) from exc
            yield params, {**values, **derived}


def _describe(params: Mapping[str, Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in params.items())


def _definitions(template: CaseTemplate | None) -> dict[str, ParameterDef]:
    if template is None:
        return {}
    out = {}
    for name, raw in (template.spec.get("parameters") or {}).items():
        raw = raw or {}
        out[name] = ParameterDef(
            name=name,
            type=raw.get("type", "float"),
            default=raw.get("default"),
            min=raw.get("min"),
            max=raw.get("max"),
            choices=tuple(raw.get("choices") or ()),
            unit=raw.get("unit", ""),
        )
    return out


def _int(value: Any, field: str, *, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int | float) or int(value) != value:
        raise _invalid(f"{field} must be a whole number, got {value!r}", field)
    if not low <= value <= high:
        raise _invalid(f"{field} must be between {low} and {high}, got {value}", field)
    return int(value)


def _case_source(*, tenant, spec: Mapping[str, Any]) -> tuple[CaseTemplate | None, Upload | None]:
    has_template, has_case = bool(spec.get("template")), bool(spec.get("case"))
    if has_template == has_case:
        raise _invalid(
            "give exactly one of template (a template name) or case (an upload id)", "template"
        )
    if has_template:
        name = spec["template"]
        template = CaseTemplate.objects.filter(name=str(name), retired=False).first()
        if template is None:
            known = ", ".join(
                CaseTemplate.objects.filter(retired=False).values_list("name", flat=True)
            )
            raise _invalid(f"unknown template {name!r}; available: {known or 'none'}", "template")
        return template, None
    upload = None
    try:
        upload = Upload.objects.filter(tenant=tenant, id=str(spec["case"])).first()
    except (ValueError, TypeError, Exception):  # malformed UUID
        upload = None
    if upload is None:
        raise _invalid(
            f"no upload with id {spec['case']!r} in your tenant; upload a case first (POST /api/v1/uploads/)",
            "case",
        )
    return None, upload


def _backend(*, tenant, name: Any) -> Backend:
    qs = Backend.objects.filter(enabled=True)
    visible = [
        b
        for b in qs.prefetch_related("tenants")
        if not b.tenants.all() or tenant in b.tenants.all()
    ]
    if name in (None, ""):
        if not visible:
            raise _invalid("no compute backend is enabled for your tenant; ask an admin", "backend")
        local = [b for b in visible if b.kind == "local"]
        return (local or visible)[0]
    for b in visible:
        if b.name == name:
            return b
    names = ", ".join(b.name for b in visible) or "none"
    raise _invalid(f"unknown backend {name!r}; available to you: {names}", "backend")


def _solver_package(solver: str, among: tuple[str, ...] | None = None) -> Package | None:
    packages = Package.objects.filter(retired=False)
    if among is not None:  # the study's image: its closure's run configurations
        packages = packages.filter(name__in=among)
    for package in packages.order_by("name"):
        if solver in package.solvers:
            return package
    return None


def known_solvers() -> list[str]:
    names: set[str] = set()
    for package in Package.objects.filter(retired=False):
        names.update(package.solvers)
    return sorted(names)


def _steps(
    *, solver: str, processes: int, prepare: list[list[str]], package: Package | None
) -> list[dict[str, Any]]:
    configs = (package.run_configurations if package else None) or DEFAULT_RUN_CONFIGURATIONS
    fmt = {"solver": solver, "processes": str(processes), "np": str(processes)}

    def expand(argv: list[str], config: dict | None = None) -> list[str]:
        declared = (config or {}).get("parameters") or {}  # package-declared, with defaults
        values = {k: (v or {}).get("default") for k, v in declared.items()}
        return [str(a).format(**{**values, **fmt}) for a in argv]

    steps = [{"name": argv[0], "argv": list(argv), "role": "prepare"} for argv in prepare]
    if processes == 1:
        serial = configs.get("serial") or DEFAULT_RUN_CONFIGURATIONS["serial"]
        steps.append({"name": solver, "argv": expand(serial["argv"], serial), "role": "solve"})
    else:
        mpi = configs.get("mpi") or DEFAULT_RUN_CONFIGURATIONS["mpi"]
        for step in mpi["steps"]:
            steps.append(
                {
                    "name": str(step["name"]).format(**fmt),
                    "argv": expand(step["argv"], mpi),
                    "role": step.get("role", "other"),
                }
            )
    return steps


def _prepare(raw: Any, *, template: CaseTemplate | None, upload: Upload | None) -> list[list[str]]:
    if raw is None:
        if template is not None:
            return [list(map(str, a)) for a in template.spec.get("prepare") or []]
        if upload is not None and not upload.has_mesh and upload.has_block_mesh_dict:
            return [["blockMesh"]]
        return []
    if not isinstance(raw, list) or not all(
        isinstance(a, list) and a and all(isinstance(x, str) for x in a) for a in raw
    ):
        raise _invalid(
            "prepare must be a list of commands, each a list of strings, e.g. [[blockMesh]]",
            "prepare",
        )
    for i, argv in enumerate(raw):
        if argv[0] not in PREPARE_UTILITIES:
            raise _invalid(
                f"prepare[{i}]: {argv[0]!r} is not an allowed utility; allowed: {', '.join(sorted(PREPARE_UTILITIES))}",
                f"prepare[{i}]",
            )
    return raw


def _objectives(raw: Any, *, names_in_scope: set[str]) -> dict[str, dict[str, Any]]:
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise _invalid(
            "objectives must be a mapping of name → {series, reduce} or {expr}", "objectives"
        )
    out: dict[str, dict[str, Any]] = {}
    for name, obj in raw.items():
        where = f"objectives.{name}"
        if not NAME_RE.match(str(name)) or keyword.iskeyword(str(name)):
            raise _invalid(f"{where}: objective names are identifiers (letters, digits, _)", where)
        if not isinstance(obj, Mapping):
            raise _invalid(
                f"{where} must be {{series: NAME, reduce: last|mean_last|min|max}} or {{expr: ...}}",
                where,
            )
        if "expr" in obj:
            out[name] = {"expr": str(obj["expr"])}
            continue
        series = obj.get("series")
        if not isinstance(series, str) or not series:
            raise _invalid(f"{where}: give series (e.g. forceCoeffs.Cl) or expr", where)
        reduce = obj.get("reduce", "last")
        if reduce not in Reduce.values:
            raise _invalid(
                f"{where}.reduce must be one of {', '.join(Reduce.values)}, got {reduce!r}",
                f"{where}.reduce",
            )
        entry: dict[str, Any] = {"series": series, "reduce": reduce}
        if reduce == Reduce.MEAN_LAST:
            entry["n"] = _int(obj.get("n", 20), f"{where}.n", low=1, high=1_000_000)
        out[name] = entry
    scope = names_in_scope | set(out)
    for name, obj in out.items():
        if "expr" in obj:
            try:
                used = render.expression_names(obj["expr"])
            except render.RenderError as exc:
                raise _invalid(
                    f"objectives.{name}.expr: {exc}",
                    f"objectives.{name}.expr",
                    ErrorCode.EXPRESSION,
                ) from exc
            unknown = sorted(used - scope)
            if unknown:
                raise _invalid(
                    f"objectives.{name}.expr uses unknown name(s) {', '.join(unknown)}; known: {', '.join(sorted(scope))}",
                    f"objectives.{name}.expr",
                    ErrorCode.EXPRESSION,
                )
            if name in used:
                raise _invalid(
                    f"objectives.{name}.expr refers to itself",
                    f"objectives.{name}.expr",
                    ErrorCode.EXPRESSION,
                )
    _check_objective_cycles(out)
    return out


def _check_objective_cycles(objectives: Mapping[str, Mapping[str, Any]]) -> None:
    """Expression objectives that depend on each other in a circle can never be computed."""
    deps = {
        name: render.expression_names(obj["expr"]) & objectives.keys()
        for name, obj in objectives.items()
        if "expr" in obj
    }
    state: dict[str, int] = {}  # 1 visiting, 2 done

    def visit(name: str, path: list[str]) -> None:
        if state.get(name) == 2 or name not in deps:
            return
        if state.get(name) == 1:
            cycle = " -> ".join([*path[path.index(name) :], name])
            raise _invalid(
                f"objectives.{name}.expr: the objectives depend on each other in a circle "
                f"({cycle}); one of them must come from a series",
                f"objectives.{name}.expr",
                ErrorCode.EXPRESSION,
            )
        state[name] = 1
        for dep in sorted(deps[name]):
            visit(dep, [*path, name])
        state[name] = 2

    for name in sorted(deps):
        visit(name, [])


def spec_resolve(*, tenant, spec: Any) -> ResolvedSpec:
    if not isinstance(spec, Mapping):
        raise _invalid("the study spec must be a JSON object (see docs/study-spec.md)")
    unknown = set(spec) - TOP_LEVEL_KEYS
    if unknown:
        raise _invalid(
            f"unknown key(s) in the study spec: {', '.join(sorted(unknown))}; allowed: {', '.join(sorted(TOP_LEVEL_KEYS))}",
            sorted(unknown)[0],
        )
    name = spec.get("name")
    if not isinstance(name, str) or not name.strip() or len(name) > 200:
        raise _invalid("name is required: a short text up to 200 characters", "name")

    template, upload = _case_source(tenant=tenant, spec=spec)
    tspec = template.spec if template else {}
    definitions = _definitions(template)

    solver = spec.get("solver") or tspec.get("solver")
    if not solver:
        raise _invalid("solver is required for an uploaded case (e.g. simpleFoam)", "solver")
    solvers = known_solvers()
    allowed = set(solvers) | set(tspec.get("solvers") or [])
    if solver not in allowed:
        raise _invalid(
            f"unknown solver {solver!r}; available: {', '.join(sorted(allowed)) or 'none'}",
            "solver",
        )

    backend = _backend(tenant=tenant, name=spec.get("backend"))
    resources = spec.get("resources") or {}
    if not isinstance(resources, Mapping):
        raise _invalid("resources must be {processes, nodes, memory_gb}", "resources")
    extra = set(resources) - {"processes", "nodes", "memory_gb"}
    if extra:
        raise _invalid(
            f"resources: unknown key(s) {', '.join(sorted(extra))}; use processes, nodes, memory_gb",
            "resources",
        )
    defaults = tspec.get("resources") or {}
    processes = _int(
        resources.get("processes", defaults.get("processes", 1)),
        "resources.processes",
        low=1,
        high=4096,
    )
    nodes = _int(
        resources.get("nodes", defaults.get("nodes", 1)), "resources.nodes", low=1, high=256
    )
    memory = resources.get("memory_gb", defaults.get("memory_gb", 1))
    if isinstance(memory, bool) or not isinstance(memory, int | float) or not 0 < memory <= 65536:
        raise _invalid(
            f"resources.memory_gb must be a number of GB above 0, got {memory!r}",
            "resources.memory_gb",
        )
    if nodes > processes:
        raise _invalid(
            f"resources.nodes ({nodes}) cannot exceed resources.processes ({processes})",
            "resources.nodes",
        )

    raw_params = spec.get("parameters")
    if raw_params is None:
        raw_params = {}
    try:
        space = parse_space(
            raw_params,
            combine=spec.get("combine", "grid"),
            samples=spec.get("samples"),
            seed=spec.get("seed"),
        )
    except SpaceError as exc:
        raise _invalid(
            str(exc), exc.field, ErrorCode.EMPTY_SPACE if "empty" in str(exc) else ErrorCode.INVALID
        ) from exc
    for axis in space.axes:
        if (
            not NAME_RE.match(axis.name)
            or keyword.iskeyword(axis.name)
            or axis.name in render.FUNCTIONS
        ):
            raise _invalid(
                f"parameters.{axis.name}: parameter names are identifiers and not a function name",
                f"parameters.{axis.name}",
            )
        if definitions and axis.name not in definitions:
            raise _invalid(
                f"parameters.{axis.name}: template {template.name} has no parameter {axis.name!r}; it has: {', '.join(definitions)}",
                f"parameters.{axis.name}",
            )
        if axis.sampled and axis.name in definitions:
            # the bounds the user gave, checked as given (not a sample drawn between them)
            where = f"parameters.{axis.name}"
            for label, bound in (("min", axis.low), ("max", axis.high)):
                try:
                    definitions[axis.name].check(bound, where)
                except ApplicationError as exc:
                    raise _invalid(
                        f"{where}.{label}: {exc.message.split(': ', 1)[1]}", where
                    ) from exc
    count = space.count()
    limit = settings.WINDTUNNEL["MAX_RUNS_PER_STUDY"]
    if count > limit:
        raise _invalid(
            f"this parameter space makes {count:,} runs; a study may have at most {limit:,}. Use fewer values, or split it into several studies",
            "parameters",
            ErrorCode.TOO_MANY_RUNS,
        )
    if count == 0:
        raise _invalid(
            "the parameter space is empty: no run to make", "parameters", ErrorCode.EMPTY_SPACE
        )

    varied = {a.name for a in space.axes}
    constants: dict[str, Value] = {}
    for pname, definition in definitions.items():
        if pname not in varied:
            if definition.default is None:
                raise _invalid(
                    f"parameters.{pname}: template {template.name} needs a value for {pname}",
                    f"parameters.{pname}",
                )
            constants[pname] = definition.check(definition.default, f"parameters.{pname}")

    derived = dict(tspec.get("derived") or {})
    user_derived = spec.get("derived") or {}
    if not isinstance(user_derived, Mapping):
        raise _invalid("derived must be a mapping of name → expression", "derived")
    derived.update({str(k): str(v) for k, v in user_derived.items()})
    names = varied | set(constants)
    for dname, expr in derived.items():
        where = f"derived.{dname}"
        if not NAME_RE.match(dname) or dname in names or dname in render.FUNCTIONS:
            raise _invalid(
                f"{where}: derived names are identifiers that are neither a parameter nor a function",
                where,
            )
        try:
            used = render.expression_names(expr)
        except render.RenderError as exc:
            raise _invalid(f"{where}: {exc}", where, ErrorCode.EXPRESSION) from exc
        unknown = sorted(used - names - set(derived))
        if unknown:
            raise _invalid(
                f"{where}: unknown name(s) {', '.join(unknown)} in {expr!r}; known: {', '.join(sorted(names | set(derived)))}",
                where,
                ErrorCode.EXPRESSION,
            )

    context_names = names | set(derived)
    placeholders = (template.placeholders if template else upload.placeholders) or {}
    for path, used in sorted(placeholders.items()):
        missing = sorted(set(used) - context_names - set(render.FUNCTIONS))
        if missing:
            raise _invalid(
                f"{path} uses {{{{ {missing[0]} }}}} but no parameter or derived value is named {missing[0]}; add it to parameters or derived",
                "parameters",
            )

    objectives_raw = spec.get("objectives")
    objectives = _objectives(
        tspec.get("objectives") if objectives_raw is None else objectives_raw,
        names_in_scope=context_names,
    )

    prepare = _prepare(spec.get("prepare"), template=template, upload=upload)
    image = study_image_resolve(spec=spec, backend=backend, solver=solver, prepare=prepare)
    package = _solver_package(solver, image.package_names if image else None)
    steps = _steps(solver=solver, processes=processes, prepare=prepare, package=package)
    decompose = None
    if processes > 1:
        decompose = {
            "method": tspec.get("decompose_method", "hierarchical"),
            "subdomains": processes,
        }
    env: dict[str, str] = {"WM_PROJECT_DIR": settings.WINDTUNNEL["OPENFOAM_DIR"]}
    if image is not None:  # the image's closure sets the environment
        env.update(image.env)
    else:
        for pkg in Package.objects.filter(retired=False).exclude(name__in=IMPLICIT_PACKAGES):
            env.update({str(k): str(v) for k, v in (pkg.env or {}).items() if k not in env})

    return ResolvedSpec(
        name=name.strip(),
        description=str(spec.get("description") or ""),
        template=template,
        upload=upload,
        case_dir=template.path if template else upload.path,
        solver=solver,
        backend=backend,
        processes=processes,
        nodes=nodes,
        memory_gb=float(memory),
        space=space,
        definitions=definitions,
        constants=constants,
        derived=derived,
        objectives=objectives,
        steps=steps,
        decompose=decompose,
        env=env,
        convergence=policy_validate(
            spec["convergence"] if spec.get("convergence") is not None else tspec.get("convergence")
        ),
        image=image,
    )
