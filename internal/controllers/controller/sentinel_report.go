package controller

// The sentinel controller's report: the Events of one pass (the applier's own Events name what it did) and the
// warnings the planner and the gather found, each Event of a lasting condition once per change of reason.

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/valkey-ha/valkey-ha/internal/chartapi/contract"
	"github.com/valkey-ha/valkey-ha/internal/chartapi/spec"
	"github.com/valkey-ha/valkey-ha/internal/planners/plan"
	"github.com/valkey-ha/valkey-ha/internal/planners/registration"
)

// credentialsGrace is how long after its descriptor was created an instance whose _sentinel Secret does not
// exist yet is reported as awaiting it (a Normal Event: its credentials Job runs at install, seconds after the
// descriptor) rather than as a monitor not registered (Warning).
const credentialsGrace = 2 * time.Minute

// reportSentinels sends the Events of conditions that last many passes once per change of reason: unknown
// descriptor fields, refused and unresolved instances (MonitorRefused, MonitorNotRegistered; MonitorAwaitingCredentials,
// Normal, for a new instance whose credentials Job has not created its _sentinel Secret yet), and the
// policy's refusals (StepRefused); before them the namespaces that cannot be read (reportNamespaces).
func (c *SentinelController) reportSentinels(ctx context.Context, w plan.SentinelWorld, d plan.SentinelDecision, descs map[string]*corev1.ConfigMap) {
	c.reportNamespaces(ctx, w)
	for _, qi := range w.Instances {
		cm := descs[qi.Key()]
		if len(qi.Instance.Unknown) > 0 {
			if msg := plan.UnknownFieldsWarning(qi); c.reported.changed(qi.Key()+"/unknown", msg) {
				c.recorder.Event(cm, corev1.EventTypeWarning, "DescriptorUnknownFields", msg)
			}
		}
		if qi.Refused != "" && c.reported.changed(qi.Key()+"/refused", qi.Refused) {
			c.recorder.Eventf(cm, corev1.EventTypeWarning, "MonitorRefused", "Sentinel release %s: %s", c.opts.Release, qi.Refused)
		}
		if qi.Unresolved != "" {
			typ, reason, msg := corev1.EventTypeWarning, "MonitorNotRegistered", qi.Unresolved+"; its monitor is kept as it is"
			if qi.AwaitingSecret && cm != nil && time.Since(cm.CreationTimestamp.Time) < credentialsGrace {
				typ, reason = corev1.EventTypeNormal, "MonitorAwaitingCredentials"
				msg = qi.Unresolved + "; the instance's credentials Job creates it at install: registered once it exists"
			}
			if c.reported.changed(qi.Key()+"/resolve", reason+": "+msg) {
				c.recorder.Event(cm, typ, reason, msg)
			}
		}
	}
	for _, qi := range w.Instances {
		if !qi.Resolved() {
			continue
		}
		foreign := registration.ForeignPrimaries(w.Sentinels, qi.Instance.MonitorName, qi.Instance.NodeAddrs())
		pods := make([]string, 0, len(foreign))
		for pod := range foreign {
			c.metrics.ForeignPrimaries.WithLabelValues(c.key.String(), qi.Instance.MonitorName).Inc()
			pods = append(pods, pod+" names "+foreign[pod])
		}
		if len(pods) == 0 {
			continue
		}
		sort.Strings(pods)
		msg := fmt.Sprintf("monitor %s: %s, which is not a node of the instance (a forged hello on a shared quorum?); nothing follows it",
			qi.Instance.MonitorName, strings.Join(pods, ", "))
		c.log.Warn("foreign primary", "monitor", qi.Instance.MonitorName, "sentinels", pods)
		if c.reported.changed(qi.Key()+"/foreign", msg) {
			c.recorder.Event(descs[qi.Key()], corev1.EventTypeWarning, "ForeignPrimary", msg)
		}
	}
	c.reportQuorumMismatches(w, descs)
	for _, r := range d.Refused {
		if c.reported.changed("refused/"+r.Step.Monitor+"/"+r.Why, r.Why) {
			c.log.Info("policy refused a step", "step", r.Step.String(), "reason", r.Why)
			c.eventFor(ctx, w, descs, r.Step.Monitor, corev1.EventTypeWarning, "StepRefused", r.Why)
		}
	}
}

// reportNamespaces sends the Warnings NamespaceSelectionUnreadable and NamespaceUnreadable of w.Namespaces on
// the quorum's status ConfigMap, once per change of message (the monitors there are kept: plan.SentinelWorld.Derive).
func (c *SentinelController) reportNamespaces(ctx context.Context, w plan.SentinelWorld) {
	if why := w.Namespaces.SelectionUnknown; why != "" {
		c.statusEventOnce(ctx, "selection", corev1.EventTypeWarning, "NamespaceSelectionUnreadable", plan.SelectionUnreadableMessage(why))
	}
	for _, u := range w.Namespaces.Unreadable {
		c.statusEventOnce(ctx, "ns/"+u.Namespace, corev1.EventTypeWarning, "NamespaceUnreadable", plan.NamespaceUnreadableMessage(u))
	}
}

// reportCopies sends Warning CredentialNotCopied on the descriptor of each copy the planner found a problem
// with or the applier could not write (failed, by plan.CredentialCopy.Key), once per change; a copy without
// either clears its report.
func (c *SentinelController) reportCopies(steps []plan.CopyStep, failed map[string]string, descs map[string]*corev1.ConfigMap) {
	for _, s := range steps {
		key := s.Copy.Instance + "/credential"
		msg := s.Problem
		if msg == "" {
			msg = failed[s.Copy.Key()]
		}
		if msg == "" {
			c.reported.changed(key, "")
			continue
		}
		if !c.reported.changed(key, msg) {
			continue
		}
		c.log.Warn(msg)
		if desc := descs[s.Copy.Instance]; desc != nil {
			c.recorder.Event(desc, corev1.EventTypeWarning, "CredentialNotCopied", msg)
		}
	}
}

// statusEventOnce records an Event on the quorum's status ConfigMap once per change of msg under key.
func (c *SentinelController) statusEventOnce(ctx context.Context, key, eventType, reason, msg string) {
	if !c.reported.changed("quorum/"+key, msg) {
		return
	}
	c.log.Warn(msg)
	ctx, cancel := context.WithTimeout(ctx, c.opts.CommandTimeout)
	defer cancel()
	if cm, err := c.cs.CoreV1().ConfigMaps(c.opts.Namespace).Get(ctx, contract.Status(c.opts.Release), metav1.GetOptions{}); err == nil {
		c.recorder.Event(cm, eventType, reason, msg)
	}
}

// eventFor records an Event on the descriptor of the instance that owns monitor (a selected one, else any
// descriptor in the namespace: a deselected instance still has one), else on the quorum's status ConfigMap.
func (c *SentinelController) eventFor(ctx context.Context, w plan.SentinelWorld, descs map[string]*corev1.ConfigMap, monitor, eventType, reason, msg string) {
	if monitor != "" {
		for _, qi := range w.Instances {
			if qi.Instance.MonitorName == monitor && descs[qi.Key()] != nil {
				c.recorder.Event(descs[qi.Key()], eventType, reason, msg)
				return
			}
		}
		cms, _ := c.cms.List(labels.SelectorFromSet(labels.Set{contract.LabelComponent: contract.ComponentInstance}))
		for _, cm := range cms {
			if in, err := spec.ParseInstance([]byte(cm.Data[contract.KeyInstance])); err == nil && in.MonitorName == monitor {
				c.recorder.Event(cm, eventType, reason, msg)
				return
			}
		}
	}
	if cm, err := c.cs.CoreV1().ConfigMaps(c.opts.Namespace).Get(ctx, contract.Status(c.opts.Release), metav1.GetOptions{}); err == nil {
		c.recorder.Event(cm, eventType, reason, msg)
	}
}
