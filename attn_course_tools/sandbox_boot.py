"""The first thing the grader's fork server of sandboxes runs: import the checks from source it is handed.

In the jail (`attn_course_tools.grading.jail`) the checks' folder is empty, so that no learner code can open
the model answers; the grader sends the checks' source on the server's stdin instead, as one JSON line
{module name: [source, file path, is package]}, and `install` makes `import attn_course_exercises...` compile
them from it. It lives outside `attn_course_tools.grading`, whose `__init__` imports the checks, and imports
nothing of the course's.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import json
import sys
from types import ModuleType
from typing import IO


class _SourceImporter(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds the checks' modules in the source the grader sent, and runs each once."""

    def __init__(self, sources: dict[str, list]):
        self.sources = sources

    def find_spec(self, name: str, path: object = None, target: object = None):
        if name not in self.sources:
            return None
        _, origin, package = self.sources[name]
        spec = importlib.util.spec_from_loader(name, self, origin=origin, is_package=package)
        spec.has_location = True  # tracebacks and `__file__` name the real file, as outside the jail
        if package:  # its folder, as outside the jail (empty inside), for whoever asks where it lives
            spec.submodule_search_locations = [origin.rpartition("/")[0]]
        return spec

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> None:
        return None

    def exec_module(self, module: ModuleType) -> None:
        source, origin, _ = self.sources.pop(module.__name__)  # not kept once it has run
        module.__file__ = origin
        exec(compile(source, origin, "exec", dont_inherit=True), module.__dict__)


def install(stream: IO[str]) -> None:
    """Read the checks' source from the first line of `stream`, and import them from it from now on."""
    sources = json.loads(stream.readline())
    sys.meta_path.insert(0, _SourceImporter(sources))
