package controller

import (
	"context"
	"encoding/json"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/valkey-ha/valkey-ha/internal/kube"
	"github.com/valkey-ha/valkey-ha/internal/plan"
	"github.com/valkey-ha/valkey-ha/internal/spec"
	"github.com/valkey-ha/valkey-ha/internal/status"
)

// statusRefresh bounds how stale observedAt and offsets in the status may get when nothing else changes.
const statusRefresh = 30 * time.Second

const annTimeToReady = "valkey.io/time-to-ready"

// writeStatus writes <F>-status (owned by the descriptor, so it goes away on uninstall) from
// plan.InstanceStatus, when it changed materially or statusRefresh passed. It also records time-to-ready
// exactly once per instance, with the once-only state kept in an annotation on the status ConfigMap (seed
// 003, "Measuring time-to-ready"): "pending" is written first, the sample is observed when it is replaced by
// a duration.
func (c *InstanceController) writeStatus(ctx context.Context, desc *corev1.ConfigMap, w plan.World, d plan.Decision, out plan.Outcome, mem *instanceMemory) error {
	prev, prevAnn := c.readStatus(w.Instance)
	st := plan.InstanceStatus(w, d, out, prev, c.opts.Version)
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
	cm, err := c.cms.ConfigMaps(in.Namespace).Get(in.Name + "-status")
	if err != nil {
		return st, ""
	}
	_ = json.Unmarshal([]byte(cm.Data[spec.StatusKey]), &st)
	return st, cm.Annotations[annTimeToReady]
}

func (c *InstanceController) putStatus(ctx context.Context, desc *corev1.ConfigMap, name string, st status.Instance, ann map[string]string) error {
	b, _ := json.MarshalIndent(st, "", "  ")
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: name + "-status", Namespace: desc.Namespace,
			Labels: map[string]string{spec.LabelPartOf: spec.PartOfValue, spec.LabelComponent: spec.ComponentStatus,
				spec.LabelInstance: name, "app.kubernetes.io/managed-by": "valkey-sentinel-ctl"},
			Annotations:     ann,
			OwnerReferences: []metav1.OwnerReference{kube.OwnerRef(desc)}},
		Data: map[string]string{spec.StatusKey: string(b)},
	}
	_, err := kube.ApplyConfigMap(ctx, c.cs, cm)
	return err
}
