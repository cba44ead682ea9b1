"""The import contract of lumos_gym: layers that import only downwards, and no import circle.

Read from the source with ``ast`` (nothing is imported). A part is the first name under
``lumos_gym`` (a sub-package or a top-level module); each part sits in one layer of
:data:`LAYERS`, and a module may import its own part and the parts of lower layers, never a
higher one. Every import counts: at the top of a module, inside a function, or under
``TYPE_CHECKING``. Imports inside functions are allowed only for a dependency that is heavy or
optional (torch, a server, another layer's optional extra), and each says why in a comment.
docs/architecture.md draws the same layers.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "lumos_gym"

#: Bottom to top. A part may import its own layer and the layers below it, never one above.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("errors",),
    ("registry", "text", "jsonl", "asgi", "gitinfo", "episodes"),
    ("actions",),
    ("prompts",),
    ("models",),
    ("scoring",),
    ("retrieval",),
    ("tools",),
    ("envs",),
    ("agents",),
    ("conversion", "databuild"),
    ("training",),
    ("evaluation",),
    ("leaderboard",),
    ("serving",),
    ("workflows",),
    ("cli",),
)
LAYER = {part: n for n, parts in enumerate(LAYERS) for part in parts}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def part_of(module: str) -> str | None:
    names = module.split(".")
    return names[1] if len(names) > 1 and names[0] == "lumos_gym" else None


class Import:
    """One import of a lumos_gym module: where it stands and whether it is in a function."""

    def __init__(self, source: str, target: str, line: int, in_function: bool, text: str):
        self.source, self.target, self.line = source, target, line
        self.in_function, self.text = in_function, text

    def __repr__(self) -> str:
        return f"{self.source}:{self.line} -> {self.target}"


def _targets(node: ast.AST, package: str, known: set[str]) -> list[str]:
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    assert isinstance(node, ast.ImportFrom)
    if node.level:
        base = package.split(".")[: len(package.split(".")) - node.level + 1]
        module = ".".join(base + ([node.module] if node.module else []))
    else:
        module = node.module or ""
    # `from pkg import sub` imports the module pkg.sub when there is one
    subs = [f"{module}.{alias.name}" for alias in node.names]
    return [s for s in subs if s in known] or [module]


def all_imports() -> list[Import]:
    files = sorted(PACKAGE.rglob("*.py"))
    known = {module_name(f) for f in files}
    found = []
    for path in files:
        source = path.read_text(encoding="utf-8")
        lines = source.splitlines()
        tree = ast.parse(source)
        me = module_name(path)
        package = me if path.name == "__init__.py" else me.rsplit(".", 1)[0]
        in_function: set[int] = set()
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                in_function.update(id(inner) for inner in ast.walk(node) if inner is not node)
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                for target in _targets(node, package, known):
                    if target == "lumos_gym" or target.startswith("lumos_gym."):
                        before = lines[node.lineno - 2].strip() if node.lineno > 1 else ""
                        own = lines[node.lineno - 1 : node.end_lineno]
                        text = "\n".join(([before] if before.startswith("#") else []) + own)
                        found.append(Import(me, target, node.lineno, id(node) in in_function,
                                            text))
    return found


def test_every_part_has_a_layer():
    parts = {part_of(module_name(f)) for f in PACKAGE.rglob("*.py")} - {None}
    assert sorted(parts - set(LAYER)) == []


def test_no_module_imports_a_higher_layer():
    upward = [
        imp for imp in all_imports()
        if part_of(imp.source) and part_of(imp.target)
        and LAYER[part_of(imp.target)] > LAYER[part_of(imp.source)]
    ]
    assert upward == []


def test_no_import_circle_between_modules():
    graph: dict[str, set[str]] = defaultdict(set)
    for imp in all_imports():
        if imp.target != imp.source:
            graph[imp.source].add(imp.target)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles: list[list[str]] = []

    def visit(node: str) -> None:  # Tarjan's strongly connected components
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                circles.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    assert circles == []


def test_imports_inside_functions_say_why():
    silent = [imp for imp in all_imports() if imp.in_function and "#" not in imp.text]
    assert silent == []
