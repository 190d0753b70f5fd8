"""The course's checkout (a clone of its repository), which the maintainer's tools work on.

The book, the decks, the robustness study and the generated pages read files that are not part of the
installed package (the notebooks, the book's templates, README), so each takes the checkout's path
(`--root`, by default the current directory) instead of guessing it from where the package lies.
"""

from __future__ import annotations

import argparse
from pathlib import Path

ROOT_HELP = "the course's checkout, the clone of its repository (default: the current directory)"


def add_root_option(parser: argparse.ArgumentParser) -> None:
    """Give a tool's command line the `--root` option: the checkout it works on."""
    parser.add_argument("--root", type=Path, default=Path("."), help=ROOT_HELP)


def checkout(root: Path, *folders: str) -> Path:
    """`root`, resolved, if it holds each of `folders` (e.g. "notebooks", "book"); ValueError if not."""
    root = Path(root)
    missing = [f"{name}/" for name in folders if not (root / name).is_dir()]
    if missing:
        where = str(root) if root.is_absolute() else f"{root} ({root.resolve()})"
        raise ValueError(f"{where} is not the course's checkout: it holds no {' and no '.join(missing)}")
    return root.resolve()


def parsed_checkout(parser: argparse.ArgumentParser, root: Path, *folders: str) -> Path:
    """`checkout(root, *folders)` for a command line: a wrong `--root` stops it with a usage error."""
    try:
        return checkout(root, *folders)
    except ValueError as error:
        parser.error(f"--root: {error}")
