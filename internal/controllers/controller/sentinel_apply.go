package controller

// The sentinel controller's applier (docs/design.md, "Gather, plan, apply"): registration actions, then the
// Sentinel info documents (published for every resolved instance), the credential copies, the withdrawal of
// the Sentinel info of instances no longer selected, then, only when all of that succeeded, the one Sentinel
// pod the plan replaces; last the status document. It only does what the plan says.

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/valkey-ha/valkey-ha/internal/chartapi/contract"
	"github.com/valkey-ha/valkey-ha/internal/chartapi/spec"
	"github.com/valkey-ha/valkey-ha/internal/chartapi/status"
	"github.com/valkey-ha/valkey-ha/internal/controllers/kube"
	"github.com/valkey-ha/valkey-ha/internal/planners/plan"
	"github.com/valkey-ha/valkey-ha/internal/planners/registration"
	"github.com/valkey-ha/valkey-ha/internal/valkeyapi/valkey"
)

// applied is what the applier of one pass did: the last step it took (the status's lastAction), the
// credential copies now equal to what the planner wanted (for the memory, plan.CredentialWorld.Written),
// why each copy it could not write failed (by plan.CredentialCopy.Key, reported as CredentialNotCopied) and
// the errors that fail the pass.
type applied struct {
	last       string
	remembered []plan.CredentialCopy
	copyFailed map[string]string
	errs       []error
}

// applySentinels executes d with the objects the gather read.
func (c *SentinelController) applySentinels(ctx context.Context, w plan.SentinelWorld, d plan.SentinelDecision, objs gathered) applied {
	descs := objs.descs
	var res applied
	for _, a := range d.Registration.Actions {
		if err := c.applyAction(ctx, w, a, descs); err != nil {
			res.errs = append(res.errs, err)
		} else {
			res.last = fmt.Sprintf("%s %s on %s", a.Kind, a.Name, a.Sentinel)
		}
	}
	for _, p := range d.Publish {
		if err := c.publish(ctx, descs[p.Descriptor], p.Instance, p.Info); err != nil {
			res.errs = append(res.errs, err)
		}
	}
	c.applyCopies(ctx, d.Copies, objs.copies, &res)
	for _, key := range d.Withdraw {
		ns, name := c.opts.Namespace, key
		if i := strings.IndexByte(key, '/'); i >= 0 {
			ns, name = key[:i], key[i+1:]
		}
		if err := kube.DeleteConfigMap(ctx, c.cs, ns, name); err != nil {
			res.errs = append(res.errs, err)
		}
	}
	if d.Roll != nil && len(res.errs) == 0 {
		if err := c.deleteSentinel(ctx, w, descs, *d.Roll); err != nil {
			res.errs = append(res.errs, err)
		} else {
			res.last = "roll: replaced " + d.Roll.Pod
		}
	}
	return res
}

// applyCopies writes the credential copies the planner found different (plan.CopyStep.Write), each the
// Secret the gather read with its data replaced (its resourceVersion a precondition). A failed write is
// recorded for the report; it fails the pass unless it was Forbidden (the instance's release grants no
// update). Copies written or found equal are recorded as remembered.
func (c *SentinelController) applyCopies(ctx context.Context, steps []plan.CopyStep, read map[string]*corev1.Secret, res *applied) {
	for _, st := range steps {
		cp := st.Copy
		if st.Write {
			s := read[cp.Key()].DeepCopy()
			s.Data = cp.Data
			if _, err := c.cs.CoreV1().Secrets(cp.Namespace).Update(ctx, s, metav1.UpdateOptions{}); err != nil {
				if res.copyFailed == nil {
					res.copyFailed = map[string]string{}
				}
				res.copyFailed[cp.Key()] = fmt.Sprintf("cannot write Secret %s/%s: %v", cp.Namespace, cp.Name, err)
				if !apierrors.IsForbidden(err) {
					res.errs = append(res.errs, fmt.Errorf("copy the quorum credential to %s/%s: %w", cp.Namespace, cp.Name, err))
				}
				continue
			}
			c.log.Info("copied the quorum credential", "secret", cp.Key())
		}
		if st.Remember {
			res.remembered = append(res.remembered, cp)
		}
	}
}

// reregister replaces a Sentinel's monitor a.Name with one at a.Host:a.Port (SENTINEL REMOVE, MONITOR, then SET
// of kv, the instance's credentials and settings): the restore of a foreign primary and the realignment of a
// stuck Sentinel. A failed REMOVE or MONITOR drops the pooled connection; errors name the command.
func (c *SentinelController) reregister(ctx context.Context, cl *valkey.Client, a registration.Action, kv []string) error {
	if err := cl.SentinelRemove(ctx, a.Name); err != nil {
		c.pool.drop(a.Addr)
		return err
	}
	if err := cl.SentinelMonitor(ctx, a.Name, a.Host, a.Port, a.Quorum); err != nil {
		c.pool.drop(a.Addr)
		return err
	}
	return cl.SentinelSet(ctx, a.Name, kv...)
}

// applyAction runs one MONITOR (+SET), SET, REMOVE, Restore or Realign on one Sentinel, sends its Event and
// records the credentials applied (c.applied, read by the next gather). Errors name the command.
func (c *SentinelController) applyAction(ctx context.Context, w plan.SentinelWorld, a registration.Action, descs map[string]*corev1.ConfigMap) error {
	cl, err := c.pool.get(ctx, a.Addr, c.sentinelOpts(w.TLS))
	if err != nil {
		return err
	}
	var kv []string
	for _, p := range a.Pairs {
		kv = append(kv, p[0], p[1])
	}
	switch a.Kind {
	case registration.Monitor:
		if err := cl.SentinelMonitor(ctx, a.Name, a.Host, a.Port, a.Quorum); err != nil {
			c.pool.drop(a.Addr)
			return err
		}
		if err := cl.SentinelSet(ctx, a.Name, kv...); err != nil {
			return err
		}
		c.metrics.Registrations.WithLabelValues(a.Name).Inc()
		c.eventFor(ctx, w, descs, a.Name, corev1.EventTypeNormal, "MonitorRegistered",
			fmt.Sprintf("SENTINEL MONITOR %s %s %d quorum %d on %s", a.Name, a.Host, a.Port, a.Quorum, a.Sentinel))
	case registration.Set:
		if err := cl.SentinelSet(ctx, a.Name, kv...); err != nil {
			c.pool.drop(a.Addr)
			return err
		}
	case registration.Restore:
		// the Sentinel names a primary that is not a node of the instance (a forged hello on a shared
		// quorum); forget it and register the observed primary again, with the instance's credentials and settings
		if err := c.reregister(ctx, cl, a, kv); err != nil {
			return err
		}
		c.metrics.ForeignRestores.WithLabelValues(c.key.String(), a.Name).Inc()
		c.eventFor(ctx, w, descs, a.Name, corev1.EventTypeWarning, "ForeignPrimaryRestored",
			fmt.Sprintf("Sentinel %s named %s as the primary of %s, which is not a node of the instance (a forged hello on a shared quorum?); "+
				"re-registered at the observed primary %s:%d (SENTINEL REMOVE + MONITOR)", a.Sentinel, a.From, a.Name, a.Host, a.Port))
	case registration.Realign:
		// the Sentinel is stuck on a stale primary its peers' hellos will never move it from (registration.Stuck);
		// forget it and register the primary its peers name again (its next hello from them gives it their
		// config epoch)
		if err := c.reregister(ctx, cl, a, kv); err != nil {
			return err
		}
		c.metrics.Registrations.WithLabelValues(a.Name).Inc()
		c.eventFor(ctx, w, descs, a.Name, corev1.EventTypeWarning, "MonitorRealigned",
			fmt.Sprintf("Sentinel %s was stuck naming %s as the primary of %s: re-registered at %s:%d (SENTINEL REMOVE + MONITOR): %s",
				a.Sentinel, a.From, a.Name, a.Host, a.Port, a.Reason))
	case registration.Remove:
		if err := cl.SentinelRemove(ctx, a.Name); err != nil {
			c.pool.drop(a.Addr)
			return err
		}
		c.metrics.Removals.WithLabelValues(a.Name).Inc()
		// removing a monitor silently removes failover: always a Warning (docs/design.md, "The sentinel controller's pass")
		msg := fmt.Sprintf("SENTINEL REMOVE %s on %s: %s", a.Name, a.Sentinel, a.Reason)
		if why := w.Revoked[a.Name]; why != "" {
			msg += " (grant revoked: " + why + ")"
		}
		c.eventFor(ctx, w, descs, a.Name, corev1.EventTypeWarning, "MonitorRemoved", msg)
	}
	c.log.Info("sentinel "+string(a.Kind), "monitor", a.Name, "sentinel", a.Sentinel, "reason", a.Reason)
	c.mu.Lock()
	defer c.mu.Unlock()
	if a.Kind == registration.Remove {
		delete(c.applied[a.Sentinel], a.Name)
		return nil
	}
	if c.applied[a.Sentinel] == nil {
		c.applied[a.Sentinel] = map[string]string{}
	}
	c.applied[a.Sentinel][a.Name] = a.AuthHash
	return nil
}

// publish writes <F>-sentinels, owned by the instance's descriptor.
func (c *SentinelController) publish(ctx context.Context, desc *corev1.ConfigMap, instance string, si spec.SentinelInfo) error {
	b, _ := json.MarshalIndent(si, "", "  ")
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: contract.SentinelInfo(instance), Namespace: desc.Namespace,
			Labels: map[string]string{contract.LabelPartOf: contract.PartOf, contract.LabelComponent: contract.ComponentSentinelInfo,
				contract.LabelInstance: instance, contract.LabelSentinel: c.opts.Release, contract.LabelManagedBy: contract.ManagedBy},
			OwnerReferences: []metav1.OwnerReference{kube.OwnerRef(desc)}},
		Data: map[string]string{contract.KeySentinels: string(b)},
	}
	_, err := kube.ApplyConfigMap(ctx, c.cs, cm)
	return err
}

// deleteSentinel replaces one Sentinel pod as observed (UID and resourceVersion as preconditions: one
// replaced or changed since fails with a Conflict).
func (c *SentinelController) deleteSentinel(ctx context.Context, w plan.SentinelWorld, descs map[string]*corev1.ConfigMap, s plan.Step) error {
	seen := w.Pods[s.Pod]
	c.log.Info("sentinel roll: deleting", "pod", s.Pod, "reason", s.Reason)
	if err := kube.DeletePod(ctx, c.cs, c.opts.Namespace, s.Pod, types.UID(seen.UID), seen.Version); err != nil {
		return fmt.Errorf("sentinel roll: %w", err)
	}
	for _, st := range w.Sentinels {
		if st.Pod == s.Pod {
			c.pool.drop(st.Addr)
		}
	}
	c.eventFor(ctx, w, descs, "", corev1.EventTypeNormal, "RollingSentinel", fmt.Sprintf("replaced %s with quorum healthy on every monitor", s.Pod))
	return nil
}

func (c *SentinelController) putStatus(ctx context.Context, st status.Quorum) error {
	st.ObservedAt = st.ObservedAt.Truncate(30 * time.Second) // rewrite at most every 30 s when nothing changes
	b, _ := json.MarshalIndent(st, "", "  ")
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: contract.Status(c.opts.Release), Namespace: c.opts.Namespace,
			Labels: map[string]string{contract.LabelPartOf: contract.PartOf, contract.LabelComponent: contract.ComponentStatus,
				contract.LabelSentinel: c.opts.Release, contract.LabelManagedBy: contract.ManagedBy}},
		Data: map[string]string{contract.KeyStatus: string(b)},
	}
	// owned by the Sentinel StatefulSet, so helm uninstall leaves nothing behind
	stsName := contract.SentinelStatefulSet(c.opts.Release)
	sts, err := c.cs.AppsV1().StatefulSets(c.opts.Namespace).Get(ctx, stsName, metav1.GetOptions{})
	switch {
	case err == nil:
		cm.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "StatefulSet", Name: sts.Name, UID: sts.UID}}
		_, err = kube.ApplyConfigMap(ctx, c.cs, cm)
	case apierrors.IsNotFound(err):
		// No StatefulSet: the release is being uninstalled (this controller outlives it by a moment) or not
		// applied yet. A ConfigMap created now would have no owner and outlive the release, so only an
		// existing one (which keeps its owner) is updated; one garbage collection deletes meanwhile stays gone.
		_, err = kube.UpdateConfigMap(ctx, c.cs, cm)
	default:
		return fmt.Errorf("get StatefulSet %s: %w", stsName, err)
	}
	if apierrors.IsForbidden(err) {
		return nil
	}
	return err
}
