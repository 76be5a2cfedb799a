//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestPodsRunUnderAnotherUID (issue 27, podSecurityContext): both charts with a uid, gid and fsGroup other than
// the images' 999, as a platform that assigns ids from a namespace range would (OpenShift's start at
// 1000000000), and persistence on, so the data volume and the Sentinels' /data are PVCs owned through the
// fsGroup. Everything boots and converges (install-ctl, the bootstrap's runtime config, the Sentinels' config
// init, the credentials Jobs, the controllers), the server and Sentinel processes run under that uid, and
// `helm test` passes for both releases.
func TestPodsRunUnderAnotherUID(t *testing.T) {
	maybeParallel(t)
	const ids = "podSecurityContext: {runAsUser: 1000650000, runAsGroup: 1000650000, fsGroup: 1000650001}\n"
	d := Deploy(t, "uid", DeployOpts{Replicas: 1,
		DataExtra:     ids + "persistence: {enabled: true, size: 1Gi}",
		SentinelExtra: ids + "persistence: {enabled: true, size: 1Gi}"})
	in := d.I()
	ctx := t.Context()
	for _, c := range []struct{ pod, container string }{{in.Pod(0), "valkey"}, {in.Pod(1), "valkey"}, {d.SentinelPod(0), "sentinel"}} {
		out, stderr, err := Exec(ctx, d.NS, c.pod, c.container, nil, "sh", "-c", "id -u; id -G; stat -c '%U:%G %g' /data; ls -ln /data")
		if err != nil {
			t.Fatalf("exec %s: %v %s", c.pod, err, stderr)
		}
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if lines[0] != "1000650000" || !strings.Contains(lines[1], "1000650001") {
			t.Fatalf("%s/%s runs as %q groups %q: want uid 1000650000 with the fsGroup 1000650001", c.pod, c.container, lines[0], lines[1])
		}
		t.Logf("%s/%s: uid %s, groups %s, /data:\n%s", c.pod, c.container, lines[0], lines[1], indent(strings.Join(lines[2:], "\n")))
	}
	for _, rel := range []string{in.Release, d.S} {
		start := time.Now()
		if logs, err := d.Helm.Test(rel, 3*time.Minute); err != nil {
			t.Fatalf("helm test %s: %v\n%s", rel, err, logs)
		}
		t.Logf("helm test %s passed in %s", rel, time.Since(start).Round(time.Millisecond))
	}
	pods, err := kube.CoreV1().Pods(d.NS).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/part-of=valkey-ha"})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		if sc := p.Spec.SecurityContext; sc == nil || sc.RunAsUser == nil || *sc.RunAsUser != 1000650000 {
			t.Errorf("pod %s: pod securityContext %+v, want runAsUser 1000650000", p.Name, sc)
		}
	}
}

// TestDiagnosticModeStartsPodsWithoutTheServer (issue 27, diagnosticMode): with the controller off and no
// failover, the data pods run `sleep infinity` (the image has it: busybox), nothing listens on the server port,
// and the pods stay up to be inspected (`kubectl exec`), with their volumes mounted.
func TestDiagnosticModeStartsPodsWithoutTheServer(t *testing.T) {
	maybeParallel(t)
	WaitForCPU(t, 2*50+100, 5*time.Minute)
	ns := NewNamespace(t, "diag")
	d := &Deployment{t: t, NS: ns, Helm: NewHelm(t, ns), Label: "q1", S: "sentinel", Sentinels: 3}
	in := &Instance{d: d, Release: "db", F: valkeyFullname("db"), Replicas: 1,
		Extra: "controller: {enabled: false}\nfailover: {mode: None}\ndiagnosticMode: {enabled: true}\n"}
	d.Instances = append(d.Instances, in)
	d.Helm.Install(in.Release, ChartPath("valkey"), in.Values(), HelmOpts{NoWait: true})
	Eventually(t, 3*time.Minute, 2*time.Second, "every data pod runs sleep, nothing listens on 6379", func(ctx context.Context) (bool, error) {
		for i := 0; i < in.Nodes(); i++ {
			// /proc/1/cmdline: the container's main process; /proc/net/tcp: no socket listening on 6379 (0x18EB)
			out, stderr, err := Exec(ctx, ns, in.Pod(i), "valkey", nil, "sh", "-c",
				"tr '\\0' ' ' </proc/1/cmdline; echo; cat /proc/net/tcp /proc/net/tcp6 | awk 'toupper($2) ~ /:18EB$/ && $4 == \"0A\"' | wc -l; ls /data /etc/valkey-ha")
			if err != nil {
				return false, fmt.Errorf("exec %s: %v %s", in.Pod(i), err, stderr)
			}
			lines := strings.Split(strings.TrimSpace(out), "\n")
			if len(lines) < 2 || strings.TrimSpace(lines[0]) != "sleep infinity" || lines[1] != "0" {
				return false, fmt.Errorf("%s: main process %q, listeners on 6379 %q", in.Pod(i), lines[0], lines[1])
			}
			t.Logf("%s: %q, no listener on 6379, mounts: %s", in.Pod(i), strings.TrimSpace(lines[0]), strings.Join(lines[2:], " "))
		}
		return true, nil
	})
	for i := 0; i < in.Nodes(); i++ {
		p, err := kube.CoreV1().Pods(ns).Get(t.Context(), in.Pod(i), metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, cs := range p.Status.ContainerStatuses {
			if cs.Name == "valkey" && cs.RestartCount != 0 {
				t.Errorf("%s: the valkey container restarted %d times (no probe should kill it)", p.Name, cs.RestartCount)
			}
		}
		if _, ok := p.Labels["valkey.io/role"]; ok {
			t.Errorf("%s: a role label without a controller", p.Name)
		}
	}
}
