package controller

import (
	"context"
	"strings"
	"time"

	"github.com/valkey-ha/valkey-ha/internal/spec"
	"github.com/valkey-ha/valkey-ha/internal/valkey"
)

// ensureSubscription keeps one +switch-master subscriber per Sentinel of a monitored instance; each event for
// this monitor enqueues the instance at once, so labels move within one pass of the switch (case S21).
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
	ctx, cancel := context.WithCancel(c.runCtx)
	mem.subCancel = cancel
	for _, addr := range si.Addrs() {
		go func() {
			for ctx.Err() == nil {
				o := c.sentinelOpts(ctx, in, *si)
				o.CommandTimeout = 0
				cl, err := valkey.Dial(ctx, addr, o)
				if err == nil {
					err = cl.SubscribeSwitchPrimary(ctx, func(sp valkey.SwitchPrimary) {
						if sp.Name == in.MonitorName {
							c.log.Info("+switch-master", "instance", name, "from", sp.OldHost, "to", sp.NewHost)
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
		}()
	}
}
