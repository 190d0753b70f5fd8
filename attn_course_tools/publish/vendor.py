"""The scripts and fonts the book and the decks load, fetched from the npm registry at pinned versions.

MathJax, RequireJS, the ipywidgets embedder and reveal.js are fetched once with `npm pack` (no dependencies,
no install scripts), checked against the sha512 digest pinned here, kept in a cache folder the caller names
(`make book` and `make slides`: build/npm/ in the checkout) and unpacked into the build. So a built page
loads everything from the build itself and opens offline, from a file or from any static server.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import shutil
import subprocess
import tarfile
from dataclasses import dataclass
from pathlib import Path

#: Where the command lines keep the tarballs, under the checkout (their `--npm-cache` says otherwise).
NPM_CACHE = Path("build") / "npm"
WIDGET_DIST = Path("@jupyter-widgets/html-manager/dist")
FONT_SUFFIXES = {".woff", ".woff2", ".ttf", ".eot", ".svg"}


@dataclass(frozen=True)
class NpmPackage:
    """One package from the npm registry: its pinned version and digest, and the folders to take from it."""

    name: str
    version: str
    integrity: str  # the registry's "dist.integrity": sha512, base64
    copy: dict[str, str]  # folder or file in the package -> where it goes in the vendor folder

    @property
    def tarball(self) -> str:
        return f"{self.name.lstrip('@').replace('/', '-')}-{self.version}.tgz"


MATHJAX = NpmPackage(
    "mathjax",
    "3.2.2",
    "sha512-Bt+SSVU8eBG27zChVewOicYs7Xsdt40qm4+UpHyX7k0/O9NliPc+x77k1/FEsPsjKPZGJvtRZM1vO+geW0OhGw==",
    {"es5": "mathjax"},
)
REQUIREJS = NpmPackage(
    "requirejs",
    "2.3.8",
    "sha512-7/cTSLOdYkNBNJcDMWf+luFvMriVm7eYxp4BcFCsAX0wF421Vyce5SXP17c+Jd5otXKGNehIonFlyQXSowL6Mw==",
    {"require.js": "require.js"},
)
# The embedder of ipywidgets 8 (ipywidgets._version.__html_manager_version__ is ^1.0.1), under the
# folder name its stylesheets use for their fonts (see widget_fonts_beside).
HTML_MANAGER = NpmPackage(
    "@jupyter-widgets/html-manager",
    "1.0.7",
    "sha512-2xGwS7vVd2RGlKMiSqj1vYv2X59V73ygefUodhzy9Bho0mswWT/yo3Cg7MaYOqwozQjNo5k3rbJ3cETXWUwJ/g==",
    {"dist": "@jupyter-widgets/html-manager/dist"},
)
REVEAL = NpmPackage(
    "reveal.js",
    "4.6.0",
    "sha512-QC80rYsZldAe95bW9VImucIPTjfsKhI0jRQrIOXU4P92ZyXb/dfw9L3EE96bN6i7UmeUl1qBieH4UNTr25erYw==",
    {"dist": "reveal.js/dist", "plugin": "reveal.js/plugin"},
)
BOOK = (MATHJAX, REQUIREJS, HTML_MANAGER)  # what the book's pages load
SLIDES = (*BOOK, REVEAL)  # what the decks load
VENDOR = SLIDES  # every pinned package


def add_cache_option(parser: argparse.ArgumentParser) -> None:
    """Give a command line the `--npm-cache` option: where the tarballs are kept (default: NPM_CACHE)."""
    help_text = f"where the fetched scripts are kept (default: {NPM_CACHE} under --root)"
    parser.add_argument("--npm-cache", type=Path, help=help_text)


def sha512_integrity(path: Path) -> str:
    return "sha512-" + base64.b64encode(hashlib.sha512(path.read_bytes()).digest()).decode()


def fetch(package: NpmPackage, cache: Path) -> Path:
    """The package's tarball in `cache`, fetched with `npm pack` if missing; refused if its digest differs."""
    cache.mkdir(parents=True, exist_ok=True)
    tarball = cache / package.tarball
    if not tarball.exists():
        spec = f"{package.name}@{package.version}"
        if shutil.which("npm") is None:
            raise RuntimeError(f"npm is needed once to fetch {spec} (apt-get install npm)")
        subprocess.run(
            ["npm", "pack", spec, "--pack-destination", str(cache), "--silent"],
            check=True,
            stdout=subprocess.DEVNULL,
        )
    actual = sha512_integrity(tarball)
    if actual != package.integrity:
        tarball.unlink()
        raise RuntimeError(f"{tarball.name}: digest {actual}, expected {package.integrity} (deleted)")
    return tarball


def vendor(dest: Path, packages: tuple[NpmPackage, ...] = VENDOR, *, cache: Path) -> Path:
    """Unpack what the pages need of each package into `dest` (source maps left out); returns `dest`.

    The tarballs come from `cache`, fetched there first if missing (`fetch`).
    """
    for package in packages:
        with tarfile.open(fetch(package, cache)) as archive:
            for member in archive.getmembers():
                target = _vendor_path(member.name, package.copy)
                if target is None or not member.isfile() or member.name.endswith(".map"):
                    continue
                path = dest / target
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_bytes(archive.extractfile(member).read())
    return dest


def _vendor_path(member: str, copy_map: dict[str, str]) -> str | None:
    inner = member.split("/", 1)[1] if "/" in member else member  # npm tarballs wrap everything in package/
    for source, target in copy_map.items():
        if inner == source:
            return target
        if inner.startswith(source + "/"):
            return target + inner[len(source) :]
    return None


def widget_fonts_beside(folder: Path, assets: Path) -> None:
    """Copy the widgets embedder's fonts from `assets` to where a page in `folder` looks for them.

    Its stylesheets name them relative to the page, not to the script, under two folders.
    """
    fonts = [path for path in (assets / WIDGET_DIST).iterdir() if path.suffix in FONT_SUFFIXES]
    for target in (folder / WIDGET_DIST, folder / WIDGET_DIST.parts[0]):
        target.mkdir(parents=True, exist_ok=True)
        for font in fonts:
            if not (target / font.name).exists():
                shutil.copyfile(font, target / font.name)
