"""The package's floors hold: no module imports from a floor above its own, no two modules import each other
(directly or round a loop), and no module reaches into another module's private (``_underscore``) names.

Floors, bottom to top (a module may import its own floor and any floor below; docs/architecture.md):

0. ``core``: ``searchgym/core/`` and ``errors.py`` -- the shared types (Task, Trajectory, Subgraph, info),
   the LLM client interface, role prompts, answer metrics, advantage estimators, files and progress
1. ``llm`` (backends: transformers, vLLM, OpenAI-compatible; decoding, the bundled model)
2. ``world``  3. ``retrieval``  4. ``construction``
5. ``scoring`` (judge, rule filters, RAG verifier and reader, outcome rewards)
6. ``tasks`` (task sources, the built-in benchmark and its splits, QA sets)
7. ``envs``  8. ``wrappers``  9. ``evaluation`` (the harness, for any agent)
10. ``agents``  11. ``training`` (self-play RL, SFT, rejection sampling, recipes, cold start)
12. ``integrations`` (TRL, verl, SkyRL, GEM, verifiers)
13. ``commands``: ``searchgym/commands/``, ``cli.py`` -- the command line, which wires every floor

Imports inside functions count the same as top-level ones: a lazy import does not change which floor
depends on which, nor hide a cycle. There is no whitelist. Run as a script to print the floor-to-floor table.
"""

from __future__ import annotations

import ast
from collections import Counter
from pathlib import Path

import searchgym

PACKAGE = Path(searchgym.__file__).parent
FLOORS = [
    "core",
    "llm",
    "world",
    "retrieval",
    "construction",
    "scoring",
    "tasks",
    "envs",
    "wrappers",
    "evaluation",
    "agents",
    "training",
    "integrations",
    "commands",
]
TOP_LEVEL_MODULES = {
    "errors": "core",
    "cli": "commands",
    "__init__": "commands",
    "assets": "core",
}
# the package's own __init__ registers the envs and offers the world API: it sits on top, like the CLI


def floor_of(module: str) -> str:
    """The floor of a dotted ``searchgym.x.y`` module name."""
    parts = module.split(".")
    if len(parts) == 1:
        return "commands"
    head = parts[1]
    if head in FLOORS:
        return head
    if head in TOP_LEVEL_MODULES:
        return TOP_LEVEL_MODULES[head]
    raise AssertionError(
        f"{module}: no floor assigned; add it to FLOORS or TOP_LEVEL_MODULES in tests/test_layering.py"
    )


def module_name(path: Path) -> str:
    rel = path.relative_to(PACKAGE.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def resolve(node: ast.ImportFrom, module: str, is_package: bool) -> str:
    """The absolute module an ``from ... import`` names."""
    if node.level == 0:
        return node.module or ""
    base = module.split(".")
    if not is_package:
        base = base[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def imports(path: Path):
    """``(lineno, imported module, imported names)`` of every searchgym import in ``path``."""
    module = module_name(path)
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("searchgym"):
                    yield node.lineno, alias.name, []
        elif isinstance(node, ast.ImportFrom):
            target = resolve(node, module, path.name == "__init__.py")
            if not target.startswith("searchgym"):
                continue
            plain = []
            for alias in node.names:  # "from .. import envs": a submodule import, its floor is the submodule's
                sub = PACKAGE.parent.joinpath(*f"{target}.{alias.name}".split("."))
                if sub.is_dir() or sub.with_suffix(".py").is_file():
                    yield node.lineno, f"{target}.{alias.name}", []
                else:
                    plain.append(alias.name)
            if plain:
                yield node.lineno, target, plain


def module_aliases(path: Path) -> set[str]:
    """Local names bound to searchgym modules in ``path`` (``import searchgym.x as m``, ``from . import x``)."""
    module = module_name(path)
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("searchgym"):
                    names.add(alias.asname or alias.name.split(".")[0])
        elif isinstance(node, ast.ImportFrom):
            target = resolve(node, module, path.name == "__init__.py")
            for alias in node.names:
                sub = PACKAGE.parent.joinpath(*f"{target}.{alias.name}".split("."))
                if target.startswith("searchgym") and (sub.is_dir() or sub.with_suffix(".py").is_file()):
                    names.add(alias.asname or alias.name)
    return names


def private_module_attributes(path: Path):
    """``(lineno, text)`` of every ``module._name`` where ``module`` is a searchgym module imported here."""
    aliases = module_aliases(path)
    for node in ast.walk(ast.parse(path.read_text())):
        if (
            isinstance(node, ast.Attribute)
            and node.attr.startswith("_")
            and not node.attr.startswith("__")
            and isinstance(node.value, ast.Name)
            and node.value.id in aliases
        ):
            yield node.lineno, f"{node.value.id}.{node.attr}"


def violations():
    """Upward imports and cross-module private names, as ``file:line: message`` strings."""
    bad, table = [], Counter()
    for path in sorted(PACKAGE.rglob("*.py")):
        module = module_name(path)
        src = floor_of(module)
        for lineno, target, names in imports(path):
            dst = floor_of(target)
            table[(src, dst)] += 1
            where = f"{path.relative_to(PACKAGE.parent)}:{lineno}"
            if FLOORS.index(dst) > FLOORS.index(src):
                bad.append(f"{where}: {src} imports {target} ({dst}, a higher floor)")
            private = [n for n in names if n.startswith("_") and not n.startswith("__")]
            if private:
                bad.append(f"{where}: imports private name(s) {', '.join(private)} from {target}")
    for path in sorted(PACKAGE.rglob("*.py")):
        for lineno, text in private_module_attributes(path):
            bad.append(f"{path.relative_to(PACKAGE.parent)}:{lineno}: uses another module's private {text}")
    return bad, table


def test_no_import_runs_up_a_floor_and_no_private_name_crosses_modules():
    bad, table = violations()
    assert sum(table.values()) > 300  # the scan did see the package's imports
    assert not bad, "layering violations:\n" + "\n".join(bad)


def module_graph() -> dict[str, set[str]]:
    """Module -> the searchgym modules it imports (package ``__init__`` files left out: they gather their own
    modules' names for users, so an ``__init__`` and its modules would always form a loop)."""
    modules = {module_name(p): p for p in PACKAGE.rglob("*.py") if p.name != "__init__.py"}
    graph: dict[str, set[str]] = {m: set() for m in modules}
    for module, path in modules.items():
        for _, target, _ in imports(path):
            while target not in modules and "." in target:  # a name imported from a module -> that module
                target = target.rsplit(".", 1)[0]
            if target in modules and target != module:
                graph[module].add(target)
    return graph


def import_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every strongly connected group of two or more modules (Tarjan), each sorted: modules that import each
    other, directly or round a loop."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return groups


def test_no_module_cycles_function_local_imports_included():
    cycles = import_cycles(module_graph())
    assert not cycles, "import cycles:\n" + "\n".join(" <-> ".join(c) for c in cycles)


def test_the_cycle_check_finds_a_loop():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert import_cycles(graph) == [["a", "b", "c"]]


def test_every_module_has_a_floor():
    for path in PACKAGE.rglob("*.py"):
        floor_of(module_name(path))


if __name__ == "__main__":
    found, counts = violations()
    for (a, b), n in sorted(counts.items(), key=lambda kv: (FLOORS.index(kv[0][0]), FLOORS.index(kv[0][1]))):
        print(f"{a:>12} -> {b:<12} {n}")
    print("\n".join(found))


def test_the_scan_catches_an_upward_import_and_a_private_name(tmp_path, monkeypatch):
    import sys

    pkg = tmp_path / "searchgym"
    for sub, text in {
        "__init__.py": "",
        "envs/__init__.py": "",
        "agents/__init__.py": "",
        "agents/llm.py": "X = 1\n",
        "envs/judge.py": "def f():\n    from ..agents.llm import X\n    return X\n",
        "envs/solver.py": "from . import judge\nfrom .judge import _helper\nY = judge._cache\n",
    }.items():
        (pkg / sub).parent.mkdir(parents=True, exist_ok=True)
        (pkg / sub).write_text(text)
    monkeypatch.setattr(sys.modules[__name__], "PACKAGE", pkg)
    bad, _ = violations()
    assert any("envs/judge.py:2: envs imports searchgym.agents.llm" in b for b in bad)
    assert any("envs/solver.py:2: imports private name(s) _helper" in b for b in bad)
    assert any("envs/solver.py:3: uses another module's private judge._cache" in b for b in bad)
