# valkey-ha: two Helm charts + valkey-sentinel-ctl. Every target installs what it needs (hack/install-deps.sh).
SHELL := /bin/bash
GO    ?= go
export GOTOOLCHAIN := local
export PATH := $(shell go env GOPATH)/bin:$(PATH)

.PHONY: deps build quick test unit engines e2e e2e-long e2e-deletions e2e-clients chaos chaos-ci chaos-cluster demo images lint bench clean

# The engine matrix: everything runs against valkey 9.1 (the default); internal/valkeyapi/valkey and the chart render
# tests cover every engine themselves; these boot, roll, orphan-repair and failover-label tests run again
# against valkey 8.0 and redis 7.0 (about 20 s each).
MATRIX_ENGINES := valkey-8.0 redis-7.0
MATRIX_RUN     := TestCaseS05|TestCaseS08|TestColdStart|TestPlannedDataRollLosesNoAckedWrite|TestCaseS21
MATRIX_PKGS    := ./internal/podsteps/bootstrap ./internal/controllers/controller
define run_matrix
	for e in $(MATRIX_ENGINES); do \
	  echo "== engine $$e: $(MATRIX_RUN)"; \
	  VALKEYTEST_ENGINE=$$e $(GO) test -count=1 -timeout 10m -run '$(MATRIX_RUN)' $(MATRIX_PKGS) || exit 1; \
	done
endef

deps: ## apt packages (valkey 8.0, redis 7.0), the valkey 9.1 root filesystem and the helm CLI
	hack/install-deps.sh

build:
	CGO_ENABLED=0 $(GO) build -trimpath -o bin/valkey-sentinel-ctl ./cmd/valkey-sentinel-ctl

# The 3 chaos rounds of `make unit` replay seed 7 (its rounds draw every fault kind: Sentinel kills and
# empty replacements, a primary kill, a lost Lease; they passed here): `make chaos` draws new seeds. The two
# findings that made random draws fail (RELIABILITY.md "Found" 4 and 5) are fixed and explained; new seeds
# passed in 10 rounds since, not yet the 50 rounds of `make chaos`, so CI keeps seed 7 until those pass.
CHAOS_CI_SEED ?= 7

# -short skips every test that starts a process: valkeytest.Require and RequireFaults skip (Engine.Command panics
# if a test starts an engine without them), templates-tests' skipProcesses skips the shell, promtool and release
# workflow runs. What is left renders, parses, plans and uses fake clientsets and in-process sockets.
quick: ## the pure tests (no processes, no cluster, no deps installed): go test -short, about one to two minutes on 2 idle cores (64-101 s measured; 406 s at load 9)
	$(GO) test -short -count=1 ./...

# Three test packages at a time (go test's default is one per core, 2 here): the long packages wait on server and
# Sentinel timers, not on the CPU, so a third slot shortens the phase to about its longest package
# (internal/controllers/controller, about 640 s) instead of half the sum (about 960 s at -p 2).
UNIT_P ?= 3
# Parallel tests at a time within a package (go test's default is GOMAXPROCS, 2 here). Only
# internal/controllers/controller marks tests parallel: ten Sentinel reset/rotation tests that wait on Sentinel's
# timers, not the CPU; at 5 they took 103 s together instead of about 170 s at 2 (2026-12-04, idle machine).
UNIT_PARALLEL ?= 5
# The longest packages go first (go test starts packages in the order listed, ./... adds the rest once): listed
# last by name, templates-tests (about 480 s, CPU-bound) started only when a slot freed, about 400 s in, and ended
# the phase (CI at d8aded2: unit phase 921 s, internal/controllers/controller 541 s, templates-tests 478 s).
UNIT_FIRST := ./templates-tests/ ./internal/controllers/controller/ ./internal/podsteps/handoff/ ./internal/podsteps/bootstrap/

# The engine matrix (about 75 s, timer-bound) runs beside the main test run, its output printed after it: the
# phase still ends with internal/controllers/controller.
unit: deps ## unit, real-process and chart render tests (valkey 9.1), and beside them the engine matrix
	$(GO) vet ./...
	log=$$(mktemp); ( $(run_matrix) ) >$$log 2>&1 & m=$$!; \
	CHAOS_SEED=$${CHAOS_SEED:-$(CHAOS_CI_SEED)} $(GO) test -p $(UNIT_P) -parallel $(UNIT_PARALLEL) -count=1 -timeout 20m $(UNIT_FIRST) ./...; rc=$$?; \
	wait $$m; mrc=$$?; cat $$log; rm -f $$log; \
	if [ $$mrc -ne 0 ]; then echo "engine matrix failed (exit $$mrc)"; fi; \
	[ $$rc -eq 0 ] && [ $$mrc -eq 0 ]

engines: deps ## only the engine matrix (valkey 8.0, redis 7.0)
	$(run_matrix)

test: unit e2e chaos-ci ## everything CI runs: unit, real-process and render tests, the e2e suite on the local cluster, then CHAOS_CI on it with three nodes

e2e: deps ## the e2e suite on the local cluster (or $$KUBECONFIG)
	hack/e2e.sh

# issue 14: the primary's pod deleted 10 times (forced and graceful, controllers on then at zero), every
# failover within down-after + failover-timeout (about 6 minutes); the e2e suite runs one (forced)
e2e-deletions: deps ## the repeated primary-pod deletion test on the local cluster, 10 deletions (E2E_PRIMARY_DELETIONS)
	E2E_LONG=1 E2E_PRIMARY_DELETIONS=$${E2E_PRIMARY_DELETIONS:-10} hack/e2e.sh -run '^TestPrimaryPodDeletedRepeatedly$$' -v

# issue 30: 20 connections held through F-primary follow four kinds of switch (about 3 min; prints median, p95 and
# worst per kind; kept out of make test for time, its numbers in BENCHMARKS.md; E2E_HELD_MODES, E2E_HELD_VALUES and
# E2E_HELD_SENTINEL_VALUES choose the modes and merge values, e2e/main_test.go)
# the e2e tests make e2e leaves out for time (longTest: each names the unit tests that cover its claim with real
# processes); about 30 minutes
E2E_LONG_RUN := ^(TestCaseS11SentinelRestartsLeaveNoGhosts|TestScaleInLeavesNoStaleReplica|TestOneQuorumThreeInstances|TestPrimaryPodDeletedRepeatedly|TestCaseS19S04FQDNsOnly|TestEngineOverrides|TestReplicaRejoinsAndS08NoKeyLoss|TestMigrateFromPlainRedis|TestServerConfigRollsDataPods|TestUpgradeFromRecordedCommitUnderTraffic|TestCaseS22SentinelOnlyChangeKeepsDataPods)$$
e2e-long: deps ## the e2e tests make test leaves out for time, on the local cluster (about 30 minutes)
	E2E_LONG=1 hack/e2e.sh -run '$(E2E_LONG_RUN)' -v
e2e-clients: deps ## the held-connections measurement on the local cluster (TestPrimaryServiceClientsFollowEverySwitch)
	E2E_HELD_CLIENTS=1 hack/e2e.sh -run '^TestPrimaryServiceClientsFollowEverySwitch$$' -v

chaos: deps ## the loopback chaos test (issue 12): 50 rounds of random faults under both controllers, real processes; prints its numbers and writes them into RELIABILITY.md (about 30 min; CHAOS_ROUNDS, CHAOS_SEED)
	CHAOS_UPDATE=1 CHAOS_ROUNDS=$${CHAOS_ROUNDS:-50} $(GO) test -count=1 -timeout 120m -run '^TestChaos$$' -v ./chaos/

# the multi-node scenarios CI runs: the named cases S24 and S25, the partitioned primary with minReplicasToWrite and
# the primary's node killed with a CoreDNS replica on it (the node stays dead about 70 s; RELIABILITY.md Found 3):
# the unplanned failures first. S02 (cordon all but one, roll: a planned disruption, 236 s in the fresh-clone run of
# 2026-12-04) runs in make chaos-cluster only, to keep .ci/run within 60 minutes; the planned rolls and drains of
# make e2e and S24 cover its claim on one and three nodes.
CHAOS_CI ?= ^(TestChaosS24DrainPrimaryNode|TestChaosPartitionPrimaryNodeMinReplicas|TestChaosS25PartitionOneSentinel|TestChaosKillPrimaryNode)$$

chaos-ci: deps ## CHAOS_CI of the multi-node scenarios on a 3-node local cluster (about 10 minutes)
	hack/chaos.sh '$(CHAOS_CI)'

chaos-cluster: deps ## the multi-node scenarios of RELIABILITY.md on a 3-node local cluster (about 20 min; CHAOS_RUN=regexp for some)
	hack/chaos.sh "$${CHAOS_RUN:-^TestChaos}"

demo: deps ## the main job: install both charts and show a healthy, failover-ready deployment
	hack/demo.sh

images: deps ## build the valkey 9.1 and 8.0, redis, controller and versitygw (e2e S3 server) images and load them into the local cluster
	hack/images.sh

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(GO) vet -tags e2e ./e2e/...
	@if command -v actionlint >/dev/null; then actionlint .github/workflows/*.yaml && echo "actionlint: ok"; \
	 else echo "actionlint missing (hack/install-deps.sh installs it); templates-tests/release_test.go still checks the workflow"; fi

bench: deps ## the benchmark suite (issue 8, about 12 minutes): prints a table and rewrites BENCHMARKS.md
	$(GO) test -tags bench -count=1 -timeout 30m -run '^TestBenchmarks$$' -v ./bench/

clean:
	rm -rf bin
