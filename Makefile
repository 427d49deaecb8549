# Set-up and everyday commands. Each target creates .venv on first use.
PY      ?= python3
VENV    := .venv
BIN     := $(VENV)/bin
STAMP   := $(VENV)/.installed

.PHONY: demo test lint format bench clean

# The package's bytecode is compiled once here: where the environment keeps Python from
# writing it (PYTHONDONTWRITEBYTECODE), every CLI run and tuning worker would otherwise compile
# the package from source (about 0.1 s each).
$(STAMP): pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev,torch,models,ray,iree]'
	$(BIN)/python -m compileall -q mlirtune
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/mlirtune bench matmul M=256 N=256 K=256 --baseline numpy
	$(BIN)/mlirtune tune matmul M=256 N=256 K=256 --budget 30 --strategy model --db $(VENV)/demo-tuning.db --update-spec $(VENV)/demo-specs.mlir
	$(BIN)/mlirtune specs list $(VENV)/demo-specs.mlir

# One worker per core, a test file's tests on one of them in order (a page's README
# examples use the files earlier ones wrote); the slowest listed.
test: $(STAMP)
	$(BIN)/pytest -n auto --dist loadfile --durations=20

lint: $(STAMP)
	$(BIN)/ruff check mlirtune tests benchmarks scripts
	$(BIN)/ruff format --check mlirtune tests benchmarks scripts README.md
	$(BIN)/pytest -q tests/test_architecture.py

format: $(STAMP)
	$(BIN)/ruff format mlirtune tests benchmarks scripts README.md
	$(BIN)/ruff check --fix mlirtune tests benchmarks scripts

bench: $(STAMP)
	$(BIN)/python benchmarks/matmul_vs_numpy.py

clean:
	rm -rf $(VENV) build *.egg-info
