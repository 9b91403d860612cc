"""Reads every import of the four packages and checks that layers point down (docs/architecture.md).

Prints what each sub-package imports; exits 1 naming any import of a sub-package listed after its own,
and any library module that imports a `cli` module.
"""

from __future__ import annotations

import ast
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# The import order of docs/architecture.md: each unit may import only units listed before it.
ORDER = [
    "zero.run", "zero.rules", "zero.corpus", "zero.net", "zero.distilled", "zero.endgames", "zero.alphabeta", "zero.yardsticks", "zero.cli",
    "selfplay.tree_search", "selfplay.replay", "selfplay.actors", "selfplay.cli",
    "train.learner", "train.arena", "train.shipping", "train.loop", "train.cli",
    "play", "play.cli",
]
TOP = ("zero", "selfplay", "train", "play")


def unit(module: str) -> str:
    parts = module.split(".")
    if len(parts) >= 2 and (ROOT / parts[0] / parts[1]).is_dir():
        return ".".join(parts[:2])
    return parts[0]


def imported(tree: ast.AST) -> list[str]:
    names = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] in TOP:
            names.append(node.module)
        elif isinstance(node, ast.Import):
            names += [a.name for a in node.names if a.name.split(".")[0] in TOP]
    return names


def main() -> int:
    edges: dict[str, set[str]] = defaultdict(set)
    wrong = []
    for top in TOP:
        for path in sorted((ROOT / top).rglob("*.py")):
            if path.name == "__main__.py" or path.parent == ROOT / top and path.name == "__init__.py":
                # `python -m play` is the console script's other door; a top-level __init__ holds a docstring
                continue
            module = ".".join(path.relative_to(ROOT).with_suffix("").parts)
            here = unit(module)
            if here not in ORDER:
                wrong.append(f"{module}: its sub-package {here} is not in the layer order")
                continue
            for name in imported(ast.parse(path.read_text())):
                there = unit(name)
                if there == here:
                    continue
                edges[here].add(there)
                if there not in ORDER or ORDER.index(there) > ORDER.index(here):
                    wrong.append(f"{module} imports {name}: {there} is not below {here}")
                elif there.endswith(".cli") and not here.endswith("cli"):
                    wrong.append(f"{module} imports the command module {name}")
    for here in ORDER:
        print(f"{here:22s} -> {', '.join(sorted(edges[here], key=ORDER.index)) or '-'}")
    for line in wrong:
        print(f"wrong way: {line}")
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
