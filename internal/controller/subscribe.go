package controller

import (
	"context"
	"strings"

	"github.com/valkey-ha/valkey-ha/internal/spec"
	"github.com/valkey-ha/valkey-ha/internal/valkey"
)

// ensureSubscription registers a monitored instance with the +switch-master subscriptions of its Sentinels
// (switchHub: one per Sentinel for every instance); each event for this monitor enqueues the instance (key)
// at once, so labels move within one pass of the switch (case S21).
func (c *InstanceController) ensureSubscription(name string, in spec.Instance, si *spec.SentinelInfo, mem *instanceMemory) {
	key := ""
	if si != nil {
		key = in.MonitorName + "|" + strings.Join(si.Addrs(), ",")
	}
	if key == mem.subKey {
		return
	}
	if mem.subCancel != nil {
		mem.subCancel()
		mem.subCancel = nil
	}
	mem.subKey = key
	if si == nil || c.runCtx == nil {
		return
	}
	info, monitor := *si, in.MonitorName
	mem.subCancel = c.switches.watch(monitor, si.Addrs(), func(ctx context.Context) valkey.Options { return c.sentinelOpts(ctx, in, info) },
		func(sp valkey.SwitchPrimary) {
			c.log.Info("+switch-master", "instance", name, "from", sp.OldHost, "to", sp.NewHost)
			c.queue.Add(name)
		})
}
