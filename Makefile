# The two set-up commands of the README. Each installs the system packages it needs if missing.
#
#   make demo   build in release and run a small Graph500 job (SCALE 16, 2 ranks) on localhost
#   make test   build once in release and run every test (what CI runs, through .ci/run),
#               check formatting, clippy (also with the `rdma` feature) and the house rules of ARCHITECTURE.md
#               (check-layout, the crate tools/layout, over every member of the workspace),
#               then the loom model checks of the slot ring and the inbox, in its own target dir because
#               --cfg loom changes every crate's build, the build of the `verbs` fabric (feature
#               `rdma`: compile-checked, no RDMA device here), and the `ofi` fabric (an opt-in
#               feature, see libgsm/Cargo.toml) in target/ofi, built there with `rdma` too so that
#               the verbs fabric's unit tests and its no-device start-up run once; last, it fails if the
#               tests left a file in /dev/shm that was not there before them (scripts/shm-leftovers)

SHELL := /bin/bash
CARGO ?= cargo

.PHONY: demo test

demo:
	@scripts/install-deps
	$(CARGO) build --release --workspace --bins
	./target/release/gsmrun -np 2 -t 1 --oversubscribe ./target/release/graph500 16 --engine gsm

test:
	@scripts/install-deps
	$(CARGO) build --release --workspace --all-targets
	@scripts/shm-leftovers snapshot target/shm-before-test
	$(CARGO) test --release --workspace --no-fail-fast
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --release --workspace --all-targets -- -D warnings
	$(CARGO) clippy --release -p gossamer --features rdma,ofi --all-targets -- -D warnings
	$(CARGO) clippy --release -p gsm-tests --features ofi --all-targets -- -D warnings
	$(CARGO) clippy --release -p gsm-bench --features ofi --all-targets -- -D warnings
	$(CARGO) run --release -q -p gsm-layout --bin check-layout
	RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom $(CARGO) test --release -p gossamer --lib -- wire::ring::loom_model wire::inbox::loom_model
	$(CARGO) build --release -p gossamer --features rdma
	CARGO_TARGET_DIR=target/ofi $(CARGO) build --release -p gsmrun --bins
	CARGO_TARGET_DIR=target/ofi $(CARGO) build --release -p gossamer --features ofi,rdma --examples
	CARGO_TARGET_DIR=target/ofi $(CARGO) test --release -p gossamer --features ofi,rdma --lib -- fabric:: sys::verbs
	CARGO_TARGET_DIR=target/ofi $(CARGO) test --release -p gsm-tests --features ofi,rdma --test ofi --test verbs
	CARGO_TARGET_DIR=target/ofi $(CARGO) test --release -p gsm-filecopy --features ofi,gossamer/rdma --test ranks over_the_ofi_fabric
	scripts/shm-leftovers check target/shm-before-test
