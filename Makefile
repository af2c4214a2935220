# redis-ratelimit: `make run` starts a redis-server with the module; `make test` passes the tests.
# Both install what is missing first (Debian packages when run as root).

PORT ?= 6380
MODULE := target/release/libredis_ratelimit.so
# The redis-server the tests start (the harness reads REDIS_SERVER).
REDIS_SERVER ?= redis-server
export REDIS_SERVER

.PHONY: all deps build test bench run clean

all: build

# redis-server/redis-cli to run and test against; libclang for bindgen in the redis-module crate.
deps:
	@missing=""; \
	command -v redis-server >/dev/null 2>&1 || missing="$$missing redis-server"; \
	command -v redis-cli >/dev/null 2>&1 || missing="$$missing redis-tools"; \
	ls /usr/lib/llvm-*/lib/libclang.so /usr/lib/*/libclang.so >/dev/null 2>&1 || missing="$$missing libclang-dev"; \
	command -v cargo >/dev/null 2>&1 || { echo "cargo not found: install Rust (https://rustup.rs)"; exit 1; }; \
	if [ -n "$$missing" ]; then \
		if [ "$$(id -u)" = 0 ]; then \
			echo "installing:$$missing"; \
			apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; \
		else \
			echo "missing:$$missing -- run 'sudo apt-get install$$missing' or 'sudo make deps'"; exit 1; \
		fi; \
	fi

build: deps
	cargo build --release --locked

# The tests, then a short benchmark run so that `make bench` cannot rot (its output goes under target/).
test: build
	cargo test --release --locked
	cargo bench --locked --bench ratelimit -- --quick

# The full benchmark (a few minutes): table on stdout and in bench/results/latest.md, chart in
# bench/results/ratios.svg.
bench: build
	cargo bench --locked --bench ratelimit

run: build
	redis-server redis.conf.example --port $(PORT)

clean:
	cargo clean
