"""`make lint`: two import rules the linters do not check (docs/development/layers.md).

1. No project import inside a function or class body: an import put there to dodge an
   import cycle is still a cycle (import-linter only sees what it is shown). Allowed: the
   `ready()` of an AppConfig (Django's place for start-up wiring), and an import marked
   `# lazy: <reason>` where the reason is start-up cost a test measures (the run agent's
   imports: orchestration/tests keep its import list honest).
2. No private name (leading underscore) imported from another module, also within one
   package (ruff's PLC2701 checks across packages only): if two modules need it, it is
   public API with a docstring.

Checks the backend's and orchestration's modules, tests included for rule 2 and excluded
for rule 1 (a test may import what it needs where it needs it). Prints one line per finding
and exits 1 when there is any.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BACKEND = ROOT / "backend"
FIRST_PARTY = {p.name for p in BACKEND.iterdir() if (p / "__init__.py").is_file()} | {
    "orchestration"
}


def module_of(path: Path) -> str:
    base = BACKEND if path.is_relative_to(BACKEND) else ROOT
    parts = list(path.relative_to(base).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imported_module(node: ast.Import | ast.ImportFrom, here: str) -> list[str]:
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if node.level:  # relative: resolve against this module's package
        package = here.split(".")[: -node.level] if node.level else []
        return [".".join([*package, *([node.module] if node.module else [])])]
    return [node.module or ""]


def first_party(name: str) -> bool:
    return name.split(".")[0] in FIRST_PARTY


def is_test(path: Path) -> bool:
    return "tests" in path.parts or path.name.startswith("test_") or path.name == "conftest.py"


class Checker(ast.NodeVisitor):
    def __init__(self, path: Path, source: str) -> None:
        self.path = path
        self.lines = source.splitlines()
        self.module = module_of(path)
        self.scopes: list[ast.AST] = []
        self.problems: list[str] = []

    def _where(self, node: ast.AST) -> str:
        return f"{self.path.relative_to(ROOT)}:{getattr(node, 'lineno', 0)}"

    def _scoped(self, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) -> None:
        self.scopes.append(node)
        self.generic_visit(node)
        self.scopes.pop()

    visit_FunctionDef = _scoped
    visit_AsyncFunctionDef = _scoped
    visit_ClassDef = _scoped

    def _in_app_ready(self) -> bool:
        return self.path.name == "apps.py" and any(
            isinstance(s, ast.FunctionDef) and s.name == "ready" for s in self.scopes
        )

    def _check(self, node: ast.Import | ast.ImportFrom) -> None:
        modules = imported_module(node, self.module)
        ours = [m for m in modules if first_party(m)]
        function = any(isinstance(s, ast.FunctionDef | ast.AsyncFunctionDef) for s in self.scopes)
        line = self.lines[node.lineno - 1] if node.lineno <= len(self.lines) else ""
        lazy = "# lazy: " in line and line.split("# lazy: ", 1)[1].strip()
        if (
            ours
            and self.scopes
            and not is_test(self.path)
            and not self._in_app_ready()
            and not lazy
        ):
            where = "function" if function else "class body"
            self.problems.append(
                f"{self._where(node)}: project import inside a {where} ({', '.join(ours)}); "
                "import at the top of the module (a cycle needs a job or a lower layer instead)"
            )
        if isinstance(node, ast.ImportFrom) and ours and ours[0] != self.module:
            for alias in node.names:
                private = alias.name.startswith("_") and not alias.name.startswith("__")
                if private:
                    self.problems.append(
                        f"{self._where(node)}: private name {alias.name} imported from "
                        f"{ours[0]}; make it public (with a docstring) or keep it in its module"
                    )

    visit_Import = _check
    visit_ImportFrom = _check


def main(paths: list[str]) -> int:
    roots = [Path(p).resolve() for p in paths] or [BACKEND, ROOT / "orchestration"]
    problems: list[str] = []
    for root in roots:
        for path in sorted(root.rglob("*.py") if root.is_dir() else [root]):
            if "migrations" in path.parts or "__pycache__" in path.parts:
                continue
            source = path.read_text()
            checker = Checker(path, source)
            checker.visit(ast.parse(source, filename=str(path)))
            problems += checker.problems
    for line in problems:
        print(line)
    if problems:
        print(f"check-imports: {len(problems)} problem(s)", file=sys.stderr)
        return 1
    print("check-imports: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
