# The test target runs vet, staticcheck and the race-enabled tests of every
# module in the repository (the core module and each nested go.mod), then a
# short bounded run of every fuzz target.

GO        ?= go
FUZZTIME  ?= 5000x
MODULES   := $(shell find . -name go.mod -not -path './.git/*' -exec dirname {} \; | sort)
STATICCHECK_VERSION ?= v0.8.2
GOBIN     := $(shell $(GO) env GOPATH)/bin

.PHONY: test vet staticcheck unit fuzz bench tools mutation mutation-check corpus api api-write

test: vet staticcheck unit fuzz

tools:
	@command -v staticcheck >/dev/null 2>&1 || test -x $(GOBIN)/staticcheck || \
		$(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)

vet:
	@for m in $(MODULES); do echo "== vet $$m"; (cd $$m && $(GO) vet ./...) || exit 1; done
	@for m in $(MODULES); do (cd $$m && $(GO) mod tidy -diff) || { echo "go mod tidy needed in $$m"; exit 1; }; done
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { echo "gofmt needed:"; gofmt -l $$(git ls-files '*.go'); exit 1; }

staticcheck: tools
	@for m in $(MODULES); do echo "== staticcheck $$m"; (cd $$m && PATH="$(GOBIN):$$PATH" staticcheck ./...) || exit 1; done

# TestConvergesOnLimiters measures the rate a crawl reaches against real
# rate limiters (nginx, HAProxy), in real time: it runs once more on its
# own, after the others and without the race detector, so that neither
# slows the clock it measures. Here one cell per limiter kind (five), in
# parallel (about two minutes); make bench runs the whole matrix.
# TestBroadCrawlStray429s (throughput of a crawl over 200 hosts, 40 s in
# memory, then 40 s with Redis) and TestSlowServerFleet (a fleet against a
# slowing server, about a minute) run with it, first, for the same reason.
CONVERGE := ^(TestConvergesOnLimiters|TestBroadCrawlStray429s|TestSlowServerFleet)$$

unit:
	@for m in $(MODULES); do echo "== test $$m"; (cd $$m && $(GO) test -race -count=1 -skip '$(CONVERGE)' ./...) || exit 1; done
	@echo "== bench/peers once, so that it cannot rot (make bench measures it)"; cd bench && $(GO) test -race -count=1 -run '^$$' -bench '^BenchmarkPeers' -benchtime 1x ./peers
	@echo "== test . (alone) TestConvergesOnLimiters"; $(GO) test -count=1 -parallel 8 -run '$(CONVERGE)' .

# Every Fuzz target of every module, each for FUZZTIME (an execution count,
# so that a loaded machine runs the same work, only slower).
fuzz:
	@for f in $$(grep -rl --include='*_test.go' '^func Fuzz' . | sort); do \
		d=$$(dirname $$f); \
		for t in $$(grep -h -o '^func Fuzz[A-Za-z0-9_]*' $$f | sed 's/func //'); do \
			echo "== fuzz $$d $$t"; \
			(cd $$d && $(GO) test -run='^$$' -fuzz="^$$t$$" -fuzztime=$(FUZZTIME) .) || exit 1; \
		done; \
	done

# The whole limiter matrix (five limiters at 1.5, 2, 5 and 10 r/s, four of
# them at 2 and 10 r/s with Retry-After 1, 3 and 10 s, and issue 35's
# HAProxy case; memory and a Redis fleet of two: ninety cells, sixteen at a
# time, about fifteen minutes), the
# broad crawl of 200 hosts with stray 429s (3 minutes in memory, 3 with
# Redis), the fleet of worker processes against a slowing server, the
# crawl-scale fleet (3 processes, a 3-master Redis Cluster, 1,000 hosts of
# mixed kinds, 3 minutes), the in-flight cap against a slowing server for a minute, then the bench
# module's benchmarks.
bench:
	$(GO) test -count=1 -parallel 16 -timeout 40m -run '^TestConvergesOnLimiters$$' -v . -args -converge.all | tee bench/converge.txt
	$(GO) test -count=1 -timeout 20m -run '^TestBroadCrawlStray429s$$' -v . -args -broad.long | tee bench/broadcrawl.txt
	$(GO) test -count=1 -run '^TestSlowServerFleet$$' -v . -args -slowfleet.procs | tee bench/slowfleet.txt
	cd bench && $(GO) test -count=1 -timeout 20m -run '^TestCrawlScale$$' -v . -args -crawlscale.long | tee crawlscale.txt
	$(GO) test -count=1 -run '^TestInFlightCapSlowServer$$' -v . -args -inflight.long
	$(MAKE) -C bench results

# The exported API of every module, per package, checked against api/*.txt
# (the unit tests check it too). After a deliberate change of the public
# surface, api-write rewrites the files: review their diff in the commit.
api:
	$(GO) run ./internal/apidump -check

api-write:
	$(GO) run ./internal/apidump -write

# Send every captured page of classify/testdata/corpus through the chain and
# write the per-vendor table to classify/testdata/RESULTS.md.
corpus:
	$(GO) test -count=1 -run '^TestCorpus$$' ./classify -args -corpus.results=testdata/RESULTS.md

# Mutation score of the core packages (internal/mutate): a fixed sample of
# mutants per package, each run against the package's short tests, written
# to MUTATION.md. About 15 minutes on 2 cores; not part of test.
# The root package's real-time tests (a real nginx for a minute, Redis for
# 8 s) are left out of the mutant runs; make test runs them.
MUTATION_MAX    ?= *=45,hoststate=9,egress=35
MUTATION_BUDGET ?= 16m
MUTATION_SKIP   ?= .=^(TestConvergesOnLimiters|TestBroadCrawlStray429s|TestSlowServerFleet|TestLongRetryAfterOneRequestRedis)$$
mutation:
	$(GO) run ./internal/mutate -max '$(MUTATION_MAX)' -budget $(MUTATION_BUDGET) -skip '$(MUTATION_SKIP)' -out MUTATION.md

# Whether MUTATION.md still describes the tree (the lines and tests it
# names exist, its skipped tests are MUTATION_SKIP); make test runs it too,
# as internal/mutate's TestReportCurrent. When it fails: make mutation.
mutation-check:
	$(GO) test -count=1 -run '^TestReportCurrent$$' ./internal/mutate
