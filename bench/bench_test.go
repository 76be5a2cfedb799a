//go:build bench

package bench

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/valkey-ha/valkey-ha/internal/testsupport/valkeytest"
)

// command is what `make bench` runs (kept equal to the Makefile's bench target).
const command = "go test -tags bench -count=1 -timeout 30m -run '^TestBenchmarks$' -v ./bench/"

type target struct {
	Name     string
	Measured string
	Pass     bool
	Skip     bool
}

func (t target) verdict() string {
	switch {
	case t.Skip:
		return "NOT MEASURED"
	case t.Pass:
		return "PASS"
	}
	return "MISS"
}

type figure struct {
	N       int
	Title   string
	Header  []string
	Rows    [][]string
	Targets []target
	Notes   []string
	Raw     []string // per-round samples, for the record
	Skipped string
	Failed  bool
	Took    time.Duration
}

var versions struct{ kubernetes, helm string }

func envInt(k string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(k)); err == nil && v > 0 {
		return v
	}
	return def
}

func envInts(k string, def []int) []int {
	v := os.Getenv(k)
	if v == "" {
		return def
	}
	var out []int
	for _, s := range strings.Split(v, ",") {
		if n, err := strconv.Atoi(strings.TrimSpace(s)); err == nil && n > 0 {
			out = append(out, n)
		}
	}
	if len(out) == 0 {
		return def
	}
	return out
}

func joinComma(s []string) string { return strings.Join(s, ", ") }

func repoRoot(t testing.TB) string {
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for d := wd; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return d
		}
		if filepath.Dir(d) == d {
			t.Fatalf("go.mod not found above %s", wd)
		}
	}
}

func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

// TestBenchmarks runs every figure, prints the table and rewrites BENCHMARKS.md.
func TestBenchmarks(t *testing.T) {
	valkeytest.Require(t, valkeytest.Default)
	begin := time.Now()
	load0 := loadavg()
	only := map[int]bool{}
	for _, n := range envInts("BENCH_FIGURES", nil) {
		only[n] = true
	}
	all := []struct {
		n  int
		fn func(*testing.T) *figure
	}{{1, fig1}, {2, fig2}, {3, fig3}, {4, fig4}, {5, fig5}, {6, fig6}, {7, fig7}, {8, fig8}}
	var figs []*figure
	for _, fg := range all {
		if len(only) > 0 && !only[fg.n] {
			continue
		}
		start := time.Now()
		var res *figure
		ok := t.Run(fmt.Sprintf("figure%d", fg.n), func(t *testing.T) { res = fg.fn(t) })
		if res == nil {
			res = &figure{N: fg.n, Title: fmt.Sprintf("Figure %d", fg.n)}
		}
		if !ok {
			res.Failed = true
			res.Skipped = "FAILED: the run did not complete (see the go test output)"
			for i := range res.Targets {
				res.Targets[i].Skip = true
			}
		}
		res.Took = time.Since(start)
		figs = append(figs, res)
		fmt.Print(renderText(res))
	}
	took := time.Since(begin)
	load1 := loadavg()
	fmt.Print(renderSummary(figs, took))
	path := filepath.Join(repoRoot(t), "BENCHMARKS.md")
	if len(only) > 0 {
		if os.Getenv("BENCH_UPDATE") != "1" {
			t.Logf("BENCH_FIGURES is set: BENCHMARKS.md left unchanged (BENCH_UPDATE=1 replaces those figures' parts)")
			return
		}
		spliceFigures(t, path, figs, took, load0, load1)
		return
	}
	md := renderMarkdown(figs, took, load0, load1, repoRoot(t))
	if err := os.WriteFile(path, []byte(md), 0o644); err != nil {
		t.Fatalf("write %s: %v", path, err)
	}
	t.Logf("wrote %s (suite took %s)", path, took.Round(time.Second))
}

// ---- rendering ------------------------------------------------------------------------------------------

func renderText(f *figure) string {
	var b strings.Builder
	fmt.Fprintf(&b, "\n=== Figure %d: %s (%s)\n", f.N, f.Title, f.Took.Round(time.Second))
	if f.Skipped != "" {
		fmt.Fprintf(&b, "    %s\n", f.Skipped)
	}
	if len(f.Rows) > 0 {
		w := make([]int, len(f.Header))
		for i, h := range f.Header {
			w[i] = len(h)
		}
		for _, r := range f.Rows {
			for i, c := range r {
				if i < len(w) && len(c) > w[i] {
					w[i] = len(c)
				}
			}
		}
		line := func(cells []string) {
			b.WriteString("   ")
			for i, c := range cells {
				fmt.Fprintf(&b, " %-*s |", w[i], c)
			}
			b.WriteString("\n")
		}
		line(f.Header)
		for _, r := range f.Rows {
			line(r)
		}
	}
	for _, tg := range f.Targets {
		fmt.Fprintf(&b, "    target %-60s %-12s measured %s\n", tg.Name, tg.verdict(), tg.Measured)
	}
	for _, n := range f.Notes {
		fmt.Fprintf(&b, "    note: %s\n", n)
	}
	return b.String()
}

func renderSummary(figs []*figure, took time.Duration) string {
	var b strings.Builder
	fmt.Fprintf(&b, "\n=== Targets (suite took %s)\n", took.Round(time.Second))
	for _, f := range figs {
		for _, tg := range f.Targets {
			fmt.Fprintf(&b, "    fig %d  %-12s %-62s %s\n", f.N, tg.verdict(), tg.Name, tg.Measured)
		}
	}
	return b.String()
}

func cmdOut(name string, args ...string) string {
	out, err := exec.Command(name, args...).Output()
	if err != nil {
		return "unknown"
	}
	return strings.TrimSpace(string(out))
}

func machine() []string {
	cpu := "unknown"
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(l, "model name") {
				cpu = strings.TrimSpace(strings.SplitN(l, ":", 2)[1])
				break
			}
		}
	}
	mem := "unknown"
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if f := strings.Fields(l); len(f) >= 2 && f[0] == "MemTotal:" {
				kb, _ := strconv.ParseFloat(f[1], 64)
				mem = fmt.Sprintf("%.1f GiB", kb/1024/1024)
			}
		}
	}
	kernel := "unknown"
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		kernel = strings.TrimSpace(string(b))
	}
	return []string{fmt.Sprintf("CPU: %s, %d logical CPUs", cpu, runtime.NumCPU()), "Memory: " + mem,
		fmt.Sprintf("Kernel: Linux %s (%s/%s)", kernel, runtime.GOOS, runtime.GOARCH)}
}

// moduleVersion returns the version go.mod requires for a module path.
func moduleVersion(root, path string) string {
	b, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		return "unknown"
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == path {
			return f[1]
		}
	}
	return "unknown"
}

func renderMarkdown(figs []*figure, took time.Duration, load0, load1, root string) string {
	var b strings.Builder
	w := func(format string, a ...any) { fmt.Fprintf(&b, format, a...) }
	w("# Benchmarks\n\n")
	w("Generated by `make bench` (issue 8) on %s; the whole suite took **%s**. Do not edit by hand: the next run\n", time.Now().UTC().Format("2006-01-02 15:04 MST"), took.Round(time.Second))
	w("rewrites this file.\n\n")
	w("```\nmake bench\n# = %s\n```\n\n", command)

	w("## Targets\n\n| fig | target | measured | verdict |\n|---|---|---|---|\n")
	for _, f := range figs {
		for _, tg := range f.Targets {
			w("| %d | %s | %s | **%s** |\n", f.N, tg.Name, tg.Measured, tg.verdict())
		}
	}
	w("\nA missed target is reported as measured; see each figure's notes and the explanations at the end.\n\n")

	w("## How to read\n\n")
	w("- Every comparison is measured side by side in the same run (same machine, same minute) and the **ratio** is\n")
	w("  what we track; absolute times move with the machine and its load, ratios much less.\n")
	w("- All data nodes and Sentinels are real `valkey-server` / `valkey-sentinel` processes on loopback\n")
	w("  (internal/testsupport/valkeytest), with the charts' ACL system users. The controllers are the real ones\n")
	w("  (internal/controllers/controller) on a fake Kubernetes clientset, except figure 5, which installs the charts on the local cluster.\n")
	w("- A writer is valkey-go's Sentinel-aware client writing every 10 ms (`SET key n GET`, its own key). Figures 1\n")
	w("  and 2 run three, writer j listing the Sentinels from Sentinel j on, so one is subscribed to each Sentinel\n")
	w("  (valkey-go listens to the first that answers), as clients spread over a Sentinel Service are. An\n")
	w("  *acknowledged write* is one that returned OK. A write that finds an older value than writes acknowledged before\n")
	w("  it proves those writes were lost; *lost acked writes* counts them.\n")
	w("- *Client outage* (figure 1) runs from the first failed write to the first acknowledged write after it.\n")
	w("  *Write outage* in figure 2 is stricter: the total time without any acknowledged write for more than 100 ms,\n")
	w("  so writes blocked by CLIENT PAUSE count as well as failed ones.\n")
	w("- The *floor* is what Sentinel alone needs: SIGKILL to the first Sentinel answering GET-MASTER-ADDR-BY-NAME with\n")
	w("  the new primary (detection after down-after-milliseconds, agreement, election, promotion). Nothing we add\n")
	w("  can be faster than it; outage / floor is what we add on top of Sentinel.\n")
	w("- Percentiles are nearest-rank; p95 of 20 samples is the 19th smallest.\n\n")

	w("## Figures\n\n")
	for _, f := range figs {
		w("### Figure %d. %s\n\n", f.N, f.Title)
		if f.Skipped != "" {
			w("%s\n\n", f.Skipped)
		}
		if len(f.Rows) > 0 {
			w("| %s |\n|%s\n", strings.Join(f.Header, " | "), strings.Repeat("---|", len(f.Header)))
			for _, r := range f.Rows {
				w("| %s |\n", strings.Join(r, " | "))
			}
			w("\n")
		}
		for _, tg := range f.Targets {
			w("- Target: %s: measured %s, **%s**\n", tg.Name, tg.Measured, tg.verdict())
		}
		for _, n := range f.Notes {
			w("- %s\n", n)
		}
		if len(f.Raw) > 0 {
			w("- Samples (s unless stated):\n")
			for _, r := range f.Raw {
				w("  - %s\n", r)
			}
		}
		w("- Figure run time: %s\n\n", f.Took.Round(time.Second))
		if text, ok := figureMethod[f.N]; ok {
			w("%s\n\n", text)
		}
	}

	w("## Machine and versions\n\n")
	for _, m := range machine() {
		w("- %s\n", m)
	}
	w("- Load average (1, 5, 15 min) at start: %s; at end: %s\n", load0, load1)
	w("- Go: %s; valkey-go %s; client-go %s\n", runtime.Version(), moduleVersion(root, "github.com/valkey-io/valkey-go"), moduleVersion(root, "k8s.io/client-go"))
	w("- Engine under test: %s (%s)\n", valkeytest.Default, engineVersion())
	if versions.kubernetes != "" {
		w("- Kubernetes (figure 5): %s; helm %s\n", versions.kubernetes, versions.helm)
	}
	commit := cmdOut("git", "-C", root, "rev-parse", "--short", "HEAD")
	if st := cmdOut("git", "-C", root, "status", "--porcelain", "--untracked-files=no"); st != "" && st != "unknown" {
		commit += " (with uncommitted changes)"
	}
	w("- Commit: %s\n", commit)
	if extra := knobs(); extra != "" {
		w("- Knobs set: %s\n", extra)
	}
	w("\n")
	if text := explanations(figs); text != "" {
		w("## Missed targets: explanation\n\n%s\n", text)
	}
	// figures measured outside the suite (they need the local cluster, or a test package's own harness) are
	// kept in bench/outside.md, by hand, with their date and machine: copied so that a rewrite keeps them
	if text, err := os.ReadFile(filepath.Join(root, "bench", "outside.md")); err == nil {
		w("%s", text)
	}
	return b.String()
}

// engineVersion is what the engine under test's server says of its version.
func engineVersion() string {
	e := valkeytest.Default
	out, err := e.Command(e.Server, "--version").Output()
	if err != nil {
		return "unknown"
	}
	return strings.TrimSpace(string(out))
}

// spliceFigures replaces the parts of BENCHMARKS.md that belong to figs (BENCH_FIGURES with BENCH_UPDATE=1)
// and notes when, on which commit and under which load they were measured.
func spliceFigures(t *testing.T, path string, figs []*figure, took time.Duration, load0, load1 string) {
	old, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read %s: %v", path, err)
	}
	var ns []int
	var names []string
	for _, f := range figs {
		ns = append(ns, f.N)
		names = append(names, strconv.Itoa(f.N))
	}
	root := repoRoot(t)
	note := fmt.Sprintf("figure %s on %s (BENCH_FIGURES=%s BENCH_UPDATE=1, %s, commit %s, %s, load %s -> %s%s); the rest is from the full run above.",
		strings.Join(names, ", "), time.Now().UTC().Format("2006-01-02 15:04 MST"), strings.Join(names, ","), took.Round(time.Second),
		cmdOut("git", "-C", root, "rev-parse", "--short", "HEAD"), engineVersion(), load0, load1, knobsSuffix())
	md, err := spliceMarkdown(string(old), renderMarkdown(figs, took, load0, load1, root), ns, note)
	if err != nil {
		t.Fatalf("update %s: %v", path, err)
	}
	if err := os.WriteFile(path, []byte(md), 0o644); err != nil {
		t.Fatalf("write %s: %v", path, err)
	}
	t.Logf("replaced figure %s in %s", strings.Join(names, ", "), path)
}

func knobsSuffix() string {
	if k := knobs(); k != "" {
		return "; knobs " + k
	}
	return ""
}

func knobs() string {
	var out []string
	for _, k := range []string{"BENCH_ROUNDS", "BENCH_ROUNDS_5000", "BENCH_ROLLS", "BENCH_REPL_DELAY_MS", "BENCH_FAILOVERS", "BENCH_K", "BENCH_HANDOFFS", "BENCH_LAG_MS", "VALKEYTEST_ENGINE"} {
		if v := os.Getenv(k); v != "" {
			out = append(out, k+"="+v)
		}
	}
	return strings.Join(out, ", ")
}
