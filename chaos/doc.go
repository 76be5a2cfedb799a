// Package chaos holds the loopback chaos test, so the safety claims rest on counts under faults: rounds of
// random faults against real valkey-server / valkey-sentinel processes with both controllers and the data pods'
// boot step running in process, under Sentinel-aware writers, counting what clients saw. See TestChaos in
// chaos_test.go; `make chaos` runs 50 rounds and writes the numbers into RELIABILITY.md, `go test ./chaos/`
// (part of `make test`) runs a short variant.
package chaos
