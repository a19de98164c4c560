# reprise — the README's two commands:
#   make run    install what is missing, build, run the main job
#   make test   install what is missing, build, run the test suite
# Both install missing Debian packages when run as root. A thin layer over
# CMake (as neovim's Makefile is): everything real lives in CMakeLists.txt.

BUILD     ?= build
TYPE      ?= RelWithDebInfo
JOBS      ?= $(shell nproc 2>/dev/null || echo 2)
CMAKE_ARGS ?=

# Debian packages the build, the tests and the tools use.
DEB_PKGS = build-essential cmake pkg-config git libcriterion-dev \
           libjemalloc-dev libopenblas-dev libcjson-dev mpich libmpich-dev \
           graphviz gnuplot-nox clang libclang-rt-14-dev clang-format \
           libjs-d3 chromium-headless-shell fortunes

.PHONY: all deps configure build run test test-asan test-tsan fuzz clean \
        format-check layering

all: build

deps:
	@if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	  missing=""; \
	  for p in $(DEB_PKGS); do \
	    dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; \
	  done; \
	  if [ -n "$$missing" ]; then \
	    echo "installing:$$missing"; \
	    apt-get update -q && \
	    DEBIAN_FRONTEND=noninteractive apt-get install -y -q $$missing; \
	  fi; \
	fi

configure: deps
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=$(TYPE) -DREPRISE_WERROR=ON $(CMAKE_ARGS)

build: configure
	cmake --build $(BUILD) -j $(JOBS)

# `make run` trains the GPT (docs/gpt.md) on the default corpus (fortune
# cookies from the Debian package fortunes): with a GPU, nanoGPT's
# character-level config; on the CPU, a config that finishes in well
# under a minute on 2 cores and ends below the bigram baseline.
GPT_GPU = --layers 6 --heads 6 --width 384 --context 256 --batch 64 \
          --iters 5000 --lr 1e-3 --warmup 100 --log-every 250
GPT_CPU = --layers 2 --heads 4 --width 64 --context 64 --batch 16 \
          --iters 1200 --lr 2e-3 --log-every 200
run: build
	@if nvidia-smi -L >/dev/null 2>&1; then \
	  echo "./$(BUILD)/reprise train --model gpt $(GPT_GPU)"; \
	  ./$(BUILD)/reprise train --model gpt $(GPT_GPU); \
	else \
	  echo "./$(BUILD)/reprise train --model gpt $(GPT_CPU)"; \
	  ./$(BUILD)/reprise train --model gpt $(GPT_CPU); \
	fi

test: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

# ASan+UBSan, debug (guard bytes on): the whole Criterion suite.
test-asan:
	$(MAKE) test BUILD=build-asan TYPE=Debug \
	  CMAKE_ARGS="-DREPRISE_SANITIZER=address"

# TSan, debug: the unit suite, then the stress program test/tsan/stress.c.
# Criterion cannot start under ThreadSanitizer (Snaipe/Criterion#274), so
# TSan builds run the same test files through the runner in
# test/tsan/crit_shim.h. MPI is off: its UCX memory hooks (libucm) crash
# under TSan. Any report fails the test it happens in (halt_on_error).
# Then the library and the command line built optimized under TSan with
# warnings as errors, as the default build type builds them: GCC warns of
# what TSan cannot model (a release fence) only when it optimizes.
TSAN_RUN = TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1"
test-tsan: deps
	cmake -S . -B build-tsan -DCMAKE_BUILD_TYPE=Debug -DREPRISE_WERROR=ON \
	  -DREPRISE_SANITIZER=thread -DREPRISE_TESTS=ON -DREPRISE_BENCH=OFF \
	  -DREPRISE_TSAN_STRESS=ON -DREPRISE_MPI=OFF
	cmake --build build-tsan -j $(JOBS)
	cd build-tsan && $(TSAN_RUN) ctest -L unit --output-on-failure -j $(JOBS)
	$(TSAN_RUN) ./build-tsan/tsan_stress
	cmake -S . -B build-tsan-rel -DCMAKE_BUILD_TYPE=RelWithDebInfo \
	  -DREPRISE_WERROR=ON -DREPRISE_SANITIZER=thread -DREPRISE_TESTS=OFF \
	  -DREPRISE_BENCH=OFF -DREPRISE_MPI=OFF
	cmake --build build-tsan-rel -j $(JOBS)

fuzz: deps
	.ci/fuzz.sh

clean:
	rm -rf build build-asan build-tsan build-tsan-rel build-fuzz

# Formatting: every C/CUDA source as .clang-format (clang-format 14) says.
format-check: deps
	git ls-files '*.c' '*.h' '*.cu' '*.cuh' | xargs clang-format --dry-run -Werror

# Layering: no #include runs up the folders' order (docs/architecture.md;
# .ci/layering prints file:line and the rule for each breach).
layering:
	sh .ci/layering
