# deployflow — durable deployments for Kubernetes, run as Temporal workflows.
#
#   make demo        bring up the local stack and run the main job
#   make test        vet, format check, unit and integration tests (starts
#                    the local stack if needed and stops what it started)
#   make unit        the unit tests only (no stack)
#   make unit-repeat the SDK test environment's tests five times, shuffled
#   make test-postgres   the integration tests on the Temporal server on
#                    PostgreSQL (DEPLOYFLOW_TEMPORAL=postgres: any target)
#   make bench       deployflow vs the native Deployment and StatefulSet
#                    controllers, on both Temporal modes
#   make bench-scale 20,000 idle leases on 3 workers on PostgreSQL, held an
#                    hour (hours of this machine; SCALE_LEASES, SCALE_HOLD)
#   make dev-up / dev-down / dev-status     the local stack by hand
#
# Binaries of the stack are built from the Go module proxy into
# $(DEPLOYFLOW_CACHE) (default ~/.cache/deployflow), once per pinned version
# (hack/versions.env).

SHELL := bash
GO ?= go
include hack/versions.env
export DEPLOYFLOW_CACHE ?= $(HOME)/.cache/deployflow
# go test's own vet is off (make lint, which make test runs first, vets
# every package, the chaos-tagged files too) and its test binaries carry
# no DWARF or symbol table (-s -w; a panic's traceback is unchanged): a
# test run links some fifty binaries, once per phase, and building them
# was a fifth of the live phase's CPU (hack/cpusample on the live phase
# of 0dfbfdb: 335 of 1805 CPU-seconds, the link alone 174; -s -w links
# the workflows tests in 6.7 s, not 9.0).
TEST_FLAGS ?= -count=1 -timeout 40m -vet=off -ldflags=-s\ -w
# Every package, the ones with the longest live tests first: go test -p
# starts packages in the order given, and ./... alone started the workflows
# package (five minutes of live tests) two minutes into the live phase, so
# the phase ended on it alone (CI run 77: started at 122 s, ended at 415 s).
PKGS ?= ./workflows/ ./worker/ ./hack/bench/ ./starter/ ./...
# Packages with tests that stop parts of the local stack, or need no
# other test around (run alone).
DISRUPTIVE_PKGS ?= ./workflows/

.PHONY: all build tools dev-up dev-down dev-status demo test test-postgres unit unit-repeat lint bench bench-scale chaos clean record-histories upgrade-check

all: build

build:
	$(GO) build -o bin/deployflow ./starter
	$(GO) build -o bin/deployflow-worker ./worker
	$(GO) build -o bin/devstack ./hack/devstack

tools:
	hack/build-tools.sh

dev-up: build tools
	bin/devstack up

dev-down:
	$(GO) build -o bin/devstack ./hack/devstack
	bin/devstack down

dev-status:
	$(GO) build -o bin/devstack ./hack/devstack
	bin/devstack status

demo: dev-up
	hack/demo.sh

lint:
	$(GO) vet ./...
	$(GO) vet -tags chaos ./worker/
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	  if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi

# Unit tests only: no stack needed.
unit:
	$(GO) test $(TEST_FLAGS) -short $(PKGS)

# The workflows' unit tests on the SDK's test environment five times each,
# in a shuffled order (the seed printed): a test that passes alone and
# fails repeated, or after another, depends on luck (one did: an "early"
# promote raced its placement to the held wave). .ci/run runs it; make
# unit-repeat REPEAT_PKGS=./... repeats every package's unit tests. (CI= :
# -short skips the live tests here even on CI, where make test runs them;
# the long pause, one deterministic simulation, runs once, in make test.)
# First, once, under the race detector: a wave's deploys and Jobs run side
# by side on the SDK's test environment, and a fake that recorded them
# unguarded lost one deploy in one run of five.
# (Run beside make test's chaos slice, whose faults of the whole stack
# mostly wait, it made both slower: CI run 85, 710 s for both against 539
# s one after the other.)
REPEAT_PKGS ?= ./workflows/...
unit-repeat:
	CI= $(GO) test -race -count=1 -short -timeout 20m $(REPEAT_PKGS)
	CI= $(GO) test -count=5 -shuffle=on -short -timeout 20m -skip '^TestALongPause' $(REPEAT_PKGS)

# Three phases, each with a go test -json report in bin/ (the slowest
# tests are printed after each):
# 1. live: every package side by side (TEST_P), and in each package its
#    live tests side by side (TEST_PARALLEL; testenv.Get marks them
#    parallel): most of a live test is waiting (pods turning Ready,
#    timers, deadlines), and waiting tests wait together;
# 2. chaos: the fault-injection suite's reduced sweep, one random boundary
#    per fault (its seed printed; `make chaos` runs every boundary),
#    without the multi-cluster placement scenario (make chaos runs it);
# 3. serial: alone, the tests that need no other test around (TestAlone*),
#    then those that stop parts of the local stack (TestDisruptive*), last:
#    after an outage of the API server the stack's own controllers (their
#    informers back off) take up to a minute to work at full speed again.
SERIAL_TESTS ?= Disruptive|Alone
# Live tests that need the PostgreSQL mode's Temporal server, newer than
# the dev server's: make test-postgres runs them, make test's live phase
# leaves them out (docs/testing.md).
POSTGRES_ONLY_TESTS ?= TestAnObservationReachesALeaseWorkflowItsWorkerEvicted
TEST_P ?= 4
# (Handing the turns to a package's longest live tests first, CI runs
# 85-87, put them all at the start side by side: the phase was no shorter,
# as it is CPU-bound, and three tests failed under that load.)
# Four, not six: the phase is CPU-bound from end to end (vmstat, local
# CI runs 95 and 96: no idle CPU from its third minute to its last), so
# six side by side made it no shorter, only each test slower; and in run
# 96 the Temporal dev server's SQLite, starved, timed out a write, lost
# its shard and answered "Namespace default is not found" for minutes,
# failing twenty tests. (The PostgreSQL phase went from six to four for
# the same reason without getting longer: POSTGRES_PARALLEL.)
TEST_PARALLEL ?= 4
GOTESTSUM = $(DEPLOYFLOW_CACHE)/gotestsum-$(GOTESTSUM_VERSION)/gotestsum
# gotest PHASE,ARGS[,ENV]: go test ARGS (with the environment ENV) by
# gotestsum, its report in bin/test-PHASE.json, then the tests over 20s,
# slowest first; it fails if a test did. The tests (their builds, their
# binaries, the workers and clusters they start) run at a lower CPU
# priority than the local stack (nice 10): the stack's servers only work
# when the tests ask, so they take no more CPU than before, but answer
# without waiting behind the builds and the tests' own work (a Temporal
# server starved past its persistence deadlines fails every test at
# once: CI run 96).
gotest = { $(3) nice -n 10 $(GOTESTSUM) --format standard-verbose --jsonfile bin/test-$(1).json -- $(2); \
	rc=$$?; echo "== $(1): the slowest tests"; $(GOTESTSUM) tool slowest --jsonfile bin/test-$(1).json --threshold 20s | head -n 25; [ $$rc = 0 ]; }
test: build tools lint
	hack/with-stack.sh bash -c '$(call gotest,live,$(TEST_FLAGS) -p $(TEST_P) -parallel $(TEST_PARALLEL) -skip "$(SERIAL_TESTS)|$(POSTGRES_ONLY_TESTS)" $(PKGS)) && \
	  $(call gotest,chaos,-tags chaos $(TEST_FLAGS) -parallel $(CHAOS_SLICE_PARALLEL) -run "^TestChaos$$" ./worker/,$(CHAOS_SLICE)) && \
	  $(call gotest,serial,$(TEST_FLAGS) -p 1 -run "^TestAlone" $(DISRUPTIVE_PKGS)) && \
	  $(call gotest,disruptive,$(TEST_FLAGS) -p 1 -run "^TestDisruptive" $(DISRUPTIVE_PKGS))'

# make test's slice of the fault-injection suite: one random boundary per
# fault and scenario, 12 runs side by side (the 32 runs of the faults of a
# run's own in three goes; each fault of the whole stack's 8 in one batch).
# It leaves out the placement scenario (make chaos runs it): 6m2s with the
# two StatefulSet scenarios on the 2-core machine, alone (docs/reliability.md).
CHAOS_SLICE = DEPLOYFLOW_CHAOS_BOUNDARIES=one DEPLOYFLOW_CHAOS_SKIP=placement DEPLOYFLOW_CHAOS_REPORT=$(CURDIR)/bin/chaos-report-reduced.txt
CHAOS_SLICE_PARALLEL ?= 12

# The live phase again on Temporal's production shape (issue 22.1): the
# Temporal server on PostgreSQL with 64 history shards instead of the dev
# server. .ci/run runs it after make test. It runs the packages whose
# tests reach a Temporal server (POSTGRES_PKGS), less the long tests that
# never do (replays of recorded histories, the SDK's test environment):
# make test ran them all, and their result cannot differ. Nor the bench's
# slices (they check the bench's tables; make bench runs on PostgreSQL
# itself) or the chart's RBAC test (what it checks is the API server's):
# the phase keeps both cores busy from end to end (CI run 84: 586 s), so
# every test in it lengthens it.
POSTGRES_PKGS ?= ./workflows/ ./worker/ ./starter/ ./internal/devstack/
# Four live tests of a package side by side, not six: the phase is
# CPU-bound throughout, and six made tests that wait on the workers' and
# Temporal's answers time out (CI run 85: four failed, "Workflow Task in
# failed state" among them); as both cores were busy throughout, fewer
# side by side should not make it longer.
POSTGRES_PARALLEL ?= 4
ENGINE_FREE_TESTS ?= TestTheGateTableNamesTheRecordingsEachGateNeeds|TestRecordedHistoriesReplay|TestALongPauseWithTheFastestAnalysisKeepsEveryRunUnderTheHistoryLimit
# Nor three long tests whose subject is the cluster's side (make test ran
# them): the two StatefulSet tests (the stack's StatefulSet controller and
# its claims, through the same deploy and rollout workflows as the
# Deployment tests this phase runs) and the thirty-lease soak (issue 8's
# colliding names; many leases at once on PostgreSQL are the worker
# package's twenty-lease tests here and make bench's fleet). The workflows
# package is this phase's longest, its tests four at a time: the three
# were 678 of its 2,365 test-seconds (local CI run 94).
POSTGRES_SKIP_TESTS ?= TestAStatefulServiceDeploysRollsOutAndItsTeardownDeletesItsClaims|TestAStatefulRolloutStepsThePartitionAbortsAndRollsBackKeepingEveryClaim|TestSoakThirtyLeasesWithCollidingNames
test-postgres: build
	DEPLOYFLOW_TEMPORAL=postgres hack/build-tools.sh
	DEPLOYFLOW_TEMPORAL=postgres hack/with-stack.sh bash -c '$(call gotest,postgres,$(TEST_FLAGS) -p $(TEST_P) -parallel $(POSTGRES_PARALLEL) -skip "$(SERIAL_TESTS)|$(ENGINE_FREE_TESTS)|$(POSTGRES_SKIP_TESTS)" $(POSTGRES_PKGS))'

# The fault-injection suite (issue 13, worker/chaos_test.go): each scenario
# x fault x step boundary, invariants checked, a report table printed and
# written to $(CHAOS_REPORT). CHAOS_BOUNDARIES=one: one random boundary per
# fault (the seed is printed; DEPLOYFLOW_CHAOS_SEED reruns it).
CHAOS_REPORT ?= $(CURDIR)/bin/chaos-report.txt
# CHAOS_PARALLEL runs go side by side (each with its own lease, task
# queue and workers; a fault of the whole stack hits a batch at once).
CHAOS_BOUNDARIES ?= every
CHAOS_PARALLEL ?= 6
# It also runs the long sweep make test runs a slice of: a canary paused for
# a week, not a day, with a measurement every second (the SDK's test
# environment; a CPU for 2-3 minutes).
# A provider's upgrade from release FROM, rehearsed on the local stack
# (docs/upgrading.md): make upgrade-check FROM=<commit or tag>.
upgrade-check: build tools
	hack/upgrade-check.sh $(FROM)

chaos: build tools
	DEPLOYFLOW_LONG_SWEEPS=1 $(GO) test -count=1 -v -run '^TestALongPauseWithTheFastestAnalysisKeepsEveryRunUnderTheHistoryLimit$$' ./workflows/rollout/
	DEPLOYFLOW_CHAOS_REPORT=$(CHAOS_REPORT) DEPLOYFLOW_CHAOS_BOUNDARIES=$(CHAOS_BOUNDARIES) \
	  hack/with-stack.sh $(GO) test -tags chaos -count=1 -timeout 180m -parallel $(CHAOS_PARALLEL) -v -run '^TestChaos$$' ./worker/

# The same rollout by deployflow's engine and by the native Deployment
# controller (a second kube-controller-manager running only that controller),
# and a StatefulSet's by deployflow's partition steps and by the stack's
# StatefulSet controller. Run on each Temporal mode in BENCH_MODES (the
# rollout comparisons on the first only: they do not involve many shards).
BENCH_MODES ?= dev postgres
bench: build tools
	$(GO) build -o bin/bench ./hack/bench
	@first=1; for mode in $(BENCH_MODES); do \
	  echo "== bench on Temporal mode $$mode"; \
	  extra=; [ $$first = 1 ] || extra="-runs 0 -statefulset-replicas 0 -traffic 0"; first=0; \
	  DEPLOYFLOW_TEMPORAL=$$mode hack/build-tools.sh || exit 1; \
	  DEPLOYFLOW_TEMPORAL=$$mode hack/with-stack.sh bin/bench $(BENCH_FLAGS) $$extra || exit 1; \
	done

# The scale mode (issue 40.4): SCALE_LEASES idle leases on SCALE_WORKERS
# workers on the PostgreSQL engine, deployed SCALE_IN_FLIGHT (100) under way at once,
# held SCALE_HOLD with each worker's memory read every minute, then a
# burst of SCALE_BURST changes with every worker and with one, and a
# deploy's time with them present against the empty stack's. Not in CI:
# at 20,000 leases, hours of this 2-core machine.
SCALE_LEASES ?= 20000
SCALE_WORKERS ?= 3
SCALE_HOLD ?= 1h
SCALE_BURST ?= 500
# SCALE_STATE=FILE creates the fleet over several sessions of a machine,
# SCALE_CREATE_FOR of it each time (20,000 leases take hours on 2 cores):
# its stack runs from SCALE_RUN_DIR, apart from the one the tests and CI
# start clean, and goes down keeping its data; each run goes on with the
# fleet in FILE, and the run that completes it measures it
# (docs/performance.md, "A fleet created over several sessions").
SCALE_STATE ?=
SCALE_CREATE_FOR ?= 0
SCALE_RUN_DIR ?= /var/tmp/deployflow-scale
SCALE_IN_FLIGHT ?= 100
SCALE_FLAGS = -scale $(SCALE_LEASES) -scale-workers $(SCALE_WORKERS) -scale-hold $(SCALE_HOLD) -scale-burst $(SCALE_BURST) \
  -scale-in-flight $(SCALE_IN_FLIGHT)
bench-scale: build tools
	$(GO) build -o bin/bench ./hack/bench
	DEPLOYFLOW_TEMPORAL=postgres hack/build-tools.sh
ifeq ($(SCALE_STATE),)
	DEPLOYFLOW_TEMPORAL=postgres hack/with-stack.sh bin/bench $(SCALE_FLAGS)
else
	DEPLOYFLOW_TEMPORAL=postgres DEPLOYFLOW_RUN_DIR=$(SCALE_RUN_DIR) DEPLOYFLOW_STACK_KEEP_DATA=1 \
	  hack/with-stack.sh bin/bench $(SCALE_FLAGS) -scale-state $(SCALE_STATE) -scale-create-for $(SCALE_CREATE_FOR)
endif

clean:
	rm -rf bin

# Records real workflow histories on the local stack into
# testdata/histories/$(HISTORIES_SET)/<scenario>/, one scenario per
# integration test below; TestRecordedHistoriesReplay replays them all. A
# recording never overwrites an older one.
HISTORIES_SET ?= $(shell date -u +%Y%m%d-%H%M)
RECORD_WORKFLOWS ?= TestImageUpdateAndFailingUpdateKeepsTheLastGoodVersion|TestAHandScaledReplicaSetTurnsTheLeaseDegradedWithoutATimer|TestClosingAnIdleLeaseTearsItDownWithinSeconds|TestNewerManifestSupersedesARolloutInProgress|TestApprovedPlanDeploysAndAStalePlanIsRefused|TestUnapprovedDeployTimesOutIntoAnAbortWithNothingChanged|TestTeardownAsTheDeployFinishesIsNeverLost|TestClosingTheLeaseMidRolloutTearsEverythingDown|TestTheLeaseRecordsWhatItsRolloutsRan|TestADeployOfAnUnknownLeaseEnds|TestADeployApprovedWithAPlanActsOnlyOnThatPlan|TestAnEarlyFailureReleasesWhatTheDeployTook|TestRecreateStartsNewPodsOnlyAfterOldOnesAreGone|TestProgressDeadlineWithAutoRollbackRestoresTheStableRevision|TestRolloutWorkflowFailsAtProgressDeadline|TestPauseHoldsScalingAndResizeIsProportional|TestUndoReusesTheOldReplicaSet|TestRestartRollsANewRevision|TestBadManifestIsRefusedWritingNothing|TestRolloutContinuesAsNewMidRollout|TestCanaryWithAnAnalysisGateIsPromoted|TestCanaryAbortsAtAFailedAnalysis|TestCanaryPauseWaitsUntilAbortReturnsToStable|TestBlueGreenPreviewPromoteAndUndoWithinTheDelay|TestBlueGreenPromotesItself|TestBlueGreenPostPromotionAnalysisSwitchesBack|TestBlueGreenSupersededInItsPreviewSwitchesFromTheActiveVersion|TestCanaryBackgroundAnalysisAbortsDuringAPause|TestSetCanaryScaleSplitsByCount|TestCanaryJobChecksGateTheSteps|TestMalformedInputsFromTheTemporalCLIFailTypedNamingTheField|TestTheSameManifestSentAgainJoinsItsDeploy|TestHandTypedInputsCannotSkipValidation|TestHostileTenants|TestAPlacementDeploysWaveByWave|TestAFailedWaveAnalysisReturnsEarlierWavesAndNeverTouchesLaterOnes|TestALeaseWorkflowTypedByHandUnderAnotherIDIsRefused|TestAClosedObservationTypedByHandTearsNothingDown|TestARollbackReturnsToTheDeployBeforeAndARejectedDeployIsRefused|TestAReadinessProbeThatNeverPassesStopsTheRolloutAndKeepsTheLastGoodVersion|TestACanarysWeightIsTheShareOfRequestsThroughTheGateway|TestABlueGreenSwitchThroughTheGatewayLosesNoRequest|TestAStatefulRolloutStepsThePartitionAbortsAndRollsBackKeepingEveryClaim|TestAStatefulServiceDeploysRollsOutAndItsTeardownDeletesItsClaims
RECORD_STARTER ?= TestScheduledRestartGoesThroughTheLeaseWorkflow|TestOperatorCommands|TestDeployPlanPrintsThePlanAndYesDeploysIt|TestThePrintedPlanIsTheExecutedTree|TestRetryRedeploysAnAbortedCanary|TestBlueGreenCommands|TestAPlacementFromTheCLI|TestRollbackAndRejectFromTheCLI
record-histories: build tools
	DEPLOYFLOW_RECORD_HISTORIES=$(CURDIR)/testdata/histories/$(HISTORIES_SET) hack/with-stack.sh bash -c \
	  '$(GO) test -count=1 -run "^($(RECORD_WORKFLOWS))$$" ./workflows/ && $(GO) test -count=1 -run "^($(RECORD_STARTER))$$" ./starter/'
	$(GO) test -count=1 -run TestRecordedHistoriesReplay ./workflows/
