package controller

// Fleets (docs/fleet.md): one instance controller serving many instances across namespaces (the
// shared controller), one quorum selecting instances across namespaces. This file holds the hooks both
// controllers call: the namespaces they serve, who serves which instance, and the worker lanes that keep one
// stuck instance from delaying another.

import (
	"context"
	"log/slog"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"github.com/valkey-ha/valkey-ha/internal/chartapi/contract"
	"github.com/valkey-ha/valkey-ha/internal/chartapi/spec"
	"github.com/valkey-ha/valkey-ha/internal/controllers/nscache"
)

// FleetOptions say which namespaces a controller serves besides its own and under which identity.
type FleetOptions struct {
	// Namespaces are served besides the controller's own (Options.Namespace).
	Namespaces []string
	// NamespaceSelector also serves every namespace whose labels match (nil or empty: none; needs get, list
	// and watch on namespaces).
	NamespaceSelector labels.Selector
	// Identity is the controller's own ServiceAccount. For the instance controller a non-zero Identity
	// is the shared mode: it serves exactly the descriptors whose instanceController names it. For the
	// sentinel controller it is the quorum that instances grant (sentinelGrant); zero skips that check
	// for descriptors of its own namespace (tests, charts before descriptor 1.1).
	Identity spec.ServiceAccountRef
}

// namespaces returns own followed by the other served namespaces, without duplicates.
func (f FleetOptions) namespaces(own string) []string {
	out := []string{own}
	seen := map[string]bool{own: true}
	for _, ns := range f.Namespaces {
		if ns != "" && !seen[ns] {
			seen[ns] = true
			out = append(out, ns)
		}
	}
	return out
}

// newNamespaceCache returns the informer cache of kinds over the namespaces f serves (own first), with
// selectors per kind (the part-of label, plus extra). waitForNone: starting waits for no namespace (the shared
// instance controller's own namespace grants it nothing unless an instance there opts in).
func newNamespaceCache(cs kubernetes.Interface, own string, f FleetOptions, kinds []nscache.Kind, extra map[nscache.Kind]string,
	h cache.ResourceEventHandler, onRemoved func(string), log *slog.Logger, waitForNone bool) *nscache.Cache {
	sel := map[nscache.Kind]string{}
	for _, k := range kinds {
		sel[k] = contract.LabelPartOf + "=" + contract.PartOf
		if e := extra[k]; e != "" {
			sel[k] += "," + e
		}
	}
	return nscache.New(cs, nscache.Options{Selectors: sel, Kinds: kinds, Namespaces: f.namespaces(own),
		NamespaceSelector: f.NamespaceSelector, Handler: h, OnRemoved: onRemoved, Log: log, WaitForNone: waitForNone})
}

// servesInstance says whether this controller serves the instance its descriptor describes, and why not:
// the shared controller serves exactly the descriptors that name its identity; a dedicated controller
// (--instance, or every instance of its namespace without an identity) only those that name no shared
// controller.
func (c *InstanceController) servesInstance(in spec.Instance) (bool, string) {
	id := c.opts.Fleet.Identity
	switch {
	case !id.IsZero() && in.ServedBy(id):
		return true, ""
	case !id.IsZero():
		if in.InstanceController == nil {
			return false, "served by its own controller (controller.mode dedicated)"
		}
		return false, "served by the shared controller " + in.InstanceController.String()
	case in.SharedController():
		return false, "controller.mode shared: served by " + in.InstanceController.String() + "; this dedicated controller stands down"
	}
	return true, ""
}

// laneLimiter backs off a failing instance on its own (exponential from 200 ms to 30 s per key): no bucket
// shared by all instances, so one instance that keeps failing never slows another's retries.
func laneLimiter() workqueue.TypedRateLimiter[types.NamespacedName] {
	return workqueue.NewTypedItemExponentialFailureRateLimiter[types.NamespacedName](200*time.Millisecond, 30*time.Second)
}

// lanes runs the workers of the instance queue: one per known instance (at least two) unless
// InstanceOptions.Workers caps them. The queue hands a key to one worker at a time, so with one worker per
// instance a pass that waits on a node that never answers holds only its own instance's lane; every other
// instance (a +switch-master, a resync) is taken up at once.
type lanes struct {
	mu      sync.Mutex
	started int
	max     int
	wg      sync.WaitGroup
	run     func()
}

// grow starts workers until there are want of them (capped by max when max > 0).
func (l *lanes) grow(want int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.max > 0 && want > l.max {
		want = l.max
	}
	for l.started < want {
		l.started++
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			l.run()
		}()
	}
}

// workers returns how many workers run.
func (l *lanes) workers() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.started
}

// growLanes makes sure there are as many lanes as instances the controller knows (called when an
// instance's memory is created).
func (c *InstanceController) growLanes() {
	if c.lanes == nil {
		return
	}
	c.mu.Lock()
	n := len(c.state)
	c.mu.Unlock()
	c.lanes.grow(max(n, 2))
}

// observeContext bounds the observation of one instance (Secret read, INFO on every node, the Sentinels'
// view) by ObserveTimeout; each command keeps its own timeout. Disruptive steps are not bounded by it: a
// handoff must never be cut off between pause and unpause.
func (c *InstanceController) observeContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, c.opts.ObserveTimeout)
}

// standDown forgets an instance this controller does not serve (another controller does) and says so once
// per reason with an Event on its descriptor.
func (c *InstanceController) standDown(descCM *corev1.ConfigMap, key types.NamespacedName, why string) {
	c.forget(key)
	if c.reported.changed(key.String()+"/standdown", why) {
		c.log.Info("instance not served here", "instance", key.String(), "reason", why)
		if c.opts.Instance != "" { // only the dedicated controller reports: the shared one sees every descriptor
			c.recorder.Event(descCM, corev1.EventTypeNormal, "ControllerStandsDown", why)
		}
	}
}

// forgetNamespace forgets every instance of a namespace that is no longer served.
func (c *InstanceController) forgetNamespace(ns string) {
	c.mu.Lock()
	var keys []types.NamespacedName
	for k := range c.state {
		if k.Namespace == ns {
			keys = append(keys, k)
		}
	}
	c.mu.Unlock()
	for _, k := range keys {
		c.forget(k)
	}
}

// observePass records one pass of the instance of key in the per-instance metrics (not for an instance that
// is gone or not served: its series were forgotten).
func (c *InstanceController) observePass(key types.NamespacedName, res Result, took time.Duration, err error) {
	if c.lanes != nil {
		c.metrics.InstanceWorkers.Set(float64(c.lanes.workers()))
	}
	if res == (Result{}) && err == nil {
		return
	}
	c.metrics.InstancePassSeconds.WithLabelValues(key.String()).Set(took.Seconds())
	if err != nil {
		c.metrics.InstancePassErrors.WithLabelValues(key.String()).Inc()
	}
}

// monitoredBy names the quorum that published si for in: its release, with its namespace when that is not
// the instance's.
func monitoredBy(si spec.SentinelInfo, in spec.Instance) string {
	if si.SentinelNamespace == "" || si.SentinelNamespace == in.Namespace {
		return si.SentinelRelease
	}
	return si.Quorum(in.Namespace)
}
