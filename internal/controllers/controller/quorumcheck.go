package controller

import (
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/valkey-ha/valkey-ha/internal/chartapi/contract"
	"github.com/valkey-ha/valkey-ha/internal/chartapi/spec"
	"github.com/valkey-ha/valkey-ha/internal/planners/plan"
)

// The instance controller's side of the cross-release checks (plan.QuorumMismatches): gather observes the
// quorum document of the Sentinel release the descriptor names, report turns each mismatch into a Warning
// Event on the descriptor (once per change), the status into the Monitored condition.

// namedQuorum observes, from the informer cache, the quorum document S-quorum of the Sentinel release the
// descriptor names, and the descriptor's labels. A quorum in a namespace this controller does not watch is
// not observable (nothing is concluded); a failed cache read other than not-found reads as unobservable too,
// never as "missing".
func (c *InstanceController) namedQuorum(in spec.Instance) plan.QuorumSide {
	q := plan.QuorumSide{Release: in.SentinelRelease, Namespace: in.Namespace}
	if g := in.SentinelGrant; g != nil && g.Namespace != "" {
		q.Namespace = g.Namespace
	}
	if in.SentinelRelease == "" || !c.cache.Serves(q.Namespace) {
		return q
	}
	if desc, err := c.cms.ConfigMaps(in.Namespace).Get(contract.Descriptor(in.Name)); err == nil {
		q.Labels = desc.Labels
	}
	cm, err := c.cms.ConfigMaps(q.Namespace).Get(contract.Quorum(in.SentinelRelease))
	switch {
	case apierrors.IsNotFound(err):
		q.Observable = true
		return q
	case err != nil:
		return q
	}
	q.Observable, q.Found = true, true
	q.Doc, err = spec.ParseQuorum([]byte(cm.Data[contract.KeyQuorum]))
	if err != nil {
		q.Err = err.Error()
	}
	return q
}

// reportMismatches sends one Warning Event per cross-release mismatch and change of its message.
func (c *InstanceController) reportMismatches(desc *corev1.ConfigMap, w plan.World, name string) {
	for _, m := range plan.QuorumMismatches(w.Instance, w.NamedQuorum) {
		if c.reported.changed(name+"/quorum/"+m.Reason, m.Message) {
			c.recorder.Event(desc, corev1.EventTypeWarning, m.Reason, m.Message)
			c.log.Warn("cross-release mismatch", "instance", name, "reason", m.Reason, "message", m.Message)
		}
	}
}

// reportQuorumMismatches is the sentinel controller's side: a selected instance whose sentinel.quorum exceeds
// this quorum's Sentinels gets a Warning Event on its descriptor naming both releases (its monitor is still
// registered: clients keep discovering the primary; the TLS mismatch is a MonitorRefused).
func (c *SentinelController) reportQuorumMismatches(w plan.SentinelWorld, descs map[string]*corev1.ConfigMap) {
	for _, qi := range w.Instances {
		if qi.Refused != "" || qi.Instance.Quorum <= len(w.Sentinels) {
			continue
		}
		msg := plan.QuorumAboveMessage(qi.Instance, w.Release, len(w.Sentinels))
		if cm := descs[qi.Key()]; cm != nil && c.reported.changed(qi.Key()+"/quorum-above", msg) {
			c.recorder.Event(cm, corev1.EventTypeWarning, plan.ReasonQuorumAboveSentinels, msg)
		}
	}
}
