//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestF5PersistentFullRestartKeepsData (issue 12, F5) on the cluster: persistence on (PVCs, AOF), no Sentinel
// release (so no Sentinel remembers the instance), keys written and replicated. Then a full restart in which
// node 0 loses its volume: its PVC and every data pod are deleted at once. Node 0 must not lead with nothing
// (every replica would full-resync from it and flush its disk): the booting pods compare what their disks
// hold through the boot step and the newest one leads. Every node ends with every key.
func TestF5PersistentFullRestartKeepsData(t *testing.T) {
	maybeParallel(t)
	const keys = 5000
	d := Deploy(t, "f5", DeployOpts{NoSentinel: true, DataExtra: `persistence: {enabled: true, size: 1Gi}
users: [{name: app, access: readwrite, keys: ["*"]}]`})
	in := d.I()
	ctx := t.Context()
	WaitPodsReady(t, d.NS, in.DataSelector(), in.Nodes(), 5*time.Minute)
	appPW := waitSecretKey(t, d, in.F+"-user-app", "password")
	Eventually(t, 2*time.Minute, time.Second, "node 0 is primary and the replicas' links are up", func(ctx context.Context) (bool, error) {
		for i := 0; i < in.Nodes(); i++ {
			r, err := in.ReplRole(ctx, i)
			if err != nil || (i == 0) != (r.Role == "master") || (i > 0 && !r.LinkUp) {
				return false, fmt.Errorf("%s: %+v %v", in.Pod(i), r, err)
			}
		}
		out, err := in.As(ctx, in.Pod(0), "app", appPW, "ping")
		if err != nil || out != "PONG" {
			return false, fmt.Errorf("PING as app: %q %v", out, err)
		}
		return true, nil
	})
	in.LoadKeys(t, in.Pod(0), "app", appPW, keys)
	in.WaitDBSize(t, keys, time.Minute)

	pvc := "data-" + in.Pod(0)
	if err := kube.CoreV1().PersistentVolumeClaims(d.NS).Delete(ctx, pvc, metav1.DeleteOptions{}); err != nil {
		t.Fatalf("delete PVC %s: %v", pvc, err)
	}
	uids := make([]string, in.Nodes())
	for i := range uids {
		uids[i] = DeletePod(t, d.NS, in.Pod(i), nil) // the pods' own grace: the shutdown save records the position
	}
	t0 := time.Now()
	Eventually(t, 6*time.Minute, 2*time.Second, "every node is back, one primary, every node holds every key", func(ctx context.Context) (bool, error) {
		primaries := 0
		for i := 0; i < in.Nodes(); i++ {
			if _, _, err := ReplacedPod(ctx, d.NS, in.Pod(i), uids[i]); err != nil {
				return false, err
			}
			r, err := in.ReplRole(ctx, i)
			if err != nil {
				return false, err
			}
			if r.Role == "master" {
				primaries++
			} else if !r.LinkUp {
				return false, fmt.Errorf("%s: link to %s down", in.Pod(i), r.MasterHost)
			}
		}
		if primaries != 1 {
			return false, fmt.Errorf("%d primaries", primaries)
		}
		for i := 0; i < in.Nodes(); i++ {
			n, err := in.DBSize(ctx, in.Pod(i))
			if err != nil || n != keys {
				return false, fmt.Errorf("%s DBSIZE %d %v", in.Pod(i), n, err)
			}
		}
		return true, nil
	})
	for i := 0; i < in.Nodes(); i++ {
		if r, err := in.ReplRole(ctx, i); err == nil && r.Role == "master" {
			t.Logf("F5 on the cluster: %s leads after the full restart, every node holds %d of %d keys, %s after the deletes",
				in.Pod(i), keys, keys, time.Since(t0).Round(time.Second))
		}
	}
}
