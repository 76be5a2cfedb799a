//go:build bench

package bench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/valkey-ha/valkey-ha/internal/controllers/controller"
	"github.com/valkey-ha/valkey-ha/internal/testsupport/testenv"
	"github.com/valkey-ha/valkey-ha/internal/testsupport/valkeytest"
	"github.com/valkey-ha/valkey-ha/internal/valkeyapi/valkey"
)

// Figure 3: role-label convergence after a failover. Two instance controllers watch the same real topology,
// each through its own fake clientset: one with the +switch-master subscription (the default), one with
// NoSubscribe (polling only, default Resync 2 s). Every SENTINEL FAILOVER is thus measured for both at once.
// The clock starts when +switch-master reaches this benchmark's own subscription on the Sentinel that ran the
// failover, and stops when the pods of a clientset carry the right role labels (sampled every 5 ms).

func fig3(t *testing.T) *figure {
	n := envInt("BENCH_FAILOVERS", 20)
	top := valkeytest.StartTopology(t, valkeytest.TopologyConfig{DownAfterMs: 5000, FailoverTimeoutMs: 15000})
	defer testenv.StopTopology(top)
	sub, poll := newKEnv(t, top), newKEnv(t, top)
	startInstanceController(sub, controller.InstanceOptions{})
	startInstanceController(poll, controller.InstanceOptions{NoSubscribe: true})

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	type switched struct {
		at   time.Time
		port int
	}
	events := make(chan switched, 16)
	s0 := top.Sentinels[0]
	go func() {
		for ctx.Err() == nil {
			c, err := valkey.Dial(ctx, s0.Addr(), valkey.Options{})
			if err == nil {
				_ = c.SubscribeSwitchPrimary(ctx, func(sp valkey.SwitchPrimary) {
					if sp.Name == top.Cfg.MonitorName {
						select {
						case events <- switched{at: time.Now(), port: sp.NewPort}:
						default:
						}
					}
				})
				c.Close()
			}
			time.Sleep(100 * time.Millisecond)
		}
	}()
	admin := s0.Client(valkey.Options{})
	var withSub, withPoll []time.Duration
	for i := 0; i < n; i++ {
		ts := time.Now()
		primary := testenv.WaitSteady(t, top, 60*time.Second)
		debugf(t, "failover %d: steady after %s", i+1, time.Since(ts))
		valkeytest.Eventually(t, 20*time.Second, 20*time.Millisecond, "labels before the failover", func() error {
			if err := sub.LabelsMatch(primary); err != nil {
				return err
			}
			return poll.LabelsMatch(primary)
		})
		// a random phase against the polling controller's 2 s resync: failovers that follow each other at a
		// fixed pace would otherwise always hit the same point of its cycle
		time.Sleep(100*time.Millisecond + time.Duration(rand.Int64N(int64(2*time.Second))))
		for len(events) > 0 {
			<-events
		}
		valkeytest.Eventually(t, 20*time.Second, 200*time.Millisecond, "SENTINEL FAILOVER accepted", func() error {
			return admin.SentinelFailover(context.Background(), top.Cfg.MonitorName)
		})
		debugf(t, "failover %d: accepted after %s", i+1, time.Since(ts))
		var sw switched
		select {
		case sw = <-events:
		case <-time.After(30 * time.Second):
			t.Fatalf("failover %d: no +switch-master within 30 s", i+1)
		}
		debugf(t, "failover %d: switched after %s", i+1, time.Since(ts))
		var dSub, dPoll time.Duration
		deadline := time.Now().Add(15 * time.Second)
		for (dSub == 0 || dPoll == 0) && time.Now().Before(deadline) {
			if dSub == 0 && sub.LabelsMatch(sw.port) == nil {
				dSub = time.Since(sw.at)
			}
			if dPoll == 0 && poll.LabelsMatch(sw.port) == nil {
				dPoll = time.Since(sw.at)
			}
			time.Sleep(5 * time.Millisecond)
		}
		if dSub == 0 || dPoll == 0 {
			t.Fatalf("failover %d: labels did not follow within 15 s (subscription %s, polling %s)", i+1, dSub, dPoll)
		}
		withSub, withPoll = append(withSub, dSub), append(withPoll, dPoll)
	}
	f := &figure{N: 3, Title: fmt.Sprintf("Role-label convergence after SENTINEL FAILOVER (%d failovers): +switch-master to correct pod labels", n),
		Header: []string{"mode", "p50", "p95", "max"}}
	f.Rows = [][]string{
		{"subscription (default)", ms(percentile(withSub, 50)), ms(percentile(withSub, 95)), ms(maxOf(withSub))},
		{"polling only (Resync 2 s)", ms(percentile(withPoll, 50)), ms(percentile(withPoll, 95)), ms(maxOf(withPoll))},
		{"subscription / polling", fmt.Sprintf("%.2f", ratio(percentile(withSub, 50), percentile(withPoll, 50))),
			fmt.Sprintf("%.2f", ratio(percentile(withSub, 95), percentile(withPoll, 95))), ""},
	}
	f.Targets = []target{{Name: "label convergence p95 <= 1 s with the subscription", Measured: ms(percentile(withSub, 95)),
		Pass: percentile(withSub, 95) <= time.Second}}
	f.Raw = []string{fmt.Sprintf("subscription ms: %v", msAll(withSub)), fmt.Sprintf("polling ms: %v", msAll(withPoll))}
	return f
}

func msAll(ds []time.Duration) []int64 {
	var out []int64
	for _, d := range ds {
		out = append(out, d.Round(time.Millisecond).Milliseconds())
	}
	return out
}
