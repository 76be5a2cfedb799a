package controller

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/valkey-ha/valkey-ha/internal/chartapi/contract"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/valkey-ha/valkey-ha/internal/chartapi/spec"
	"github.com/valkey-ha/valkey-ha/internal/controllers/kube"
	"github.com/valkey-ha/valkey-ha/internal/planners/plan"
	"github.com/valkey-ha/valkey-ha/internal/valkeyapi/acl"
	"github.com/valkey-ha/valkey-ha/internal/valkeyapi/valkey"
)

// The instance controller's gather (docs/design.md, "Gather, plan, apply"): everything one pass decides from, read once
// (pods, StatefulSets and ConfigMaps from the informer caches; INFO replication from every running node and
// each Sentinel's SENTINEL MASTER + REPLICAS in one pipeline, all at once; CKQUORUM from one Sentinel). A part
// that cannot be read is recorded with its error; only a missing credential fails the pass (then nothing can
// be observed).

var (
	// errGone: the descriptor no longer exists (the instance was uninstalled).
	errGone = errors.New("descriptor gone")
	// errInvalid: the descriptor was refused (reported on it and in the status).
	errInvalid = errors.New("descriptor refused")
	// errSuperseded: a +switch-master arrived while the gather still waited for a node; the pass
	// decides nothing from the pre-switch observation and the next pass starts at once.
	errSuperseded = errors.New("observation superseded by +switch-master")
)

// descriptor reads and checks the descriptor <name>-instance of the instance of key. A refused one is
// reported (Event, Failed status) and returned with errInvalid.
func (c *InstanceController) descriptor(ctx context.Context, key types.NamespacedName) (*corev1.ConfigMap, spec.Instance, error) {
	name := key.Name
	desc, err := c.cms.ConfigMaps(key.Namespace).Get(contract.Descriptor(name))
	if apierrors.IsNotFound(err) {
		return nil, spec.Instance{}, errGone
	}
	if err != nil {
		return nil, spec.Instance{}, fmt.Errorf("get descriptor %s: %w", contract.Descriptor(name), err)
	}
	in, err := spec.ParseInstance([]byte(desc.Data[contract.KeyInstance]))
	if err == nil {
		err = in.CheckCanonical(desc.Name, desc.Namespace, c.opts.ClusterDomain)
	}
	if err != nil {
		c.recorder.Eventf(desc, corev1.EventTypeWarning, "InvalidDescriptor", "%v", err)
		c.writeInvalid(ctx, desc, name, err)
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
	switched := mem.switchSignal()
	w.Nodes = make([]plan.Node, len(in.Nodes))
	answered := make([]bool, len(in.Nodes)) // w.Nodes[i] holds its INFO answer (or why there is none)
	type reply struct {
		i    int
		repl valkey.Replication
		err  error
	}
	replies := make(chan reply, len(in.Nodes)) // buffered: a node given up on still reports, to nobody
	nctx, cancelNodes := context.WithCancel(ctx)
	defer cancelNodes()
	waiting := 0
	for i, n := range in.Nodes {
		nw := &w.Nodes[i]
		nw.Node = n
		running, err := c.gatherPod(in.Namespace, nw)
		if err != nil {
			return w, err
		}
		if !running {
			answered[i] = true
			continue
		}
		waiting++
		go func() {
			addr := in.Addr(n)
			var r valkey.Replication
			var err error
			// twice when the pooled connection turns out closed by the server: Sentinel closes every normal
			// connection of a node it promotes or reconfigures (CLIENT KILL TYPE normal), and the new
			// primary's answer is what the pass waits for
			for try := 0; try < 2; try++ {
				var cl *valkey.Client
				if cl, err = c.pool.get(nctx, addr, opts); err == nil {
					if r, err = cl.InfoReplication(nctx); err != nil {
						c.pool.drop(addr)
					}
				}
				if !closedByServer(err) {
					break
				}
			}
			replies <- reply{i, r, err}
		}()
	}
	if in.Monitored() {
		w.SentinelInfo, w.SentinelInfoErr = c.sentinelInfo(in)
		w.NamedQuorum = c.namedQuorum(in)
	}
	if w.SentinelInfo != nil {
		c.gatherSentinels(ctx, &w)
	}
	// wait for every node's INFO, except: once the Sentinels' agreed primary answered as master
	// (plan.PrimaryAnswered), a node still silent stragglerGrace later is recorded as not answering (a paused
	// old primary would hold the new one's relabel for the whole command timeout); and a +switch-master
	// arriving while a node is still silent abandons the pass (errSuperseded: the next one starts at once,
	// from the new topology). A node given up on has its pooled connection closed (in the background: its
	// command may be stuck).
	giveUp := func(why string) {
		for i := range w.Nodes {
			if !answered[i] {
				w.Nodes[i].Err = why
				c.pool.abandon(in.Addr(w.Nodes[i].Node))
			}
		}
	}
	var grace <-chan time.Time
	for ; waiting > 0; waiting-- {
		if grace == nil && plan.PrimaryAnswered(w, answered) {
			grace = time.After(stragglerGrace)
		}
		select {
		case r := <-replies:
			nw := &w.Nodes[r.i]
			if r.err != nil {
				nw.Err = r.err.Error()
			} else {
				nw.Repl, nw.Reachable = r.repl, true
			}
			answered[r.i] = true
		case <-grace:
			giveUp(fmt.Sprintf("no answer to INFO replication within %s of the Sentinels' primary's", stragglerGrace))
			return w, nil
		case <-switched:
			giveUp("+switch-master arrived before its INFO replication answered")
			return w, errSuperseded
		}
	}
	return w, nil
}

// closedByServer reports an error of a connection the server closed (EOF, reset): a pooled connection
// killed since its last use, worth one fresh dial.
func closedByServer(err error) bool {
	return err != nil && (errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, net.ErrClosed))
}

// revisionLabel is the pod label that names the revision a pod runs (Node.Revision).
const revisionLabel = contract.LabelRevision

// stragglerGrace is how long a pass waits for a node's INFO once the Sentinels' agreed primary has answered
// as master (plan.PrimaryAnswered): a healthy node answers within milliseconds, a paused or partitioned one
// only at the command timeout.
const stragglerGrace = 250 * time.Millisecond

// gatherPod fills a node's pod and StatefulSet from the caches and reports whether its server may be asked
// (the pod exists, runs and is not being deleted).
func (c *InstanceController) gatherPod(ns string, nw *plan.Node) (bool, error) {
	if sts, err := c.stss.StatefulSets(ns).Get(nw.Node.StatefulSet); err == nil {
		s := &plan.StatefulSet{Name: sts.Name, Generation: sts.Generation, ObservedGeneration: sts.Status.ObservedGeneration,
			UpdateRevision: sts.Status.UpdateRevision}
		s.ReleaseRevision, s.HasReleaseRevision = sts.Annotations[contract.AnnotationReleaseRevision]
		for _, v := range sts.Spec.VolumeClaimTemplates {
			if v.Name == contract.DataClaim {
				q := v.Spec.Resources.Requests[corev1.ResourceStorage]
				s.Claims = &spec.Claims{Size: q.String(), StorageClass: ptr.Deref(v.Spec.StorageClassName, "")}
			}
		}
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
	nw.RoleLabel = pod.Labels[contract.LabelRole]
	nw.Revision = pod.Labels[revisionLabel]
	restarts := int32(0)
	for _, s := range pod.Status.ContainerStatuses {
		restarts += s.RestartCount
	}
	nw.Identity = fmt.Sprintf("%s/%d", pod.UID, restarts)
	nw.StartRefused = startRefused(pod)
	nw.Unschedulable = kube.PodUnschedulable(pod)
	// a pod being deleted is still observed until its deletion deadline (its preStop hook may be handing
	// the primary role off: topology treats it as handing off)
	nw.Terminating = pod.DeletionTimestamp != nil && time.Now().Before(pod.DeletionTimestamp.Time)
	if gone := pod.DeletionTimestamp != nil && !nw.Terminating; gone || pod.Status.Phase != corev1.PodRunning {
		nw.Err = kube.PodNotRunning(pod, gone)
		return false, nil
	}
	return true, nil
}

// startRefused returns the reason a container of pod last refused to start with the values (its termination
// message after contract.StartRefusedPrefix, current or last state), "" when none did. Init containers count
// too: the restore step (restoreFrom) refuses a corrupt or foreign backup that way.
func startRefused(pod *corev1.Pod) string {
	for _, s := range append(append([]corev1.ContainerStatus{}, pod.Status.InitContainerStatuses...), pod.Status.ContainerStatuses...) {
		for _, t := range []*corev1.ContainerStateTerminated{s.State.Terminated, s.LastTerminationState.Terminated} {
			if t != nil && strings.HasPrefix(t.Message, contract.StartRefusedPrefix) {
				return strings.TrimSpace(strings.TrimPrefix(t.Message, contract.StartRefusedPrefix))
			}
		}
	}
	return ""
}

// sentinelInfo reads <F>-sentinels: nil and "" when none is published, nil and the reason when it is
// published but unusable (it does not parse, or names another monitor).
func (c *InstanceController) sentinelInfo(in spec.Instance) (*spec.SentinelInfo, string) {
	cm, err := c.cms.ConfigMaps(in.Namespace).Get(contract.SentinelInfo(in.Name))
	if apierrors.IsNotFound(err) {
		return nil, ""
	}
	if err != nil {
		return nil, err.Error()
	}
	si, err := spec.ParseSentinelInfo([]byte(cm.Data[contract.KeySentinels]))
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

// aclReread is how long the <F>-acl Secret read by gatherACL is reused before it is read again.
const aclReread = 5 * time.Second

// gatherACL reads the users of the <F>-acl Secret the descriptor names (zero when it names none) into the
// World of a pass whose steps were applied (the live ACL sync comes last: a slow API read never delays a
// label), through the API (Secrets are not cached by the informers), at most every aclReread while it lists users (the last read is kept in mem).
// A Secret that cannot be read or parsed is recorded in ACLSecret.Err and read again next pass.
func (c *InstanceController) gatherACL(ctx context.Context, in spec.Instance, now time.Time, mem *instanceMemory) plan.ACLSecret {
	if in.ACLSecret == "" {
		return plan.ACLSecret{}
	}
	if mem.acl.Users != nil && now.Sub(mem.aclReadAt) <= aclReread {
		return mem.acl
	}
	s, err := c.cs.CoreV1().Secrets(in.Namespace).Get(ctx, in.ACLSecret, metav1.GetOptions{})
	if err != nil {
		return plan.ACLSecret{Err: fmt.Sprintf("read secret %s: %v", in.ACLSecret, err)}
	}
	users, refused, err := acl.SplitUsers(s.Data[contract.KeyUsers])
	if err != nil {
		return plan.ACLSecret{Err: err.Error()}
	}
	mem.acl, mem.aclReadAt = plan.ACLSecret{Users: users, Refused: plan.RefusedUsers(in.ACLSecret, refused)}, now
	return mem.acl
}
