//go:build e2e

package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// TestClusterReachable proves the harness on the cluster: a Ready node, and a namespace that is
// created and deleted again.
func TestClusterReachable(t *testing.T) {
	ctx := t.Context()
	v, err := kube.Discovery().ServerVersion()
	if err != nil {
		t.Fatalf("server version: %v", err)
	}
	t.Logf("cluster %s, Kubernetes %s", restConfig.Host, v.GitVersion)

	nodes, err := kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatalf("list nodes: %v", err)
	}
	ready := 0
	for _, n := range nodes.Items {
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
				ready++
				t.Logf("node %s Ready (kubelet %s)", n.Name, n.Status.NodeInfo.KubeletVersion)
			}
		}
	}
	if ready == 0 {
		t.Fatalf("no Ready node among %d", len(nodes.Items))
	}

	ns := NewNamespace(t, "reach")
	got, err := kube.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
	if err != nil || got.Status.Phase != corev1.NamespaceActive {
		t.Fatalf("namespace %s: %v (phase %q)", ns, err, got.Status.Phase)
	}
	start := time.Now()
	if err := DeleteNamespace(ctx, ns, 2*time.Minute); err != nil {
		t.Fatal(err)
	}
	if _, err := kube.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("namespace %s still there after delete: %v", ns, err)
	}
	t.Logf("namespace %s deleted in %s", ns, time.Since(start).Round(time.Millisecond))
}

// TestHarnessValkeyPod proves the exec path and the local valkey image: a restricted pod running
// valkey-server answers PING through valkey-cli over exec, with and without a password on stdin,
// and its labels can be read back.
func TestHarnessValkeyPod(t *testing.T) {
	ctx := t.Context()
	ns := NewNamespace(t, "harness")
	no, yes := false, true
	uid := int64(999)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "vk", Labels: map[string]string{"app": "vk", "valkey.io/role": "primary"}},
		Spec: corev1.PodSpec{
			TerminationGracePeriodSeconds: new(int64),
			AutomountServiceAccountToken:  &no,
			EnableServiceLinks:            &no,
			SecurityContext: &corev1.PodSecurityContext{
				RunAsNonRoot: &yes, RunAsUser: &uid, RunAsGroup: &uid, FSGroup: &uid,
				SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
			},
			Containers: []corev1.Container{{
				Name: "valkey", Image: valkeyImage, ImagePullPolicy: corev1.PullIfNotPresent,
				Args: []string{"valkey-server", "--save", "", "--appendonly", "no", "--requirepass", "s3cret-e2e"},
				SecurityContext: &corev1.SecurityContext{
					AllowPrivilegeEscalation: &no, ReadOnlyRootFilesystem: &yes,
					Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
				},
				ReadinessProbe: &corev1.Probe{
					ProbeHandler:  corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(6379)}},
					PeriodSeconds: 1,
				},
				VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/data"}},
			}},
			Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
		},
	}
	if _, err := kube.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create pod: %v", err)
	}
	WaitPodsReady(t, ns, "app=vk", 1, 2*time.Minute)

	out, err := ValkeyCLI(ctx, ns, "vk", CLI{}, "ping")
	if err != nil || !strings.HasPrefix(out, "NOAUTH") {
		t.Fatalf("unauthenticated PING: %q, %v (want NOAUTH)", out, err)
	}
	out, err = ValkeyCLI(ctx, ns, "vk", CLI{Password: "s3cret-e2e"}, "ping")
	if err != nil || out != "PONG" {
		t.Fatalf("authenticated PING: %q, %v", out, err)
	}
	out, err = ValkeyCLI(ctx, ns, "vk", CLI{Password: "s3cret-e2e"}, "info", "server")
	if err != nil || !strings.Contains(out, "valkey_version:") {
		t.Fatalf("INFO server: %v\n%s", err, out)
	}
	if stdout, _, err := Exec(ctx, ns, "vk", "", nil, "id", "-u"); err != nil || strings.TrimSpace(stdout) != "999" {
		t.Fatalf("id -u: %q, %v", stdout, err)
	}
	labels, err := PodLabels(ctx, ns, "vk")
	if err != nil || labels["valkey.io/role"] != "primary" {
		t.Fatalf("labels: %v, %v", labels, err)
	}
}

// TestHarnessHelm proves install / upgrade / test / uninstall through the Helm SDK with a small
// throwaway chart (no images needed beyond the local valkey one for the test hook).
func TestHarnessHelm(t *testing.T) {
	ctx := t.Context()
	ns := NewNamespace(t, "helm")
	dir := t.TempDir()
	write := func(name, body string) {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("Chart.yaml", "apiVersion: v2\nname: harness\nversion: 0.0.1\n")
	write("values.yaml", "greeting: hello\nimage: "+valkeyImage+"\n")
	write("templates/cm.yaml", `apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Release.Name }}-cm
data:
  greeting: {{ .Values.greeting | quote }}
`)
	write("templates/test.yaml", `apiVersion: v1
kind: Pod
metadata:
  name: {{ .Release.Name }}-test
  annotations:
    "helm.sh/hook": test
    "helm.sh/hook-delete-policy": before-hook-creation
spec:
  restartPolicy: Never
  automountServiceAccountToken: false
  securityContext: {runAsNonRoot: true, runAsUser: 999, seccompProfile: {type: RuntimeDefault}}
  containers:
  - name: t
    image: {{ .Values.image }}
    imagePullPolicy: IfNotPresent
    command: [sh, -c, 'echo greeting={{ .Values.greeting }}']
    securityContext: {allowPrivilegeEscalation: false, readOnlyRootFilesystem: true, capabilities: {drop: [ALL]}}
`)
	h := NewHelm(t, ns)
	h.Install("h", dir, Values(t, "greeting: hi"))
	cm := func() string {
		c, err := kube.CoreV1().ConfigMaps(ns).Get(ctx, "h-cm", metav1.GetOptions{})
		if err != nil {
			t.Fatalf("get configmap: %v", err)
		}
		return c.Data["greeting"]
	}
	if g := cm(); g != "hi" {
		t.Fatalf("after install: greeting %q", g)
	}
	h.Upgrade("h", dir, Values(t, "greeting: bye"))
	if g := cm(); g != "bye" {
		t.Fatalf("after upgrade: greeting %q", g)
	}
	logs, err := h.Test("h", 2*time.Minute)
	if err != nil || !strings.Contains(logs, "greeting=bye") {
		t.Fatalf("helm test: %v\n%s", err, logs)
	}
	h.Uninstall("h")
	if _, err := kube.CoreV1().ConfigMaps(ns).Get(ctx, "h-cm", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("configmap after uninstall: %v", err)
	}
}
