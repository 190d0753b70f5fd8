"""Find-the-bug exercises: the learner's cell holds a short function with bugs planted in it; the check names
the bugs still there.

A `BugHunt` is an `Exercise` whose stub is the buggy function itself (not ``raise NotImplementedError``). Its
mistakes are the planted bugs and their combinations (`planted_mistakes`), each the function with those bugs
left in, so that a partial fix is told which bugs remain; an answer that still behaves exactly like the
function as given, on every case, is "not attempted yet".
"""

from __future__ import annotations

import itertools
import textwrap
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from attn_course_exercises.core import FAILED, NOT_ATTEMPTED, Case, CheckResult, Exercise, Mistake, compare


def planted_mistakes(
    bugs: Mapping[str, str],
    variant: Callable[..., Any] | None = None,
    *,
    wrong: Callable[[frozenset[str]], Callable[..., Any]] | None = None,
) -> list[Mistake]:
    """One Mistake per non-empty set of the planted `bugs` ({name: what is wrong, in words}), fewest first.

    wrong(remaining) -> the function with the bugs named in `remaining` (a frozenset) still in it and the
    others fixed, as a learner's partial fix reads (the exercise's signature): each mistake is that code.
    variant(inputs, remaining) -> that function's output instead (the older form); give exactly one.
    A message lists every bug that remains.
    """
    if (variant is None) == (wrong is None):
        raise ValueError("planted_mistakes needs exactly one of `wrong` and `variant`")
    mistakes = []
    for size in range(1, len(bugs) + 1):
        for names in itertools.combinations(bugs, size):
            if size == 1:
                hint = f"One planted bug remains. {bugs[names[0]]}"
            else:
                remain = f"All {size}" if size == len(bugs) else f"{size} of the {len(bugs)}"
                hint = f"{remain} planted bugs remain:\n" + "\n".join(f"- {bugs[n]}" for n in names)
            if wrong is not None:
                mistakes.append(Mistake(hint, wrong=wrong(frozenset(names))))
            else:
                mistakes.append(Mistake(hint, lambda i, n=frozenset(names): variant(i, n)))
    return mistakes


class BugHunt(Exercise):
    """An exercise whose stub is `buggy`, the function with its bugs planted (its signature and docstring say
    what it should do); `namespace` holds the names the buggy source needs (the chapter's imports).

    The other arguments are Exercise's; `solution` is the function fixed.
    """

    def __init__(
        self, key: str, name: str, title: str, *, buggy: str, namespace: Mapping[str, Any], **kwargs
    ):
        super().__init__(key, name, title, **kwargs)
        self.stub_code = textwrap.dedent(buggy).strip("\n") + "\n"
        self._namespace = dict(namespace)

    def _as_given(self) -> Any:
        namespace = dict(self._namespace)
        exec(compile(self.stub_code, f"<{self.key} as given>", "exec"), namespace)
        return namespace[self.name]

    def judge(self, cases: Sequence[Case], attempts: Sequence[Mapping[str, Any]]) -> CheckResult:
        """Exercise.judge, except that an answer that behaves like the buggy function on every case is "not
        attempted yet" (it is the stub, or an edit that fixed nothing)."""
        result = super().judge(cases, attempts)
        if result.status != FAILED or len(attempts) != len(cases):
            return result
        given = self._as_given()
        if all(_same(self.attempt(given, case), att) for case, att in zip(cases, attempts, strict=True)):
            return self._result(NOT_ATTEMPTED, self._not_attempted_message(), 0, len(cases))
        return result

    def _not_attempted_message(self) -> str:
        return (
            f"`{self.name}` still behaves like the function as given, on every case. Read it against its "
            f"docstring, fix the bugs in the cell that starts with `{self.marker}`, run that cell, then run "
            f"this check again. Stuck? Try `{self.key.split('.')[1]}.hint()`."
        )


def _same(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    """Whether two attempts came out alike: the same output, or the same error (type and message)."""
    if a.get("status") != b.get("status"):
        return False
    if a.get("status") == "ok":
        return compare(a.get("output"), b.get("output")) is None
    if a.get("status") == "error":
        ea, eb = a.get("error") or {}, b.get("error") or {}
        return (ea.get("type"), ea.get("message")) == (eb.get("type"), eb.get("message"))
    return True
