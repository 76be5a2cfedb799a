//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestMissingQuorumIsReported: an instance whose sentinel.release names a Sentinel release that does not
// exist used to install silently and stay not Ready. Its controller now sends a Warning Event QuorumMissing on
// the descriptor naming the missing quorum document, and F-status's Monitored condition says the same.
// The data pods are not waited for: the controller reports from the cache alone.
func TestMissingQuorumIsReported(t *testing.T) {
	maybeParallel(t)
	WaitForCPU(t, 2*50+100, 5*time.Minute)
	ns := NewNamespace(t, "noquorum")
	d := &Deployment{t: t, NS: ns, Helm: NewHelm(t, ns), Label: "q1", S: "sentinel", Sentinels: 3}
	in := &Instance{d: d, Release: "lonely", F: valkeyFullname("lonely"), Replicas: 1, Extra: "sentinel: {release: nosuch}\n"}
	d.Instances = append(d.Instances, in)
	start := time.Now()
	d.Helm.Install(in.Release, ChartPath("valkey"), in.Values(), HelmOpts{NoWait: true})

	want := []string{"nosuch-quorum does not exist", "instance release lonely", "namespace " + ns}
	Eventually(t, 2*time.Minute, time.Second, "Warning Event QuorumMissing", func(ctx context.Context) (bool, error) {
		evs, err := FindEvents(ctx, ns, "QuorumMissing", "Warning")
		if err != nil {
			return false, err
		}
		for _, e := range evs {
			ok := e.InvolvedObject.Kind == "ConfigMap" && e.InvolvedObject.Name == in.F+"-instance"
			for _, s := range want {
				ok = ok && strings.Contains(e.Message, s)
			}
			if ok {
				t.Logf("%s after install: event %s %s/%s: %s", time.Since(start).Round(time.Second), e.Type, e.InvolvedObject.Kind, e.InvolvedObject.Name, e.Message)
				return true, nil
			}
		}
		return false, fmt.Errorf("no matching QuorumMissing event among %d", len(evs))
	})
	Eventually(t, 30*time.Second, time.Second, "F-status Monitored names the missing quorum", func(ctx context.Context) (bool, error) {
		st, err := in.Status(ctx)
		if err != nil {
			return false, err
		}
		for _, c := range st.Conditions {
			if c.Type == "Monitored" && c.Reason == "QuorumMissing" && strings.Contains(c.Message, "nosuch-quorum") {
				t.Logf("status %s: %s", st.State, c.Message)
				return true, nil
			}
		}
		return false, fmt.Errorf("conditions: %+v", st.Conditions)
	})
}
