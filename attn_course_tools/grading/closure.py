"""What grading imports of the course: the modules of `attn_course` and `attn_course_tools` it loads.

The grade cache's key (`cache.grader_version`) digests these modules' source and the Gradescope zip
(`gradescope.build_bundle`) ships them, so that editing or leaving out a module grading never loads (a
widget, a plot, the book's tools) changes neither. The closure is found by reading the source, not by
running it: from the entry modules, every ``import`` and ``from ... import`` statement anywhere in a module
(inside functions and ``if TYPE_CHECKING:`` too, so it errs towards more) and every
``resolve("dotted.name")`` (the checks' import by name) that names a module of the two packages, and the
packages that hold each module (their ``__init__``). Two more imports are made by name at run time and are
added from the checks' own data: the modules of the package functions the exercises switch off
(`checks.Exercise.package`, imported by the sandbox) and the chapters' set-up imports (`checks.PREAMBLES`,
run in the sandbox).
"""

from __future__ import annotations

import ast
import functools
import importlib.util
import re
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path

import attn_course_exercises as checks

#: The course's three packages: the learner's library, the exercises' checks and the instructor's tools.
PACKAGES = ("attn_course", "attn_course_exercises", "attn_course_tools")

#: What judges a submission: the grader's judging and batching, the sandbox, and the checks.
JUDGE = (
    "attn_course_tools.grading.batch",
    "attn_course_tools.grading.judging",
    "attn_course_tools.grading.sandbox_child",
    "attn_course_tools.sandbox_boot",  # the fork server's first import, named in its command line
    "attn_course_exercises",
)

#: What grades a Gradescope upload: the judge and the Gradescope entry point with the writers it uses.
GRADESCOPE = (*JUDGE, "attn_course_tools.grading.gradescope")

#: The data files each package ships beside its modules (pyproject.toml's package data, which a test holds
#: equal). Some are read by checks: chapter 9's committed seed study, chapter 12's attention maps.
PACKAGE_DATA = {
    "attn_course.data.corpora": ("*.txt.xz", "README.md"),
    "attn_course.course": ("results/*.json", "results/*.md"),
    "attn_course_exercises": ("data/*.json",),
}


def package_roots() -> dict[str, Path]:
    """{package: the folder it is imported from}, as Python finds them (a checkout or site-packages)."""
    roots = {}
    for name in PACKAGES:
        spec = importlib.util.find_spec(name)
        if spec is None or not spec.submodule_search_locations:
            raise ModuleNotFoundError(f"the package {name} cannot be found")
        roots[name] = Path(next(iter(spec.submodule_search_locations))).resolve()
    return roots


def module_file(name: str, roots: Mapping[str, Path]) -> Path | None:
    """The source file of module `name` of one of `roots`' packages, or None if there is none."""
    top, *rest = name.split(".")
    if top not in roots:
        return None
    base = roots[top].joinpath(*rest)
    for candidate in (base / "__init__.py", base.with_suffix(".py")):
        if candidate.is_file():
            return candidate
    return None


@functools.lru_cache(maxsize=1024)  # a pure function of its arguments: the same source parses the same
def _imported(source: str, module: str, is_package: bool) -> frozenset[str]:
    """The dotted names every import statement and `resolve("...")` of `source` (the module `module`) may
    load."""
    found = set(_RESOLVE.findall(source))
    found |= {name.rpartition(".")[0] for name in found}
    package = module if is_package else module.rpartition(".")[0]
    for node in _statements(ast.parse(source).body):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                base = f"{parent}.{base}" if base else parent
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names)  # `from pkg import module`
    return frozenset(found)


#: What a block may hold that holds statements in turn.
_BLOCKS = (ast.stmt, ast.excepthandler, ast.match_case)

#: `resolve("dotted.name")`, the checks' import by name.
_RESOLVE = re.compile(r"""\bresolve\(\s*["']([\w.]+)["']""")


def _statements(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    """Every statement of `body` and of the blocks nested in it (functions, classes, if, try, with, ...);
    an import is a statement, so expressions need not be visited."""
    for node in body:
        yield node
        for field in ("body", "orelse", "finalbody", "handlers", "cases"):
            block = getattr(node, field, None)
            if isinstance(block, list):
                yield from _statements([n for n in block if isinstance(n, _BLOCKS)])


def _with_parents(name: str) -> list[str]:
    parts = name.split(".")
    return [".".join(parts[: i + 1]) for i in range(len(parts))]


def _runtime_imports() -> set[str]:
    """The modules grading imports by name at run time (see the module's docstring)."""
    found = {d.rpartition(".")[0] for e in checks.EXERCISES.values() for d in e.package}
    for preamble in checks.PREAMBLES.values():
        found |= _imported(preamble, "__main__", False)
    return found


def grading_modules(entry: Iterable[str] = JUDGE, roots: Mapping[str, Path] | None = None) -> dict[str, Path]:
    """{module: source file} of the course's modules that `entry` loads, with the run-time imports, sorted
    by name. roots: {package: folder} to read (default: `package_roots`, where Python imports them from)."""
    roots = package_roots() if roots is None else roots
    todo, found = [*entry, *_runtime_imports()], {}
    while todo:
        for name in _with_parents(todo.pop()):
            path = module_file(name, roots)
            if name in found or path is None:
                continue
            found[name] = path
            todo.extend(_imported(path.read_text(encoding="utf-8"), name, path.name == "__init__.py"))
    return dict(sorted(found.items()))


def grading_data(modules: Mapping[str, Path]) -> dict[str, Path]:
    """{archive name: file} of the package data (`PACKAGE_DATA`) of the packages among `modules`
    ({module: source file}, as `grading_modules` gives them), sorted by name: "attn_course/course/results/
    dynamics_seeds.json"."""
    found = {}
    for package, patterns in PACKAGE_DATA.items():
        if package not in modules:
            continue
        folder, prefix = modules[package].parent, package.replace(".", "/")
        for pattern in patterns:
            found.update({f"{prefix}/{p.relative_to(folder).as_posix()}": p for p in folder.glob(pattern)})
    return dict(sorted(found.items()))


def archive_name(name: str, path: Path) -> str:
    """Where module `name`'s file `path` lies under the folder that holds the packages:
    "attn_course_exercises/core.py", "attn_course_exercises/__init__.py"."""
    return "/".join(name.split(".")[: -1 if path.name != "__init__.py" else None] + [path.name])
