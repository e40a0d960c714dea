# Berth: `make run` serves the dashboard and API; `make test` runs every test.
# Both install what is missing first (see .ci/install.sh). One build serves every stage.

SHELL := /bin/bash
# Reuse a cargo target dir kept outside the checkout, so clones share one build cache.
export CARGO_TARGET_DIR ?= $(HOME)/.cache/berth-target
TARGET := $(CARGO_TARGET_DIR)
SITE := $(TARGET)/site
BIN := $(TARGET)/debug/berth
WASM := $(TARGET)/wasm32-unknown-unknown/debug/berth_frontend.wasm
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
## files are built into the binary; BERTH_SITE_ROOT=DIR serves others instead)
run: deps-run build
	$(BIN) serve --addr $(BERTH_ADDR) --database-url $(BERTH_DATABASE_URL) $(BERTH_ACCESS) $(BERTH_WORKDIR_ROOTS)

## test: unit + integration (SQLite, PostgreSQL, a real Ray head, a real Slurm) + schemathesis against the OpenAPI
## document + browser tests in headless Chromium
test: deps-test build
	@start=$$(date +%s); \
	export BERTH_PG_PORT=$${BERTH_PG_PORT:-55432} BERTH_PG_DATA=$${BERTH_PG_DATA:-/tmp/berth-pg/data}; \
	export BERTH_TEST_PG_URL=$$(.ci/pg.sh start); \
	BERTH_TEST_RAY_URL=$$(.ci/ray.sh start) || exit 1; export BERTH_TEST_RAY_URL; \
	BERTH_TEST_SLURM=$$(.ci/slurm.sh start) || exit 1; export BERTH_TEST_SLURM; \
	trap '.ci/ray.sh stop; .ci/slurm.sh stop' EXIT; \
	cargo test --workspace --exclude berth-frontend && \
	BERTH_BIN=$(BIN) .ci/schemathesis.sh && \
	$(MAKE) --no-print-directory e2e && \
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

ECHARTS := frontend/node_modules/echarts/dist/echarts.min.js
# npm writes this marker on install; reinstall when the lock file is newer.
frontend/node_modules/.package-lock.json: frontend/package-lock.json
	cd frontend && npm ci --no-audit --no-fund --loglevel=error

## site: the dashboard's wasm, js and css under $(SITE)/pkg (and ECharts, from npm)
site: frontend/node_modules/.package-lock.json
	cargo build -p berth-frontend --lib --target wasm32-unknown-unknown
	@mkdir -p $(SITE)/pkg
	wasm-bindgen --target web --out-dir $(SITE)/pkg --out-name berth $(WASM)
	cp style/main.css $(SITE)/pkg/berth.css
	cp $(ECHARTS) $(SITE)/pkg/echarts.min.js
	gzip -6 -kf $(SITE)/pkg/berth_bg.wasm $(SITE)/pkg/berth.js $(SITE)/pkg/berth.css $(SITE)/pkg/echarts.min.js

## release: one self-contained `berth` (the optimized dashboard embedded), in $(TARGET)/server-release;
## reports the wasm's and the binary's sizes
release: deps-run
	cargo build -p berth-frontend --lib --target wasm32-unknown-unknown --release
	@mkdir -p $(TARGET)/release-site/pkg
	wasm-bindgen --target web --out-dir $(TARGET)/release-site/pkg --out-name berth $(TARGET)/wasm32-unknown-unknown/release/berth_frontend.wasm
	cp style/main.css $(TARGET)/release-site/pkg/berth.css
	cp $(ECHARTS) $(TARGET)/release-site/pkg/echarts.min.js
	@w=$(TARGET)/release-site/pkg/berth_bg.wasm; echo "wasm: $$(stat -c %s $$w) B raw, $$(gzip -9c $$w | wc -c) B gzip (wasm-bindgen output)"; \
	opt=$$(command -v wasm-opt || ls $(HOME)/.cache/berth-tools/node_modules/.bin/wasm-opt 2>/dev/null || true); \
	ver=$$($${opt:-false} --version 2>/dev/null | grep -o 'version [0-9]*' | grep -o '[0-9]*' || echo 0); \
	if [ "$$ver" -ge 116 ]; then \
	  $$opt -Oz --enable-bulk-memory --enable-nontrapping-float-to-int $$w -o $$w && \
	  echo "wasm: $$(stat -c %s $$w) B raw, $$(gzip -9c $$w | wc -c) B gzip (after wasm-opt $$ver)"; \
	else echo "wasm-opt >= 116 not found (npm install --prefix ~/.cache/berth-tools binaryen@132), size not optimized"; fi
	gzip -9 -kf $(TARGET)/release-site/pkg/berth_bg.wasm $(TARGET)/release-site/pkg/berth.js $(TARGET)/release-site/pkg/berth.css $(TARGET)/release-site/pkg/echarts.min.js
	BERTH_EMBED_SITE_DIR=$(TARGET)/release-site cargo build -p berth-server --bin berth --profile server-release
	@echo "berth: $$(stat -c %s $(TARGET)/server-release/berth) B, dashboard included: $(TARGET)/server-release/berth"
