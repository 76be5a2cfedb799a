//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestFleet (issue 17): one quorum and one shared instance controller (valkey-sentinel release "fleet",
// instanceController.enabled) in a namespace of their own serve five instances of 1 primary + 1 replica in
// two other namespaces, each of which grants them access (controller.mode shared, sentinel.namespace).
// No instance runs a controller pod. Sentinel auth is on (the default): the quorum copies its _instance
// credential into each instance's F-quorum-auth. The API server (SubjectAccessReview) allows the shared controller and
// the quorum what each instance granted and refuses the rest. Then one instance fails over while another
// rolls (a server-config change): both converge, with role labels true, by the one shared controller.
func TestFleet(t *testing.T) {
	maybeParallel(t)
	// 10 data pods (50m), 3 Sentinels (50m), each with its DNS cache, 2 controllers (100m)
	WaitForCPU(t, 10*(50+dnsCacheCPU())+3*(50+dnsCacheCPU())+2*100, 5*time.Minute)
	platform := NewNamespace(t, "fleet-q")
	tenants := []string{NewNamespace(t, "fleet-a"), NewNamespace(t, "fleet-b")}
	quorum := &Deployment{t: t, NS: platform, Helm: NewHelm(t, platform), Label: "fleet", S: "fleet", Sentinels: 3,
		SentinelExtra: fmt.Sprintf("sharedTrustDomain: accept\nnamespaces: [%s, %s]\ninstanceController: {enabled: true, resources: {cpu: 100m, memory: 128Mi}}\n", tenants[0], tenants[1])}
	grant := fmt.Sprintf(`
controller: {mode: shared, shared: {namespace: %s, serviceAccount: fleet-instance-controller}}
sentinel: {namespace: %s, release: fleet}
`, platform, platform)
	var ds []*Deployment
	start := time.Now()
	for i, releases := range [][]string{{"a", "b", "c"}, {"d", "e"}} {
		d := &Deployment{t: t, NS: tenants[i], Helm: NewHelm(t, tenants[i]), Label: "fleet", S: "fleet", SentinelNS: platform, Sentinels: 3}
		for _, r := range releases {
			in := &Instance{d: d, Release: r, F: valkeyFullname(r), Replicas: 1, Extra: grant}
			d.Instances = append(d.Instances, in)
			d.Helm.Install(r, ChartPath("valkey"), in.Values(), HelmOpts{NoWait: true})
		}
		ds = append(ds, d)
	}
	quorum.Helm.Install(quorum.S, ChartPath("valkey-sentinel"), quorum.SentinelValues(), HelmOpts{NoWait: true})
	for _, d := range ds {
		d.WaitConverged(t, installTimeout, true)
	}
	t.Logf("5 instances in %s and %s, quorum and shared controller in %s: converged %s after the first install",
		tenants[0], tenants[1], platform, time.Since(start).Round(time.Second))
	ctx := context.Background()
	for _, ns := range tenants {
		l, err := kube.AppsV1().Deployments(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(l.Items) != 0 {
			t.Errorf("namespace %s runs %d Deployments (%s...): shared mode runs no controller per instance", ns, len(l.Items), l.Items[0].Name)
		}
	}

	// ---- the API server enforces what each instance granted
	allowed := func(sa, ns, verb, group, resource, name string) bool {
		r, err := kube.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User:               "system:serviceaccount:" + platform + ":" + sa,
			ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: ns, Verb: verb, Group: group, Resource: resource, Name: name}}},
			metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("SubjectAccessReview: %v", err)
		}
		return r.Status.Allowed
	}
	a, d0 := ds[0].Instances[0], ds[1].Instances[0]
	for _, c := range []struct {
		sa, ns, verb, group, resource, name string
		want                                bool
	}{
		{"fleet-instance-controller", tenants[0], "patch", "", "pods", a.Pod(0), true},
		{"fleet-instance-controller", tenants[1], "delete", "", "pods", d0.Pod(1), true},
		{"fleet-instance-controller", tenants[0], "get", "", "secrets", a.F + "-system", true},
		{"fleet-instance-controller", tenants[0], "get", "", "secrets", a.F + "-sentinel-auth", false},
		{"fleet-instance-controller", tenants[0], "list", "", "secrets", "", false},
		{"fleet-instance-controller", tenants[0], "patch", "", "pods", "unrelated-app-0", false},
		{"fleet-instance-controller", tenants[0], "update", "", "configmaps", a.F + "-instance", false},
		{"fleet-instance-controller", platform, "delete", "", "pods", quorum.SentinelPod(0), false},
		{"fleet-instance-controller", "default", "list", "", "pods", "", false},
		{"fleet-controller", tenants[1], "get", "", "secrets", d0.F + "-sentinel-auth", true},
		{"fleet-controller", tenants[1], "update", "", "configmaps", d0.F + "-sentinels", true},
		{"fleet-controller", tenants[1], "get", "", "secrets", d0.F + "-system", false},
		{"fleet-controller", tenants[1], "update", "", "configmaps", d0.F + "-instance", false},
		{"fleet-controller", tenants[1], "delete", "", "pods", d0.Pod(0), false},
		{"fleet-controller", "default", "list", "", "configmaps", "", false},
		// the quorum's _instance credential, copied into the instance's F-quorum-auth (Sentinel auth is on)
		{"fleet-controller", tenants[1], "update", "", "secrets", d0.F + "-quorum-auth", true},
		{"fleet-controller", tenants[1], "create", "", "secrets", "", false},
		{"fleet-controller", tenants[1], "update", "", "secrets", d0.F + "-sentinel-auth", false},
		{"fleet-instance-controller", tenants[1], "get", "", "secrets", d0.F + "-quorum-auth", true},
	} {
		if got := allowed(c.sa, c.ns, c.verb, c.group, c.resource, c.name); got != c.want {
			t.Errorf("%s may %s %s %s/%s: %v, want %v", c.sa, c.verb, c.resource, c.ns, c.name, got, c.want)
		}
	}

	// the copy carries the quorum's scope: its data pods and the shared controller send it to those Sentinels only
	for k, want := range map[string]string{"namespace": platform, "release": "fleet", "username": "_instance"} {
		if got, err := ds[1].SecretKey(ctx, d0.F+"-quorum-auth", k); err != nil || got != want {
			t.Errorf("%s-quorum-auth %s: %q (%v), want %q", d0.F, k, got, err, want)
		}
	}

	// ---- one instance fails over while another rolls
	b := ds[0].Instances[1]
	tracker := TrackPods(t, tenants[0], b.DataSelector(), 250*time.Millisecond)
	b.Extra = grant + "config: {tcp-keepalive: 120}\n"
	t0 := time.Now()
	ds[0].Helm.Upgrade(b.Release, ChartPath("valkey"), b.Values(), HelmOpts{NoWait: true})
	rolled := func() error {
		lives := tracker.Lives()
		for i := 0; i < b.Nodes(); i++ {
			ls := lives[b.Pod(i)]
			if len(ls) < 2 {
				return fmt.Errorf("%s not replaced yet", b.Pod(i))
			}
			if last := ls[len(ls)-1]; last.Ready.IsZero() || !last.Gone.IsZero() {
				return fmt.Errorf("%s (new) not Ready yet", b.Pod(i))
			}
		}
		return nil
	}
	// the roll has begun: b's replica pod is replaced first
	Eventually(t, 2*time.Minute, 250*time.Millisecond, b.F+": the roll begins", func(context.Context) (bool, error) {
		for _, ls := range tracker.Lives() {
			if len(ls) > 1 || (len(ls) == 1 && !ls[0].Gone.IsZero()) {
				return true, nil
			}
		}
		return false, fmt.Errorf("no pod of %s replaced yet", b.F)
	})
	old, primary := d0.SentinelFailover(t)
	failedOver := time.Since(t0)
	if rolled() == nil {
		t.Errorf("%s finished rolling before %s's failover converged: nothing overlapped", b.F, d0.F)
	}
	t.Logf("%s failed over %s -> %s and converged (labels by the shared controller) %s after %s's roll began",
		d0.F, d0.Pod(old), d0.Pod(primary), failedOver.Round(time.Millisecond), b.F)
	Eventually(t, 6*time.Minute, time.Second, b.F+": every data pod replaced and Ready", func(context.Context) (bool, error) {
		if err := rolled(); err != nil {
			return false, err
		}
		return true, nil
	})
	tracker.Stop()
	t.Logf("%s rolled in %s", b.F, time.Since(t0).Round(time.Second))
	for _, d := range ds {
		d.WaitConverged(t, 2*time.Minute, true)
	}
}
