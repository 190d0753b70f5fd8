"""The chapters' predict-then-see questions, one module per chapter, found by name.

`chNN.py` (two digits: ch01.py, ch12.py) defines `QUESTIONS = (Choice(...), Number(...), ...)`, keyed
"chN.p1", "chN.p2", ... in the order the chapter asks them. A new module is found without a list to edit;
`attn_course_exercises.predict` checks what each one holds.
"""

from __future__ import annotations

import importlib
import pkgutil
import re
from types import ModuleType

MODULE = re.compile(r"ch([0-9]{2})")


def discover() -> dict[int, ModuleType]:
    """Every chapter's questions module by chapter number (ch04.py -> 4), in chapter order."""
    names = sorted(info.name for info in pkgutil.iter_modules(__path__) if MODULE.fullmatch(info.name))
    return {
        int(MODULE.fullmatch(name).group(1)): importlib.import_module(f"{__name__}.{name}") for name in names
    }
