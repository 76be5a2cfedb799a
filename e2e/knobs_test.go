//go:build e2e

package e2e

import (
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
