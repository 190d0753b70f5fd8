# attn-course: `make lab` to learn, `make test` to check everything.
# Both create the course environment in .venv first if it is missing or older than pyproject.toml.

PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.attn-course-installed
# Extra arguments for JupyterLab, e.g. make lab LAB_ARGS="--no-browser --port=8899"
LAB_ARGS ?=
# Jupyter refuses to run as root unless told to; containers and CI often are root.
ROOT_FLAG := $(if $(filter 0,$(shell id -u)),--allow-root)
NOTEBOOKS := $(wildcard notebooks/*.ipynb) $(wildcard exercises/*.ipynb) $(wildcard solutions/*.ipynb)
# The course's models are small: one CPU thread per kernel runs them faster than several (thread hand-off
# costs more than the arithmetic) and keeps chapters within their time on a 2-core machine. Override with
# e.g. `make lab THREADS=4`.
THREADS ?= 1
NBVAL_FLAGS := --nbval-lax --nbval-current-env --nbval-cell-timeout=300 -p no:cacheprovider

.PHONY: env lab test lint unit unit-slow notebooks portability robustness bench gpu-check book slides figures clean

env: $(STAMP)

# d2l 1.0.3 hard-pins numpy 1.23.5, matplotlib 3.7.2, pandas 2.0.3, scipy 1.10.1 and jupyter 1.0.0,
# which do not build on current Pythons and would drag the stack back. So it is installed without
# its dependencies; pyproject.toml lists what `import d2l.torch` really needs.
$(STAMP): pyproject.toml Makefile
	@$(PYTHON) -c 'import sys; assert sys.version_info >= (3, 10), "attn-course needs Python >= 3.10"'
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --progress-bar off -e ".[dev]"
	$(BIN)/python -m pip install --quiet --progress-bar off --no-deps "d2l==1.0.3"
	$(BIN)/python -c "import attn_course, d2l.torch, torch; print('attn-course environment ready: torch', torch.__version__)"
	@touch $@

lab: env
	OMP_NUM_THREADS=$(THREADS) $(BIN)/jupyter lab --ServerApp.root_dir=. --LabApp.default_url=/lab/tree/notebooks $(ROOT_FLAG) $(LAB_ARGS)

lint: env
	$(BIN)/ruff check .

# The quick loop: every test but those marked slow (browser, servers, kernels, spawned training).
unit: env
	$(BIN)/python -m pytest -m "not slow" tests

# The tests marked slow, which `make unit` leaves out; `make test` runs both.
unit-slow: env
	$(BIN)/python -m pytest -m slow tests

# Chapters cache the models they train (attn_course.training.runtime.artifacts_dir: ~/.cache/attn-course for a
# learner). A test run trains its own, in a fresh folder, so it never passes on a model an older version of
# the course trained.
notebooks: env
	@artifacts=$$(mktemp -d) && trap 'rm -rf "$$artifacts"' EXIT && \
	OMP_NUM_THREADS=$(THREADS) ATTN_COURSE_ARTIFACTS=$$artifacts $(BIN)/python -m pytest $(NBVAL_FLAGS) $(NOTEBOOKS)

# Every notebook a second time, on another floating-point path: other torch CPU kernels, two threads, model
# seed 1, and a fresh artifacts folder so that nothing trained by the first pass is reused. A chapter claim
# that holds on one machine's kernels or one seed only turns this red, and so does a cell tagged
# `nbval-check-output` whose output depends on them.
OTHER_KERNEL ?= $(if $(filter default,$(ATEN_CPU_CAPABILITY)),avx2,default)
portability: env
	@artifacts=$$(mktemp -d) && trap 'rm -rf "$$artifacts"' EXIT && \
	echo "every notebook again: ATEN_CPU_CAPABILITY=$(OTHER_KERNEL), 2 threads, seed 1" && \
	ATEN_CPU_CAPABILITY=$(OTHER_KERNEL) OMP_NUM_THREADS=2 ATTN_COURSE_SEED=1 ATTN_COURSE_ARTIFACTS=$$artifacts \
	$(BIN)/python -m pytest $(NBVAL_FLAGS) $(NOTEBOOKS)

test: lint unit unit-slow notebooks portability

# Every training chapter over 5 seeds x torch CPU kernels (default, avx2, the machine's best) x 1 and 2
# threads: the spread of each claim, in attn_course/course/results/robustness.json and .md (hours:
# docs/maintainers.md says how many). `make robustness ARGS=--resume` keeps the runs already there and
# adds the missing ones.
ARGS ?=
robustness: env
	$(BIN)/python -m attn_course_tools.robustness --root . --out attn_course/course/results/robustness.json $(ARGS)

# Benchmarks: ratios against the textbook (d2l-style) pipeline, measured in one run, and grading a class of
# 300 students x 6 notebooks with 1 job and with every core (benchmarks/grading.py). Not part of `make test`.
bench: env
	$(BIN)/python -m benchmarks.run --out benchmarks/results

# On a machine with a CUDA GPU: every notebook under nbval, the chapters' claims over 5 seeds, then the
# benchmarks, on the GPU (TF32 off: attn_course.training.runtime.seed_everything).
gpu-check: env
	$(BIN)/python -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 'gpu-check: no CUDA device')"
	$(MAKE) --no-print-directory notebooks
	$(BIN)/python -m attn_course_tools.robustness --device cuda --threads 1 --workers 1 --root . \
		--out attn_course/course/results/robustness-cuda.json
	$(BIN)/python -m benchmarks.run --device cuda --out benchmarks/results

# The course to read and to teach from, built from the notebooks' stored outputs (nothing is executed):
# an HTML book (open build/book/index.html) and a reveal.js deck per chapter (build/slides/index.html). Both
# open offline; their scripts are fetched once from the npm registry, pinned in attn_course_tools/publish/vendor.py,
# and kept in build/npm.
book: env
	$(BIN)/python -m attn_course_tools.publish.book --root . --out build/book --npm-cache build/npm

slides: env
	$(BIN)/python -m attn_course_tools.publish.slides build --root . --out build/slides --npm-cache build/npm

# The course's diagrams (notebooks/figures/*.svg), redrawn from notebooks/figures/draw.py.
figures: env
	$(BIN)/python notebooks/figures/draw.py

clean:
	rm -rf $(VENV) build .pytest_cache .ruff_cache .hypothesis
