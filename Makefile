# Berth: `make run` serves the dashboard and API; `make test` runs every test.
# Both install what is missing first (see .ci/install.sh). One build serves every stage.

SHELL := /bin/bash
# Reuse a cargo target dir kept outside the checkout, so clones share one build cache.
export CARGO_TARGET_DIR ?= $(HOME)/.cache/berth-target
TARGET := $(CARGO_TARGET_DIR)
SITE := $(TARGET)/site
BIN := $(TARGET)/debug/berth
# The dashboard's wasm is always the optimized (release) build: it is what users load.
WASM := $(TARGET)/wasm32-unknown-unknown/release/berth_frontend.wasm
# wasm-bindgen's output and the stylesheet, before frontend/pack.mjs hashes and compresses them.
BINDGEN := $(TARGET)/wasm-bindgen
WASM_OPT := frontend/node_modules/.bin/wasm-opt
export PATH := $(HOME)/.cargo/bin:$(PATH)

BERTH_ADDR ?= 127.0.0.1:3000
BERTH_DATABASE_URL ?= sqlite://data/berth.db
# Anonymous local mode (no sign-in) on loopback; `make run BERTH_ACCESS=` to require tokens.
BERTH_ACCESS ?= --anonymous
# Where jobs may run: the defaults (home, temp dir) plus the checkout, since `berth jobs
# submit` runs a job in the directory it was typed in.
BERTH_WORKDIR_ROOTS ?= --workdir-root $(HOME) --workdir-root $${TMPDIR:-/tmp} --workdir-root $(CURDIR)

.PHONY: run test build site server install deps-run deps-test unit e2e bench release clean-site

## run: install what is missing, build, serve on http://$(BERTH_ADDR) with SQLite (the dashboard's
## files are built into the binary; BERTH_SITE_ROOT=DIR serves others instead). The first run
## takes longer: the dashboard's wasm is an optimized release build
run: deps-run build
	$(BIN) serve --addr $(BERTH_ADDR) --database-url $(BERTH_DATABASE_URL) $(BERTH_ACCESS) $(BERTH_WORKDIR_ROOTS)

## test: unit + integration (SQLite, PostgreSQL, a real Ray head, a real Slurm) + schemathesis against the OpenAPI
## document + browser tests in headless Chromium. The tests' temporary files go to one directory per run
## (.ci/scratch.sh), removed when every stage passed
test: deps-test build
	@start=$$(date +%s); \
	export BERTH_PG_PORT=$${BERTH_PG_PORT:-55432} BERTH_PG_DATA=$${BERTH_PG_DATA:-/tmp/berth-pg/data}; \
	BERTH_TEST_PG_URL=$$(.ci/pg.sh start) || exit 1; export BERTH_TEST_PG_URL; \
	BERTH_TEST_RAY_URL=$$(.ci/ray.sh start) || exit 1; export BERTH_TEST_RAY_URL; \
	BERTH_TEST_SLURM=$$(.ci/slurm.sh start) || exit 1; export BERTH_TEST_SLURM; \
	trap '.ci/ray.sh stop; .ci/slurm.sh stop' EXIT; \
	scratch=$$(.ci/scratch.sh $$$$) || exit 1; \
	{ TMPDIR=$$scratch cargo test --workspace --exclude berth-frontend && \
	  TMPDIR=$$scratch BERTH_BIN=$(BIN) .ci/schemathesis.sh && \
	  TMPDIR=$$scratch $(MAKE) --no-print-directory e2e; } || \
	  { echo "make test: a stage failed; the tests' files (server logs, data dirs) are in $$scratch"; exit 1; }; \
	rm -rf $$scratch; \
	echo "make test: all stages passed in $$(( $$(date +%s) - start )) s"

e2e:
	cd end2end && BERTH_BIN=$(BIN) BERTH_SITE_ROOT=$(SITE) node --test --test-concurrency=1 tests/

## bench: store latency (SQLite and PostgreSQL), the engine, and the runtime end to end (local, Ray, Slurm),
## as printed tables
bench:
	@.ci/install.sh bench
	BERTH_BENCH_PG_URL=$$(.ci/pg.sh start) BERTH_BENCH_RAY_URL=$$(.ci/ray.sh start) BERTH_BENCH_SLURM=$$(.ci/slurm.sh start) \
	  cargo bench -p berth-server --no-fail-fast; \
	  rc=$$?; .ci/ray.sh stop; .ci/slurm.sh stop; exit $$rc

deps-run:
	@.ci/install.sh run

deps-test:
	@.ci/install.sh test

# The site first: the server embeds it (server/build.rs reads $(SITE)).
build: site server

server:
	cargo build -p berth-server --bin berth

## install: build the `berth` binary and copy it to ~/.cargo/bin (on PATH wherever rustup is
## installed); run it again after pulling to update the copy
install: build
	@mkdir -p $(HOME)/.cargo/bin
	install -m 0755 $(BIN) $(HOME)/.cargo/bin/berth
	@echo "installed $(HOME)/.cargo/bin/berth"

# npm writes this marker on install; reinstall when the lock file is newer.
frontend/node_modules/.package-lock.json: frontend/package-lock.json
	cd frontend && npm ci --no-audit --no-fund --loglevel=error

## site: the dashboard's files under $(SITE)/pkg: the optimized wasm (a release build, then
## wasm-opt), its JS glue, the CSS, ECharts and the YAML editor (CodeMirror, bundled with
## esbuild), each under a content-hashed name with gzip and brotli copies; prints their sizes
site: frontend/node_modules/.package-lock.json
	cargo build -p berth-frontend --lib --target wasm32-unknown-unknown --release
	@$(MAKE) --no-print-directory $(SITE)/pkg/manifest.json
	@node frontend/pack.mjs --report $(SITE)

# Repacked only when an input changed: wasm-opt takes a while. wasm-split-cli cuts the wasm
# into the shell (berth.wasm, which wasm-bindgen then wraps) and a chunk per page group plus
# the chunks the groups share, all loaded through __wasm_split.js; wasm-opt shrinks each.
$(SITE)/pkg/manifest.json: $(WASM) style/main.css frontend/pack.mjs frontend/js/yaml-editor.js frontend/package-lock.json
	@rm -rf $(BINDGEN) && mkdir -p $(BINDGEN)/split
	wasm-split-cli --target web --out-name berth $(WASM) $(BINDGEN)/split
	wasm-bindgen --target web --keep-lld-exports --no-demangle --out-dir $(BINDGEN) --out-name berth $(BINDGEN)/split/berth.wasm
	@rm $(BINDGEN)/split/berth.wasm && mv $(BINDGEN)/split/* $(BINDGEN)/ && rmdir $(BINDGEN)/split
	@echo "wasm-bindgen and wasm-split output: $$(cat $(BINDGEN)/*.wasm | wc -c) B in $$(ls $(BINDGEN)/*.wasm | wc -l) files; wasm-opt -Oz each:"
	ls $(BINDGEN)/*.wasm | xargs -P $$(nproc) -I{} $(WASM_OPT) -Oz --enable-bulk-memory --enable-nontrapping-float-to-int {} -o {}
	cp style/main.css $(BINDGEN)/berth.css
	node frontend/pack.mjs $(BINDGEN) $(SITE)

## release: one self-contained `berth` (the dashboard embedded), in $(TARGET)/server-release;
## reports the wasm's and the binary's sizes
release: deps-run site
	cargo build -p berth-server --bin berth --profile server-release
	@echo "berth: $$(stat -c %s $(TARGET)/server-release/berth) B, dashboard included: $(TARGET)/server-release/berth"
