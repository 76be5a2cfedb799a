package plan

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/valkey-ha/valkey-ha/internal/chartapi/spec"
	"github.com/valkey-ha/valkey-ha/internal/planners/registration"
	"github.com/valkey-ha/valkey-ha/internal/valkeyapi/valkey"
)

// TestMonitorNameCollisionAcrossNamespaces (issue 17): two instances of different namespaces with the same
// monitor name; the one already registered (by its host's namespace) keeps it, the other is refused.
func TestMonitorNameCollisionAcrossNamespaces(t *testing.T) {
	a := spec.Instance{Name: "cache", Namespace: "a", MonitorName: "cache"}
	b := spec.Instance{Name: "cache", Namespace: "b", MonitorName: "cache"}
	world := func(reg []registration.SentinelState) *SentinelWorld {
		w := &SentinelWorld{Sentinels: reg, Instances: []MonitoredInstance{{Descriptor: "cache-instance", Namespace: "a", Instance: a},
			{Descriptor: "cache-instance", Namespace: "b", Instance: b}}}
		RefuseNameCollisions(w)
		w.Derive()
		return w
	}
	w := world(nil)
	assert.Empty(t, w.Instances[0].Refused, "unregistered: the first by namespace/name keeps the name")
	assert.Contains(t, w.Instances[1].Refused, "also used by instance a/cache")
	assert.True(t, w.Instances[1].Collision)
	assert.NotContains(t, w.Keep, "cache", "the loser keeps nothing (its Keep would hold every Sentinel roll)")

	reg := []registration.SentinelState{{Reachable: true, Monitors: map[string]valkey.Monitor{"cache": {Host: "cache-0-0.cache-0.b.svc.cluster.local"}}}}
	w = world(reg)
	assert.Empty(t, w.Instances[1].Refused, "the registered one keeps its monitor")
	assert.Contains(t, w.Instances[0].Refused, "also used by instance b/cache")
}

// TestKeepUnreadable: the monitors registered in a namespace that cannot be read, or that the unknown
// namespace selection may select, are kept; a monitor whose host names no namespace holds every removal
// while some namespace or the selection cannot be read; everything readable keeps nothing (issue 12, F3).
func TestKeepUnreadable(t *testing.T) {
	mon := func(host string) valkey.Monitor { return valkey.Monitor{Host: host, Port: 6379} }
	sentinels := []registration.SentinelState{{Pod: "q-0", Reachable: true, Monitors: map[string]valkey.Monitor{
		"a":  mon("a-0-0.a-0.t1.svc.cluster.local"),
		"b":  mon("b-0-0.b-0.t2.svc.cluster.local"),
		"c":  mon("c-0-0.c-0.t3.svc.cluster.local"),
		"lo": mon("localhost"),
	}}}
	t1 := UnreadableNamespace{Namespace: "t1", Why: "forbidden"}
	for _, tc := range []struct {
		name     string
		rd       NamespaceReadability
		keep     []string
		unowned  bool
		warnings int
	}{
		{"everything readable", NamespaceReadability{}, nil, false, 0},
		{"t1 unreadable", NamespaceReadability{Unreadable: []UnreadableNamespace{t1}}, []string{"a"}, true, 1},
		{"selection unknown, t2 served", NamespaceReadability{SelectionUnknown: "not listed yet", Served: map[string]bool{"t1": false, "t2": true, "t3": false}},
			[]string{"a", "c"}, true, 1},
		{"both", NamespaceReadability{SelectionUnknown: "x", Unreadable: []UnreadableNamespace{t1}, Served: map[string]bool{"t2": true}},
			[]string{"a", "c"}, true, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := SentinelWorld{Namespace: "platform", Sentinels: sentinels, Namespaces: tc.rd}
			w.Derive()
			var keep []string
			for name := range w.Keep {
				keep = append(keep, name)
			}
			assert.ElementsMatch(t, tc.keep, keep)
			assert.Equal(t, tc.unowned, w.Unowned != "", "Unowned %q", w.Unowned)
			assert.Len(t, NamespaceWarnings(w), tc.warnings)
			d := PlanSentinels(w, time.Time{})
			for _, name := range tc.keep {
				assert.NotEmpty(t, CheckSentinelStep(w, Step{Kind: Remove, Pod: "q-0", Monitor: name}), "the policy refuses the REMOVE of %s", name)
			}
			assert.Equal(t, tc.warnings > 0, strings.Contains(strings.Join(d.Warnings, "\n"), "cannot be read"), "%v", d.Warnings)
		})
	}
}
