"""python -m orchestration.composer {check,resolve,recipe,build,base} — see docs/images.md."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from orchestration.composer import (
    DEFAULT_BASE,
    Buildah,
    BuildError,
    ManifestError,
    ResolveError,
    compose,
    load_catalog,
)

ROOT = Path(__file__).resolve().parents[2]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m orchestration.composer")
    parser.add_argument("--packages-dir", default=str(ROOT / "packages"))
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("check", help="validate every package manifest")
    for name in ("resolve", "recipe", "build"):
        p = sub.add_parser(name)
        p.add_argument("packages", nargs="+")
        p.add_argument("--kind", default="container", choices=["container", "vm"])
        if name == "build":
            p.add_argument("--force", action="store_true", help="rebuild without the layer cache")
    sub.add_parser("base", help="build (or find) the base rootfs image")
    args = parser.parse_args(argv)
    try:
        catalog = load_catalog(args.packages_dir)
        if args.command == "check":
            print(f"{len(catalog.names())} packages OK: {', '.join(catalog.names())}")
            return 0
        if args.command == "base":
            cached = Buildah().ensure_base(DEFAULT_BASE, log=print)
            print(
                json.dumps(
                    {"ref": DEFAULT_BASE.ref, "digest": DEFAULT_BASE.digest, "cached": cached}
                )
            )
            return 0
        composition = compose(args.packages, catalog, kind=args.kind)
        if args.command == "resolve":
            print(
                json.dumps(
                    {
                        "name": composition.name,
                        "digest": composition.digest,
                        "closure": composition.packages,
                        "solvers": list(composition.solvers),
                        "ref": composition.ref,
                    },
                    indent=2,
                )
            )
        elif args.command == "recipe":
            sys.stdout.write(composition.recipe)
        else:
            result = Buildah().build(composition, log=print, force=args.force)
            print(
                json.dumps(
                    {
                        "ref": result.ref,
                        "digest": result.digest,
                        "cached": result.cached,
                        "size_bytes": result.size_bytes,
                        "seconds": round(result.seconds, 1),
                    }
                )
            )
    except (ManifestError, ResolveError, BuildError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
