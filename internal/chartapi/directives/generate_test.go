package directives

import (
	"context"
	"flag"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/valkey-ha/valkey-ha/internal/testsupport/valkeytest"
	"github.com/valkey-ha/valkey-ha/internal/valkeyapi/valkey"
)

var update = flag.Bool("update", false, "rewrite the engine data and _directives.tpl of both charts")

// Charts carry the same data; each reads it with .Files.Get.
var charts = []string{"valkey", "valkey-sentinel"}

func chartFile(chart, rel string) string {
	return filepath.Join("..", "..", "..", "charts", chart, rel)
}

// TestEngineDirectivesCurrent observes every installed engine and compares what it accepts with the data
// checked into both charts (and the generated _directives.tpl with its source). With -update (go generate) it
// rewrites them instead.
func TestEngineDirectivesCurrent(t *testing.T) {
	for _, e := range valkeytest.Engines {
		t.Run(e.String(), func(t *testing.T) {
			set := Observe(t, e)
			if set.Version != e.Version {
				t.Fatalf("%s: the binaries report version %s", e, set.Observed)
			}
			got, err := set.Marshal()
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range charts {
				path := chartFile(c, FileName(set.Engine, set.Version))
				if *update {
					if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
						t.Fatal(err)
					}
					if err := os.WriteFile(path, got, 0o644); err != nil {
						t.Fatal(err)
					}
					continue
				}
				b, err := os.ReadFile(path)
				if err != nil {
					t.Fatalf("charts/%s has no directive data for %s %s (%v): run go generate ./internal/chartapi/directives", c, set.Engine, set.Version, err)
				}
				old, err := Parse(b)
				if err != nil {
					t.Fatalf("%s: %v", path, err)
				}
				if d := Diff(old, set); len(d) > 0 {
					t.Errorf("charts/%s/%s is stale for the installed %s %s (run go generate ./internal/chartapi/directives):\n  %s",
						c, FileName(set.Engine, set.Version), set.Engine, set.Observed, strings.Join(d, "\n  "))
				}
			}
		})
	}
	for _, c := range charts {
		want := CheckTemplate(c)
		path := chartFile(c, "templates/_directives.tpl")
		if *update {
			if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		b, err := os.ReadFile(path)
		if err != nil || string(b) != want {
			t.Errorf("charts/%s/templates/_directives.tpl differs from internal/chartapi/directives/check.tpl: run go generate ./internal/chartapi/directives", c)
		}
	}
}

// Observe starts the engine's server and Sentinel and probes every directive they know.
func Observe(t *testing.T, e valkeytest.Engine) Set {
	t.Helper()
	version := valkeytest.Version(t, e)
	set := Set{Engine: e.Name, Version: valkeytest.MinorVersion(version), Observed: version,
		Server: observeServer(t, e), Sentinel: observeSentinel(t, e), SentinelSet: observeSentinelSet(t, e)}
	return set
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}

// parallel runs fn for every name on a few workers (each probe is a short-lived process).
func parallel(names []string, fn func(name string)) {
	var wg sync.WaitGroup
	work := make(chan string)
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := range work {
				fn(n)
			}
		}()
	}
	for _, n := range names {
		work <- n
	}
	close(work)
	wg.Wait()
}

func quote(v string) string { return strconv.Quote(v) }

func observeServer(t *testing.T, e valkeytest.Engine) map[string]Directive {
	srv := valkeytest.StartServer(t, e, valkeytest.ServerConfig{})
	all, err := srv.Client(valkey.Options{}).ConfigGet(ctx(t), "*")
	if err != nil {
		t.Fatalf("CONFIG GET *: %v", err)
	}
	srv.Kill()
	names := slices.Sorted(maps.Keys(all))
	check := func(line string) valkeytest.ConfigVerdict { return valkeytest.CheckConfig(t, e, false, line) }
	out := map[string]Directive{}
	var mu sync.Mutex
	parallel(names, func(n string) {
		if slices.Contains(Paths, n) {
			mu.Lock()
			out[n] = Directive{Kind: Path}
			mu.Unlock()
			return
		}
		first := check(n + " " + Probe)
		d := ClassifyServerProbe(first.Accepted, first.Message)
		switch d.Kind {
		case Integer:
			v := check(n + " -9223372036854775808")
			if lo, hi, ok := ParseBounds(v.Message); ok {
				d.Min, d.Max = lo, hi
			} else if v.Accepted {
				d.Min = "-9223372036854775808"
				if w := check(n + " 9223372036854775807"); !w.Accepted {
					_, d.Max, _ = ParseBounds(w.Message)
				} else {
					d.Max = "9223372036854775807"
				}
			} else {
				t.Errorf("%s %s: bounds probe said %q", e.Name, n, v.Message)
			}
		case Memory, MemoryOrPercent:
			d.Min, d.Max = "0", "18446744073709551615"
			if v := check(n + " 0"); !v.Accepted {
				d.Min, d.Max, _ = ParseBounds(v.Message)
			} else if v := check(n + " 18446744073709551615"); !v.Accepted {
				_, d.Max, _ = ParseBounds(v.Message)
			}
			if d.Kind == MemoryOrPercent {
				if mp, ok := ParseMaxPercent(check(n + " 999999%").Message); ok {
					d.MaxPercent = mp
				}
			}
		case Enum:
			two := d.Values[0] + " " + d.Values[0]
			d.Multi = check(n + " " + quote(two)).Accepted
		case Special:
			if chars, ok := KeyspaceEventClasses(first.Message); ok {
				r := Rules[n]
				r.Format = "^[" + regexp.QuoteMeta(chars) + "]*$"
				d.Format, d.Hint = r.Format, r.Hint
			}
		}
		if slices.Contains(Defaults, n) {
			d.Default = all[n]
		}
		if r, ok := Rules[n]; ok && (d.Kind == Special || d.Kind == String) {
			if d.Format == "" {
				d.Format, d.Hint = r.Format, r.Hint
			}
			verifyRule(t, e, n, d, r, check)
		}
		mu.Lock()
		out[n] = d
		mu.Unlock()
	})
	return out
}

// verifyRule tries the rule's examples on the binary: Good ones must start (and match Format); for Special
// directives Bad ones must be refused (and not match).
func verifyRule(t *testing.T, e valkeytest.Engine, name string, d Directive, r Rule, check func(string) valkeytest.ConfigVerdict) {
	re, err := regexp.Compile(d.Format)
	if err != nil {
		t.Errorf("rule %s: %v", name, err)
		return
	}
	for _, g := range r.Good {
		if !re.MatchString(g) {
			t.Errorf("rule %s: good example %q does not match %s", name, g, d.Format)
		}
		if v := check(name + " " + quote(g)); !v.Accepted {
			t.Errorf("rule %s: %s %s refused the good example %q: %s", name, e.Name, e.Server, g, v.Message)
		}
	}
	if d.Kind != Special {
		return
	}
	for _, b := range r.Bad {
		if re.MatchString(b) {
			t.Errorf("rule %s: bad example %q matches %s", name, b, d.Format)
		}
		if v := check(name + " " + quote(b)); v.Accepted {
			t.Errorf("rule %s: %s accepted the bad example %q", name, e.Server, b)
		}
	}
}

func observeSentinel(t *testing.T, e valkeytest.Engine) map[string]Directive {
	s := valkeytest.StartSentinel(t, e, valkeytest.SentinelConfig{})
	reply, err := s.Client(valkey.Options{}).SentinelConfigGet(ctx(t), "*")
	if err != nil {
		t.Fatalf("SENTINEL CONFIG GET *: %v", err)
	}
	s.Kill()
	names := map[string]bool{}
	for _, n := range SentinelCandidates {
		names[n] = true
	}
	for n := range reply {
		names[n] = true
	}
	sorted := slices.Sorted(maps.Keys(names))
	out := map[string]Directive{}
	var mu sync.Mutex
	parallel(sorted, func(n string) {
		v := valkeytest.CheckConfig(t, e, true, "sentinel "+n+" "+Probe)
		if SentinelStatementUnknown(v.Message) {
			return
		}
		d := ClassifyServerProbe(v.Accepted, v.Message)
		mu.Lock()
		out[n] = d
		mu.Unlock()
	})
	return out
}

// pairNames returns the keys of a flat [k1 v1 k2 v2 ...] or map reply.
func pairNames(reply any) []string {
	var out []string
	switch r := reply.(type) {
	case []any:
		for i := 0; i+1 < len(r); i += 2 {
			if s, ok := r[i].(string); ok {
				out = append(out, s)
			}
		}
	case map[string]any:
		for k := range r {
			out = append(out, k)
		}
	}
	return out
}

func observeSentinelSet(t *testing.T, e valkeytest.Engine) map[string]Directive {
	s := valkeytest.StartSentinel(t, e, valkeytest.SentinelConfig{})
	cl := s.Client(valkey.Options{})
	c := ctx(t)
	const name = "probe"
	if err := cl.SentinelMonitor(c, name, "127.0.0.1", valkeytest.FreePort(t), 1); err != nil {
		t.Fatalf("SENTINEL MONITOR: %v", err)
	}
	names := map[string]bool{}
	for _, n := range SentinelSetCandidates {
		names[n] = true
	}
	m, _, err := cl.SentinelMaster(c, name)
	if err != nil {
		t.Fatalf("SENTINEL MASTER: %v", err)
	}
	for k := range m.Fields {
		names[k] = true
	}
	sorted := slices.Sorted(maps.Keys(names))
	set := func(k, v string) error { return cl.SentinelSet(c, name, k, v) }
	out := map[string]Directive{}
	for _, k := range sorted {
		err := set(k, "abc")
		switch {
		case SentinelSetUnknown(err):
			continue
		case err == nil:
			out[k] = Directive{Kind: String}
			continue
		case !strings.Contains(err.Error(), "Invalid argument"):
			out[k] = Directive{Kind: Special}
			continue
		}
		d := Directive{Kind: Integer}
		for _, lo := range []string{"-1", "0", "1"} {
			if set(k, lo) == nil {
				d.Min = lo
				break
			}
		}
		if d.Min == "" {
			t.Errorf("%s SENTINEL SET %s: neither -1, 0 nor 1 accepted", e.Name, k)
		}
		if set(k, "9223372036854775807") == nil {
			d.Max = "9223372036854775807"
		}
		out[k] = d
	}
	return out
}
