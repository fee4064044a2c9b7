# The two set-up commands of the README. Each installs the system packages it needs if missing.
#
#   make demo   build in release and run a small job on localhost
#   make test   build once in release and run every test (what CI runs, through .ci/run)

SHELL := /bin/bash
CARGO ?= cargo
export OMPI_ALLOW_RUN_AS_ROOT ?= 1
export OMPI_ALLOW_RUN_AS_ROOT_CONFIRM ?= 1

.PHONY: demo test

demo:
	@scripts/install-deps
	$(CARGO) build --release --workspace --bins
	./target/release/gsmrun -np 2 --oversubscribe ./target/release/gsm-hello

test:
	@scripts/install-deps
	$(CARGO) build --release --workspace --all-targets
	$(CARGO) test --release --workspace --no-fail-fast
