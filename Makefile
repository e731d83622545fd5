# tileopt's two commands: `make test` (set up .venv, build, run every test)
# and `make demo`. Everything else here is what those two need.

PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
BUILD_DIR := build/release
export PATH := $(CURDIR)/$(VENV)/bin:$(PATH)
export CMAKE_BUILD_PARALLEL_LEVEL ?= $(shell nproc)
# For the tests: glibc fills freed memory with this byte, so a Python object that outlives
# the MLIR object it wraps fails every run instead of one run in many. Each test file runs on
# one worker (--dist loadfile): a file's session-cached kernels compile once, not on every
# worker (545 s -> 514 s on 2 cores).
PYTEST := MALLOC_PERTURB_=165 $(PY) -m pytest -q -n auto --dist loadfile

.PHONY: venv build test lit pytest lint demo docs clean fuzz fuzz-models bench-graphs \
  bench-matmul

$(VENV)/.installed: requirements.txt
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -r requirements.txt
	touch $@

venv: $(VENV)/.installed

# Configures and builds into $(BUILD_DIR) (incrementally after the first
# time) and installs the package into .venv in editable mode.
build: venv
	$(PY) -m pip install --quiet --disable-pip-version-check \
	  --no-build-isolation --no-deps -e .

lit: build
	$(VENV)/bin/lit -sv $(BUILD_DIR)/test

pytest: build
	$(PYTEST)

lint: venv
	$(PY) -m ruff check .

test: build
	@start=$$(date +%s); lit=0; pytest=0; lint=0; \
	$(VENV)/bin/lit -sv $(BUILD_DIR)/test || lit=$$?; \
	$(PYTEST) || pytest=$$?; \
	$(PY) -m ruff check . || lint=$$?; \
	verdict() { if [ $$1 -eq 0 ]; then echo PASS; else echo FAIL; fi; }; \
	echo; echo "==================== tileopt test summary ===================="; \
	echo "  lit (IR tests)     : $$(verdict $$lit)"; \
	echo "  pytest (Python)    : $$(verdict $$pytest)"; \
	echo "  ruff (lint)        : $$(verdict $$lint)"; \
	echo "  time               : $$(( $$(date +%s) - start )) s (tests only)"; \
	[ $$lit -eq 0 ] && [ $$pytest -eq 0 ] && [ $$lint -eq 0 ] && echo "  RESULT: PASS" \
	  || { echo "  RESULT: FAIL"; exit 1; }

demo: build
	$(PY) examples/demo.py

# Per model: aten ops, kernels, emulated bytes against the minimum, compile time by stage.
bench-graphs: build
	$(PY) benchmarks/graphs.py

# TFLOP/s of tileopt's matmul beside Triton's and cuBLAS's; says "skipped" without a GPU.
bench-matmul: build
	$(PY) benchmarks/matmul_tflops.py

# A long run of the tile-program fuzzer (test/python/fuzz): fails on any crash, hang, raw
# exception or wrong answer (reproducers go to $(FUZZ_OUT)); then as many mutants of compiled
# PTX through the emulator, which fails on any raw exception.
FUZZ_SEED ?= 1
FUZZ_COUNT ?= 3000
FUZZ_JOBS ?= $(shell nproc)
FUZZ_TIMEOUT ?= 120
FUZZ_OUT ?= $(or $(TMPDIR),/tmp)/tileopt-fuzz-$(FUZZ_SEED)
FUZZ_AVOID ?=
fuzz: build
	$(PY) test/python/fuzz/fuzzrun.py --seed $(FUZZ_SEED) --count $(FUZZ_COUNT) \
	  --jobs $(FUZZ_JOBS) --timeout $(FUZZ_TIMEOUT) --out $(FUZZ_OUT) \
	  $(if $(FUZZ_AVOID),--avoid $(FUZZ_AVOID))
	$(PY) test/python/fuzz/ptxmutate.py --seed $(FUZZ_SEED) --count $(FUZZ_COUNT)

# A long run of random PyTorch programs and attentions through tileopt.compile against eager,
# and of programs with in-place ops and views through torch.compile.
fuzz-models: build
	$(PY) test/python/fuzz/modelfuzz.py --seed $(FUZZ_SEED) --count $(FUZZ_COUNT)
	$(PY) test/python/fuzz/attentionfuzz.py --seed $(FUZZ_SEED) --count $(FUZZ_COUNT)
	$(PY) test/python/fuzz/inplacefuzz.py --seed $(FUZZ_SEED) --count $(FUZZ_COUNT)

# The dialect reference, generated from ODS into docs/generated/.
docs: build
	cmake --build $(BUILD_DIR) --target tileopt-doc
	mkdir -p docs/generated
	cp $(BUILD_DIR)/docs/TileDialect.md docs/generated/

clean:
	rm -rf build docs/generated
