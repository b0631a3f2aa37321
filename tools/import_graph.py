"""rmlib's import graph in numbers, for any checkout: modules, lines, loose top-level modules,
the import cycles (strongly connected components of more than one module) and the imports by
name. Every import counts: module level, in functions and under TYPE_CHECKING, as
import-linter counts them; an `__import__` / `import_module` call with a literal name counts as
an edge too (import-linter cannot see those), one with a computed name is listed.

    python tools/import_graph.py [CHECKOUT]      # default: this checkout

The layers contract itself is `lint-imports` (pyproject.toml); this script measures, it does
not judge, so it also runs on checkouts from before the contract (for before/after figures).
"""

from __future__ import annotations

import ast
import sys
from collections import defaultdict
from pathlib import Path


def modules(root: Path) -> dict[str, Path]:
    found = {}
    for path in sorted((root / "rmlib").rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


def edges(mods: dict[str, Path]) -> tuple[dict[str, set[str]], list[str]]:
    """Module -> the rmlib modules it imports (anywhere in it), and the by-name imports."""

    def owner(name: str) -> str:
        while name and name not in mods:
            name = name.rpartition(".")[0]
        return name

    graph: dict[str, set[str]] = defaultdict(set)
    by_name: list[str] = []
    for mod, path in mods.items():
        package = mod.split(".") if path.name == "__init__.py" else mod.split(".")[:-1]
        for node in ast.walk(ast.parse(path.read_text())):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = package[: len(package) - node.level + 1] if node.level else []
                target = ".".join([*base, node.module] if node.module else base)
                names = [target, *(f"{target}.{a.name}" for a in node.names)]
            elif isinstance(node, ast.Call) and (
                getattr(node.func, "id", None) == "__import__"
                or getattr(node.func, "attr", None) == "import_module"
            ):
                arg = node.args[0] if node.args else None
                literal = isinstance(arg, ast.Constant) and isinstance(arg.value, str)
                names = [arg.value] if literal else []
                by_name.append(f"{path}:{node.lineno}: {ast.unparse(node)}")
            for name in names:
                target = owner(name) if name.startswith("rmlib") else ""
                if target and target != mod:
                    graph[mod].add(target)
    return graph, by_name


def cycles(mods: dict[str, Path], graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []
    for start in mods:
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on.add(start)
        while work:
            v, children = work[-1]
            w = next(children, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(graph[w]))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    x = stack.pop()
                    on.discard(x)
                    comp.append(x)
                    if x == v:
                        break
                if len(comp) > 1:
                    found.append(sorted(comp))
    return found


def main(root: Path) -> None:
    mods = modules(root)
    graph, by_name = edges(mods)
    lines = sum(len(p.read_text().splitlines()) for p in mods.values())
    loose = sorted(p.name for p in (root / "rmlib").glob("*.py") if p.name != "__init__.py")
    found = cycles(mods, graph)
    print(f"modules: {len(mods)}, lines: {lines:,}, imports between modules: "
          f"{sum(map(len, graph.values()))}")  # fmt: skip
    print(f"loose top-level modules: {len(loose)} ({', '.join(loose)})")
    print(f"import cycles: {len(found)} (sizes: {[len(c) for c in found]})")
    for comp in found:
        print("  " + ", ".join(comp))
    print(f"imports by name: {len(by_name)}")
    for line in by_name:
        print("  " + line)


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parents[1])
