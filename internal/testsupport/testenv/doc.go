// Package testenv is the one test environment of the controller tests (internal/controllers/controller), the benchmarks
// (bench/) and the chaos test (chaos/): real valkey-server / valkey-sentinel processes (internal/testsupport/valkeytest)
// described to the controllers through a fake Kubernetes clientset, and the instruments that watch what a
// client of them sees.
//
//   - Env: a valkeytest.Topology as the charts describe it (descriptor, Secrets, one Running+Ready pod per
//     node, the <F>-sentinels ConfigMap), role labels, revisions and status as the controllers write them,
//     and Run, which runs a controller until the test ends.
//   - Kubelet: stands in for the kubelet and the StatefulSet controller when a controller deletes a pod.
//   - Writer: a Sentinel-aware client (valkey-go's Sentinel mode) that writes every 10 ms and records every
//     attempt; FailWindows, Stalls and CountWrites read its record, Missing checks acknowledged keys.
//   - SwitchWatcher, WaitSteady, SentinelHealthy, MajorityPrimary: the Sentinels' view of the primary.
//   - SentinelEvents: what each Sentinel logged about a monitor (the audit of MONITOR, REMOVE, RESET and
//     FAILOVER commands, and its own +sdown/+odown/+switch-master events).
//   - Probe: ROLE and a probe write on every node, sampled, to count windows with two writable primaries.
//
// Faults come from internal/testsupport/valkeytest (Link delay/blackhole/cut, TopologyConfig.FaultLinks, Proc.Pause) and
// internal/testsupport/kubefault (failed API reads, delayed watches, Strict bookkeeping).
//
// This is test code: nothing in production imports it. It lives outside _test.go files so that every test
// package can import it, and it does not import internal/controllers/controller (whose own tests import it): a
// controller is started with Env.Run.
package testenv
