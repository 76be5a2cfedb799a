//go:build e2e

package e2e

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/valkey-io/valkey-go"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/yaml"
)

// upgradeFromFile records the earlier commit the upgrade test starts from (its first non-comment line).
const upgradeFromFile = "e2e/testdata/upgrade-from"

// upgradeFrom reads the recorded commit (40 hex digits) from upgradeFromFile.
func upgradeFrom(t testing.TB) string {
	t.Helper()
	f, err := os.Open(filepath.Join(repoRoot, upgradeFromFile))
	if err != nil {
		t.Fatalf("the upgrade's starting commit: %v", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if !regexp.MustCompile(`^[0-9a-f]{40}$`).MatchString(line) {
			t.Fatalf("%s: %q is not a full commit id (40 hex digits)", upgradeFromFile, line)
		}
		return line
	}
	t.Fatalf("%s names no commit", upgradeFromFile)
	return ""
}

// oldTree extracts commit from this repository's history (git archive) into a temporary directory and returns
// it. A shallow clone without that commit skips the test (saying so); a full one without it fails.
func oldTree(t testing.TB, commit string) string {
	t.Helper()
	dir := t.TempDir()
	tar := filepath.Join(dir, "src.tar")
	if out, err := exec.Command("git", "-C", repoRoot, "archive", "--format=tar", "-o", tar, commit).CombinedOutput(); err != nil {
		if sh, _ := exec.Command("git", "-C", repoRoot, "rev-parse", "--is-shallow-repository").Output(); strings.TrimSpace(string(sh)) == "true" {
			t.Skipf("SKIPPED, NOT PASSED: this clone is shallow and lacks the upgrade's starting commit %s (%s): git fetch --unshallow", commit, upgradeFromFile)
		}
		t.Fatalf("git archive %s (the upgrade's starting commit, %s; a shallow clone lacks it: git fetch --unshallow): %v: %s",
			commit, upgradeFromFile, err, out)
	}
	src := filepath.Join(dir, "src")
	if err := os.Mkdir(src, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("tar", "-xf", tar, "-C", src).CombinedOutput(); err != nil {
		t.Fatalf("tar -xf %s: %v: %s", tar, err, out)
	}
	return src
}

// oldControllerImage builds the controller of the tree at dir (hack/images.sh of this tree, CTL_BUILD_DIR = that
// tree) under the tag <its appVersion>-<short commit>, loads it into the local cluster and returns the tag.
// E2E_UPGRADE_FROM_CTL_TAG names an already loaded tag instead (a cluster that is not the local one).
func oldControllerImage(t testing.TB, dir, commit string) string {
	t.Helper()
	if tag := os.Getenv("E2E_UPGRADE_FROM_CTL_TAG"); tag != "" {
		return tag
	}
	if os.Getenv("E2E_LOCAL_CLUSTER") != "1" {
		t.Skip("not the local cluster (hack/e2e.sh sets E2E_LOCAL_CLUSTER=1): build and load the old controller yourself and set E2E_UPGRADE_FROM_CTL_TAG")
	}
	out, err := exec.Command("bash", filepath.Join(dir, "hack", "ctl-image.sh")).Output()
	if err != nil {
		t.Fatalf("the old tree's hack/ctl-image.sh: %v", err)
	}
	repo, appTag := splitImage(strings.TrimSpace(string(out)))
	tag := appTag + "-" + commit[:7]
	start := time.Now()
	cmd := exec.Command(filepath.Join(repoRoot, "hack", "images.sh"), "controller")
	cmd.Env = append(os.Environ(), "CTL_IMAGE="+repo+":"+tag, "CTL_BUILD_DIR="+dir, "CTL_STAMP=controller-upgrade-from")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("hack/images.sh controller (CTL_BUILD_DIR=%s): %v\n%s", dir, err, out)
	}
	t.Logf("controller of %s built and loaded as %s:%s in %s", commit[:7], repo, tag, time.Since(start).Round(time.Second))
	return tag
}

// StartServiceWriter is the SentinelWriter's loop over a plain client of the primary Service <F>-primary (its
// ClusterIP, resolved by the cluster DNS), as an application that knows nothing of Sentinel writes: one
// connection, re-dialled (to whichever pod the Service then selects) when it breaks.
func (in *Instance) StartServiceWriter(t testing.TB, user, password, prefix string, interval time.Duration) *SentinelWriter {
	t.Helper()
	ctx := t.Context()
	dialer, err := ClusterDialer(ctx)
	if err != nil {
		t.Fatal(err)
	}
	addr := net.JoinHostPort(fmt.Sprintf("%s-primary.%s.svc.%s", in.F, in.d.NS, clusterDomain), strconv.Itoa(valkeyPort))
	opt := clusterClientOption(dialer, user, password, addr)
	opt.ForceSingleClient = true
	var client valkey.Client
	Eventually(t, time.Minute, time.Second, "client of "+addr+" connects", func(ctx context.Context) (bool, error) {
		c, err := valkey.NewClient(opt)
		if err != nil {
			return false, fmt.Errorf("valkey.NewClient (%s, user %s): %w", addr, user, err)
		}
		client = c
		return true, nil
	})
	wctx, cancel := context.WithCancel(ctx)
	w := &SentinelWriter{client: client, prefix: prefix, cancel: cancel, done: make(chan struct{})}
	go w.run(wctx, interval)
	t.Cleanup(w.Stop)
	return w
}

// primaryChanges counts the handoffs in the role samples: changes of the single pod labelled primary (samples
// with zero or two labelled pods, in the middle of a relabel, are skipped), and lists them.
func primaryChanges(samples []RoleSample, t0 time.Time) (int, []string) {
	last, n := "", 0
	var seq []string
	for _, s := range samples {
		if s.Err != nil || len(s.Primaries) != 1 {
			continue
		}
		if p := s.Primaries[0]; p != last {
			if last != "" {
				n++
			}
			seq = append(seq, fmt.Sprintf("%s at +%s", p, rel(s.At, t0)))
			last = p
		}
	}
	return n, seq
}

// rolledOnto waits until every StatefulSet and Deployment of the namespace runs only pods of its current
// template (StatefulSets: controller-revision-hash = updateRevision, every replica Ready; Deployments: observed,
// updated and available = replicas, no other pod), with no manual step.
func rolledOnto(t testing.TB, ns string, timeout time.Duration, what string) {
	t.Helper()
	Eventually(t, timeout, time.Second, what, func(ctx context.Context) (bool, error) {
		stss, err := kube.AppsV1().StatefulSets(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, s := range stss.Items {
			pods, err := ListPods(ctx, ns, labels.Set(s.Spec.Selector.MatchLabels).String())
			if err != nil {
				return false, err
			}
			want := int(*s.Spec.Replicas)
			if s.Status.ObservedGeneration < s.Generation || s.Status.UpdateRevision == "" {
				return false, fmt.Errorf("statefulset %s: status not observed yet", s.Name)
			}
			ok := 0
			for i := range pods {
				if pods[i].Labels["controller-revision-hash"] == s.Status.UpdateRevision && PodReady(&pods[i]) {
					ok++
				}
			}
			if len(pods) != want || ok != want {
				return false, fmt.Errorf("statefulset %s: %d of %d pods Ready on revision %s (%d pods)", s.Name, ok, want, s.Status.UpdateRevision, len(pods))
			}
		}
		deps, err := kube.AppsV1().Deployments(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, d := range deps.Items {
			want := *d.Spec.Replicas
			st := d.Status
			if st.ObservedGeneration < d.Generation || st.UpdatedReplicas != want || st.AvailableReplicas != want || st.Replicas != want {
				return false, fmt.Errorf("deployment %s: %d updated, %d available, %d pods, want %d", d.Name, st.UpdatedReplicas, st.AvailableReplicas, st.Replicas, want)
			}
		}
		return true, nil
	})
}

// TestUpgradeFromRecordedCommitUnderTraffic installs both charts as they were at the commit recorded in
// e2e/testdata/upgrade-from, with that commit's own controller image (built here under a distinct tag), then,
// while a Sentinel-aware writer (valkey-go Sentinel client) and a writer through the primary Service each write a
// distinct key every 10 ms, upgrades the quorum release and then the instance release to the current tree with
// the command README "Upgrading" gives (`helm upgrade REL CHART -f values`: the same values file, new chart
// defaults; the old install's only extra value is the old controller's tag, since both trees call themselves
// 0.1.0). No manual step: the controllers roll every pod by themselves. Asserted: 0 acknowledged writes lost
// for both writers (every acknowledged key is on the final primary), at most one handoff (changes of the pod
// labelled primary), every pod of every StatefulSet and Deployment on the current template with no container of
// the old controller image, both releases at revision 2 of the current charts, the deployment converged.
func TestUpgradeFromRecordedCommitUnderTraffic(t *testing.T) {
	longTest(t, "internal/controllers/controller TestPlannedRollWaitsForAHalfAppliedUpgrade, templates-tests TestPasswordsSurviveUpgrades and the rolls of make e2e")
	maybeParallel(t)
	const (
		writeEvery = 10 * time.Millisecond
		rollWait   = 4 * time.Minute
	)
	commit := upgradeFrom(t)
	old := oldTree(t, commit)
	oldTag := oldControllerImage(t, old, commit)

	WaitForCPU(t, 3*50+100+3*50+100+100, 5*time.Minute)
	ns := NewNamespace(t, "upgrade")
	d := &Deployment{t: t, NS: ns, Helm: NewHelm(t, ns), Label: "q1", S: "sentinel", Sentinels: 3}
	in := &Instance{d: d, Release: "db", F: valkeyFullname("db"), Replicas: 2}
	d.Instances = []*Instance{in}
	// the values files a user keeps: the same for the install and the upgrade (keys both trees know)
	instFile := fmt.Sprintf(`
replicas: %d
sentinel:
  config: {down-after-milliseconds: "%d", failover-timeout: "%d"}
instanceLabels: {%s: %s}
resources: {limits: {cpu: 50m}}
controller: {resources: {cpu: 100m, memory: 128Mi}}
users: [{name: app, access: full, keys: ["*"]}]
`, in.Replicas, downAfter.Milliseconds(), failoverTimeout.Milliseconds(), quorumLabel, d.Label)
	sentFile := fmt.Sprintf(`
replicas: %d
valkeySelector:
  matchLabels: {%s: %s}
resources: {cpu: 50m, memory: 64Mi}
controller: {resources: {cpu: 100m, memory: 128Mi}}
`, d.Sentinels, quorumLabel, d.Label)
	oldCtl := fmt.Sprintf("controller: {image: {tag: %q}}\n", oldTag)

	// ---- the old tree, as Deploy installs: the instance, then the quorum
	start := time.Now()
	d.Helm.Install(in.Release, filepath.Join(old, "charts", "valkey"), mergeYAML(t, instFile, oldCtl), HelmOpts{Timeout: installTimeout})
	d.Helm.Install(d.S, filepath.Join(old, "charts", "valkey-sentinel"), mergeYAML(t, sentFile, oldCtl), HelmOpts{Timeout: installTimeout})
	d.WaitConverged(t, installTimeout, true)
	t.Logf("the charts and controller of %s converged %s after the first install", commit[:7], time.Since(start).Round(time.Second))
	ctx := t.Context()
	appPW := waitSecretKey(t, d, in.F+"-user-app", "password")
	oldPrimary, err := in.SentinelPrimary(ctx)
	if err != nil {
		t.Fatal(err)
	}

	// ---- traffic
	roles := in.SampleRoles(t, 200*time.Millisecond)
	sw := in.StartSentinelWriter(t, "app", appPW, "up-s:", writeEvery)
	pw := in.StartServiceWriter(t, "app", appPW, "up-p:", writeEvery)
	writers := []struct {
		name string
		w    *SentinelWriter
	}{{"Sentinel-aware writer", sw}, {"primary Service writer", pw}}
	ackedBy := func(what string, more int) {
		t.Helper()
		base := []int{sw.Acked(), pw.Acked()}
		Eventually(t, time.Minute, 100*time.Millisecond, what, func(context.Context) (bool, error) {
			for i, x := range writers {
				if n := x.w.Acked() - base[i]; n < more {
					return false, fmt.Errorf("%s: %d acknowledged writes; %s", x.name, n, x.w.Stats())
				}
			}
			return true, nil
		})
	}
	ackedBy("both writers acknowledged 100 times before the upgrade", 100)

	// ---- the commands README "Upgrading" rules out and allows, rendered against the cluster without applying:
	// --reuse-values renders the new templates with the old chart's defaults, so a key the new chart added is
	// missing; when that is refused the message must name the commands to use instead
	for _, r := range []struct{ release, chart string }{{d.S, "valkey-sentinel"}, {in.Release, "valkey"}} {
		_, err := d.Helm.TryUpgrade(r.release, ChartPath(r.chart), nil, HelmOpts{ReuseValues: true, DryRun: true})
		switch {
		case err == nil:
			t.Logf("helm upgrade %s --reuse-values (dry run): rendered (the new chart adds no defaulted key over %s)", r.release, commit[:7])
		case !strings.Contains(err.Error(), "-f VALUES or --reset-then-reuse-values"):
			t.Errorf("helm upgrade %s --reuse-values (dry run) refused without naming the commands to use instead: %v", r.release, err)
		default:
			t.Logf("helm upgrade %s --reuse-values (dry run) refused, naming the fix: %v", r.release, err)
		}
		if _, err := d.Helm.TryUpgrade(r.release, ChartPath(r.chart), nil, HelmOpts{ResetThenReuseValues: true, DryRun: true}); err != nil {
			t.Errorf("helm upgrade %s --reset-then-reuse-values (dry run), which README recommends: %v", r.release, err)
		}
	}

	// ---- the upgrade: the quorum, then the instance, each with README's command
	t0 := time.Now()
	d.Helm.Upgrade(d.S, ChartPath("valkey-sentinel"), mergeYAML(t, sentFile, imageValues()), HelmOpts{Timeout: rollWait})
	rolledOnto(t, ns, rollWait, "the quorum upgraded: every pod on its current template")
	d.WaitConverged(t, 2*time.Minute, true)
	tQuorum := time.Since(t0)
	t1 := time.Now()
	d.Helm.Upgrade(in.Release, ChartPath("valkey"), mergeYAML(t, instFile, imageValues()), HelmOpts{Timeout: rollWait})
	rolledOnto(t, ns, rollWait, "the instance upgraded: every pod on its current template")
	d.WaitConverged(t, 2*time.Minute, true)
	tInstance := time.Since(t1)
	ackedBy("both writers acknowledged 100 more times after the upgrade", 100)
	sw.Stop()
	pw.Stop()
	roles.Stop()
	t.Logf("upgrade from %s: quorum rolled and converged in %s, instance in %s", commit[:7], tQuorum.Round(time.Second), tInstance.Round(time.Second))

	// ---- 0 acknowledged writes lost, for both writers
	newPrimary, err := in.SentinelPrimary(ctx)
	if err != nil {
		t.Fatal(err)
	}
	primaryAddr := net.JoinHostPort(in.FQDN(newPrimary), strconv.Itoa(valkeyPort))
	for _, x := range writers {
		st := x.w.Stats()
		t.Logf("%s: %s; longest failed window from +%s after the quorum upgrade began", x.name, st, rel(st.FailWindowStart, t0))
		if st.Acked == 0 || st.Writes < int(time.Since(t0)/(10*writeEvery)) {
			t.Errorf("%s barely wrote: %s", x.name, st)
		}
		missing, err := x.w.MissingOn(ctx, primaryAddr, "app", appPW)
		if err != nil {
			t.Fatal(err)
		}
		if len(missing) > 0 {
			t.Errorf("%s: %d of %d acknowledged writes are missing on the primary %s after the upgrade (first: %v)",
				x.name, len(missing), st.Acked, in.Pod(newPrimary), missing[:min(10, len(missing))])
		} else {
			t.Logf("%s: all %d acknowledged writes are on the primary %s (lost 0)", x.name, st.Acked, in.Pod(newPrimary))
		}
	}

	// ---- at most one handoff
	n, seq := primaryChanges(roles.Samples(), t0)
	t.Logf("pod labelled primary: %v (before the upgrade: %s, after: %s); %d handoffs", seq, in.Pod(oldPrimary), in.Pod(newPrimary), n)
	if n > 1 {
		t.Errorf("the upgrade moved the primary %d times (want at most one handoff): %v", n, seq)
	}

	// ---- everything on the current charts and controller
	for _, r := range []string{d.S, in.Release} {
		got, err := d.Helm.Get(r)
		if err != nil {
			t.Fatal(err)
		}
		want := LoadChart(t, ChartPath(got.Chart.Metadata.Name)).Metadata.Version
		if got.Version != 2 || got.Chart.Metadata.Version != want || got.Info.Status != "deployed" {
			t.Errorf("release %s: revision %d of chart %s %s (%s), want revision 2 of %s", r, got.Version, got.Chart.Metadata.Name, got.Chart.Metadata.Version, got.Info.Status, want)
		}
	}
	pods, err := kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var newCtl string
	{
		var vals struct {
			Controller struct {
				Image struct{ Registry, Repository, Tag string }
			}
		}
		rel, err := d.Helm.Get(in.Release)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := yaml.Marshal(rel.Config)
		_ = yaml.Unmarshal(b, &vals)
		newCtl = ":" + rel.Chart.Metadata.AppVersion
		if vals.Controller.Image.Tag != "" {
			newCtl = ":" + vals.Controller.Image.Tag
		}
	}
	checked := 0
	for _, p := range pods.Items {
		if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue // a finished Job pod of the old release (the credentials Job's own history)
		}
		checked++
		for _, c := range append(append([]corev1.Container{}, p.Spec.InitContainers...), p.Spec.Containers...) {
			if strings.HasSuffix(c.Image, ":"+oldTag) {
				t.Errorf("pod %s container %s still runs the old controller image %s", p.Name, c.Name, c.Image)
			} else if strings.Contains(c.Image, "valkey-sentinel-ctl") && !strings.HasSuffix(c.Image, newCtl) {
				t.Errorf("pod %s container %s runs controller image %s, want tag %s", p.Name, c.Name, c.Image, newCtl)
			}
		}
	}
	t.Logf("%d running pods checked: none on the old controller image", checked)
	d.WaitConverged(t, time.Minute, true)
}
