# The two set-up commands of the README. Each installs the system packages it needs if missing.
#
#   make demo   build in release and run a small job on localhost
#   make test   build once in release and run every test (what CI runs, through .ci/run),
#               check formatting and clippy, then the loom model check of the slot ring, in its own target dir because
#               --cfg loom changes every crate's build

SHELL := /bin/bash
CARGO ?= cargo

.PHONY: demo test

demo:
	@scripts/install-deps
	$(CARGO) build --release --workspace --bins
	./target/release/gsmrun -np 2 --oversubscribe ./target/release/gsm-hello

test:
	@scripts/install-deps
	$(CARGO) build --release --workspace --all-targets
	$(CARGO) test --release --workspace --no-fail-fast
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --release --workspace --all-targets -- -D warnings
	RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom $(CARGO) test --release -p gossamer --lib wire::ring::loom_model
