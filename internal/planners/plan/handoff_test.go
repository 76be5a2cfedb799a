package plan

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/valkey-ha/valkey-ha/internal/valkeyapi/valkey"
)

func TestFailoverOrderAsksTheLastSentinelFirst(t *testing.T) {
	in := []string{"q-0.q-headless:26379", "q-1.q-headless:26379", "q-2.q-headless:26379"}
	assert.Equal(t, []string{"q-2.q-headless:26379", "q-1.q-headless:26379", "q-0.q-headless:26379"}, FailoverOrder(in))
	assert.Equal(t, "q-0.q-headless:26379", in[0], "the input is left as it was")
	assert.Empty(t, FailoverOrder(nil))
	assert.NotNil(t, FailoverOrder(nil), "never nil: a Decision's nil order means FAILOVER TO")
}

// TestHandoffObstacle is what the report of a terminating primary says stops its preStop hook, one row per
// rule of HandoffObstacle.
func TestHandoffObstacle(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(w *World)
		want   string // "" = nothing stops it; else the whole sentence
	}{
		{name: "steady: nothing stops it"},
		{name: "unmonitored: FAILOVER TO needs no Sentinel", mutate: func(w *World) {
			w.SentinelInfo, w.Sentinels, w.QuorumAsked = nil, nil, false
		}},
		{name: "no quorum", mutate: func(w *World) { w.Quorum = valkey.Quorum{Message: "NOQUORUM"} }, want: "no Sentinel quorum (NOQUORUM)"},
		{name: "CKQUORUM not answered: the Sentinels decide", mutate: func(w *World) {
			w.Quorum, w.QuorumAsked = valkey.Quorum{Message: "no Sentinel answered CKQUORUM"}, false
		}},
		{name: "the first Sentinel that knows the monitor sees the primary down", mutate: func(w *World) {
			w.Sentinels[0].Err = "timeout"
			w.Sentinels[1].Monitor.Flags = []string{"master", "s_down"}
		}, want: "Sentinel s1:26379: Sentinel flags the primary master,s_down"},
		{name: "no Sentinel may promote and no replica reports itself promotable", mutate: func(w *World) {
			for i := range w.Sentinels {
				for j := range w.Sentinels[i].Replicas {
					w.Sentinels[i].Replicas[j].Priority = 0
				}
			}
			w.Nodes[1].Repl.ReplicaPriority, w.Nodes[2].Repl.ReplicaPriority = 0, 0
		}, want: "Sentinel s0:26379: no replica may be promoted: "},
		{name: "no Sentinel may promote yet, but a replica reports a restored priority: the hook waits for the Sentinels", mutate: func(w *World) {
			for i := range w.Sentinels {
				for j := range w.Sentinels[i].Replicas {
					w.Sentinels[i].Replicas[j].Priority = 0
				}
			}
		}},
		{name: "a failover in flight is the hook's to wait for", mutate: func(w *World) {
			w.Sentinels[0].Monitor.Flags = []string{"master", "failover_in_progress"}
		}},
		{name: "no Sentinel listed its replicas", mutate: func(w *World) {
			w.Sentinels[0].Err, w.Sentinels[1].Found, w.Sentinels[2].ReplicasErr = "timeout", false, "timeout"
		}, want: "no Sentinel answered"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := steadyWorld()
			for i := range w.Sentinels {
				for j := range w.Sentinels[i].Replicas {
					w.Sentinels[i].Replicas[j].Priority = 100
				}
			}
			if tt.mutate != nil {
				tt.mutate(&w)
			}
			got := HandoffObstacle(w, w.Instance.Nodes[0])
			if tt.want == "" {
				assert.Empty(t, got)
			} else {
				assert.Contains(t, got, tt.want)
			}
		})
	}
}
