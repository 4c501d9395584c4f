# One-command setup on a fresh machine. A GPU user overrides the torch pin, e.g.
#   make install TORCH_SPEC="torch==2.13.0 --index-url https://download.pytorch.org/whl/cu128"
PYTHON ?= python3
VENV ?= .venv
TORCH_SPEC ?= torch==2.13.0
BERTKIT_DATA_DIR ?= $(abspath ../shared/data)
export BERTKIT_DATA_DIR
BIN := $(VENV)/bin
DEMO_DIR ?= runs/demo-sst2
# Training rows for the demo; CI uses fewer (.ci/run) to keep the check short.
DEMO_ROWS ?= 4000
# The command the demo runs; e.g. BERTKIT="python -m bertkit" to try a working tree without installing it.
BERTKIT ?= $(BIN)/bertkit

.PHONY: install lint format docs test test-learning test-fast demo bench bench-quick reproduce clean

$(BIN)/bertkit: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q $(TORCH_SPEC)
	$(BIN)/pip install -q -e ".[offline,test,extras]"
	touch $@

install: $(BIN)/bertkit

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

## Fine-tune the bundled MiniLM on DEMO_ROWS SST-2 rows (4,000: a few minutes on 2 CPU cores), evaluate, predict.
## runs/ is not in git: bertkit creates the output's parent directories.
demo: install
	$(BERTKIT) finetune cls --data sst2 --model minilm --max-train-samples $(DEMO_ROWS) --epochs 1 --lr 5e-5 \
		--output $(DEMO_DIR) --overwrite
	$(BERTKIT) eval $(DEMO_DIR) --split dev
	$(BERTKIT) predict $(DEMO_DIR) --input examples/sentences.txt

## The full side-by-side suite (about 50 minutes on 2 cores; run it on a quiet machine).
bench: install
	$(BIN)/python -m benchmarks run --repeats 3

bench-quick: install
	$(BIN)/python -m benchmarks run --quick

## bertkit vs the HF Trainer (bf16) at full budget, 3 seeds on the small sets (about 70 minutes on 2 cores).
reproduce: install
	$(BIN)/python -m benchmarks.reproduce

clean:
	rm -rf $(VENV) runs .pytest_cache
