package controller

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/valkey-ha/valkey-ha/internal/acl"
	"github.com/valkey-ha/valkey-ha/internal/kube"
	"github.com/valkey-ha/valkey-ha/internal/plan"
	"github.com/valkey-ha/valkey-ha/internal/spec"
	"github.com/valkey-ha/valkey-ha/internal/valkey"
)

// The instance controller's gather (docs/design.md, "Gather"): everything one pass decides from, read once
// (pods, StatefulSets and ConfigMaps from the informer caches; INFO replication from every running node and
// each Sentinel's SENTINEL MASTER + REPLICAS in one pipeline, all at once; CKQUORUM from one Sentinel). A part
// that cannot be read is recorded with its error; only a missing credential fails the pass (then nothing can
// be observed).

var (
	// errGone: the descriptor no longer exists (the instance was uninstalled).
	errGone = errors.New("descriptor gone")
	// errInvalid: the descriptor was refused (reported on it and in the status).
	errInvalid = errors.New("descriptor refused")
)

// descriptor reads and checks the descriptor <name>-instance. A refused one is reported (Event, Failed
// status) and returned with errInvalid.
func (c *InstanceController) descriptor(name string) (*corev1.ConfigMap, spec.Instance, error) {
	desc, err := c.cms.ConfigMaps(c.opts.Namespace).Get(name + spec.InstanceSuffix)
	if apierrors.IsNotFound(err) {
		return nil, spec.Instance{}, errGone
	}
	if err != nil {
		return nil, spec.Instance{}, fmt.Errorf("get descriptor %s%s: %w", name, spec.InstanceSuffix, err)
	}
	in, err := spec.ParseInstance([]byte(desc.Data[spec.InstanceKey]))
	if err == nil {
		err = in.CheckCanonical(desc.Name, desc.Namespace, c.opts.ClusterDomain)
	}
	if err != nil {
		c.recorder.Eventf(desc, corev1.EventTypeWarning, "InvalidDescriptor", "%v", err)
		c.writeInvalid(context.Background(), desc, name, err)
		return desc, in, errInvalid
	}
	return desc, in, nil
}

// gather builds the World of one pass.
func (c *InstanceController) gather(ctx context.Context, in spec.Instance, mem *instanceMemory) (plan.World, error) {
	w := plan.World{Instance: in, Now: time.Now(), Quorum: valkey.Quorum{Message: "not monitored"}}
	pw, err := c.operatorPassword(ctx, in, mem)
	if err != nil {
		return w, err
	}
	opts := valkey.Options{Username: acl.Operator, Password: pw, DialTimeout: c.opts.DialTimeout, CommandTimeout: c.opts.CommandTimeout}.
		WithTLS(in.TLS.Enabled, c.opts.TLSCAFile)
	w.Nodes = make([]plan.Node, len(in.Nodes))
	var wg sync.WaitGroup
	for i, n := range in.Nodes {
		nw := &w.Nodes[i]
		nw.Node = n
		running, err := c.gatherPod(in.Namespace, nw)
		if err != nil {
			return w, err
		}
		if !running {
			continue
		}
		wg.Go(func() {
			addr := in.Addr(n)
			cl, err := c.pool.get(ctx, addr, opts)
			if err == nil {
				nw.Repl, err = cl.InfoReplication(ctx)
				if err != nil {
					c.pool.drop(addr)
				}
			}
			if err != nil {
				nw.Err = err.Error()
				return
			}
			nw.Reachable = true
		})
	}
	if in.Monitored() {
		w.SentinelInfo, w.SentinelInfoErr = c.sentinelInfo(in)
	}
	if w.SentinelInfo != nil {
		c.gatherSentinels(ctx, &w)
	}
	wg.Wait()
	return w, nil
}

// gatherPod fills a node's pod and StatefulSet from the caches and reports whether its server may be asked
// (the pod exists, runs and is not being deleted).
func (c *InstanceController) gatherPod(ns string, nw *plan.Node) (bool, error) {
	if sts, err := c.stss.StatefulSets(ns).Get(nw.Node.StatefulSet); err == nil {
		s := &plan.StatefulSet{Name: sts.Name, Generation: sts.Generation, ObservedGeneration: sts.Status.ObservedGeneration,
			UpdateRevision: sts.Status.UpdateRevision}
		s.ReleaseRevision, s.HasReleaseRevision = sts.Annotations[spec.AnnotationReleaseRevision]
		nw.StatefulSet = s
	}
	pod, err := c.pods.Pods(ns).Get(nw.Node.Pod)
	switch {
	case apierrors.IsNotFound(err):
		nw.Err = "pod missing"
		return false, nil
	case err != nil:
		return false, fmt.Errorf("get pod %s: %w", nw.Node.Pod, err)
	}
	nw.PodExists = true
	nw.PodUID, nw.PodVersion = string(pod.UID), pod.ResourceVersion
	nw.PodReady = kube.PodReady(pod)
	nw.RoleLabel = pod.Labels[spec.LabelRole]
	nw.Revision = pod.Labels[revisionLabel]
	restarts := int32(0)
	for _, s := range pod.Status.ContainerStatuses {
		restarts += s.RestartCount
	}
	nw.Identity = fmt.Sprintf("%s/%d", pod.UID, restarts)
	// a pod being deleted is still observed until its deletion deadline (its preStop hook may be handing
	// the primary role off: topology treats it as handing off, issue 14)
	nw.Terminating = pod.DeletionTimestamp != nil && time.Now().Before(pod.DeletionTimestamp.Time)
	if pod.DeletionTimestamp != nil && !nw.Terminating || pod.Status.Phase != corev1.PodRunning {
		nw.Err = "pod not running"
		return false, nil
	}
	return true, nil
}

// sentinelInfo reads <F>-sentinels: nil and "" when none is published, nil and the reason when it is
// published but unusable (it does not parse, or names another monitor).
func (c *InstanceController) sentinelInfo(in spec.Instance) (*spec.SentinelInfo, string) {
	cm, err := c.cms.ConfigMaps(in.Namespace).Get(in.Name + "-sentinels")
	if apierrors.IsNotFound(err) {
		return nil, ""
	}
	if err != nil {
		return nil, err.Error()
	}
	si, err := spec.ParseSentinelInfo([]byte(cm.Data[spec.SentinelsKey]))
	switch {
	case err != nil:
		return nil, err.Error()
	case si.MonitorName != in.MonitorName:
		return nil, fmt.Sprintf("%s names monitor %q, the descriptor %q", cm.Name, si.MonitorName, in.MonitorName)
	}
	return &si, ""
}

// gatherSentinels asks every Sentinel, at once, SENTINEL MASTER and SENTINEL REPLICAS in one pipeline, the
// first one CKQUORUM too; when the first does not answer CKQUORUM, the next ones are asked in turn.
func (c *InstanceController) gatherSentinels(ctx context.Context, w *plan.World) {
	si, name := *w.SentinelInfo, w.Instance.MonitorName
	addrs := si.Addrs()
	w.Sentinels = make([]plan.Sentinel, len(addrs))
	quorums := make([]*valkey.Quorum, len(addrs))
	var wg sync.WaitGroup
	for i, addr := range addrs {
		s := &w.Sentinels[i]
		s.Addr = addr
		wg.Go(func() {
			cl, err := c.pool.get(ctx, addr, c.sentinelOpts(ctx, w.Instance, si))
			var v valkey.MonitorView
			if err == nil {
				v, err = cl.SentinelMonitorView(ctx, name, i == 0)
				if err != nil {
					c.pool.drop(addr)
				}
			}
			if err != nil {
				s.Err = err.Error()
				return
			}
			s.Found, s.Monitor, s.Replicas = v.Found, v.Monitor, v.Replicas
			if v.ReplicasErr != nil {
				s.ReplicasErr = v.ReplicasErr.Error()
			}
			if v.QuorumAsked && v.QuorumErr == nil {
				quorums[i] = &v.Quorum
			}
		})
	}
	wg.Wait()
	if quorums[0] != nil {
		w.Quorum, w.QuorumAsked = *quorums[0], true
		return
	}
	w.Quorum = valkey.Quorum{Message: "no Sentinel answered CKQUORUM"}
	for i, addr := range addrs[1:] {
		if !w.Sentinels[i+1].Answered() {
			continue
		}
		cl, err := c.pool.get(ctx, addr, c.sentinelOpts(ctx, w.Instance, si))
		if err != nil {
			continue
		}
		if q, err := cl.SentinelCKQuorum(ctx, name); err == nil {
			w.Quorum, w.QuorumAsked = q, true
			return
		}
	}
}

func (c *InstanceController) operatorPassword(ctx context.Context, in spec.Instance, mem *instanceMemory) (string, error) {
	if mem.operatorPW != "" && time.Since(mem.operatorPWAt) < time.Minute {
		return mem.operatorPW, nil
	}
	pw, err := kube.ReadSecretKey(ctx, c.cs, in.Namespace, in.SystemSecret, acl.Operator)
	if err != nil {
		return "", err
	}
	mem.operatorPW, mem.operatorPWAt = pw, time.Now()
	return pw, nil
}
