# windgate: the README's two commands (`make demo`, `make test`) and the developer targets.
# Every target does its own set-up on a fresh machine: a .venv, a release build of the wheel, the extras.

SHELL := /bin/bash
.DEFAULT_GOAL := help
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip
WHEEL_DIR := target/wheels
EXTRAS ?= spark,cli,test,bench
export PYTHONUNBUFFERED := 1

.PHONY: help setup demo test test-rust test-loom test-python bench bench-rust bench-peers lint fmt clean

help:
	@echo "make demo   - set up, then run the PySpark demo job on generated smart-grid data"
	@echo "make test   - set up, then cargo test (workspace) and pytest (including Spark on local[2])"
	@echo "make bench  - criterion benches and the peer comparison (JSON, Markdown, PNG in bench-results/)"
	@echo "make lint   - cargo fmt --check, clippy -D warnings, the layer check, ruff check, ruff format --check"

$(VENV)/.created:
	$(PYTHON) -m venv $(VENV)
	$(PIP) install --quiet --upgrade pip "maturin>=1.9.4,<2"
	touch $@

# Release build of the wheel, installed with its extras. Cargo rebuilds only what changed.
setup: $(VENV)/.created
	rm -rf $(WHEEL_DIR)
	$(VENV)/bin/maturin build --release --out $(WHEEL_DIR)
	$(PIP) install --quiet --force-reinstall --no-deps $(WHEEL_DIR)/windgate-*.whl
	$(PIP) install --quiet "$$(ls $(WHEEL_DIR)/windgate-*.whl)[$(EXTRAS)]"

demo: setup
	$(VENV)/bin/windgate demo

test: setup test-rust test-loom test-python

# The `test-opt` profile (Cargo.toml): release optimisation without LTO, so the test binaries link quickly.
test-rust:
	cargo test --workspace --profile test-opt

# loom models of the lock-free structures (ScaleGate, reorder buffer, W-Hive): the core rebuilt with --cfg loom in its own target dir (so the normal build
# cache survives), every interleaving up to loom's preemption bound.
test-loom:
	RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom cargo test -p windgate-core --profile test-opt --test loom_scale_gate --test loom_reorder --test loom_w_hive

# pytest exits 5 when it collects nothing: that must fail here, since a run without tests proves nothing.
test-python:
	$(PY) -m pytest -q tests

bench: setup bench-rust bench-peers

bench-rust:
	cargo bench -p windgate-benches -- --noplot

bench-peers:
	$(PY) -m benches.peers all --out bench-results

lint: $(VENV)/.created
	$(PIP) install --quiet "ruff>=0.6"
	cargo fmt --all -- --check
	cargo clippy --workspace --all-targets -- -D warnings
	python3 tools/check_layers.py
	$(VENV)/bin/ruff check python tests benches
	$(VENV)/bin/ruff format --check python tests benches

fmt: $(VENV)/.created
	cargo fmt --all
	$(VENV)/bin/ruff format python tests benches
	$(VENV)/bin/ruff check --fix python tests benches

clean:
	rm -rf $(VENV) target bench-results out
