"""Sphinx configuration of the course's HTML book (`make book`).

The book is built from the notebooks' stored outputs by myst-nb (nothing is executed), with every script
and font it needs served from the book itself: MathJax, RequireJS and the ipywidgets embedder are fetched
once from the npm registry at pinned versions (attn_course_tools.publish.vendor.VENDOR), so the built book
opens offline, from a file or any static server. Build it with `make book` (attn_course_tools.publish.book).
"""

import os
from pathlib import Path

from attn_course_tools.publish.book import read_for_book

project = "attn-course"
author = "the attn-course authors"
copyright = "attn-course"

extensions = ["myst_nb"]

# The sources are the repository itself: the landing page here, README, the chapters and the exercises, and
# the guides README links to (for instructors and maintainers, and the architecture).
root_doc = "book/index"
include_patterns = [
    "book/*.md",
    "README.md",
    "notebooks/*.ipynb",
    "exercises/*.ipynb",
    "docs/*.md",
    "ARCHITECTURE.md",
]
exclude_patterns = ["build", ".venv", "**/.ipynb_checkpoints"]

# Stored outputs only: a chapter that trains a model is not re-run to be read.
nb_execution_mode = "off"
nb_merge_streams = True
myst_enable_extensions = ["dollarmath", "amsmath", "colon_fence"]
# A display equation written inside a paragraph (`...the query:\n$$f(x) = ...$$\nOur data...`, as JupyterLab
# renders it) is display math; without this, `$$` inside a paragraph reads as a `$` and inline math.
myst_dmath_double_inline = True
myst_heading_anchors = 3
suppress_warnings = ["myst.header"]

# attn_course_tools.publish.book unpacks the vendored assets into a folder and names it here; a build started
# by hand finds them where `make book` left them, in the build/ folder of this file's checkout.
BUILD = Path(__file__).resolve().parent.parent / "build"
VENDOR = Path(os.environ.get("ATTN_COURSE_VENDOR", BUILD / "book-vendor"))
html_static_path = [str(VENDOR), "static"]
mathjax_path = "mathjax/tex-chtml.js"
# Loaded after the page's MathJax configuration and before MathJax itself (see the file).
html_js_files = [("mathjax-startup.js", {"priority": 510})]
# A long code line scrolls inside its block, a table fits its column, display math fits its column
# (mathjax-startup.js scales a wide one).
html_css_files = ["course.css"]
# The widgets' embedder, on the pages whose notebook stored widget state. A widget module it does not bundle
# would be fetched from the CDN named here; the course's widgets are all ipywidgets' own controls, which it
# bundles, so none is (the browser test fails on any request that leaves the book). It loads its fonts from
# "@jupyter-widgets/html-manager/dist/" beside the page: attn_course_tools.publish.book copies them there.
nb_ipywidgets_js = {
    "require.js": {},
    "@jupyter-widgets/html-manager/dist/embed-amd.js": {"data-jupyter-widgets-cdn": "_static/"},
}

# An output that carries both a widget and its own static HTML (a predict-then-see question: the widget for a
# live kernel, a <details> with the answer for a page) shows the HTML, which works without a kernel; widgets
# without HTML (the explorer, the playground) still show their stored view. JupyterLab keeps the widget first.
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
nb_mime_priority_overrides = [
    (builder, WIDGET_VIEW, 35) for builder in ("html", "dirhtml", "singlehtml", "epub")
]  # myst-nb's defaults: widget 10, text/html 30, image/svg+xml 40, text/plain 100

html_theme = "sphinx_book_theme"
html_title = "attn-course: attention for sequence-to-sequence models"
html_favicon = "favicon.svg"
html_context = {"default_mode": "light"}
html_theme_options = {
    "home_page_in_toc": True,
    "show_toc_level": 2,
    "use_download_button": True,
}
html_last_updated_fmt = None


def setup(app):
    # Each notebook is read as attn_course_tools.publish.book.reading_view shows it: no nbval tags, and a
    # chapter's set-up cell (imports, seeding) with its output only.
    app.connect("source-read", read_for_book)
