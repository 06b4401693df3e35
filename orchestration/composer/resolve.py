"""Dependency resolution: a requested package set → its closure, in install order.

Errors list the chain that led to them (`icofoam → openfoam-core >=2000`), so a user sees
which request pulled in what. Conflicts, missing packages and cycles are errors.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable

from orchestration.composer.manifest import Catalog, Manifest, Requirement, parse_requirement

__all__ = ["ResolveError", "Resolution", "resolve"]

MAX_PASSES = 50


class ResolveError(ValueError):
    """The request cannot be satisfied. `chains` hold the dependency paths involved."""

    def __init__(self, message: str, *, kind: str, chains: list[list[str]] | None = None) -> None:
        super().__init__(message)
        self.kind = kind  # missing | unsatisfiable | conflict | cycle | env
        self.chains = chains or []


@dataclasses.dataclass(frozen=True)
class Resolution:
    requested: tuple[str, ...]
    closure: tuple[Manifest, ...]  # install order: dependencies first

    @property
    def names(self) -> list[str]:
        return [m.name for m in self.closure]


def _chain(chain: list[str]) -> str:
    return " → ".join(chain)


def resolve(requested: Iterable[str | Requirement], catalog: Catalog) -> Resolution:
    """The closure of `requested` in `catalog`: one version per package, dependencies first.

    Versions: the highest version that satisfies every constraint placed on the package by the
    packages selected so far; selection repeats until it no longer changes (one version per
    folder today, so this settles in one or two passes).
    """
    roots = [r if isinstance(r, Requirement) else parse_requirement(str(r)) for r in requested]
    if not roots:
        raise ResolveError("no packages requested", kind="missing")
    selected: dict[str, Manifest] = {}
    for _ in range(MAX_PASSES):
        chosen, constraints = _select(roots, catalog, selected)
        if chosen == selected:
            break
        selected = chosen
    else:  # pragma: no cover - would need oscillating version constraints
        raise ResolveError("the dependency constraints do not settle", kind="unsatisfiable")
    _check_conflicts(selected, constraints)
    order = _install_order(selected, constraints)
    return Resolution(
        requested=tuple(sorted({r.name for r in roots})),
        closure=tuple(selected[name] for name in order),
    )


def _select(
    roots: list[Requirement], catalog: Catalog, previous: dict[str, Manifest]
) -> tuple[dict[str, Manifest], dict[str, list[tuple[Requirement, list[str]]]]]:
    """One pass: walk from the roots, picking versions under the constraints seen so far."""
    constraints: dict[str, list[tuple[Requirement, list[str]]]] = {}
    # constraints from the previous pass's selection count from the start, so a later
    # constraint on an already visited package is honoured in the next pass
    for manifest in previous.values():
        for dep in manifest.depends:
            constraints.setdefault(dep.name, []).append(
                (dep, [f"{manifest.name} {manifest.version}", str(dep)])
            )
    chosen: dict[str, Manifest] = {}
    stack: list[tuple[Requirement, list[str]]] = [(r, [str(r)]) for r in reversed(roots)]
    for req, chain in stack:
        constraints.setdefault(req.name, []).append((req, chain))
    while stack:
        req, chain = stack.pop()
        if req.name in chosen:
            continue
        versions = catalog.versions(req.name)
        if not versions:
            known = ", ".join(catalog.names()) or "none"
            raise ResolveError(
                f"no package named {req.name!r} (needed by {_chain(chain)}); known packages: {known}",
                kind="missing",
                chains=[chain],
            )
        wanted = constraints.get(req.name, [])
        fitting = [m for m in versions if all(r.allows(m.version) for r, _ in wanted)]
        if not fitting:
            have = ", ".join(m.version for m in versions)
            lines = "; ".join(_chain(c) for _, c in wanted)
            raise ResolveError(
                f"no version of {req.name} satisfies every requirement on it ({lines}); available: {have}",
                kind="unsatisfiable",
                chains=[c for _, c in wanted],
            )
        manifest = fitting[-1]
        chosen[req.name] = manifest
        for dep in reversed(manifest.depends):
            sub = [*chain[:-1], f"{manifest.name} {manifest.version}", str(dep)]
            if dep.name in {c.split(" ")[0] for c in sub[:-1]}:
                raise ResolveError(f"dependency cycle: {_chain(sub)}", kind="cycle", chains=[sub])
            constraints.setdefault(dep.name, []).append((dep, sub))
            if dep.name in chosen and not dep.allows(chosen[dep.name].version):
                continue  # settled in the next pass (or reported there)
            stack.append((dep, sub))
    _check_cycles(chosen)
    return chosen, constraints


def _check_cycles(chosen: dict[str, Manifest]) -> None:
    state: dict[str, int] = {}

    def visit(name: str, path: list[str]) -> None:
        if state.get(name) == 2:
            return
        if state.get(name) == 1:
            start = path.index(name)
            cycle = [*path[start:], name]
            raise ResolveError(f"dependency cycle: {_chain(cycle)}", kind="cycle", chains=[cycle])
        state[name] = 1
        for dep in chosen[name].depends:
            if dep.name in chosen:
                visit(dep.name, [*path, name])
        state[name] = 2

    for name in sorted(chosen):
        visit(name, [])


def _check_conflicts(
    selected: dict[str, Manifest], constraints: dict[str, list[tuple[Requirement, list[str]]]]
) -> None:
    for name, manifest in selected.items():
        for req, chain in constraints.get(name, []):
            if not req.allows(manifest.version):
                raise ResolveError(
                    f"{name} {manifest.version} was selected but {_chain(chain)} needs {req}",
                    kind="unsatisfiable",
                    chains=[chain],
                )
    for name in sorted(selected):
        manifest = selected[name]
        for con in manifest.conflicts:
            other = selected.get(con.name)
            if other is not None and con.allows(other.version):
                raise ResolveError(
                    f"{manifest.name} {manifest.version} conflicts with {other.name} {other.version} "
                    f"({manifest.name} declares conflicts: {con}); pulled in by "
                    f"{_via(constraints, manifest.name)} and {_via(constraints, other.name)}",
                    kind="conflict",
                    chains=[
                        _first_chain(constraints, manifest.name),
                        _first_chain(constraints, other.name),
                    ],
                )
    env_owner: dict[str, tuple[str, str]] = {}
    for name in sorted(selected):
        for key, value in selected[name].env.items():
            if key in env_owner and env_owner[key][1] != value:
                owner, old = env_owner[key]
                raise ResolveError(
                    f"{owner} sets {key}={old!r} but {name} sets {key}={value!r}; packages in "
                    "one image must agree on their environment",
                    kind="conflict",
                )
            env_owner[key] = (name, value)


def _first_chain(
    constraints: dict[str, list[tuple[Requirement, list[str]]]], name: str
) -> list[str]:
    found = constraints.get(name) or []
    return min((c for _, c in found), key=len) if found else [name]


def _via(constraints: dict[str, list[tuple[Requirement, list[str]]]], name: str) -> str:
    return _chain(_first_chain(constraints, name))


def _install_order(
    selected: dict[str, Manifest], constraints: dict[str, list[tuple[Requirement, list[str]]]]
) -> list[str]:
    """Dependencies first; among equals, foundations (fewer levels below them) first, then name.

    Compositions that share their foundations then share their first image layers.
    """
    depth: dict[str, int] = {}

    def level(name: str) -> int:
        if name not in depth:
            deps = [d.name for d in selected[name].depends if d.name in selected]
            depth[name] = 1 + max((level(d) for d in deps), default=-1)
        return depth[name]

    return sorted(selected, key=lambda n: (level(n), n))
