"""The layout: three houses, imports running tools -> exercises -> library and never back (the learner's
library imports neither the exercises' checks nor the instructor's tools; the checks never import the
tools); no import cycle; no path climbing out of a package; functions that fit a screen.

The scans read the source (every import statement, at the top of a module or inside a function), so a lazy
import inside a function counts as much as one at the top: it is a dependency all the same.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LIBRARY, EXERCISES, TOOLS = "attn_course", "attn_course_exercises", "attn_course_tools"
#: The longest function the course keeps without a stated reason; a longer one carries a `# long: <why>`
#: comment on the line above its `def` (or above its first decorator).
MAX_FUNCTION_LINES = 60


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def sources(package: str) -> dict[str, Path]:
    return {module_name(p): p for p in sorted((ROOT / package).rglob("*.py"))}


MODULES = {**sources(LIBRARY), **sources(EXERCISES), **sources(TOOLS)}


def imports_of(name: str, path: Path) -> set[str]:
    """The course modules `name` imports, resolved to modules (a `from package import module` names the
    module, a `from module import function` the module)."""
    found = set()
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[: len(parts) - node.level + 1] + [base]).strip(".")
            for alias in node.names:
                found.add(f"{base}.{alias.name}" if f"{base}.{alias.name}" in MODULES else base)
    return {m for m in found if m in MODULES}


GRAPH = {name: imports_of(name, path) for name, path in MODULES.items()}


def reaching_up(house: str, above: tuple[str, ...]) -> dict[str, list[str]]:
    """{module of `house`: the modules of the houses `above` it imports}, for those that import any."""
    reaching = {name: sorted(m for m in deps if m.split(".")[0] in above) for name, deps in GRAPH.items()
                if name.split(".")[0] == house}
    return {name: deps for name, deps in reaching.items() if deps}


def test_the_learners_library_imports_neither_the_exercises_nor_the_tools():
    assert reaching_up(LIBRARY, (EXERCISES, TOOLS)) == {}


def test_the_exercises_import_nothing_from_the_tools():
    assert reaching_up(EXERCISES, (TOOLS,)) == {}


def test_the_rule_finds_an_import_that_points_back():
    GRAPH["attn_course.attention.masking"].add("attn_course_exercises.core")
    try:
        assert reaching_up(LIBRARY, (EXERCISES, TOOLS)) == {
            "attn_course.attention.masking": ["attn_course_exercises.core"]
        }
    finally:
        GRAPH["attn_course.attention.masking"].discard("attn_course_exercises.core")


@pytest.mark.slow
def test_importing_every_module_of_the_library_loads_no_tool():
    code = (
        "import importlib, pkgutil, sys, attn_course\n"
        "for m in pkgutil.walk_packages(attn_course.__path__, 'attn_course.'):\n"
        "    importlib.import_module(m.name)\n"
        "print(sorted(m for m in sys.modules if m.startswith(('attn_course_tools', 'attn_course_ex'))))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout.strip() == "[]"


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle of `graph` as a list of modules (first == last), or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return path[path.index(nxt):] + [nxt]
            if nxt not in state and (cycle := visit(nxt)):
                return cycle
        path.pop()
        state[node] = 2
        return None

    for start in sorted(graph):
        if start not in state and (cycle := visit(start)):
            return cycle
    return None


def test_find_cycle_finds_one_and_only_where_there_is_one():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": set()}) is None
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]


def test_no_import_cycle_in_any_house():
    assert find_cycle(GRAPH) is None


def test_no_module_finds_files_by_climbing_out_of_its_package():
    climbing = []
    for path in MODULES.values():
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            code = line.split("#", 1)[0]
            if "__file__" in code and (".parents[" in code or ".parent.parent" in code):
                climbing.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    assert climbing == []


def long_functions(path: Path) -> list[str]:
    lines = path.read_text(encoding="utf-8").splitlines()
    found = []
    for node in ast.walk(ast.parse("\n".join(lines))):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            length = node.end_lineno - node.lineno + 1
            first = min([node.lineno] + [d.lineno for d in node.decorator_list])
            reason = lines[first - 2].strip() if first >= 2 else ""
            if length > MAX_FUNCTION_LINES and not reason.startswith("# long:"):
                found.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name} ({length} lines)")
    return found


def test_no_function_is_longer_than_a_screen_without_a_stated_reason():
    assert [f for path in MODULES.values() for f in long_functions(path)] == []
