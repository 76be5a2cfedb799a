//go:build bench

package bench

// Small helpers shared by the figures: wrappers of the shared test environment (internal/testsupport/testenv: writers,
// the fake clientset, the fake kubelet, Sentinel watchers), readers for process CPU and memory, statistics.

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"os"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/tools/record"

	"github.com/valkey-ha/valkey-ha/internal/controllers/controller"
	"github.com/valkey-ha/valkey-ha/internal/controllers/metrics"
	"github.com/valkey-ha/valkey-ha/internal/testsupport/testenv"
	"github.com/valkey-ha/valkey-ha/internal/testsupport/valkeytest"
	"github.com/valkey-ha/valkey-ha/internal/valkeyapi/valkey"
)

const ns = "bench"

// writerKey is the prefix of the writers' keys.
const writerKey = "__valkey-ha:bench"

// startWriters starts one counter-mode writer per Sentinel (testenv.StartWriters), on keys writerKey:<j>.
func startWriters(t testing.TB, top *valkeytest.Topology) []*testenv.Writer {
	t.Helper()
	return testenv.StartWriters(t, top, testenv.WriterOptions{Key: writerKey})
}

// startWriter starts a counter-mode writer that lists the Sentinels in order, so it subscribes to Sentinel 0.
func startWriter(t testing.TB, top *valkeytest.Topology) *testenv.Writer {
	t.Helper()
	return testenv.StartWriter(t, top, testenv.WriterOptions{Key: writerKey + ":0"})
}

// newKEnv describes top to the controllers through a fake clientset (testenv.Env in namespace ns, with the
// <F>-sentinels ConfigMap published).
func newKEnv(t testing.TB, top *valkeytest.Topology) *testenv.Env {
	t.Helper()
	e := testenv.New(t, top, testenv.Options{Namespace: ns, DescriptorUID: "desc-vk"})
	e.PublishSentinels()
	return e
}

// debugf logs with BENCH_DEBUG set.
func debugf(t testing.TB, format string, a ...any) {
	if os.Getenv("BENCH_DEBUG") != "" {
		t.Helper()
		t.Logf("%s "+format, append([]any{time.Now().Format("15:04:05.000")}, a...)...)
	}
}

func quietLog() *slog.Logger { return testenv.Log("BENCH_LOG") }

// startInstanceController runs the real instance controller on e's fake clientset until stop is called or
// the test ends (Events are dropped).
func startInstanceController(e *testenv.Env, o controller.InstanceOptions) (stop func()) {
	o.Namespace, o.Instance = e.NS, e.In.Name
	c := controller.NewInstanceController(e.CS, o, metrics.New(), &record.FakeRecorder{}, quietLog())
	return e.Run(func(ctx context.Context) error { return c.Run(ctx, nil) })
}

// serverPID returns the process id of a server or Sentinel (INFO server).
func serverPID(p *valkeytest.Proc, o valkey.Options) (int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	c, err := valkey.Dial(ctx, p.Addr(), o)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	f, err := c.Info(ctx, "server")
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(f["process_id"])
}

// ---- process accounting ---------------------------------------------------------------------------------

// sentinelCPU returns the process ids of the Sentinels sents and a function that sums the CPU time they have
// used (cpuTime); a Sentinel whose pid cannot be read fails the test.
func sentinelCPU(t *testing.T, sents []*valkeytest.Proc) (pids []int, total func() time.Duration) {
	t.Helper()
	for _, s := range sents {
		pid, err := serverPID(s, valkey.Options{})
		if err != nil {
			t.Fatalf("sentinel pid: %v", err)
		}
		pids = append(pids, pid)
	}
	return pids, func() time.Duration {
		var d time.Duration
		for _, pid := range pids {
			c, _ := cpuTime(pid)
			d += c
		}
		return d
	}
}

// cpuTime returns the CPU time a process has used: from /proc/<pid>/schedstat (nanoseconds) when the kernel
// provides it, else utime+stime of /proc/<pid>/stat (clock ticks of 10 ms).
func cpuTime(pid int) (time.Duration, error) {
	if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/schedstat", pid)); err == nil {
		if f := strings.Fields(string(b)); len(f) > 0 {
			if ns, err := strconv.ParseInt(f[0], 10, 64); err == nil && ns > 0 {
				return time.Duration(ns), nil
			}
		}
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	if len(f) < 13 {
		return 0, fmt.Errorf("short /proc/%d/stat", pid)
	}
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * 10 * time.Millisecond, nil
}

// statusKB returns a field of /proc/<pid>/status in KiB (e.g. VmHWM, VmRSS).
func statusKB(pid int, field string) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, field+":") {
			f := strings.Fields(l)
			if len(f) >= 2 {
				return strconv.ParseInt(f[1], 10, 64)
			}
		}
	}
	return 0, fmt.Errorf("%s not in /proc/%d/status", field, pid)
}

// ---- statistics -----------------------------------------------------------------------------------------

func sortedCopy(ds []time.Duration) []time.Duration {
	s := append([]time.Duration{}, ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s
}

// percentile is the nearest-rank percentile (p in 0..100) of ds.
func percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := sortedCopy(ds)
	r := int(math.Ceil(p / 100 * float64(len(s))))
	if r < 1 {
		r = 1
	}
	return s[r-1]
}

func median(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := sortedCopy(ds)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func maxOf(ds []time.Duration) time.Duration {
	var m time.Duration
	for _, d := range ds {
		if d > m {
			m = d
		}
	}
	return m
}

func secs(d time.Duration) string { return fmt.Sprintf("%.2f s", d.Seconds()) }

func ms(d time.Duration) string {
	return fmt.Sprintf("%d ms", d.Round(time.Millisecond).Milliseconds())
}

func ratio(a, b time.Duration) float64 {
	if b <= 0 {
		return math.Inf(1)
	}
	return float64(a) / float64(b)
}
