package plan

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/valkey-ha/valkey-ha/internal/podsteps/handoff"
)

// TestRemember is the one fold of an applier's Outcome into the next pass's Memory: a failed handoff by
// reason, the nodes whose users were synced, and nothing else.
func TestRemember(t *testing.T) {
	failedAt := now.Add(3 * time.Second)
	earlier := map[string]ACLApplied{"vk-2-0": {Revision: "old", Identity: "uid/0", At: now.Add(-time.Hour)}}
	tests := []struct {
		name  string
		d     func(d *Decision)
		o     Outcome
		check func(t *testing.T, m Memory)
	}{
		{name: "nothing done: the planner's memory as it is", check: func(t *testing.T, m Memory) {
			assert.Equal(t, settledMemory(), m)
		}},
		{name: "a step taken changes nothing", o: Outcome{LastAction: "roll: replaced vk-1-0"}, check: func(t *testing.T, m Memory) {
			assert.Equal(t, settledMemory(), m)
		}},
		{name: "no promotable replica: not retried under the view it was refused under",
			d: func(d *Decision) { d.HandoffPrint = "the view" },
			o: Outcome{Handoff: &HandoffFailure{Reason: handoff.ReasonNoGoodReplica, Err: "NoGoodReplica: NOGOODSLAVE", At: failedAt}},
			check: func(t *testing.T, m Memory) {
				assert.Equal(t, HandoffRefusal{Print: "the view", Why: "handoff refused: NoGoodReplica: NOGOODSLAVE"}, m.HandoffRefused)
				assert.Zero(t, m.HandoffDeferredUntil, "no back-off: the view must change")
			}},
		{name: "a failover in flight: looked at again next pass",
			o: Outcome{Handoff: &HandoffFailure{Reason: handoff.ReasonFailoverInFlight, Err: "INPROG", At: failedAt}},
			check: func(t *testing.T, m Memory) {
				assert.Zero(t, m.HandoffDeferredUntil)
				assert.Zero(t, m.HandoffRefused)
			}},
		{name: "any other failure backs the roll off from when it failed",
			o: Outcome{Handoff: &HandoffFailure{Reason: handoff.ReasonReplicasLag, Err: "lag", At: failedAt}},
			check: func(t *testing.T, m Memory) {
				assert.Equal(t, failedAt.Add(HandoffBackoff), m.HandoffDeferredUntil)
				assert.Zero(t, m.HandoffRefused)
			}},
		{name: "an error without a reason backs off too",
			o:     Outcome{Handoff: &HandoffFailure{Err: "dial tcp: refused", At: failedAt}},
			check: func(t *testing.T, m Memory) { assert.Equal(t, failedAt.Add(HandoffBackoff), m.HandoffDeferredUntil) }},
		{name: "a node whose primary label was taken off is closed again for RecloseWindow from then",
			d: func(d *Decision) { d.Memory.Reclose = map[int]time.Time{2: now.Add(time.Second)} },
			o: Outcome{Relabelled: map[int]time.Time{0: failedAt}},
			check: func(t *testing.T, m Memory) {
				assert.Equal(t, map[int]time.Time{0: failedAt.Add(RecloseWindow), 2: now.Add(time.Second)}, m.Reclose)
			}},
		{name: "synced nodes record the revision, their identity and the pass's time; a failed one nothing",
			d: func(d *Decision) { d.Memory.ACLApplied = earlier },
			o: Outcome{ACLSync: []NodeSync{{Pod: "vk-0-0", Revision: "rev1"}, {Pod: "vk-1-0", Revision: "rev1", Err: "NOPERM"}}},
			check: func(t *testing.T, m Memory) {
				assert.Equal(t, map[string]ACLApplied{
					"vk-0-0": {Revision: "rev1", Identity: "uid-0/0", At: now},
					"vk-2-0": earlier["vk-2-0"],
				}, m.ACLApplied)
				assert.Len(t, earlier, 1, "the earlier memory's map is not changed in place")
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := steadyWorld()
			for i := range w.Nodes {
				w.Nodes[i].Identity = fmt.Sprintf("uid-%d/0", i)
			}
			d := Decision{Memory: settledMemory()}
			if tt.d != nil {
				tt.d(&d)
			}
			tt.check(t, Remember(w, d, tt.o))
		})
	}
}
