package controller

import (
	"context"
	"strings"
	"sync"
	"time"

	"github.com/valkey-ha/valkey-ha/internal/spec"
	"github.com/valkey-ha/valkey-ha/internal/valkey"
)

// subscription is one instance's subscribers to the Sentinels' topology events (valkey.TopologyEvents:
// +switch-master, +convert-to-slave), one per Sentinel: each event for the monitor enqueues the instance at
// once, so labels move within one pass of the switch and of the old primary's demotion (case S21), with no
// pass of the controller's own making. Its goroutines
// are owned: stop cancels them and returns once every one has returned.
type subscription struct {
	key    string
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// stop ends the subscribers and waits for them.
func (s *subscription) stop() {
	if s == nil {
		return
	}
	s.cancel()
	s.wg.Wait()
}

// ensureSubscription keeps mem's subscription on si's Sentinels for in's monitor (none when si is nil),
// replacing it when the Sentinels or the monitor changed.
func (c *InstanceController) ensureSubscription(name string, in spec.Instance, si *spec.SentinelInfo, mem *instanceMemory) {
	key := ""
	if si != nil {
		key = in.MonitorName + "|" + strings.Join(si.Addrs(), ",")
	}
	if mem.sub != nil && key == mem.sub.key || mem.sub == nil && key == "" {
		return
	}
	mem.sub.stop()
	mem.sub = nil
	if si == nil || c.runCtx == nil {
		return
	}
	ctx, cancel := context.WithCancel(c.runCtx)
	s := &subscription{key: key, cancel: cancel}
	mem.sub = s
	for _, addr := range si.Addrs() {
		s.wg.Go(func() {
			for ctx.Err() == nil {
				o := c.sentinelOpts(ctx, in, *si)
				o.CommandTimeout = 0
				cl, err := valkey.Dial(ctx, addr, o)
				if err == nil {
					_ = cl.SubscribeTopology(ctx, func(ev valkey.MonitorEvent) {
						if ev.Monitor == in.MonitorName {
							c.log.Info("Sentinel event", "instance", name, "event", ev.Channel, "message", ev.Payload)
							c.queue.Add(name)
						}
					})
					cl.Close()
				}
				select {
				case <-ctx.Done():
				case <-time.After(time.Second):
				}
			}
		})
	}
}
