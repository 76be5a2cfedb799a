package templatestests

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestDetachedDaemonHoldsNoLockOfTheCaller: the local cluster's daemons (hack/k8s-local/up.sh start_daemon) and
// fault timers (node.sh) start through `detached` (env.sh). Started under `flock LOCK ...`, as HELPERS.md has
// every cluster user do, a daemon must not inherit the lock's descriptor: with the former plain `setsid exe &`
// the cluster's eight daemons held /tmp/valkey-ha-cluster.lock on fd 3 for the cluster's lifetime, and every
// later `flock` on it waited forever. The daemon keeps only descriptors 0-2, and the lock is free once the
// caller has exited.
func TestDetachedDaemonHoldsNoLockOfTheCaller(t *testing.T) {
	skipProcesses(t, "a detached daemon script (flock, bash)")
	if _, err := exec.LookPath("flock"); err != nil {
		t.Skip("flock (util-linux) not installed")
	}
	env, err := filepath.Abs(filepath.Join("..", "hack", "k8s-local", "env.sh"))
	require.NoError(t, err)
	lock := filepath.Join(t.TempDir(), "cluster.lock")
	script := `. "$1"; detached sleep 60 >/dev/null 2>&1 </dev/null & echo $!`
	out, err := exec.Command("flock", lock, "bash", "-c", script, "detached-test", env).Output()
	require.NoError(t, err)
	pid, err := strconv.Atoi(strings.TrimSpace(string(out)))
	require.NoError(t, err, "pid printed: %q", out)
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })

	// $! is the background subshell until it has closed the descriptors and exec'ed setsid, then sleep
	var cmdline []byte
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if cmdline, err = os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline"); err != nil || string(cmdline) == "sleep\x0060\x00" {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	require.NoError(t, err, "the detached process runs")
	require.Equal(t, "sleep\x0060\x00", string(cmdline), "$! becomes the command itself (the pid file up.sh writes)")
	fds, err := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/fd")
	require.NoError(t, err)
	var names []string
	for _, fd := range fds {
		names = append(names, fd.Name())
	}
	assert.ElementsMatch(t, []string{"0", "1", "2"}, names, "descriptors of the detached process")
	assert.NoError(t, exec.Command("flock", "-n", lock, "true").Run(), "the caller's lock is free while the daemon runs")
}

// TestMakeE2ELongRunsEveryLongTest: the e2e tests that skip themselves in `make e2e` (they call longTest) are the
// ones `make e2e-long` runs by name (the Makefile's E2E_LONG_RUN). A test added to one list and not the other
// would never run in either target; the two lists must name the same tests.
func TestMakeE2ELongRunsEveryLongTest(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "e2e", "*_test.go"))
	require.NoError(t, err)
	require.NotEmpty(t, files, "e2e/*_test.go")
	fset := token.NewFileSet()
	var long []string
	for _, f := range files {
		file, err := parser.ParseFile(fset, f, nil, 0)
		require.NoError(t, err, f)
		for _, d := range file.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Body == nil || !strings.HasPrefix(fn.Name.Name, "Test") {
				continue
			}
			ast.Inspect(fn.Body, func(n ast.Node) bool {
				if call, ok := n.(*ast.CallExpr); ok {
					if id, ok := call.Fun.(*ast.Ident); ok && id.Name == "longTest" {
						long = append(long, fn.Name.Name)
						return false
					}
				}
				return true
			})
		}
	}
	require.NotEmpty(t, long, "no e2e test calls longTest: is the helper renamed?")

	mk, err := os.ReadFile(filepath.Join("..", "Makefile"))
	require.NoError(t, err)
	m := regexp.MustCompile(`(?m)^E2E_LONG_RUN\s*:=\s*\^\(([^)]*)\)\$\$\s*$`).FindSubmatch(mk)
	require.NotNil(t, m, "Makefile: E2E_LONG_RUN := ^(TestA|TestB)$$ not found")
	assert.ElementsMatch(t, long, strings.Split(string(m[1]), "|"),
		"the e2e tests calling longTest (left) and the Makefile's E2E_LONG_RUN (right) must name the same tests")
}
