// Package bench is the benchmark suite behind `make bench`, the source of BENCHMARKS.md: failover outage
// against the bare-Sentinel floor, planned-roll outage against a naive roll, role-label convergence with and
// without the +switch-master subscription, scale of one Sentinel quorum, time to ready on the local cluster,
// the planned handoff's paths and the primary pod's graceful deletion with and without the preStop hook (figure
// 7). Everything lives in _test.go files behind the build tag "bench" and drives real valkey-server /
// valkey-sentinel processes on loopback (internal/testsupport/valkeytest) and the real controllers (internal/controllers/controller);
// figure 8 is a fleet: one quorum and one shared instance controller for 10, 100 and 300 instances across
// namespaces:
//
//	go test -tags bench -count=1 -timeout 15m -run '^TestBenchmarks$' -v ./bench/
//
// The run prints a table and rewrites BENCHMARKS.md at the repository root. Knobs (development only; the
// published numbers come from a run without them): BENCH_FIGURES=1,3 runs a subset and leaves BENCHMARKS.md
// alone (with BENCH_UPDATE=1 it replaces only those figures' parts and says so under the header), BENCH_ROUNDS
// (BENCH_ROUNDS_5000) overrides the rounds of figure 1 (at down-after 5000 ms), BENCH_ROLLS the rolls of figure
// 2, BENCH_REPL_DELAY_MS its replication-link delay (default 200, 0 = none), BENCH_FAILOVERS the failovers of
// figure 3, BENCH_K the instance counts of figure 4 (e.g. "1,10"), BENCH_PRESTOP_ROUNDS (default 3),
// BENCH_PRESTOP_LAG_MS (default 100) and BENCH_PRESTOP_ENGINES (default valkey-9.1,valkey-8.0) the rounds,
// replication delay and engines of figure 7, BENCH_FLEET_K the instance counts of figure 8 (default
// "10,100,300"); BENCH_DEBUG=1 logs progress, BENCH_LOG=1 the controllers' logs.
//
// One file a figure, named after what it measures: 1 unplanned_failover_test.go, 2 planned_roll_test.go,
// 3 role_labels_test.go, 4 sentinel_scale_test.go, 5 time_to_ready_test.go, 6 planned_handoff_test.go,
// 7 graceful_delete_test.go, 8 fleet_test.go.
package bench
