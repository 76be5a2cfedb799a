package testenv

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/valkey-ha/valkey-ha/internal/testsupport/valkeytest"
	"github.com/valkey-ha/valkey-ha/internal/valkeyapi/acl"
)

func TestFailWindowsAndStalls(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	ev := func(start, end int, ok bool) WriteEvent { return WriteEvent{Start: at(start), End: at(end), OK: ok} }
	evs := []WriteEvent{ev(0, 1, true), ev(10, 11, false), ev(20, 21, false), ev(30, 35, true), ev(40, 300, true), ev(310, 311, false)}
	assert.Equal(t, []Window{{From: at(10), To: at(35)}, {From: at(310), To: at(311)}}, FailWindows(evs, time.Time{}))
	assert.Equal(t, []Window{{From: at(310), To: at(311)}}, FailWindows(evs, at(40)))
	assert.Equal(t, []Window{{From: at(1), To: at(35)}, {From: at(35), To: at(300)}}, Stalls(evs, t0, at(400), 20*time.Millisecond))
	ok, failed, lost := CountWrites(evs, t0, at(400))
	assert.Equal(t, [3]int{3, 3, 0}, [3]int{ok, failed, lost})
}

func TestMultiWritable(t *testing.T) {
	t0 := time.Unix(1000, 0)
	r := func(ms int, writable ...int) ProbeRound {
		return ProbeRound{At: t0.Add(time.Duration(ms) * time.Millisecond), Writable: writable}
	}
	rounds := []ProbeRound{r(0, 0), r(100, 0, 2), r(200, 0, 2), r(300, 2), r(400), r(500, 1, 2)}
	assert.Equal(t, []Window{{From: rounds[1].At, To: rounds[3].At}, {From: rounds[5].At, To: rounds[5].At.Add(time.Millisecond)}}, MultiWritable(rounds))
	assert.Empty(t, MultiWritable(rounds[:1]))
}

// TestProbeSeesTwoWritablePrimaries: the probe reports exactly one writable primary on a healthy topology,
// and two once a replica is promoted by hand (so a chaos run that counts no two-primary window is not
// blind); a PerWrite writer's acknowledged keys are all on the primary.
func TestProbeSeesTwoWritablePrimaries(t *testing.T) {
	top := valkeytest.StartTopology(t, valkeytest.TopologyConfig{Replicas: 1, DownAfterMs: 5000, FailoverTimeoutMs: 15000})
	w := StartWriter(t, top, WriterOptions{Key: "__valkey-ha:testenv", PerWrite: true})
	p := StartProbe(t, top, 50*time.Millisecond, 300*time.Millisecond)
	valkeytest.Eventually(t, 5*time.Second, 50*time.Millisecond, "writes acknowledged", func() error {
		if r := w.Result(); r.OK < 20 {
			return fmt.Errorf("%d acknowledged", r.OK)
		}
		return nil
	})
	w.Finish()
	res := w.Result()
	missing, err := Missing(context.Background(), top.Nodes[0].Client(top.Options(acl.Operator)), res.Acked)
	require.NoError(t, err)
	assert.Empty(t, missing, "every acknowledged key is on the primary")
	assert.Empty(t, MultiWritable(p.Rounds()), "one writable primary")

	require.NoError(t, top.Nodes[1].Client(top.Options(acl.Operator)).PromoteToPrimary(context.Background()))
	valkeytest.Eventually(t, 5*time.Second, 50*time.Millisecond, "two writable primaries seen", func() error {
		if len(MultiWritable(p.Rounds())) == 0 {
			return fmt.Errorf("not yet")
		}
		return nil
	})
	p.Stop()
	rounds := p.Rounds()
	assert.Equal(t, []int{0, 1}, rounds[len(rounds)-1].Writable)
}
