# ngx_omniroute — build, test, demo and benchmark entry points.
#
#   make deps    install the Debian packages to build and run (idempotent)
#   make test-deps  ... and those the tests, benchmarks and fuzzing need
#                (with the OpenAI and Anthropic npm SDKs of t/sdk: sdk-deps)
#   make         build build/nginx/ngx_http_omniroute_module.so
#   make test-build  build/nginx-test/ngx_http_omniroute_module.so: the same
#                with test-only handlers (omniroute_redis_debug)
#   make test    unit tests (plain and ASan/UBSan) + integration tests (prove)
#   make demo    start nginx in the foreground on 127.0.0.1:8080 (demo config)
#   make bench   wrk: module vs plain proxy_pass (real bodies, rewrite, SSE,
#                pool size, memory), failover, Redis mirror, the core
#                scanners alone (bench/core.sh); BENCH= picks
#                scripts, knobs in bench/run.sh, e.g.
#                make bench BENCH=run CASES="tiny pool" DURATION=10
#   make bench-gate  instructions per request against bench/budgets
#                (bench/gate.sh): fails over a budget by more than 10 %
#   make fuzz    libFuzzer targets under fuzz/ (ASan, UBSan), FUZZ_SECONDS
#                each; make fuzz-plain: the same without sanitizers
#   make deb     build/deb/libnginx-mod-http-omniroute_*.deb (pkg/debian,
#                debhelper and dh_nginx); make deb-test: installed with apt
#                in a clean Debian 12 root, nginx -t and a fallback there
#   make compat  build, unit tests and an integration subset in Debian 13
#                and unstable roots (nginx 1.26, 1.30); docs/packaging.md

SHELL      := /bin/bash
TOP        := $(CURDIR)
BUILD      := $(TOP)/build
NGX_SRC    := /usr/share/nginx/src
NGX_BUILD  := $(BUILD)/nginx
MODULE_SO  := $(NGX_BUILD)/ngx_http_omniroute_module.so
# the test build: configured with OMNIROUTE_TEST=1 (see config)
NGX_TBUILD := $(BUILD)/nginx-test
TEST_SO    := $(NGX_TBUILD)/ngx_http_omniroute_module.so

DEB_PKGS   := nginx nginx-dev libhiredis-dev libjansson-dev libssl-dev \
              libpcre2-dev zlib1g-dev gcc make perl openssl curl
# libclang-rt-dev: the clang runtime (LeakSanitizer, libFuzzer) of the
# release's default clang, whatever its version (14 on Debian 12)
TEST_PKGS  := redis-server redis-sentinel wrk clang libclang-rt-dev \
              prometheus chromium valgrind python3

CORE_SRCS  := $(wildcard src/core/*.c)
CORE_HDRS  := $(wildcard src/core/*.h)
NGX_SRCS   := ngx_omniroute_module.c $(wildcard src/ngx/*.c src/ngx/*/*.c)
NGX_HDRS   := $(wildcard src/ngx/*.h src/ngx/*/*.h)
UNIT_SRCS  := $(wildcard t/unit/test_*.c)
UNIT_BINS  := $(patsubst t/unit/%.c,$(BUILD)/unit/%,$(UNIT_SRCS))
ASAN_BINS  := $(patsubst t/unit/%.c,$(BUILD)/unit-asan/%,$(UNIT_SRCS))
FUZZ_SRCS  := $(wildcard fuzz/fuzz_*.c)
FUZZ_BINS  := $(patsubst fuzz/%.c,$(BUILD)/fuzz/%,$(FUZZ_SRCS))
FUZZ_PLAIN := $(patsubst fuzz/%.c,$(BUILD)/fuzz-plain/%,$(FUZZ_SRCS))

CORE_CFLAGS := -std=gnu99 -g -O1 -Wall -Wextra -Werror -Wno-unused-parameter \
               -Isrc/core -It/unit
ASAN_FLAGS  := -fsanitize=address,undefined -fno-omit-frame-pointer \
               -fno-sanitize-recover=all
FUZZ_SECONDS ?= 60
BENCH       ?= run failover cluster core
NPROC      := $(shell nproc 2>/dev/null || echo 2)
PROVE_ARGS  ?=

NPM_DIR    := $(BUILD)/npm

.PHONY: all build test-build deps test-deps sdk-deps unit unit-bins test itest demo \
        bench bench-gate fuzz fuzz-plain clean deb deb-test compat

all: build

build: $(MODULE_SO)

test-build: $(TEST_SO)

deps:
	@$(MAKE) -s install-pkgs PKGS="$(DEB_PKGS)"

test-deps:
	@$(MAKE) -s install-pkgs PKGS="$(DEB_PKGS) $(TEST_PKGS)"
	@$(MAKE) -s sdk-deps

# the real SDKs t/stream_sdk.t drives (versions pinned in t/sdk)
sdk-deps: $(NPM_DIR)/.installed

$(NPM_DIR)/.installed: t/sdk/package.json t/sdk/package-lock.json
	@command -v npm >/dev/null 2>&1 \
	    || $(MAKE) -s install-pkgs PKGS="nodejs npm"
	mkdir -p $(NPM_DIR)
	cp t/sdk/package.json t/sdk/package-lock.json $(NPM_DIR)/
	cd $(NPM_DIR) && npm ci --no-audit --no-fund --loglevel=error
	touch $@

# apt-get's failure is make's failure (a missing package must not turn
# into skipped tests later); NO_APT_UPDATE=1 skips the list update
install-pkgs:
	@missing=""; for p in $(PKGS); do \
	    dpkg-query -W -f='$${Status}' $$p 2>/dev/null \
	        | grep -q 'install ok installed' || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
	    echo "installing:$$missing"; \
	    if [ "$$(id -u)" = 0 ]; then SUDO=""; else SUDO=sudo; fi; \
	    if [ -z "$(NO_APT_UPDATE)" ]; then \
	        $$SUDO apt-get update -qq --error-on=any \
	            || { echo "make: apt-get update failed" >&2; exit 1; }; \
	    fi; \
	    DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq \
	        --no-install-recommends $$missing \
	        || { echo "make: apt-get install failed:$$missing" >&2; \
	             exit 1; }; \
	    $$SUDO systemctl disable --now nginx redis-server prometheus \
	        >/dev/null 2>&1 || true; \
	fi

# reconfigure when the set of source files changes (config lists them)
ALL_SRCS   := $(sort $(CORE_SRCS) $(NGX_SRCS) $(CORE_HDRS) $(NGX_HDRS))
$(shell mkdir -p $(BUILD); echo '$(ALL_SRCS)' | cmp -s - $(BUILD)/srclist \
    || echo '$(ALL_SRCS)' > $(BUILD)/srclist)

# configure in nginx's source tree, everything written under --builddir
# (OMNIROUTE_TEST=1 in the environment: the test build)
NGX_CONFIGURE = source $(NGX_SRC)/conf_flags && cd $(NGX_SRC) && \
	    ./configure "$${NGX_CONF_FLAGS[@]}" \
	        --with-cc-opt="-g -O2 -fstack-protector-strong -Wformat -Werror=format-security -fPIC -D_FORTIFY_SOURCE=2 -Werror" \
	        --add-dynamic-module=$(TOP) --builddir=$(1) \
	        > $(1)/configure.log 2>&1 \
	    || { tail -30 $(1)/configure.log; exit 1; }

$(NGX_BUILD)/Makefile: config $(BUILD)/srclist
	@test -x $(NGX_SRC)/configure || $(MAKE) deps
	mkdir -p $(NGX_BUILD)
	$(call NGX_CONFIGURE,$(NGX_BUILD))

$(NGX_TBUILD)/Makefile: config $(BUILD)/srclist
	@test -x $(NGX_SRC)/configure || $(MAKE) deps
	mkdir -p $(NGX_TBUILD)
	export OMNIROUTE_TEST=1 && $(call NGX_CONFIGURE,$(NGX_TBUILD))

$(MODULE_SO): $(NGX_BUILD)/Makefile $(NGX_SRCS) $(NGX_HDRS) $(CORE_SRCS) \
              $(CORE_HDRS)
	cd $(NGX_SRC) && $(MAKE) -s -j$(NPROC) -f $(NGX_BUILD)/Makefile modules

$(TEST_SO): $(NGX_TBUILD)/Makefile $(NGX_SRCS) $(NGX_HDRS) $(CORE_SRCS) \
            $(CORE_HDRS)
	cd $(NGX_SRC) && $(MAKE) -s -j$(NPROC) -f $(NGX_TBUILD)/Makefile modules

# the core is compiled once per flavour into a static library; each unit
# test links to it (make -j builds the objects in parallel)
CORE_OBJS  := $(patsubst src/core/%.c,$(BUILD)/core/%.o,$(CORE_SRCS))
ASAN_OBJS  := $(patsubst src/core/%.c,$(BUILD)/core-asan/%.o,$(CORE_SRCS))
CORE_LIB   := $(BUILD)/core/libor_core.a
ASAN_LIB   := $(BUILD)/core-asan/libor_core.a

$(BUILD)/core/%.o: src/core/%.c $(CORE_HDRS)
	@mkdir -p $(dir $@)
	$(CC) $(CORE_CFLAGS) -c -o $@ $<

$(BUILD)/core-asan/%.o: src/core/%.c $(CORE_HDRS)
	@mkdir -p $(dir $@)
	$(CC) $(CORE_CFLAGS) $(ASAN_FLAGS) -c -o $@ $<

$(CORE_LIB): $(CORE_OBJS)
	rm -f $@ && ar rcs $@ $^

$(ASAN_LIB): $(ASAN_OBJS)
	rm -f $@ && ar rcs $@ $^

$(BUILD)/unit/%: t/unit/%.c $(CORE_LIB) $(CORE_HDRS) t/unit/or_test.h
	@mkdir -p $(dir $@)
	$(CC) $(CORE_CFLAGS) -o $@ $< $(CORE_LIB) -lm

$(BUILD)/unit-asan/%: t/unit/%.c $(ASAN_LIB) $(CORE_HDRS) t/unit/or_test.h
	@mkdir -p $(dir $@)
	$(CC) $(CORE_CFLAGS) $(ASAN_FLAGS) -o $@ $< $(ASAN_LIB) -lm

unit:
	@$(MAKE) -s -j$(NPROC) unit-bins

unit-bins: $(UNIT_BINS) $(ASAN_BINS)

test: test-deps build test-build unit
	prove $(PROVE_ARGS) $(UNIT_BINS) $(ASAN_BINS) t/*.t

itest: build test-build
	prove $(PROVE_ARGS) t/*.t

demo: deps build
	bash conf.d/run-demo.sh

bench: test-deps build test-build
	@set -e; for b in $(BENCH); do echo "== bench/$$b.sh"; bash bench/$$b.sh; done

bench-gate: build
	bash bench/gate.sh

# ASan + UBSan (any undefined behaviour aborts); fuzz-plain: libFuzzer
# alone, several times faster, for the properties the targets assert
$(BUILD)/fuzz/%: fuzz/%.c $(CORE_SRCS) $(CORE_HDRS)
	@mkdir -p $(dir $@)
	clang -g -O1 -fsanitize=fuzzer,address,undefined \
	    -fno-sanitize-recover=undefined -Isrc/core \
	    -o $@ $< $(CORE_SRCS) -lm -ljansson

$(BUILD)/fuzz-plain/%: fuzz/%.c $(CORE_SRCS) $(CORE_HDRS)
	@mkdir -p $(dir $@)
	clang -g -O2 -fsanitize=fuzzer -Isrc/core -o $@ $< $(CORE_SRCS) -lm -ljansson

FUZZ_RUN = set -e; for f in $(1); do \
	    name=$$(basename $$f); \
	    mkdir -p $(BUILD)/fuzz/corpus-$$name; \
	    echo "== $$name for $(FUZZ_SECONDS)s"; \
	    $$f -max_total_time=$(FUZZ_SECONDS) -print_final_stats=1 \
	        -artifact_prefix=$(BUILD)/fuzz/ \
	        $(BUILD)/fuzz/corpus-$$name fuzz/corpus/$$name; \
	done

fuzz: test-deps $(FUZZ_BINS)
	@$(call FUZZ_RUN,$(FUZZ_BINS))

fuzz-plain: test-deps $(FUZZ_PLAIN)
	@$(call FUZZ_RUN,$(FUZZ_PLAIN))

# the Debian package and the other releases' roots (pkg/, docs/packaging.md)
PKG_PKGS   := debhelper dpkg-dev pandoc debootstrap

deb:
	@$(MAKE) -s install-pkgs PKGS="$(DEB_PKGS) $(PKG_PKGS)"
	bash pkg/deb.sh

deb-test: deb
	NO_DEB_BUILD=1 bash pkg/deb-test.sh

compat:
	@$(MAKE) -s install-pkgs PKGS="debootstrap"
	bash pkg/compat.sh $(COMPAT_SUITES)

clean:
	rm -rf $(BUILD) t/tmp
