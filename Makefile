# ssmtrade: the two commands of the README, and a few conveniences.
#   make run    build, then run the main job
#   make test   build, then run the whole test suite, then the same suite
#               again under ASan + UBSan (`make sanitize`); what CI runs
BUILD ?= build
JOBS ?= $(shell nproc)

.PHONY: all deps build run test clean format sanitize fuzz

all: build

deps:
	@bash scripts/install-deps.sh

build: deps
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release >/dev/null
	@cmake --build $(BUILD) -j $(JOBS)

run: build
	@bash scripts/run-main.sh $(BUILD)/ssmtrade

# Both suites run even when the first fails; the target fails if either does.
test: build
	@rc=0; (cd $(BUILD) && ctest --output-on-failure -j $(JOBS)) || rc=1; \
	$(MAKE) --no-print-directory sanitize || rc=1; exit $$rc

# ASan (leaks included) + UBSan, the first report fatal, on the optimised
# CPU build (-O2 -g; the CUDA backend left out: GPU tests skip on CI anyway).
sanitize: deps
	@cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Release -DST_SANITIZE=ON -DST_CUDA=OFF >/dev/null
	@cmake --build build-asan -j $(JOBS)
	@cd build-asan && ctest --output-on-failure -j $(JOBS)

# libFuzzer harnesses of the input readers (fuzz/README.md); FUZZ_SECONDS each (60).
fuzz: ; @bash scripts/fuzz.sh

format:
	@clang-format -i $$(git ls-files '*.c' '*.h' '*.cu')

clean:
	rm -rf $(BUILD) build-asan
