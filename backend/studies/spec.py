"""The study spec (docs/study-spec.md): validated and resolved against the catalog.

One function, `spec_resolve`, turns what a user wrote (API JSON, CLI YAML, the UI) into a
`ResolvedSpec` or raises an ApplicationError naming the field and what to change.
"""

from __future__ import annotations

import dataclasses
import itertools
import keyword
import re
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from django.conf import settings

from catalog.images import study_image_resolve
from catalog.inspection import template_inspection
from catalog.models import Backend, CaseTemplate, Package
from compute.drivers import traits_of
from core.exceptions import ApplicationError, ErrorCode
from core.schemas import validate
from orchestration.case import casecheck, render
from orchestration.composer import IMPLICIT_PACKAGES
from studies.adaptive import AdaptivePlan, adaptive_initial, adaptive_plan
from studies.models import Upload
from studies.objectives import objectives_check_series, objectives_resolve
from studies.policy import policy_normalize
from studies.space import Space, SpaceError, Value, parse_space
from studies.steps import known_solvers, prepare_commands, run_steps, solver_package
from studies.usage import backends_visible_to

SPEC_SCHEMA = Path(__file__).resolve().parent / "schemas" / "study-spec.json"
# what a template's template.yaml gives as defaults of a spec's keys
TEMPLATE_DEFAULTS = ("resources", "derived", "objectives", "convergence", "prepare", "solver")
NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")


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
    adaptive: AdaptivePlan | None = None  # combine: adaptive (studies/adaptive.py)

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

    def check_within(self, *, limit: int) -> int:
        """As check(), at a cost set by `limit` rather than by the run count where the space
        allows; how many runs' values it checked (run_count: all of them).

        Each parameter's values are checked once each (a grid's are its axes', not its
        runs'); derived values are evaluated for every distinct combination of the
        parameters they use when there are at most `limit` of them (a 1,000 x 1,000 grid
        whose derived values use one axis: 1,000). Otherwise, and in sampled spaces, the
        first `limit` runs are checked, and submission checks the rest."""
        for axis in self.space.axes:
            definition = self.definitions.get(axis.name)
            if definition is not None and not axis.sampled:
                for _, value in dict.fromkeys((type(v), v) for v in axis.values):
                    definition.check(value, f"parameters.{axis.name}")
        used = {name for expr in self.derived.values() for name in render.expression_names(expr)}
        count, combinations = self.space.combinations(used)
        checked = self.run_count
        if count > limit:
            combinations = itertools.islice(enumerate(self.space.points()), limit)
            checked = min(limit, self.run_count)
        first = None  # run 0's context: the combinations start with it
        for _, context in self.indexed_contexts(combinations):
            first = context if first is None else first
        if first is not None:
            self.check_case(first)
        return checked

    def check_case(self, context: Mapping[str, Any]) -> None:
        """The case's templates rendered with `context` in the sandbox, and the rendered
        texts checked as OpenFOAM will read them (orchestration.case.casecheck), or a 400."""
        field = "case" if self.upload else "template"
        etc_dir = casecheck.etc_folder(settings.WINDTUNNEL["OPENFOAM_DIR"])
        try:
            casecheck.render_checked(Path(self.case_dir), context, etc_dir=etc_dir)
        except casecheck.CaseCheckError as exc:
            raise _invalid(f"the case as run 0's values render it: {exc}", field) from exc
        except render.RenderError as exc:
            raise _invalid(
                f"the case's placeholders cannot be filled (with run 0's values): {exc}",
                field,
                ErrorCode.EXPRESSION,
            ) from exc

    def points(self) -> Iterator[tuple[dict[str, Value], dict[str, Any]]]:
        """(parameters, context) for every run, validated against the parameter definitions."""
        return self.contexts(self.space.points())

    def contexts(
        self, points: Iterable[Mapping[str, Value]]
    ) -> Iterator[tuple[dict[str, Value], dict[str, Any]]]:
        """(parameters, context) of each of `points` (an adaptive study's next batch, or the
        space's points), validated against the parameter definitions."""
        return self.indexed_contexts(enumerate(points))

    def indexed_contexts(
        self, points: Iterable[tuple[int, Mapping[str, Value]]]
    ) -> Iterator[tuple[dict[str, Value], dict[str, Any]]]:
        """As contexts(), for points given with their run index (named by a refusal)."""
        memo: dict[
            tuple[Any, ...], Any
        ] = {}  # derived values by their inputs (render.evaluate_derived)
        for i, point in points:
            params = {}
            for name, value in point.items():
                definition = self.definitions.get(name)
                params[name] = (
                    definition.check(value, f"parameters.{name}") if definition else value
                )
            values = {**self.constants, **params}
            try:
                derived = render.evaluate_derived(self.derived, values, memo)
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


def _case_source(*, tenant, spec: Mapping[str, Any]) -> CaseTemplate | Upload:
    """The case the spec names: a template, or one of the tenant's uploads."""
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
        return template
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
    return upload


def _backend(*, tenant, name: Any) -> Backend:
    visible = backends_visible_to(tenant=tenant)
    if name in (None, ""):
        if not visible:
            raise _invalid("no compute backend is enabled for your tenant; ask an admin", "backend")
        # the default: this machine with the OpenFOAM installed on it, when the tenant has it
        here = [
            b for b in visible if traits_of(b).on_portal_host and traits_of(b).image_kind is None
        ]
        return (here or visible)[0]
    for b in visible:
        if b.name == name:
            return b
    names = ", ".join(b.name for b in visible) or "none"
    raise _invalid(f"unknown backend {name!r}; available to you: {names}", "backend")


def spec_validate(spec: Any) -> None:
    """The spec's shape, types, bounds and allow-lists, by its JSON Schema
    (studies/schemas/study-spec.json); a 400 naming the field."""
    validate(SPEC_SCHEMA, spec, what="the study spec")


def spec_resolve(*, tenant: Any, spec: Any) -> ResolvedSpec:
    """What a spec means against the catalog: its case, solver, backend, resources, points,
    commands, objectives and image; a 400 naming the field when it cannot run."""
    spec_validate(spec)
    name = spec["name"]

    case = _case_source(tenant=tenant, spec=spec)
    template = case if isinstance(case, CaseTemplate) else None
    upload = case if isinstance(case, Upload) else None
    tspec = template.spec if template else {}
    if template is not None:  # its defaults are spec parts too: checked the same way
        defaults = {k: tspec[k] for k in TEMPLATE_DEFAULTS if tspec.get(k) is not None}
        validate(SPEC_SCHEMA, {"name": template.name, **defaults}, what=f"template {template.name}")
    definitions = _definitions(template)

    inspection = upload.inspection if upload else template_inspection(path=case.path)
    solver = spec.get("solver") or tspec.get("solver") or inspection.get("solver")
    if not solver:
        raise _invalid(
            "solver is required: the case's controlDict names no application (e.g. simpleFoam)",
            "solver",
        )
    solvers = known_solvers()
    allowed = set(solvers) | set(tspec.get("solvers") or [])
    if solver not in allowed:
        named = " (named by the case's controlDict)" if not spec.get("solver") else ""
        raise _invalid(
            f"unknown solver {solver!r}{named}; available: {', '.join(sorted(allowed)) or 'none'}",
            "solver",
        )

    if spec.get("warm_start") and "simple" not in solver.lower():
        raise _invalid(
            f"warm_start is for steady solvers (simpleFoam and its kin): {solver} is "
            "transient, and a run's initial condition is part of its problem; leave "
            "warm_start out",
            "warm_start",
        )
    backend = _backend(tenant=tenant, name=spec.get("backend"))
    if spec.get("warm_start") and not traits_of(backend).keeps_attempts:
        raise _invalid(
            f"warm_start needs a backend whose runs share a folder (local, Slurm): "
            f"{backend.name} is {backend.kind}; choose another backend or leave warm_start out",
            "warm_start",
        )
    resources = {**(tspec.get("resources") or {}), **(spec.get("resources") or {})}
    processes = int(resources.get("processes", 1))
    nodes = int(resources.get("nodes", 1))
    memory = float(resources.get("memory_gb", 1))
    if nodes > processes:
        raise _invalid(
            f"resources.nodes ({nodes}) cannot exceed resources.processes ({processes})",
            "resources.nodes",
        )

    raw_params = spec.get("parameters")
    if raw_params is None:
        raw_params = {}
    combine = spec.get("combine", "grid")
    samples = spec.get("samples")
    if combine == "adaptive":  # its initial design is its first runs
        if "samples" in spec:
            raise _invalid(
                "samples is for lhs and random; an adaptive study gives adaptive.initial "
                "(its first Latin hypercube) and adaptive.budget",
                "samples",
            )
        bounded = sum(1 for r in raw_params.values() if isinstance(r, dict) and "min" in r)
        samples = adaptive_initial(spec, varied=bounded)
    elif "adaptive" in spec:
        raise _invalid(
            f'adaptive settings need "combine": "adaptive" (this spec has combine: {combine})',
            "adaptive",
        )
    try:
        space = parse_space(raw_params, combine=combine, samples=samples, seed=spec.get("seed"))
    except SpaceError as exc:
        raise _invalid(
            str(exc), exc.field, ErrorCode.EMPTY_SPACE if "empty" in str(exc) else ErrorCode.INVALID
        ) from exc
    for axis in space.axes:
        if keyword.iskeyword(axis.name) or axis.name in render.FUNCTIONS:
            raise _invalid(
                f"parameters.{axis.name}: parameter names are identifiers and not a function name",
                f"parameters.{axis.name}",
            )
        if definitions and axis.name not in definitions:
            assert template is not None  # definitions are a template's
            raise _invalid(
                f"parameters.{axis.name}: template {template.name} has no parameter {axis.name!r}; it has: {', '.join(definitions)}",
                f"parameters.{axis.name}",
            )
        if axis.sampled and axis.name in definitions:
            assert axis.low is not None and axis.high is not None  # sampled: both bounds
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
    if combine == "adaptive" and spec["adaptive"]["budget"] > limit:
        raise _invalid(
            f"adaptive.budget {spec['adaptive']['budget']:,} is above the {limit:,} runs a "
            "study may have",
            "adaptive.budget",
            ErrorCode.TOO_MANY_RUNS,
        )
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
                assert template is not None  # definitions are a template's
                raise _invalid(
                    f"parameters.{pname}: template {template.name} needs a value for {pname}",
                    f"parameters.{pname}",
                )
            constants[pname] = definition.check(definition.default, f"parameters.{pname}")

    derived = dict(tspec.get("derived") or {})
    user_derived = spec.get("derived") or {}
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
    placeholders = case.placeholders or {}
    for path, used in sorted(placeholders.items()):
        missing = sorted(set(used) - context_names - set(render.FUNCTIONS))
        if missing:
            raise _invalid(
                f"{path} uses {{{{ {missing[0]} }}}} but no parameter or derived value is named {missing[0]}; add it to parameters or derived",
                "parameters",
            )

    objectives_raw = spec.get("objectives")
    objectives = objectives_resolve(
        tspec.get("objectives") if objectives_raw is None else objectives_raw,
        names_in_scope=context_names,
    )

    plan = (
        adaptive_plan(spec, space=space, objectives=list(objectives))
        if combine == "adaptive"
        else None
    )

    convergence = policy_normalize(
        spec["convergence"] if spec.get("convergence") is not None else tspec.get("convergence")
    )
    objectives_check_series(objectives=objectives, convergence=convergence, inspection=inspection)

    prepare = prepare_commands(spec.get("prepare"), template=template, upload=upload)
    image = study_image_resolve(
        spec=spec,
        backend=backend,
        image_kind=traits_of(backend).image_kind,
        solver=solver,
        prepare=prepare,
    )
    package = solver_package(solver, image.package_names if image else None)
    steps = run_steps(solver=solver, processes=processes, prepare=prepare, package=package)
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
        case_dir=case.path,
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
        convergence=convergence,
        image=image,
        adaptive=plan,
    )
