# `make demo` and `make test` set everything up on a fresh machine (a virtual environment in .venv), and compile the
# engine with mypyc into build/native (used only while it matches the sources; without a C compiler all runs pure).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test native kube browser lint typecheck bench experiments clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test]'
	touch $(STAMP)

# Compiles the engine unless build/native's stamp already matches the sources (then it takes a fraction of a second).
# Under CI=true a failed compile fails the build (--strict), so CI never tests the pure sources in its place;
# elsewhere it is a one-line warning and everything runs pure.
NATIVE_FLAGS ?= $(if $(filter true,$(CI)),--strict)
native: $(STAMP)
	$(BIN)/python tools/build_native.py $(NATIVE_FLAGS)

demo: native
	$(BIN)/kubeflux demo

# The real control plane the tests run against (etcd, kube-apiserver, kube-scheduler, kube-controller-manager,
# kubectl, KWOK), Helm (which installs kubeflux's chart in the tests) and Kueue (which admits Jobs in front of serve),
# built from the Go modules pinned in tools/kube into build/kube: once, then only when a pin changes (seconds with Go's
# build cache; ~8 minutes cold on 2 cores, ~9 more for Helm and up to 17 more for Kueue, whose k8s.io libraries are
# their own). Without Go, one line, and those tests are skipped;
# under CI=true a failed build fails (--strict), so CI never passes without them.
KUBE_FLAGS ?= $(if $(filter true,$(CI)),--strict)
# The protobuf schema of the built-in types (descriptors compiled from k8s.io/api's .proto files, and Go's JSON rules
# read from its types) goes to build/kube/proto: `cluster serve` decodes and answers protobuf with it. The OpenAPI v3
# documents of the served groups (copied from k8s.io/kubernetes) go to build/kube/openapi: `cluster serve` serves them.
kube: $(STAMP)
	$(BIN)/python tools/kube/build.py $(KUBE_FLAGS)
	$(BIN)/python tools/kube/protobuf_gen.py $(KUBE_FLAGS) build/kube/proto
	$(BIN)/python tools/kube/openapi_gen.py $(KUBE_FLAGS) build/kube/openapi

# Headless Chromium, which the report's browser tests drive (tests/sim/test_report_browser.py): Debian's package,
# installed when /usr/bin/chromium is missing and we are root (as CI is, on a clean Debian machine). Elsewhere one line
# says so and those tests skip; under CI=true they fail instead, so CI never passes without looking at the page.
browser:
	@test -x /usr/bin/chromium || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null && \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; } || \
		echo "chromium: not installed (needs root and apt-get): the report's browser tests will be skipped"

# The suite runs on the engine users run (compiled when built); the tests that patch the engine's internals run on
# the pure engine in a second pass (tests/conftest.py), with Fluxion's corpora, which check the pure engine that
# machines without a C compiler run (marked both_engines). A module of tests against the real control plane runs on one
# worker (--dist loadgroup), which starts its control plane once.
test: native kube browser
	$(BIN)/ruff check src tests benchmarks tools experiments
	$(BIN)/ruff format --check src tests benchmarks tools experiments
	$(BIN)/mypy
	$(BIN)/python -m pytest -n 2 --dist loadgroup -q
	KUBEFLUX_PURE=1 $(BIN)/python -m pytest -n 2 -q -m "pure_engine or both_engines"

experiments: native
	$(BIN)/python -m experiments

bench: native
	$(BIN)/python benchmarks/match.py

clean:
	rm -rf $(VENV) build dist .pytest_cache .mypy_cache .ruff_cache src/*.egg-info
