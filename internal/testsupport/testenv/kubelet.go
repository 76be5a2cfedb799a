package testenv

import (
	"context"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/valkey-ha/valkey-ha/internal/testsupport/valkeytest"
)

// Kubelet stands in for the kubelet and the StatefulSet controller: when a controller deletes one of its
// pods, it stops the pod's process (SIGTERM), calls Fresh, starts the process again from its config file
// and recreates the pod (Running+Ready, no UID, no resourceVersion) at revision Rev. Deletions are handled
// one at a time, in the order the watch delivers them.
type Kubelet struct {
	mu      sync.Mutex
	deleted []string
}

// RunKubelet starts a Kubelet for procs (pod name -> process) until the test ends. fresh, when not nil, runs
// between stop and start (it may rewrite the config: what a pod's boot step does); nil keeps the config the
// process rewrote itself.
func (e *Env) RunKubelet(procs map[string]*valkeytest.Proc, rev string, fresh func(pod string, p *valkeytest.Proc)) *Kubelet {
	e.T.Helper()
	k := &Kubelet{}
	ctx, cancel := context.WithCancel(context.Background())
	e.T.Cleanup(cancel)
	w, err := e.CS.CoreV1().Pods(e.NS).Watch(ctx, metav1.ListOptions{})
	if err != nil {
		e.T.Fatalf("kubelet: watch pods: %v", err)
	}
	go func() {
		for ev := range w.ResultChan() {
			if ev.Type != watch.Deleted {
				continue
			}
			pod, ok := ev.Object.(*corev1.Pod)
			if !ok {
				continue
			}
			p, ok := procs[pod.Name]
			if !ok {
				continue
			}
			k.mu.Lock()
			k.deleted = append(k.deleted, pod.Name)
			k.mu.Unlock()
			p.Stop()
			if fresh != nil {
				fresh(pod.Name, p)
			}
			if ctx.Err() != nil {
				return
			}
			p.Start()
			np := pod.DeepCopy()
			np.ResourceVersion, np.UID, np.DeletionTimestamp = "", "", nil
			if np.Labels == nil {
				np.Labels = map[string]string{}
			}
			np.Labels[RevisionLabel] = rev
			_, _ = e.CS.CoreV1().Pods(e.NS).Create(ctx, np, metav1.CreateOptions{})
		}
	}()
	return k
}

// Order returns the pods deleted so far, in order.
func (k *Kubelet) Order() []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return append([]string{}, k.deleted...)
}
