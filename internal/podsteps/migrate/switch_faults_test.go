package migrate

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/valkey-ha/valkey-ha/internal/testsupport/valkeytest"
	"github.com/valkey-ha/valkey-ha/internal/valkeyapi/valkey"
)

// TestSwitchUnderFaults (issue 28.3): "0 acknowledged writes lost at the switch" under faults, not only on an
// idle loopback. A writer runs on the source (and moves to node 0 when the fenced source refuses it) while
// the switch runs with replication latency between the source and node 0 (a Link on node 0's replication
// connection), with that link blackholed, with the source stopped (SIGSTOP) at each step of the switch for
// longer than its server-side pause, and with the switching process itself stalled past that pause. Each
// switch either completes with every acknowledged write on node 0, or is refused and leaves the source
// serving with every acknowledged write on it; never an acknowledged write the final primary lacks.
func TestSwitchUnderFaults(t *testing.T) {
	valkeytest.RequireFaults(t)
	const budget = time.Second // the source's server-side pause is budget + 1 s
	stall := budget + time.Second + 700*time.Millisecond
	for _, c := range []struct {
		name  string
		delay time.Duration
		// before runs just before Switch; step at each step of it (Config.step)
		before func(m *migration, link *valkeytest.Link)
		step   func(m *migration, link *valkeytest.Link, name string)
		// refused: the switch must be refused (a Reason); "": it must complete; "either": either is fine
		refused Reason
	}{
		{name: "replication delayed 100ms", delay: 100 * time.Millisecond},
		{name: "replication blackholed at the switch", before: func(_ *migration, l *valkeytest.Link) { l.Blackhole() }, refused: NotCaughtUp},
		{name: "source stopped when the switch starts", before: func(m *migration, _ *valkeytest.Link) { m.source.PauseFor(1500 * time.Millisecond) }, refused: NotReady},
		{name: "source stopped after the pause, past it", delay: 50 * time.Millisecond, refused: "either",
			step: func(m *migration, _ *valkeytest.Link, name string) {
				if name == "paused" {
					m.source.PauseFor(stall)
				}
			}},
		{name: "source stopped before the fence, past the pause", delay: 50 * time.Millisecond, refused: "either",
			step: func(m *migration, _ *valkeytest.Link, name string) {
				if name == "caught-up" {
					m.source.PauseFor(stall)
				}
			}},
		{name: "switching process stalled before the fence, past the pause", delay: 50 * time.Millisecond, refused: "either",
			step: func(_ *migration, _ *valkeytest.Link, name string) {
				if name == "caught-up" {
					time.Sleep(stall) // a GC-like freeze or a throttled controller: the source's pause ends meanwhile
				}
			}},
		// the writes taken after the pause ended cannot reach node 0: the switch lifts its fence and gives up
		{name: "switching process stalled past the pause, then node 0's link blackholed", delay: 50 * time.Millisecond, refused: NotCaughtUp,
			step: func(_ *migration, link *valkeytest.Link, name string) {
				if name == "caught-up" {
					link.Blackhole()
					time.Sleep(stall)
				}
			}},
	} {
		t.Run(c.name, func(t *testing.T) {
			m, link := startMigrationLinked(t, valkeytest.Valkey91, valkeytest.Valkey91, sourceRights, true)
			// a writer at full speed is more than DefaultMaxLag behind through a delayed link: let the switch
			// start anyway (the MaxLag refusal is TestPlan's), so that each case reaches the steps it stresses
			m.cfg.PauseBudget, m.cfg.MaxLag = budget, 64<<20
			m.cfg.Source.CommandTimeout = 2 * stall // a stopped source answers late, not never
			m.cfg.Node0.CommandTimeout = 2 * stall
			if c.name == "source stopped when the switch starts" {
				m.cfg.Source.CommandTimeout = 500 * time.Millisecond
			}
			if c.step != nil {
				m.cfg.step = func(name string) { c.step(m, link, name) }
			}
			link.Delay(c.delay)
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			appOpts := valkey.Options{Password: m.appPassword, CommandTimeout: 10 * time.Second}
			w := &writer{}
			wctx, stopWriter := context.WithCancel(ctx)
			done := make(chan struct{})
			go func() {
				defer close(done)
				w.run(wctx, t, m.source.Client(appOpts), m.node0.Client(valkey.Options{CommandTimeout: 10 * time.Second}))
			}()
			defer func() { stopWriter(); <-done }()
			valkeytest.Eventually(t, 20*time.Second, 20*time.Millisecond, "node 0 migrating", func() error {
				d := Plan(Observe(ctx, m.cfg, false))
				if d.State != Migrating {
					return fmt.Errorf("%s: %s", d.State, d.Message)
				}
				if acked, _ := w.acks(); len(acked) < 300 {
					return fmt.Errorf("%d writes acknowledged", len(acked))
				}
				return nil
			})
			if c.before != nil {
				c.before(m, link)
			}
			res, err := Switch(ctx, m.cfg, slog.Default())
			link.Heal()
			var se *Error
			switch {
			case err == nil:
				assert.Contains(t, []Reason{"", "either"}, c.refused, "the switch completed; expected a refusal")
				t.Logf("switched at offset %d, source paused %s", res.Offset, res.Paused)
			case errors.As(err, &se):
				assert.NotEmpty(t, c.refused, "the switch was refused: %v", err)
				if c.refused != "either" {
					assert.Equal(t, c.refused, se.Reason, "%v", err)
				}
				t.Logf("switch refused: %v", err)
			default:
				t.Fatalf("switch: not an *Error: %v", err)
			}
			m.source.Resume()
			before, _ := w.acks()
			valkeytest.Eventually(t, 15*time.Second, 20*time.Millisecond, "the writer goes on after the switch", func() error {
				if acked, _ := w.acks(); len(acked) < len(before)+300 {
					return fmt.Errorf("%d writes acknowledged, %d before the switch returned", len(acked), len(before))
				}
				return nil
			})
			stopWriter()
			<-done
			acked, onSource := w.acks()
			_, _, moved, refusals := w.snapshot()

			primary, name := m.node0.Client(valkey.Options{}), "node 0"
			if err != nil {
				primary, name = m.source.Client(valkey.Options{Password: m.appPassword}), "the source"
				require.NoError(t, primary.Set(ctx, "after", "1", 0), "a refused switch leaves the source serving")
				assert.Equal(t, Migrating, Plan(Observe(ctx, m.cfg, false)).State, "node 0 still follows the source")
			} else {
				assert.ErrorContains(t, m.source.Client(appOpts).Set(ctx, "late", "x", 0), "NOREPLICAS", "the switched source stays fenced")
			}
			lost, lostFromSource := 0, 0
			for k, i := range acked {
				v, found, gerr := primary.Get(ctx, "w-"+strconv.Itoa(i))
				require.NoError(t, gerr)
				if !found || v != strconv.Itoa(i) {
					lost++
					if onSource[k] {
						lostFromSource++
					}
				}
			}
			t.Logf("%s: %d writes acknowledged (%d by the source), %d errors, moved to node 0 %t; lost on %s: %d (%d acknowledged by the source)",
				link, len(acked), countTrue(onSource), len(refusals), moved, name, lost, lostFromSource)
			assert.Zero(t, lost, "acknowledged writes that %s lacks", name)
		})
	}
}

func countTrue(b []bool) int {
	n := 0
	for _, v := range b {
		if v {
			n++
		}
	}
	return n
}
