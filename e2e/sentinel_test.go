//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/valkey-ha/valkey-ha/internal/chartapi/contract"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestRelabelRemovesMonitor: `helm upgrade` the instance with instanceLabels that no longer match the
// quorum's selector: every Sentinel forgets the monitor (SENTINEL REMOVE), a Warning Event MonitorRemoved
// is recorded, the Sentinel info ConfigMap is withdrawn, and no data pod is touched.
func TestRelabelRemovesMonitor(t *testing.T) {
	maybeParallel(t)
	d := Deploy(t, "relabel", DeployOpts{})
	in := d.I()
	ctx := t.Context()
	before, err := Snapshot(ctx, d.NS, in.DataSelector())
	if err != nil {
		t.Fatal(err)
	}

	in.Extra = fmt.Sprintf("instanceLabels: {%s: elsewhere}", quorumLabel)
	d.Helm.Upgrade(in.Release, ChartPath("valkey"), in.Values())
	Eventually(t, time.Minute, time.Second, "SENTINEL REMOVE on every Sentinel", func(ctx context.Context) (bool, error) {
		for j := 0; j < d.Sentinels; j++ {
			if _, found, err := d.SentinelMaster(ctx, j, in.F); err != nil || found {
				return false, fmt.Errorf("%s still monitors %s (%v)", d.SentinelPod(j), in.F, err)
			}
			ms, err := d.SentinelList(ctx, j, "masters")
			if err != nil {
				return false, err
			}
			for _, m := range ms {
				if m["name"] == in.F {
					return false, fmt.Errorf("%s lists %s in SENTINEL MASTERS", d.SentinelPod(j), in.F)
				}
			}
			if addr, err := d.PrimaryAddr(ctx, j, in.F); err != nil || addr != "" {
				return false, fmt.Errorf("%s: GET-MASTER-ADDR-BY-NAME %s = %q (%v)", d.SentinelPod(j), in.F, addr, err)
			}
		}
		return true, nil
	})
	Eventually(t, 30*time.Second, time.Second, "Warning Event MonitorRemoved", func(ctx context.Context) (bool, error) {
		evs, err := FindEvents(ctx, d.NS, "MonitorRemoved", "Warning")
		if err != nil {
			return false, err
		}
		if len(evs) == 0 {
			return false, fmt.Errorf("no MonitorRemoved event")
		}
		for _, e := range evs {
			t.Logf("event %s %s/%s: %s (count %d)", e.Type, e.InvolvedObject.Kind, e.InvolvedObject.Name, e.Message, e.Count)
		}
		return true, nil
	})
	Eventually(t, 30*time.Second, time.Second, "Sentinel info ConfigMap "+in.F+"-sentinels withdrawn", func(ctx context.Context) (bool, error) {
		_, err := kube.CoreV1().ConfigMaps(d.NS).Get(ctx, contract.SentinelInfo(in.F), metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, fmt.Errorf("still there (%v)", err)
	})
	after, err := Snapshot(ctx, d.NS, in.DataSelector())
	if err != nil {
		t.Fatal(err)
	}
	if diff := SnapshotDiff(before, after); diff != "" {
		t.Errorf("relabelling touched data pods: %s", diff)
	}
}

// TestScaleInLeavesNoStaleReplica: replicas 2 -> 1 with `helm upgrade`: the removed node's pod goes away,
// and within a deadline no Sentinel lists it any more (the instance controller's SENTINEL RESET after a
// scale-in, cases S03/S11); the instance is Ready again with one replica.
func TestScaleInLeavesNoStaleReplica(t *testing.T) {
	longTest(t, "internal/controllers/controller TestCaseS03ScaleInResetsOneSentinelAtATime, TestScaleInResetAsControllerUserWithSentinelAuth and TestScaleInResetFallsBackOnAQuorumNotYetUpgraded")
	maybeParallel(t)
	d := Deploy(t, "scalein", DeployOpts{})
	in := d.I()
	ctx := t.Context()
	primary, err := in.SentinelPrimary(ctx)
	if err != nil {
		t.Fatal(err)
	}
	removed := in.Nodes() - 1
	if primary == removed {
		t.Fatalf("fresh install elected %s, the node a scale-in removes; the test expects node 0", in.Pod(primary))
	}
	removedHost := in.FQDN(removed)

	in.Replicas--
	d.Helm.Upgrade(in.Release, ChartPath("valkey"), in.Values())
	t0 := time.Now()
	Eventually(t, 2*time.Minute, time.Second, "pod "+in.Pod(removed)+" gone", func(ctx context.Context) (bool, error) {
		_, err := kube.CoreV1().Pods(d.NS).Get(ctx, in.Pod(removed), metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, fmt.Errorf("still there (%v)", err)
	})
	var lastSeen []string
	err = Poll(ctx, 90*time.Second, time.Second, func(ctx context.Context) (bool, error) {
		lastSeen = nil
		for j := 0; j < d.Sentinels; j++ {
			reps, err := d.SentinelList(ctx, j, "replicas", in.F)
			if err != nil {
				return false, err
			}
			for _, r := range reps {
				if r["ip"] == removedHost {
					lastSeen = append(lastSeen, fmt.Sprintf("%s lists %s (flags %s)", d.SentinelPod(j), r["name"], r["flags"]))
				}
			}
			if len(reps) != in.Replicas {
				lastSeen = append(lastSeen, fmt.Sprintf("%s lists %d replicas, want %d", d.SentinelPod(j), len(reps), in.Replicas))
			}
		}
		if len(lastSeen) > 0 {
			return false, fmt.Errorf("%s", strings.Join(lastSeen, "; "))
		}
		return true, nil
	})
	if err != nil {
		resets, _ := FindEvents(ctx, d.NS, "SentinelReset", "")
		t.Fatalf("90 s after the scale-in the Sentinels still list the removed node: %v (SentinelReset events: %d)", err, len(resets))
	}
	t.Logf("no Sentinel lists %s %s after the upgrade", removedHost, time.Since(t0).Round(time.Second))
	if resets, err := FindEvents(ctx, d.NS, "SentinelReset", ""); err == nil {
		for _, e := range resets {
			t.Logf("event %s: %s (count %d)", e.Reason, e.Message, e.Count)
		}
	}
	// a fresh install's Sentinels know _controller, the only user that may RESET: no fallback to _instance
	if fb, err := FindEvents(ctx, d.NS, "SentinelResetUserFallback", ""); err != nil || len(fb) > 0 {
		t.Errorf("SentinelResetUserFallback events on a fresh install: %v (error %v)", fb, err)
	}
	d.WaitConverged(t, time.Minute, true)
}

// TestOneQuorumThreeInstances: one valkey-sentinel release selecting three charts/valkey releases by label:
// all three Ready and monitored on every Sentinel (3 monitors), CKQUORUM OK for each on each Sentinel, and
// the quorum's status lists the three.
func TestOneQuorumThreeInstances(t *testing.T) {
	longTest(t, "TestFleet (make e2e: one quorum, five instances in two namespaces) and internal/controllers/controller TestSharedControllerIsolatesAStuckInstance and TestCrossNamespaceQuorum")
	maybeParallel(t)
	// one replica each and lighter controllers: 3 instances + 3 Sentinels must fit next to a demo on 2 cores
	d := Deploy(t, "three", DeployOpts{Releases: []string{"a", "b", "c"}, Replicas: 1,
		DataExtra: "controller: {resources: {cpu: 50m, memory: 128Mi}}"})
	ctx := t.Context()
	var want []string
	for _, in := range d.Instances {
		want = append(want, in.F)
		st, err := in.Status(ctx)
		if err != nil || st.State != "Ready" {
			t.Errorf("%s-status: %q (%v)", in.F, st.State, err)
		}
	}
	sort.Strings(want)
	for j := 0; j < d.Sentinels; j++ {
		ms, err := d.SentinelList(ctx, j, "masters")
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, m := range ms {
			got = append(got, m["name"])
			if m["flags"] != "master" {
				t.Errorf("%s: monitor %s flags %s", d.SentinelPod(j), m["name"], m["flags"])
			}
		}
		sort.Strings(got)
		if strings.Join(got, ",") != strings.Join(want, ",") {
			t.Errorf("%s monitors %v, want %v", d.SentinelPod(j), got, want)
		}
		for _, in := range d.Instances {
			if err := d.CKQuorum(ctx, j, in.F); err != nil {
				t.Error(err)
			}
		}
	}
	for _, in := range d.Instances {
		cm, err := kube.CoreV1().ConfigMaps(d.NS).Get(ctx, contract.SentinelInfo(in.F), metav1.GetOptions{})
		if err != nil || !strings.Contains(cm.Data["sentinels.json"], `"sentinelRelease": "`+d.S+`"`) && !strings.Contains(cm.Data["sentinels.json"], `"sentinelRelease":"`+d.S+`"`) {
			t.Errorf("%s-sentinels: %v %v", in.F, err, cm)
		}
	}
	Eventually(t, time.Minute, 2*time.Second, "quorum status lists 3 monitors with quorum OK", func(ctx context.Context) (bool, error) {
		cm, err := kube.CoreV1().ConfigMaps(d.NS).Get(ctx, contract.Status(d.S), metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		raw := cm.Data["status.json"]
		for _, in := range d.Instances {
			if !strings.Contains(raw, `"name": "`+in.F+`"`) {
				return false, fmt.Errorf("%s missing from %s-status", in.F, d.S)
			}
		}
		if strings.Count(raw, `"quorumOK": true`) != 3 {
			return false, fmt.Errorf("%s-status: %d monitors with quorumOK", d.S, strings.Count(raw, `"quorumOK": true`))
		}
		return true, nil
	})
}

// TestCaseS22SentinelOnlyChangeKeepsDataPods: `helm upgrade` of the Sentinel release with a changed
// `config` value changes the Sentinel side only: the data StatefulSets keep their template and no data pod
// is replaced or restarted, also while the Sentinel controller may roll the Sentinel pods. (Whether and how
// the Sentinel pods are rolled is logged, not asserted here.)
func TestCaseS22SentinelOnlyChangeKeepsDataPods(t *testing.T) {
	longTest(t, "templates-tests TestCaseS22SentinelOnlyChangeLeavesDataTemplatesIdentical and internal/controllers/controller TestCaseS22SentinelRollKeepsQuorum")
	maybeParallel(t)
	d := Deploy(t, "s22", DeployOpts{})
	in := d.I()
	ctx := t.Context()
	before, err := Snapshot(ctx, d.NS, in.DataSelector())
	if err != nil {
		t.Fatal(err)
	}
	type stsState struct {
		gen  int64
		hash string
	}
	stsOf := func(name string) stsState {
		s, err := kube.AppsV1().StatefulSets(d.NS).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("statefulset %s: %v", name, err)
		}
		return stsState{s.Generation, s.Spec.Template.Annotations["valkey.io/config-hash"]}
	}
	dataBefore := map[string]stsState{}
	for i := 0; i < in.Nodes(); i++ {
		dataBefore[contract.NodeStatefulSet(in.F, i)] = stsOf(contract.NodeStatefulSet(in.F, i))
	}
	sentBefore := stsOf(d.S)

	d.SentinelExtra = "config: {loglevel: verbose}"
	d.Helm.Upgrade(d.S, ChartPath("valkey-sentinel"), d.SentinelValues())
	t0 := time.Now()
	sentAfter := stsOf(d.S)
	if sentAfter.hash == sentBefore.hash {
		t.Fatalf("the Sentinel config change did not change the Sentinel pod template hash (%s)", sentAfter.hash)
	}
	cm, err := kube.CoreV1().ConfigMaps(d.NS).Get(ctx, d.S+"-config", metav1.GetOptions{})
	if err != nil || !strings.Contains(cm.Data["sentinel.conf"], "loglevel verbose") {
		t.Fatalf("%s-config does not carry the new directive: %v", d.S, err)
	}
	for name, b := range dataBefore {
		if a := stsOf(name); a != b {
			t.Errorf("data StatefulSet %s changed by a Sentinel-only upgrade: %+v -> %+v", name, b, a)
		}
	}

	// hold for at least 30 s, and until the Sentinel pods run the new template if the controller rolls them
	// (at most 2 minutes)
	rolled := map[string]time.Duration{}
	for {
		after, err := Snapshot(ctx, d.NS, in.DataSelector())
		if err != nil {
			t.Fatal(err)
		}
		if diff := SnapshotDiff(before, after); diff != "" {
			t.Fatalf("S22: a Sentinel-only change touched data pods %s after the upgrade: %s", time.Since(t0).Round(time.Second), diff)
		}
		sp, err := ListPods(ctx, d.NS, d.SentinelSelector())
		if err != nil {
			t.Fatal(err)
		}
		current := 0
		for i := range sp {
			if sp[i].Annotations["valkey.io/config-hash"] == sentAfter.hash && PodReady(&sp[i]) {
				current++
				if _, ok := rolled[sp[i].Name]; !ok {
					rolled[sp[i].Name] = time.Since(t0).Round(time.Second)
				}
			}
		}
		el := time.Since(t0)
		if el > 30*time.Second && (current == d.Sentinels || el > 2*time.Minute) {
			break
		}
		time.Sleep(time.Second)
	}
	t.Logf("S22: data pods untouched for %s after the Sentinel-only upgrade; Sentinel pods on the new template: %v (of %d)",
		time.Since(t0).Round(time.Second), rolled, d.Sentinels)
	d.WaitConverged(t, 2*time.Minute, true)
	after, err := Snapshot(ctx, d.NS, in.DataSelector())
	if err != nil {
		t.Fatal(err)
	}
	if diff := SnapshotDiff(before, after); diff != "" {
		t.Fatalf("S22: data pods changed: %s", diff)
	}
}
