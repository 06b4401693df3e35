"""The options each utility run before the solver may be given, and the value each takes.

A study's `prepare` steps are argv lists of an allowed utility (the schema's
PrepareUtility). Their options are an allow-list too: an OpenFOAM utility also takes
`-lib` (loads a library), `-case`, `-fileHandler`, `-roots`/`-hostRoots` (read another
folder), `-dict` (reads any dictionary file), `-info-switch`/`-opt-switch` (sets OpenFOAM's
switches, allowSystemOperations among them). Each option here has the kind of value it
takes, checked before anything runs:

- a path: relative to the case and inside it after normalisation (no `..` leaving it, no
  absolute path, no `$`, `~` or `<tag>` OpenFOAM would expand);
- a name (a region, a time folder, a field, a patch): letters, digits, `_ . + -`;
- times (`-time 0:10,20`), numbers (`-scale 0.001`, `-translate "(1 0 0)"`), names in
  parentheses (`-patches "(inlet outlet)"`), or one of a few words.

Options as of OpenFOAM v1912's `-help-full` for each utility (surfaceFeatures from the
Foundation's versions), less the ones above and those that start a browser (`-doc`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from core.exceptions import ApplicationError, ErrorCode

__all__ = ["UTILITIES", "prepare_check"]

_NUMBER = r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?"
_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.+-]{0,99}")
_PATH = re.compile(r"[A-Za-z0-9_.][A-Za-z0-9_.,+=@%/-]{0,499}")
_TIME_ITEM = re.compile(rf"(?:{_NUMBER})?(?::(?:{_NUMBER})?)?")
_NUMBERS_TOKEN = re.compile(rf"\s+|\(|\)|{_NUMBER}")


def _path(value: str) -> str | None:
    if value.startswith(("/", "~")):
        return "a path relative to the case (an absolute path is outside it)"
    if ".." in value.split("/"):
        return "a path inside the case (without '..')"
    if not _PATH.fullmatch(value):
        return "a path relative to the case, of letters, digits and . _ - + / (no $ or <tag>)"
    return None


def _name(value: str) -> str | None:
    return None if _NAME.fullmatch(value) else "a name of letters, digits and _ . + -"


def _times(value: str) -> str | None:
    items = [v for v in re.split(r"[ ,]+", value.strip()) if v]
    if value in ("none", "latestTime") or (
        items and all(_TIME_ITEM.fullmatch(i) and any(c.isdigit() for c in i) for i in items)
    ):
        return None
    return "times: a number, ranges such as 0:10,20 or 100:, or latestTime"


def _time(value: str) -> str | None:
    if value == "latestTime" or re.fullmatch(_NUMBER, value):
        return None
    return "a time: a number or latestTime"


def _numbers(value: str) -> str | None:
    """A number, or numbers in nested parentheses: (1 0 0), ((0 0 0) (1 1 1))."""
    depth, pos, seen = 0, 0, False
    while pos < len(value):
        match = _NUMBERS_TOKEN.match(value, pos)
        if not match:
            break
        text = match.group()
        depth += (text == "(") - (text == ")")
        seen = seen or text[0] not in " \t\n()"
        if depth < 0:
            break
        pos = match.end()
    if pos == len(value) and depth == 0 and seen:
        return None
    return "a number, or numbers in parentheses such as (1 0 0)"


def _names(value: str) -> str | None:
    inner = value.strip()
    if inner.startswith("(") and inner.endswith(")"):
        inner = inner[1:-1]
    names = inner.split()
    if names and all(_NAME.fullmatch(n) for n in names):
        return None
    return "names in parentheses such as (inlet outlet)"


def _choice(*allowed: str) -> Callable[[str], str | None]:
    def check(value: str) -> str | None:
        return None if value in allowed else f"one of {', '.join(allowed)}"

    return check


Check = Callable[[str], str | None]
PATH, NAME, TIMES, TIME, NUMBERS, NAMES = _path, _name, _times, _time, _numbers, _names


@dataclass(frozen=True)
class Utility:
    flags: frozenset[str] = frozenset()  # options without a value
    options: Mapping[str, Check] = field(default_factory=dict)  # options with one value
    positional: tuple[tuple[str, Check], ...] = ()  # (what it is, its check)

    def allowed(self) -> str:
        return ", ".join(sorted([*self.flags, *(f"{o} <value>" for o in self.options)]))


def _utility(
    flags: str = "",
    options: Mapping[str, Check] | None = None,
    positional: tuple[tuple[str, Check], ...] = (),
) -> Utility:
    return Utility(
        flags=frozenset(f"-{f}" for f in flags.split()),
        options={f"-{k}": v for k, v in (options or {}).items()},
        positional=positional,
    )


_MESH: dict[str, Check] = {"decomposeParDict": PATH, "region": NAME}
_DICT: dict[str, Check] = {"dict": PATH, **_MESH}
UTILITIES: dict[str, Utility] = {
    "blockMesh": _utility(
        "blockTopology noClean sets noFunctionObjects",
        {"dict": PATH, "region": NAME, "time": TIME},
    ),
    "snappyHexMesh": _utility(
        "checkGeometry dry-run overwrite profiling",
        {**_DICT, "outFile": PATH, "patches": NAMES, "surfaceSimplify": NUMBERS},
    ),
    "surfaceFeatureExtract": _utility("", {"dict": PATH}),
    "surfaceFeatures": _utility("", {"dict": PATH}),
    "extrudeMesh": _utility("noFunctionObjects", _DICT),
    "setFields": _utility("noFunctionObjects", _DICT),
    "topoSet": _utility(
        "constant latestTime noFunctionObjects noSync noZero", {**_DICT, "time": TIMES}
    ),
    "createPatch": _utility("overwrite writeObj", _DICT),
    "checkMesh": _utility(
        "allGeometry allTopology constant latestTime meshQuality noFunctionObjects noTopology "
        "noZero writeAllFields",
        {
            **_MESH,
            "time": TIMES,
            "writeFields": NAMES,
            "writeSets": _choice("vtk", "raw", "ensight", "foam", "starcd", "nastran", "obj"),
        },
    ),
    "renumberMesh": _utility(
        "constant frontWidth latestTime noZero overwrite", {**_DICT, "time": TIME}
    ),
    "refineMesh": _utility("all overwrite", _DICT),
    "transformPoints": _utility(
        "noFunctionObjects rotateFields",
        {
            **_MESH,
            "origin": NUMBERS,
            "rollPitchYaw": NUMBERS,
            "rotate": NUMBERS,
            "rotate-angle": NUMBERS,
            "scale": NUMBERS,
            "time": TIME,
            "translate": NUMBERS,
            "yawPitchRoll": NUMBERS,
        },
    ),
    "mirrorMesh": _utility("noFunctionObjects overwrite", {"dict": PATH, "decomposeParDict": PATH}),
    "createBaffles": _utility("overwrite", _DICT),
    "potentialFoam": _utility(
        "dry-run dry-run-write initialiseUBCs noFunctionObjects withFunctionObjects writePhi "
        "writep writephi",
        {**_MESH, "pName": NAME},
    ),
    "mapFields": _utility(
        "consistent noFunctionObjects parallelSource parallelTarget subtract",
        {
            "mapMethod": _choice(
                "direct", "mapNearest", "cellVolumeWeight", "correctedCellVolumeWeight"
            ),
            "sourceDecomposeParDict": PATH,
            "sourceRegion": NAME,
            "sourceTime": TIME,
            "targetDecomposeParDict": PATH,
            "targetRegion": NAME,
        },
        positional=(("the source case (a folder inside this case)", PATH),),
    ),
    "changeDictionary": _utility(
        "constant disablePatchGroups enableFunctionEntries latestTime literalRE "
        "noFunctionObjects noZero",
        {**_DICT, "instance": NAME, "subDict": NAME, "time": TIMES},
    ),
}

# why the options every OpenFOAM utility takes are not on the lists
_REFUSED = {
    "-lib": "it loads a shared library",
    "-libs": "it loads shared libraries",
    "-case": "it runs on another folder than the case",
    "-fileHandler": "it changes how OpenFOAM reads files",
    "-hostRoots": "it reads other folders",
    "-roots": "it reads other folders",
    "-parallel": "steps before the solver run serially (decomposition is the run's)",
    "-debug-switch": "it changes OpenFOAM's switches",
    "-info-switch": "it changes OpenFOAM's switches (allowSystemOperations among them)",
    "-opt-switch": "it changes OpenFOAM's switches",
    "-doc": "it starts a browser",
    "-doc-source": "it starts a browser",
}


def _refuse(index: int, utility: str, message: str) -> ApplicationError:
    field_name = f"prepare[{index}]"
    return ApplicationError(
        f"{field_name} ({utility}): {message}", code=ErrorCode.INVALID, field=field_name
    )


def prepare_check(commands: Sequence[Sequence[str]]) -> None:
    """Each command's options are on its utility's list, each with a value of the right
    kind; a 400 naming the step, the option and what is allowed."""
    for index, argv in enumerate(commands):
        utility = argv[0]
        spec = UTILITIES.get(utility)
        if spec is None:
            raise _refuse(
                index, utility, f"not a utility a step may run; allowed: {', '.join(UTILITIES)}"
            )
        positional = list(spec.positional)
        args = list(argv[1:])
        while args:
            arg = args.pop(0)
            if arg.startswith("-") and not re.fullmatch(_NUMBER, arg):
                if arg in spec.flags:
                    continue
                check = spec.options.get(arg)
                if check is None:
                    why = _REFUSED.get(arg.replace("--", "-", 1), "it is not on the list")
                    raise _refuse(
                        index,
                        utility,
                        f"option {arg} is not allowed ({why}); {utility} takes: "
                        f"{spec.allowed() or 'no options'}",
                    )
                if not args:
                    raise _refuse(index, utility, f"option {arg} needs a value")
                value = args.pop(0)
                problem = check(value)
                if problem is not None:
                    raise _refuse(index, utility, f"option {arg} takes {problem}; got {value!r}")
                continue
            if not positional:
                raise _refuse(
                    index,
                    utility,
                    f"{arg!r} is not an option of {utility} (options start with -); "
                    f"{utility} takes: {spec.allowed() or 'no options'}",
                )
            what, check = positional.pop(0)
            problem = check(arg)
            if problem is not None:
                raise _refuse(index, utility, f"{what} must be {problem}; got {arg!r}")
