package valkeytest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// Engine names the binaries of one server family and version.
type Engine struct {
	// Name is the charts' engine value: "valkey" or "redis".
	Name string
	// Version is the major.minor version the binaries report, e.g. "9.1".
	Version string
	// Server, Sentinel and CLI are program names: looked up on PATH, or under Root/usr/bin when Root is set.
	Server   string
	Sentinel string
	CLI      string
	// Root, when set, is a root filesystem built for a newer libc than the host's (hack/engine-rootfs.sh): its
	// programs are started through its own dynamic loader, Root/lib64/ld-linux-x86-64.so.2, with its own
	// libraries, so the host's libc is never involved.
	Root string
}

// String returns "<name>-<version>", the value VALKEYTEST_ENGINE takes, e.g. "valkey-9.1".
func (e Engine) String() string { return e.Name + "-" + e.Version }

// EnginesDir is where hack/engine-rootfs.sh puts root filesystems: $VALKEY_HA_ENGINES, default
// /var/cache/valkey-ha/engines.
func EnginesDir() string {
	if d := os.Getenv("VALKEY_HA_ENGINES"); d != "" {
		return d
	}
	return "/var/cache/valkey-ha/engines"
}

// The engines the charts support and the tests run against.
var (
	// Valkey91 is Debian sid's valkey 9.1 (9.1.2-1) on a Debian trixie root filesystem, the charts' default.
	Valkey91 = Engine{Name: "valkey", Version: "9.1", Server: "valkey-server", Sentinel: "valkey-sentinel",
		CLI: "valkey-cli", Root: filepath.Join(EnginesDir(), "valkey-9.1", "rootfs")}
	// Valkey80 is Debian bookworm-backports' valkey 8.0 (8.0.1), installed on the host.
	Valkey80 = Engine{Name: "valkey", Version: "8.0", Server: "valkey-server", Sentinel: "valkey-sentinel", CLI: "valkey-cli"}
	// Redis70 is Debian bookworm's redis 7.0 (7.0.15), installed on the host.
	Redis70 = Engine{Name: "redis", Version: "7.0", Server: "redis-server", Sentinel: "redis-sentinel", CLI: "redis-cli"}

	// Engines lists every supported engine, newest first.
	Engines = []Engine{Valkey91, Valkey80, Redis70}

	// Default is the engine tests run against when they do not pick one: the one VALKEYTEST_ENGINE names
	// ("valkey-9.1", "valkey-8.0" or "redis-7.0"), valkey 9.1 when it is unset. An unknown name fails every
	// test that starts a process (see Require).
	Default, defaultErr = engineFromEnv(os.Getenv("VALKEYTEST_ENGINE"))

	// Redis is the redis engine (Redis70).
	Redis = Redis70
)

func engineFromEnv(v string) (Engine, error) {
	if v == "" {
		return Valkey91, nil
	}
	var names []string
	for _, e := range Engines {
		if e.String() == v {
			return e, nil
		}
		names = append(names, e.String())
	}
	return Valkey91, fmt.Errorf("VALKEYTEST_ENGINE=%q is not one of %s", v, strings.Join(names, ", "))
}

// path returns the file that runs prog: Root/usr/bin/prog under a root filesystem, else prog found on PATH.
func (e Engine) path(prog string) (string, error) {
	if e.Root == "" {
		return exec.LookPath(prog)
	}
	p := filepath.Join(e.Root, "usr", "bin", prog)
	if _, err := os.Stat(p); err != nil {
		return "", err
	}
	if _, err := os.Stat(e.loader()); err != nil {
		return "", err
	}
	return p, nil
}

func (e Engine) loader() string { return filepath.Join(e.Root, "lib64", "ld-linux-x86-64.so.2") }

// Command returns a command that runs the engine's program prog (Server, Sentinel or CLI) with args. Under a
// root filesystem it is that root's dynamic loader with --library-path set to the root's libraries; the
// program still sees its own path as argv[0], so valkey's sentinel mode (chosen by the program name) works.
//
// Under -short (make quick: pure tests only) it panics: a test that starts an engine must call Require first,
// which skips it there.
func (e Engine) Command(prog string, args ...string) *exec.Cmd {
	if testing.Short() {
		panic("valkeytest: " + e.String() + " " + prog + " started under -short; the test must call Require (which skips it) first")
	}
	p, err := e.path(prog)
	if err != nil {
		p = prog // let exec report the missing program
	}
	if e.Root == "" {
		return exec.Command(p, args...)
	}
	full := append([]string{"--library-path", filepath.Join(e.Root, "usr", "lib", "x86_64-linux-gnu"), p}, args...)
	return exec.Command(e.loader(), full...)
}

// NoEnginesEnv is the variable a run without engines sets to say so on purpose: with
// VALKEYTEST_NO_ENGINES=1 a test whose engines or fault injection are missing is skipped even under CI=true.
// The release workflow's check job sets it (it runs the unit and render tests on a GitHub runner, which has no
// engines; .ci/run, which installs them, runs the real-process tests); without it CI=true keeps failing such a
// test, so a CI machine that lost its engines does not pass by skipping.
const NoEnginesEnv = "VALKEYTEST_NO_ENGINES"

// Unavailable ends a test that cannot run here: skipped with msg under VALKEYTEST_NO_ENGINES=1, failed with
// msg under CI=true, skipped with msg elsewhere.
func Unavailable(t testing.TB, msg string) {
	t.Helper()
	switch {
	case os.Getenv(NoEnginesEnv) == "1":
		t.Skip(msg + " (" + NoEnginesEnv + "=1: a run without engines on purpose)")
	case os.Getenv("CI") == "true":
		t.Fatal(msg)
	default:
		t.Skip(msg)
	}
}

// Require fails the test under CI=true, and skips it elsewhere or under VALKEYTEST_NO_ENGINES=1, when the
// engine's binaries are missing (or VALKEYTEST_ENGINE names no engine). Under -short (make quick: pure tests
// only) it always skips: the test starts engine processes.
func Require(t testing.TB, e Engine) {
	t.Helper()
	if testing.Short() {
		t.Skip("starts " + e.String() + " processes: skipped under -short (make quick runs pure tests only)")
	}
	fail := func(msg string) {
		t.Helper()
		Unavailable(t, msg)
	}
	if defaultErr != nil {
		t.Fatal(defaultErr)
	}
	for _, b := range []string{e.Server, e.Sentinel, e.CLI} {
		if _, err := e.path(b); err != nil {
			if e.Root != "" {
				fail(fmt.Sprintf("%s %s not found in %s: run hack/install-deps.sh (hack/engine-rootfs.sh)", e, b, e.Root))
			}
			fail(fmt.Sprintf("%s %s not found on PATH: run hack/install-deps.sh", e, b))
		}
	}
}

// ForEachEngine runs fn as one subtest per engine of Engines, all at once. The subtests are started from their
// own goroutines instead of calling t.Parallel, so the -parallel limit (GOMAXPROCS) does not queue the third
// engine behind the first two: tests with real Sentinels wait on Sentinel's timers, not on the CPU.
func ForEachEngine(t *testing.T, fn func(t *testing.T, e Engine)) {
	var wg sync.WaitGroup
	for _, e := range Engines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			t.Run(e.String(), func(t *testing.T) { fn(t, e) })
		}()
	}
	wg.Wait()
}
