package controller

import (
	"context"
	"strings"

	"k8s.io/apimachinery/pkg/types"

	"github.com/valkey-ha/valkey-ha/internal/chartapi/spec"
	"github.com/valkey-ha/valkey-ha/internal/valkeyapi/valkey"
)

// subscription is one instance's registration for the Sentinels' topology events (valkey.TopologyEvents:
// +switch-master, +convert-to-slave) of its monitor: each event enqueues the instance at once, so labels move
// within one pass of the switch and of the old primary's demotion (case S21), with no pass of the controller's
// own making. The subscriber connections are the switchHub's, one per Sentinel for every instance, so a
// controller serving many instances holds few connections. stop unregisters and returns once the goroutines of
// every Sentinel subscription it was the last registrant of have returned.
type subscription struct {
	key    string
	cancel func()
}

// stop ends the registration and waits for the subscribers it ended.
func (s *subscription) stop() {
	if s == nil {
		return
	}
	s.cancel()
}

// ensureSubscription keeps mem's subscription on si's Sentinels for in's monitor (none when si is nil),
// replacing it when the Sentinels or the monitor changed.
//
// ctx bounds the subscription: it is the pass's, which the loop ends when the controller stops (not with the
// pass).
func (c *InstanceController) ensureSubscription(ctx context.Context, name types.NamespacedName, in spec.Instance, si *spec.SentinelInfo, mem *instanceMemory) {
	key := ""
	if si != nil {
		key = in.MonitorName + "|" + strings.Join(si.Addrs(), ",")
	}
	if mem.sub != nil && key == mem.sub.key || mem.sub == nil && key == "" {
		return
	}
	mem.sub.stop()
	mem.sub = nil
	if si == nil || c.switches == nil { // nil: Run has not started (a test's direct pass)
		return
	}
	info, monitor := *si, in.MonitorName
	mem.sub = &subscription{key: key, cancel: c.switches.watch(ctx, monitor, si.Addrs(),
		func(ctx context.Context) valkey.Options { return c.sentinelOpts(ctx, in, info) },
		func(ev valkey.MonitorEvent) {
			c.log.Info("Sentinel event", "instance", name.String(), "event", ev.Channel, "message", ev.Payload)
			if ev.Channel == "+switch-master" {
				mem.signalSwitch() // a gather still waiting for a silent node gives up: the relabel must not wait for it
			}
			c.queue.Add(name)
		})}
}
