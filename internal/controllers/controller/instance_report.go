package controller

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"time"

	"github.com/valkey-ha/valkey-ha/internal/chartapi/contract"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/valkey-ha/valkey-ha/internal/chartapi/spec"
	"github.com/valkey-ha/valkey-ha/internal/chartapi/status"
	"github.com/valkey-ha/valkey-ha/internal/controllers/kube"
	"github.com/valkey-ha/valkey-ha/internal/planners/plan"
	"github.com/valkey-ha/valkey-ha/internal/planners/roll"
)

// The instance controller's report (docs/design.md, "Status"): the Events of a pass, once per change of
// reason, and the <F>-status document built by plan.InstanceStatus; both from the World, the Decision and
// what the applier did, never deciding a step.

// rollNoPromotable is the roll's wait reason that gets a HandoffImpossible Event.
const rollNoPromotable = roll.NoPromotableReplica

// report sends the Events of conditions that last many passes once per change of reason (the policy's
// refusal, no promotable replica, unknown descriptor fields, a primary handing off in its preStop hook, a
// stalled failover) and the one-off PrimaryChanged, from the World and the Decision alone.
func (c *InstanceController) report(desc *corev1.ConfigMap, w plan.World, d plan.Decision) {
	name := w.Instance.NamespacedName().String() // the keys of reportOnce: unique across namespaces
	for _, n := range w.Nodes {
		if n.StartRefused != "" && c.reported.changed(name+"/start/"+n.Node.Pod, n.StartRefused) {
			c.recorder.Eventf(desc, corev1.EventTypeWarning, "StartRefused", "%s: %s", n.Node.Pod, n.StartRefused)
		}
	}
	for _, why := range plan.ClaimsDiffer(w) {
		if c.reported.changed(name+"/claims/"+why, why) {
			c.recorder.Event(desc, corev1.EventTypeWarning, "ClaimsDiffer", why)
		}
	}
	c.reportMismatches(desc, w, name)
	if len(w.Instance.Unknown) > 0 {
		msg := "descriptor fields this controller does not know (ignored): " + strings.Join(w.Instance.Unknown, ", ")
		if c.reported.changed(name+"/unknown", msg) {
			c.recorder.Event(desc, corev1.EventTypeWarning, "DescriptorUnknownFields", msg)
		}
	}
	if h := d.Topology.HandingOff; h != nil && c.reported.changed(name+"/handing-off/"+h.Pod, w.Node(h.Index).PodUID) {
		if why := d.HandoffObstacle; why != "" {
			c.metrics.HandoffUnavailable.WithLabelValues(name).Inc()
			// the hook's own reason is in the pod's log only (the kubelet's FailedPreStopHook Event carries
			// no hook output), so say here what stops it
			c.recorder.Eventf(desc, corev1.EventTypeWarning, "HandoffUnavailable",
				"primary pod %s is terminating but its preStop hook cannot hand off: %s; Sentinel fails over once it sees the primary down (down-after-milliseconds)", h.Pod, why)
		} else {
			c.recorder.Eventf(desc, corev1.EventTypeNormal, "PrimaryHandingOff",
				"primary pod %s is terminating: its preStop hook hands the primary role off; no repair or planned handoff until it is done", h.Pod)
		}
	}
	if d.Refused != "" && c.reported.changed(name+"/refused", d.Refused) {
		c.recorder.Event(desc, corev1.EventTypeWarning, "StepRefused", d.Refused)
		c.log.Info("policy refused a step", "instance", name, "reason", d.Refused)
	}
	if d.Roll == rollNoPromotable && c.reported.changed(name+"/nopromote", d.Roll) {
		c.recorder.Eventf(desc, corev1.EventTypeWarning, "HandoffImpossible", "%s", d.Roll)
	}
	if st, ok := plan.FailoverStalled(w); ok && c.reported.changed(name+"/stalled", st.Primary) {
		c.metrics.FailoverStalls.WithLabelValues(name).Inc()
		c.recorder.Event(desc, corev1.EventTypeWarning, "FailoverStalled", st.String())
		c.log.Warn("failover stalled", "instance", name, "primary", st.Primary, "down_seconds", st.Down.Seconds(),
			"sentinels_answered", st.Answered, "sentinels_asked", st.Asked, "retry_after_seconds", st.Retry.Seconds())
	}
	for _, nw := range plan.SentinelsNotWatching(w) {
		if c.reported.changed(name+"/not-watching/"+nw.Sentinel, strconv.FormatBool(nw.Down)) {
			c.recorder.Event(desc, corev1.EventTypeWarning, "SentinelNotWatching", nw.String())
			c.log.Warn("Sentinel not watching the primary", "instance", name, "sentinel", nw.Sentinel, "primary", nw.Primary,
				"info_refresh_seconds", nw.Refresh.Seconds(), "flags_down", nw.Down)
		}
	}
	if ch := d.PrimaryChanged; ch.From != "" {
		c.metrics.FailoversObserved.WithLabelValues(name).Inc()
		c.recorder.Eventf(desc, corev1.EventTypeNormal, "PrimaryChanged", "primary moved from %s to %s", ch.From, ch.To)
	}
}

// reportUsers sends the Warning Event UsersRefused once per change of the refused users of the <F>-acl
// Secret (gatherACL), when the Secret was read.
func (c *InstanceController) reportUsers(desc *corev1.ConfigMap, w plan.World) {
	name := w.Instance.NamespacedName().String()
	if w.Instance.ACLSecret != "" && w.ACL.Err == "" && c.reported.changed(name+"/users-refused", w.ACL.Refused) && w.ACL.Refused != "" {
		c.recorder.Event(desc, corev1.EventTypeWarning, "UsersRefused", w.ACL.Refused)
		c.log.Info("users refused", "instance", w.Instance.Name, "why", w.ACL.Refused)
	}
}

// statusRefresh bounds how stale observedAt and offsets in the status may get when nothing else changes.
const statusRefresh = 30 * time.Second

const annTimeToReady = contract.AnnotationTimeToReady

// writeStatus writes <F>-status (owned by the descriptor, so it goes away on uninstall) from
// plan.InstanceStatus, when it changed materially or statusRefresh passed. It also records time-to-ready
// exactly once per instance, with the once-only state kept in an annotation on the status ConfigMap (seed
// 003, "Measuring time-to-ready"): "pending" is written first, the sample is observed when it is replaced by
// a duration.
func (c *InstanceController) writeStatus(ctx context.Context, desc *corev1.ConfigMap, w plan.World, d plan.Decision, out plan.Outcome, mem *instanceMemory) error {
	prev, prevAnn := c.readStatus(w.Instance)
	st := plan.InstanceStatus(w, d, out, prev, c.opts.Version)
	st.Migration = mem.migration
	st.LastBackup = backupStatus(mem.lastBackup)
	ann := map[string]string{}
	switch prevAnn {
	case "":
		ann[annTimeToReady] = "pending"
	case "pending":
		if rc, _ := status.Get(st.Conditions, status.Ready); rc.Status == status.True {
			dur := w.Now.Sub(desc.CreationTimestamp.Time)
			ann[annTimeToReady] = strconv.FormatFloat(dur.Seconds(), 'f', 1, 64)
			if err := c.putStatus(ctx, desc, w.Instance.Name, st, ann); err != nil {
				return err
			}
			c.metrics.TimeToReady.WithLabelValues(w.Instance.Engine).Observe(dur.Seconds())
			c.recorder.Eventf(desc, corev1.EventTypeNormal, "Ready", "instance ready %.1fs after creation", dur.Seconds())
			return nil
		}
	}
	print := materialPrint(st)
	if len(ann) == 0 && print == mem.statusPrint && w.Now.Sub(mem.statusWritten) < statusRefresh {
		return nil
	}
	if err := c.putStatus(ctx, desc, w.Instance.Name, st, ann); err != nil {
		return err
	}
	mem.statusPrint, mem.statusWritten = print, w.Now
	return nil
}

// materialPrint is the status without what changes on every pass (timestamps, offsets, lag).
func materialPrint(st status.Instance) string {
	st.ObservedAt = time.Time{}
	nodes := make([]status.NodeStatus, len(st.Nodes))
	for i, n := range st.Nodes {
		n.Offset, n.LagBytes = 0, 0
		nodes[i] = n
	}
	st.Nodes = nodes
	b, _ := json.Marshal(st)
	return string(b)
}

func (c *InstanceController) writeInvalid(ctx context.Context, desc *corev1.ConfigMap, name string, cause error) {
	now := time.Now()
	st := status.Instance{Name: name, State: status.StateFailed, Message: cause.Error(), ObservedAt: now}
	st.Conditions = status.SetCondition(nil, status.Condition{Type: status.Ready, Status: status.False,
		Reason: "InvalidDescriptor", Message: cause.Error()}, now)
	_ = c.putStatus(ctx, desc, name, st, nil)
}

// readStatus returns the previous status document (from the cache) and its time-to-ready annotation.
func (c *InstanceController) readStatus(in spec.Instance) (status.Instance, string) {
	var st status.Instance
	cm, err := c.cms.ConfigMaps(in.Namespace).Get(contract.Status(in.Name))
	if err != nil {
		return st, ""
	}
	_ = json.Unmarshal([]byte(cm.Data[contract.KeyStatus]), &st)
	return st, cm.Annotations[annTimeToReady]
}

func (c *InstanceController) putStatus(ctx context.Context, desc *corev1.ConfigMap, name string, st status.Instance, ann map[string]string) error {
	b, _ := json.MarshalIndent(st, "", "  ")
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: contract.Status(name), Namespace: desc.Namespace,
			Labels: map[string]string{contract.LabelPartOf: contract.PartOf, contract.LabelComponent: contract.ComponentStatus,
				contract.LabelInstance: name, contract.LabelManagedBy: contract.ManagedBy},
			Annotations:     ann,
			OwnerReferences: []metav1.OwnerReference{kube.OwnerRef(desc)}},
		Data: map[string]string{contract.KeyStatus: string(b)},
	}
	_, err := kube.ApplyConfigMap(ctx, c.cs, cm)
	return err
}
