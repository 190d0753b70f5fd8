"""Who each submission belongs to: the student id of every file in a batch, read from its layout or metadata.

The rules (``id_from``, ``--id-from`` on the command line):

- ``folder``: ``<root>/<student>/<notebook>.ipynb``, the folder a submission sits in;
- ``file``: ``<student>.ipynb``, the file name without ``.ipynb`` (``stem`` is an older name for it);
- ``nbgrader``: ``.../submitted/<student>/<assignment>/<notebook>.ipynb``, the folder under ``submitted``;
- ``canvas``: Canvas's downloads, ``<name>_<userid>_<submissionid>_<original>.ipynb`` (a late one
  ``<name>_LATE_<userid>_...``): the student is ``<name>_<userid>``, the name for a reader, the user id to
  keep two students of one name apart;
- ``moodle``: Moodle's downloads, a folder ``<Full Name>_<id>_assignsubmission_file_`` per student (or files
  named ``<Full Name>_<id>_assignsubmission_file_<original>.ipynb``): ``<Full Name>_<id>``, for the same
  reasons;
- ``metadata``: the notebook's ``metadata.attn_course.student``, else what the layout says;
- ``auto`` (the default) picks one rule for the whole batch: nbgrader if any file sits in
  ``submitted/<student>/<assignment>/``, moodle if any is in Moodle's layout, canvas if every file name is
  Canvas's, folder if two folders hold a file of the same name, else file.

Two students never share a row. Two files that give one student the same notebook (the same file name;
nbgrader: assignment and file name; Canvas: the original name, without the ``-1`` Canvas appends to a
resubmitted file) are either Canvas resubmissions -- the highest submission id, Canvas's latest, is graded
and the others are listed as superseded -- or a collision: `identify` raises `IdentityError` listing the
files, before anything is graded. One student's different notebooks (ex01 and ex02) share a row.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

RULES = ("auto", "folder", "file", "nbgrader", "canvas", "moodle", "metadata")
ALIASES = {"stem": "file"}

DESCRIPTIONS = {
    "folder": "from the folder of each submission",
    "file": "from the file name of each submission",
    "nbgrader": "from nbgrader's submitted/<student>/<assignment>/ folders",
    "canvas": "from Canvas's file names, <name>_<userid>; of one student's resubmissions of a notebook, "
    "the highest submission id (the latest) is graded",
    "moodle": "from Moodle's <Full Name>_<id>_assignsubmission_file_ names, <Full Name>_<id>",
    "metadata": "from metadata.attn_course.student",
}

_CANVAS = re.compile(r"^(?P<name>.+?)_(?:LATE_)?(?P<user>\d+)_(?P<submission>\d+)_(?P<original>.+)$")
_MOODLE_FOLDER = re.compile(r"^(?P<student>.+_\d+)_assignsubmission_file_?$")
_MOODLE_FILE = re.compile(r"^(?P<student>.+_\d+)_assignsubmission_file_(?P<original>.+)$")
_CANVAS_COPY = re.compile(r"-\d+$")  # Canvas names a resubmitted file ex01-1.ipynb, ex01-2.ipynb, ...


class IdentityError(ValueError):
    """The batch's student ids cannot be settled: files outside the rule's layout, or two files that give
    one student the same notebook with nothing to say which is newer. Raised before anything is graded."""


@dataclass(frozen=True)
class Owner:
    """What one file says about who sent it: the student, the notebook it answers (by name), and its place
    among resubmissions (Canvas's submission id; None where the layout keeps no order)."""

    student: str
    notebook: str
    order: int | None = None


@dataclass(frozen=True)
class Identities:
    """A batch's student ids: `students` maps each file to grade to its student, in the batch's order;
    `superseded` maps each resubmission not graded to the later one that is."""

    rule: str
    auto: bool
    students: dict[Path, str]
    superseded: dict[Path, Path]
    fallback: str | None = None  # the metadata rule's layout, for notebooks without a student

    def summary(self) -> list[str]:
        """The lines the command line prints before grading: the rule, then each superseded file."""
        how = DESCRIPTIONS[self.rule]
        if self.fallback is not None:
            how += f", else {DESCRIPTIONS[self.fallback]}"
        lines = [f"student ids: {how} ({'auto' if self.auto else 'chosen'})"]
        lines += [f"superseded: {old} (not graded: {new} is later)" for old, new in self.superseded.items()]
        return lines


def _folder(path: Path) -> Owner:
    return Owner(path.absolute().parent.name, path.name)


def _file(path: Path) -> Owner:
    return Owner(path.stem, path.name)


def _nbgrader(path: Path) -> Owner | None:
    parts = path.absolute().parts
    below = [i for i in range(len(parts) - 3) if parts[i] == "submitted"]
    if not below:
        return None
    i = below[-1]
    return Owner(parts[i + 1], "/".join(parts[i + 2 :]))


def _canvas(path: Path) -> Owner | None:
    match = _CANVAS.match(path.stem)
    if match is None:
        return None
    original = _CANVAS_COPY.sub("", match["original"])
    return Owner(f"{match['name']}_{match['user']}", original, int(match["submission"]))


def _moodle(path: Path) -> Owner | None:
    folder = _MOODLE_FOLDER.match(path.absolute().parent.name)
    if folder is not None:
        return Owner(folder["student"], path.name)
    named = _MOODLE_FILE.match(path.stem)
    return None if named is None else Owner(named["student"], named["original"])


_READERS: dict[str, Callable[[Path], Owner | None]] = {
    "folder": _folder,
    "file": _file,
    "nbgrader": _nbgrader,
    "canvas": _canvas,
    "moodle": _moodle,
}

_LAYOUTS = {
    "nbgrader": ".../submitted/<student>/<assignment>/<notebook>.ipynb",
    "canvas": "<name>_<userid>_<submissionid>_<original>.ipynb",
    "moodle": "<Full Name>_<id>_assignsubmission_file_/<notebook>.ipynb",
}


def detect(paths: Sequence[Path]) -> str:
    """The layout rule `auto` picks for the whole batch (see the module's docstring)."""
    if any(_nbgrader(p) for p in paths):
        return "nbgrader"
    if any(_moodle(p) for p in paths):
        return "moodle"
    if paths and all(_canvas(p) for p in paths):
        return "canvas"
    folders: dict[str, set[Path]] = {}
    for p in paths:
        folders.setdefault(p.name, set()).add(p.absolute().parent)
    return "folder" if any(len(f) > 1 for f in folders.values()) else "file"


def _owners(paths: Sequence[Path], layout: str, metadata: Mapping[Path, str | None]) -> dict[Path, Owner]:
    """Each file's owner by the layout rule, the metadata's student first where there is one."""
    owners, misfits = {}, []
    for path in paths:
        found, student = _READERS[layout](path), metadata.get(path)
        if student:
            found = Owner(student, found.notebook, found.order) if found else Owner(student, path.name)
        if found is None:
            misfits.append(path)
        else:
            owners[path] = found
    if misfits:
        listed = "\n".join(f"  {p}" for p in misfits)
        raise IdentityError(
            f"student ids {DESCRIPTIONS[layout]}, but {len(misfits)} file(s) are not in that layout "
            f"({_LAYOUTS[layout]}); nothing was graded:\n{listed}\n"
            "Grade them apart, or choose the rule with --id-from."
        )
    return owners


def _settle(owners: dict[Path, Owner], rule: str) -> tuple[dict[Path, str], dict[Path, Path]]:
    """(each graded file's student, each superseded file's replacement); IdentityError on a collision."""
    groups: dict[tuple[str, str], list[Path]] = {}
    for path, owner in owners.items():
        groups.setdefault((owner.student, owner.notebook), []).append(path)
    collisions, superseded = [], {}
    for (student, notebook), group in groups.items():
        orders = [owners[p].order for p in group]
        if len(group) == 1:
            continue
        if None in orders or len(set(orders)) < len(orders):
            files = "\n".join(f"    {p}" for p in group)
            collisions.append(f"  student {student!r}, notebook {notebook}:\n{files}")
            continue
        latest = max(group, key=lambda p: owners[p].order)
        superseded.update({p: latest for p in group if p != latest})
    if collisions:
        raise IdentityError(
            f"student ids {DESCRIPTIONS[rule]} give one student the same notebook in more than one file, "
            "and nothing says which is theirs (two students? a copy?); nothing was graded:\n"
            + "\n".join(collisions)
            + "\nGive each student their own folder or file name, or choose the rule with --id-from."
        )
    return {p: o.student for p, o in owners.items() if p not in superseded}, superseded


def identify(
    paths: Sequence[str | Path], id_from: str = "auto", metadata: Mapping[Path, str | None] | None = None
) -> Identities:
    """Each file's student by the rule `id_from` (one of RULES, or "stem" for "file"), and the files that
    a later resubmission supersedes. metadata: each path's metadata.attn_course.student (or None), needed
    by the "metadata" rule only. Raises IdentityError (see `_owners`, `_settle`) before anything is graded.
    """
    rule = ALIASES.get(id_from, id_from)
    if rule not in RULES:
        raise ValueError(f"id_from must be one of {', '.join(RULES)} (or 'stem'), got {id_from!r}")
    if rule == "metadata" and metadata is None:
        raise ValueError("id_from='metadata' needs each notebook's metadata student (metadata=...)")
    paths = list(dict.fromkeys(map(Path, paths)))
    layout = detect(paths) if rule in ("auto", "metadata") else rule
    owners = _owners(paths, layout, metadata if rule == "metadata" else {})
    students, superseded = _settle(owners, "metadata" if rule == "metadata" else layout)
    fallback = layout if rule == "metadata" else None
    return Identities(rule if rule == "metadata" else layout, rule == "auto", students, superseded, fallback)
