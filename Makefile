# devlet — user-facing entry points:
#   make          build build/devlet (and the mock NVML library)
#   make check    every test: unit (plain and ASan+UBSan), integration, fuzz smoke
#   make demo     run the main job on the embedded demo setup, as a transcript
#   make bench    print the benchmark table
#   make bench-scale  N devlet nodes against a fake watch-cache API server and
#                 a real kube-apiserver: requests per node, restart, threads,
#                 memory (N=, WINDOW=, SERVERS=fake,real, QUICK=1; minutes)
#   make fuzz     build the libFuzzer targets (clang); fuzz-long runs each for
#                 FUZZ_LONG_TIME seconds
#   make cluster  a one-node Kubernetes cluster on loopback (real kubelet, API
#                 server, scheduler, containerd) with devlet installed from its
#                 image on mock hardware; prints KUBECONFIG=... last.
#                 `make cluster DRA=1`: the GPUs served through DRA instead.
#                 Kubernetes is the newest release pinned in
#                 tests/cluster/versions.env; K8S=1.35 (here, or with
#                 `make check`/`make e2e`) runs the oldest minor still
#                 supported.  `make cluster-down` removes it.  `make peers`
#                 only builds (or finds in the cache) the pinned peers.
#   make soak     long-running proofs (kubelet restarts, a million Allocates, a
#                 reload storm, the attacks), bounded in time, one line each
#   make ARCH=arm64        cross-build for linux/arm64 into build-arm64 (Debian's
#                          aarch64-linux-gnu-gcc and arm64 -dev packages:
#                          `scripts/deps.sh arm64`); `make check-arm64` runs its
#                          unit tests and integration subset under qemu-user
# Variables: BUILD (output dir), CC, SAN=1 (ASan+UBSan build), ARCH (amd64 or
# arm64; default: the build host's).

PYTHON ?= /usr/bin/python3
HOST_ARCH := $(shell dpkg --print-architecture 2>/dev/null || uname -m)
ARCH ?= $(HOST_ARCH)
ifneq ($(ARCH),$(HOST_ARCH))
# a cross build: Debian's triplet toolchain, pkg-config reading the multiarch
# .pc files, and the results run through qemu-user (no binfmt registration
# assumed; -L names the cross libc for the loader, multiarch libs are found in
# their host paths)
ifeq ($(ARCH),arm64)
TRIPLET := aarch64-linux-gnu
QEMU ?= qemu-aarch64-static
else
$(error ARCH=$(ARCH): devlet cross-builds for arm64 only)
endif
BUILD ?= build-$(ARCH)
ifeq ($(origin CC),default)
CC := $(TRIPLET)-gcc
endif
ifeq ($(origin AR),default)
AR := $(TRIPLET)-ar
endif
PKG_CONFIG ?= $(TRIPLET)-pkg-config
# prefix for running a target binary on this host.  The loader must come
# from the same glibc as the libc it loads: with the multiarch libc6:arm64
# (which the arm64 -dev packages bring) that is /lib/ld-linux-aarch64.so.1,
# so -L / (the cross toolchain's older loader in /usr/$(TRIPLET)/lib with
# multiarch's newer libc spins forever in the first pthread_create)
QEMU_LD_PREFIX ?= $(if $(wildcard /lib/ld-linux-aarch64.so.1),/,/usr/$(TRIPLET))
EXEC_PREFIX ?= $(QEMU) -L $(QEMU_LD_PREFIX)
endif
BUILD ?= build
CC ?= gcc
PKG_CONFIG ?= pkg-config
EXEC_PREFIX ?=
PKGS := libuv libnghttp2 libprotobuf-c yaml-0.1 jansson

VERSION := $(shell git describe --always --dirty 2>/dev/null || echo 0.1.0)

WARN := -Wall -Wextra -Werror -Wno-unused-parameter -Wshadow -Wformat=2 -Wformat-security \
	-Wstrict-prototypes -Wmissing-prototypes -Wold-style-definition -Wpointer-arith \
	-Wundef -Wvla -Wwrite-strings -Wimplicit-fallthrough -Wmissing-declarations \
	-Wnull-dereference -Wcast-qual
OPT ?= -O2
CFLAGS_BASE := -std=gnu17 -g $(OPT) -D_GNU_SOURCE -fno-strict-aliasing -fstack-protector-strong \
	-DDEVLET_VERSION=\"$(VERSION)\" -Isrc -isystem $(BUILD)/gen $(shell $(PKG_CONFIG) --cflags $(PKGS) 2>/dev/null)
ifeq ($(SAN),1)
CFLAGS_BASE += -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all
LDFLAGS += -fsanitize=address,undefined
endif
CFLAGS ?=
CFLAGS_ALL := $(CFLAGS_BASE) $(WARN) $(CFLAGS)
LIBS := $(shell $(PKG_CONFIG) --libs $(PKGS) 2>/dev/null) -ldl -lpthread -lm

PROTOS := $(wildcard proto/*.proto)
GEN_C := $(patsubst proto/%.proto,$(BUILD)/gen/%.pb-c.c,$(PROTOS))
GEN_H := $(GEN_C:.c=.h)
GEN_O := $(GEN_C:.c=.o)

LIB_SRC := $(filter-out src/main.c,$(wildcard src/*.c src/*/*.c src/*/*/*.c))
LIB_OBJ := $(patsubst src/%.c,$(BUILD)/obj/%.o,$(LIB_SRC))
LIB := $(BUILD)/libdevlet.a

UNIT_SRC := $(wildcard tests/unit/test-*.c)
UNIT_BIN := $(patsubst tests/unit/%.c,$(BUILD)/tests/%,$(UNIT_SRC))

MOCK_NVML_SRC := $(wildcard tests/mock-nvml/*.c)
MOCK_NVML := $(if $(MOCK_NVML_SRC),$(BUILD)/mock-nvml/libnvidia-ml.so.1)

PY_GEN := $(patsubst proto/%.proto,$(BUILD)/py/%_pb2.py,$(PROTOS))

# small C programs the integration tests drive (e.g. a gRPC test server)
TOOL_SRC := $(wildcard tests/tools/*.c)
TOOL_BIN := $(patsubst tests/tools/%.c,$(BUILD)/tools/%,$(TOOL_SRC))

# C benchmark programs `make bench` runs before the Python ones (bench.py,
# then every bench/bench-*.py)
BENCH_SRC := $(wildcard bench/bench-*.c)
BENCH_BIN := $(patsubst bench/%.c,$(BUILD)/bench/%,$(BENCH_SRC))

.PHONY: cluster cluster-down peers e2e
.PHONY: check-arm64 integration-emulated
.PHONY: all check unit integration asan fuzz fuzz-smoke fuzz-long fuzz-merge soak demo bench bench-scale clean deps \
	deps-build py
.DEFAULT_GOAL := all
# the Kubernetes release of `make cluster`, `make e2e` and `make check`
# (scripts/peers.sh, scripts/cluster.py): empty for the newest
ifdef K8S
export K8S
endif
.SECONDARY:

# LD_PRELOAD libraries the integration tests inject failures with
PRELOAD_SRC := $(wildcard tests/preload/*.c)
PRELOAD_LIB := $(patsubst tests/preload/%.c,$(BUILD)/preload/%.so,$(PRELOAD_SRC))

all: $(BUILD)/devlet $(MOCK_NVML) $(TOOL_BIN) $(PRELOAD_LIB)

# protoc-c sees the messages only: devlet dispatches gRPC methods by path, and
# protoc-c's service stubs would name a struct member after the C keyword
# `register` (the Registration service's Register method).
$(BUILD)/gen/%.pb-c.c $(BUILD)/gen/%.pb-c.h: proto/%.proto
	@mkdir -p $(BUILD)/gen/msg
	awk '/^service /{skip=1} !skip{print} skip&&/^}/{skip=0}' $< > $(BUILD)/gen/msg/$*.proto
	protoc-c --c_out=$(BUILD)/gen -I$(BUILD)/gen/msg $(BUILD)/gen/msg/$*.proto

$(BUILD)/gen/%.pb-c.o: $(BUILD)/gen/%.pb-c.c
	$(CC) $(CFLAGS_BASE) -Wall -Werror -c -o $@ $<

# every object may include any generated header
$(BUILD)/obj/%.o: src/%.c $(GEN_H)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_ALL) -MMD -MP -c -o $@ $<

$(LIB): $(LIB_OBJ) $(GEN_O)
	@rm -f $@
	$(AR) rcs $@ $^

$(BUILD)/devlet: $(BUILD)/obj/main.o $(LIB)
	$(CC) $(LDFLAGS) -o $@ $^ $(LIBS)

$(BUILD)/tests/%: tests/unit/%.c $(LIB)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_ALL) -Itests/unit -MMD -MP -o $@ $< $(LIB) $(LDFLAGS) $(LIBS) -lcmocka

$(BUILD)/tools/%: tests/tools/%.c $(LIB)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_ALL) -MMD -MP -o $@ $< $(LIB) $(LDFLAGS) $(LIBS)

$(BUILD)/bench/bench-%: bench/bench-%.c $(LIB)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_ALL) -Itests/unit -MMD -MP -o $@ $< $(LIB) $(LDFLAGS) $(LIBS)

$(BUILD)/mock-nvml/libnvidia-ml.so.1: $(MOCK_NVML_SRC) $(wildcard tests/mock-nvml/*.h) src/devices/nvidia/nvml.h
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_BASE) $(WARN) -fPIC -shared -fvisibility=hidden -Wl,-soname,libnvidia-ml.so.1 \
		-o $@ $(MOCK_NVML_SRC) $(shell $(PKG_CONFIG) --libs yaml-0.1) -lpthread

$(BUILD)/preload/%.so: tests/preload/%.c
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_BASE) $(WARN) -fPIC -shared -o $@ $< -ldl

$(BUILD)/py/%_pb2.py: proto/%.proto
	@mkdir -p $(@D)
	protoc --python_out=$(BUILD)/py -Iproto $<

py: $(PY_GEN)

deps:
	@scripts/deps.sh

deps-build:
	@scripts/deps.sh build

unit: $(UNIT_BIN) $(MOCK_NVML)
	@set -e; for t in $(UNIT_BIN); do echo "== $$t"; $(EXEC_PREFIX) $$t; done

asan:
	$(MAKE) BUILD=build-asan SAN=1 OPT=-O1 unit all

# the simulated-kubelet suite, then the end-to-end suite on a real cluster
# (tests/e2e brings one up, or uses the one `make cluster` left running)
integration: all py peers
	DEVLET_BUILD=$(abspath $(BUILD)) $(PYTHON) -m pytest -q -p no:cacheprovider tests/integration tests/e2e

e2e: all py peers
	DEVLET_BUILD=$(abspath $(BUILD)) $(PYTHON) -m pytest -q -p no:cacheprovider tests/e2e

peers:
	@scripts/peers.sh >/dev/null

cluster: deps all peers
	DEVLET_BUILD=$(abspath $(BUILD)) DRA=$(DRA) $(PYTHON) scripts/cluster.py up

cluster-down:
	$(PYTHON) scripts/cluster.py down

FUZZ_SRC := $(wildcard fuzz/fuzz-*.c)
FUZZ_BIN := $(patsubst fuzz/%.c,build-fuzz/%,$(FUZZ_SRC))
FUZZ_TIME ?= 5
FUZZ_LONG_TIME ?= 300
# What a target may take (libFuzzer also caps one malloc at it): a parser that
# lets its input make a tree 50x its bytes fails the run.  ASan's quarantine
# of freed memory is kept to 16 MB (its default, 256 MB, would be most of
# the limit): the targets then peak at 60-90 MB.
FUZZ_RSS_MB ?= 256

fuzz:
	$(MAKE) BUILD=build-fuzz CC=clang OPT=-O1 CFLAGS="-fsanitize=fuzzer-no-link,address,undefined" \
		LDFLAGS="-fsanitize=address,undefined" fuzz-bins

fuzz-bins: $(FUZZ_BIN)

build-fuzz/fuzz-%: fuzz/fuzz-%.c $(LIB)
	$(CC) $(CFLAGS_ALL) -fsanitize=fuzzer -o $@ $< $(LIB) $(LIBS)

# Each target for SECONDS on its corpus in the repo (fuzz/corpus/NAME, read
# only; what it finds goes to build-fuzz/corpus-NAME), one line of figures
# per target; fails if any target found a crash, leak or timeout.
FUZZ_RUN = fail=0; for f in $(FUZZ_BIN); do n=$$(basename $$f); \
	mkdir -p fuzz/corpus/$$n build-fuzz/corpus-$$n; \
	ASAN_OPTIONS="quarantine_size_mb=16$${ASAN_OPTIONS:+:$$ASAN_OPTIONS}" \
	$$f -max_total_time=$$secs -timeout=10 -rss_limit_mb=$(FUZZ_RSS_MB) -print_final_stats=1 -artifact_prefix=build-fuzz/ \
		build-fuzz/corpus-$$n fuzz/corpus/$$n > build-fuzz/$$n.log 2>&1 || { fail=1; tail -n 30 build-fuzz/$$n.log; }; \
	printf '%-22s %10s executions in %ss, corpus %s inputs, peak RSS %s MB\n' $$n \
		"$$(sed -n 's/^stat::number_of_executed_units: *//p' build-fuzz/$$n.log)" $$secs \
		"$$(ls build-fuzz/corpus-$$n fuzz/corpus/$$n | grep -cv -e '^$$' -e ':$$')" \
		"$$(sed -n 's/^stat::peak_rss_mb: *//p' build-fuzz/$$n.log)"; done; exit $$fail

fuzz-smoke: fuzz
	@secs=$(FUZZ_TIME); $(FUZZ_RUN)

# every target for FUZZ_LONG_TIME seconds (default 300); `make fuzz-merge`
# then folds what they found into the corpus kept in the repo
fuzz-long: fuzz
	@secs=$(FUZZ_LONG_TIME); $(FUZZ_RUN)

fuzz-merge: fuzz
	@set -e; for f in $(FUZZ_BIN); do n=$$(basename $$f); mkdir -p build-fuzz/corpus-$$n; \
		$$f -merge=1 fuzz/corpus/$$n build-fuzz/corpus-$$n 2>&1 | tail -n 1; done

# linux/arm64 under qemu-user, on any build host (docs/INSTALL.md, "arm64"):
# the unit tests plain and with ASan+UBSan (LeakSanitizer cannot run under
# qemu-user), then the integration suite's device-plugin and metrics files
# against build-arm64/devlet, the arm64 mock NVML and the fake AMD trees
EMULATED_INTEGRATION ?= test_plugin.py test_nvidia.py test_nvidia_health.py test_nvidia_strategies.py \
	test_amd.py test_metrics.py test_amd_metrics.py test_dcgm_fields.py
check-arm64:
	@scripts/deps.sh arm64
	$(MAKE) ARCH=arm64 all unit
	@echo "check-arm64: LeakSanitizer skipped under qemu-user (it stops the world with ptrace, which qemu-user does not emulate); ASan and UBSan run"
	ASAN_OPTIONS=detect_leaks=0 $(MAKE) ARCH=arm64 BUILD=build-arm64-asan SAN=1 OPT=-O1 unit
	$(MAKE) ARCH=arm64 integration-emulated

# the integration files above against $(BUILD), each binary run through
# $(EXEC_PREFIX) (tests/integration/devlet_harness.py: DEVLET_EXEC_PREFIX)
integration-emulated: all py
	DEVLET_BUILD=$(abspath $(BUILD)) DEVLET_EXEC_PREFIX="$(EXEC_PREFIX)" $(PYTHON) -m pytest -q -p no:cacheprovider \
		$(addprefix tests/integration/,$(EMULATED_INTEGRATION))

# integration runs last, so the run closes with pytest's summary line
check: deps
	$(MAKE) all unit
	$(MAKE) asan
	$(MAKE) check-arm64
	$(MAKE) fuzz-smoke
	$(MAKE) integration

# bounded in time (a few minutes); SOAK_ARGS e.g. "--only http,idle --restarts 100"
soak: deps
	$(MAKE) all py
	DEVLET_BUILD=$(abspath $(BUILD)) $(PYTHON) bench/soak.py $(SOAK_ARGS)

demo: deps
	$(MAKE) all py
	DEVLET_BUILD=$(abspath $(BUILD)) $(PYTHON) scripts/demo.py

bench: deps $(BENCH_BIN)
	@set -e; for b in $(BENCH_BIN); do $$b; done
	$(MAKE) all py
	$(if $(wildcard bench/bench.py),DEVLET_BUILD=$(abspath $(BUILD)) $(PYTHON) bench/bench.py)
	@set -e; for b in $(wildcard bench/bench-*.py); do DEVLET_BUILD=$(abspath $(BUILD)) $(PYTHON) $$b; done

# not part of `make bench` (it takes minutes) nor of `make check`; figures
# reported, never asserted (bench/scale.py)
BENCH_SCALE_ARGS = $(if $(N),--nodes $(N)) $(if $(WINDOW),--window $(WINDOW)) \
	$(if $(SERVERS),--servers $(SERVERS)) $(if $(QUICK),--quick) $(if $(AFTER),--after $(AFTER)) \
	$(if $(filter 0,$(RESTART)),--no-restart) $(if $(KEEP),--keep)
bench-scale: deps
	$(MAKE) all py
	DEVLET_BUILD=$(abspath $(BUILD)) $(PYTHON) bench/scale.py $(BENCH_SCALE_ARGS)

clean:
	rm -rf build build-asan build-fuzz build-arm64 build-arm64-asan

-include $(LIB_OBJ:.o=.d) $(BUILD)/obj/main.d $(UNIT_BIN:=.d) $(TOOL_BIN:=.d) $(BENCH_BIN:=.d)

# Container image, built offline with buildah FROM scratch (scripts/build-image.sh);
# image-test runs it with podman (tests/integration/test_image.py).
.PHONY: image image-test
image: $(BUILD)/devlet
	BUILD=$(BUILD) VERSION=$(VERSION) scripts/build-image.sh

image-test: all
	DEVLET_BUILD=$(abspath $(BUILD)) $(PYTHON) -m pytest -q -p no:cacheprovider tests/integration/test_image.py
