# One-command setup on a fresh machine. A GPU user overrides the torch pin, e.g.
#   make install TORCH_SPEC="torch==2.13.0 --index-url https://download.pytorch.org/whl/cu128"
PYTHON ?= python3
VENV ?= .venv
TORCH_SPEC ?= torch==2.13.0
BERTKIT_DATA_DIR ?= $(abspath ../shared/data)
export BERTKIT_DATA_DIR
BIN := $(VENV)/bin
DEMO_DIR ?= runs/demo-sst2

.PHONY: install test test-fast demo bench bench-quick clean

$(BIN)/bertkit: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q $(TORCH_SPEC)
	$(BIN)/pip install -q -e ".[offline,test,plots]"
	touch $@

install: $(BIN)/bertkit

## The whole test suite: unit, end-to-end CLI on a tiny BERT, and learning tests on MiniLM + real data.
test: install
	$(BIN)/python -m pytest -q

## Everything but the learning tests (seconds).
test-fast: install
	$(BIN)/python -m pytest -q -m "not learning"

## Fine-tune the bundled MiniLM on 4,000 SST-2 rows (a few minutes on 2 CPU cores), evaluate, predict.
demo: install
	$(BIN)/bertkit finetune cls --data sst2 --model minilm --max-train-samples 4000 --epochs 1 --lr 5e-5 \
		--output $(DEMO_DIR) --overwrite
	$(BIN)/bertkit eval $(DEMO_DIR) --split dev
	$(BIN)/bertkit predict $(DEMO_DIR) --input examples/sentences.txt

bench: install
	$(BIN)/python -m benchmarks run

bench-quick: install
	$(BIN)/python -m benchmarks run --quick

clean:
	rm -rf $(VENV) runs .pytest_cache
