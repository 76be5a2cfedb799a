//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/remotecommand"
)

// ---- polling ---------------------------------------------------------------------------------------

// Poll calls cond every interval until it returns true, returns an error, or timeout passes. A
// condition error is not fatal: polling goes on and the last error is reported on timeout.
func Poll(ctx context.Context, timeout, interval time.Duration, cond func(ctx context.Context) (bool, error)) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var last error
	for {
		ok, err := cond(ctx)
		if ok && err == nil {
			return nil
		}
		if err != nil {
			last = err
		}
		select {
		case <-ctx.Done():
			if last != nil {
				return fmt.Errorf("timed out after %s: %w", timeout, last)
			}
			return fmt.Errorf("timed out after %s", timeout)
		case <-time.After(interval):
		}
	}
}

// Eventually is Poll that fails the test (with what) on timeout.
func Eventually(t testing.TB, timeout, interval time.Duration, what string, cond func(ctx context.Context) (bool, error)) {
	t.Helper()
	start := time.Now()
	if err := Poll(context.Background(), timeout, interval, cond); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	t.Logf("%s: after %s", what, time.Since(start).Round(time.Millisecond))
}

// ---- namespaces ------------------------------------------------------------------------------------

// NewNamespace creates a fresh namespace e2e-<prefix>-xxxxx (Pod Security E2E_PSS, default
// restricted, enforced) and deletes it when the test ends, waiting until it is gone. On failure the
// namespace's pods, events and container logs are logged first. E2E_KEEP=1 keeps every namespace,
// E2E_KEEP_FAILED=1 those of failed tests.
func NewNamespace(t testing.TB, prefix string) string {
	t.Helper()
	ctx := t.Context()
	labels := map[string]string{"app.kubernetes.io/part-of": "valkey-ha-e2e"}
	if pss := envOr("E2E_PSS", "restricted"); pss != "none" {
		labels["pod-security.kubernetes.io/enforce"] = pss
		labels["pod-security.kubernetes.io/warn"] = pss
	}
	ns, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		GenerateName: "e2e-" + prefix + "-", Labels: labels,
	}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create namespace: %v", err)
	}
	name := ns.Name
	t.Logf("namespace %s", name)
	t.Cleanup(func() {
		if t.Failed() {
			DumpNamespace(t, name)
		}
		if os.Getenv("E2E_KEEP") == "1" || (t.Failed() && os.Getenv("E2E_KEEP_FAILED") == "1") {
			t.Logf("keeping namespace %s", name)
			return
		}
		if err := DeleteNamespace(context.Background(), name, 3*time.Minute); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	})
	return name
}

// DeleteNamespace deletes ns and waits until it no longer exists.
func DeleteNamespace(ctx context.Context, ns string, timeout time.Duration) error {
	err := kube.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("delete namespace %s: %w", ns, err)
	}
	return Poll(ctx, timeout, time.Second, func(ctx context.Context) (bool, error) {
		_, err := kube.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		if err != nil {
			return false, err
		}
		return false, fmt.Errorf("namespace %s still exists", ns)
	})
}

// DumpNamespace logs pod states, recent events and the last log lines of every container.
func DumpNamespace(t testing.TB, ns string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // runs in a cleanup: t.Context() is done by then
	defer cancel()
	var b strings.Builder
	pods, err := kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Logf("dump %s: list pods: %v", ns, err)
		return
	}
	fmt.Fprintf(&b, "---- namespace %s: %d pods\n", ns, len(pods.Items))
	for _, p := range pods.Items {
		fmt.Fprintf(&b, "pod %s phase=%s ready=%v labels=%v\n", p.Name, p.Status.Phase, PodReady(&p), p.Labels)
		for _, cs := range append(append([]corev1.ContainerStatus{}, p.Status.InitContainerStatuses...), p.Status.ContainerStatuses...) {
			fmt.Fprintf(&b, "  container %s ready=%v restarts=%d state=%s\n", cs.Name, cs.Ready, cs.RestartCount, containerState(cs.State))
			tail := int64(30)
			logs, err := kube.CoreV1().Pods(ns).GetLogs(p.Name, &corev1.PodLogOptions{Container: cs.Name, TailLines: &tail}).DoRaw(ctx)
			if err == nil && len(logs) > 0 {
				fmt.Fprintf(&b, "    | %s\n", strings.ReplaceAll(strings.TrimRight(string(logs), "\n"), "\n", "\n    | "))
			}
		}
	}
	if evs, err := kube.CoreV1().Events(ns).List(ctx, metav1.ListOptions{}); err == nil {
		sort.Slice(evs.Items, func(i, j int) bool { return evs.Items[i].LastTimestamp.Before(&evs.Items[j].LastTimestamp) })
		items := evs.Items
		if len(items) > 40 {
			items = items[len(items)-40:]
		}
		fmt.Fprintf(&b, "---- last %d events\n", len(items))
		for _, e := range items {
			fmt.Fprintf(&b, "%s %s %s/%s: %s %s\n", e.LastTimestamp.Format("15:04:05"), e.Type, e.InvolvedObject.Kind, e.InvolvedObject.Name, e.Reason, e.Message)
		}
	}
	t.Log(b.String())
}

func containerState(s corev1.ContainerState) string {
	switch {
	case s.Running != nil:
		return "running"
	case s.Waiting != nil:
		return "waiting(" + s.Waiting.Reason + ": " + s.Waiting.Message + ")"
	case s.Terminated != nil:
		return fmt.Sprintf("terminated(%s, exit %d: %s)", s.Terminated.Reason, s.Terminated.ExitCode, s.Terminated.Message)
	}
	return "unknown"
}

// ---- pods ------------------------------------------------------------------------------------------

// PodReady reports whether the pod's Ready condition is True.
func PodReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// PodLabels returns the current labels of a pod.
func PodLabels(ctx context.Context, ns, pod string) (map[string]string, error) {
	p, err := kube.CoreV1().Pods(ns).Get(ctx, pod, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	return p.Labels, nil
}

// ListPods returns the pods matching a label selector (terminating pods excluded), sorted by name.
func ListPods(ctx context.Context, ns, selector string) ([]corev1.Pod, error) {
	l, err := kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		return nil, err
	}
	var out []corev1.Pod
	for _, p := range l.Items {
		if p.DeletionTimestamp == nil {
			out = append(out, p)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// WaitPodsReady waits until exactly n pods match selector and all are Ready.
func WaitPodsReady(t testing.TB, ns, selector string, n int, timeout time.Duration) []corev1.Pod {
	t.Helper()
	var pods []corev1.Pod
	Eventually(t, timeout, time.Second, fmt.Sprintf("%d pods Ready (%s)", n, selector), func(ctx context.Context) (bool, error) {
		var err error
		if pods, err = ListPods(ctx, ns, selector); err != nil {
			return false, err
		}
		ready := 0
		for i := range pods {
			if PodReady(&pods[i]) {
				ready++
			}
		}
		if len(pods) != n || ready != n {
			return false, fmt.Errorf("%d pods, %d ready", len(pods), ready)
		}
		return true, nil
	})
	return pods
}

// ---- exec ------------------------------------------------------------------------------------------

// Exec runs cmd in a container (container "" = the pod's only/default container) over the API
// server's exec subresource (SPDY, falling back to WebSocket) and returns stdout and stderr. A
// non-zero exit status is returned as an error that includes stderr.
func Exec(ctx context.Context, ns, pod, container string, stdin io.Reader, cmd ...string) (string, string, error) {
	var stdout, stderr bytes.Buffer
	err := ExecStream(ctx, ns, pod, container, stdin, &stdout, &stderr, cmd...)
	return stdout.String(), stderr.String(), err
}

// ExecStream is Exec writing stdout and stderr to the given writers as the command produces them (for
// long-running samplers inside a pod); it returns when the command ends or ctx is cancelled.
func ExecStream(ctx context.Context, ns, pod, container string, stdin io.Reader, stdout, stderr io.Writer, cmd ...string) error {
	req := kube.CoreV1().RESTClient().Post().Resource("pods").Namespace(ns).Name(pod).SubResource("exec").
		VersionedParams(&corev1.PodExecOptions{
			Container: container, Command: cmd,
			Stdin: stdin != nil, Stdout: true, Stderr: true,
		}, scheme.ParameterCodec)
	spdy, err := remotecommand.NewSPDYExecutor(restConfig, "POST", req.URL())
	if err != nil {
		return fmt.Errorf("exec %s/%s: %w", ns, pod, err)
	}
	exe := spdy
	if ws, err := remotecommand.NewWebSocketExecutor(restConfig, "GET", req.URL().String()); err == nil {
		if fb, err := remotecommand.NewFallbackExecutor(spdy, ws, func(err error) bool { return err != nil && isUpgradeFailure(err) }); err == nil {
			exe = fb
		}
	}
	var errTail tailBuffer
	err = exe.StreamWithContext(ctx, remotecommand.StreamOptions{Stdin: stdin, Stdout: stdout, Stderr: io.MultiWriter(stderr, &errTail)})
	if err != nil {
		return fmt.Errorf("exec %v in %s/%s: %w (stderr: %s)", cmd, ns, pod, err, strings.TrimSpace(errTail.String()))
	}
	return nil
}

// tailBuffer keeps the last 2 KiB written to it (stderr of a failed exec, for the error message).
type tailBuffer struct{ b []byte }

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.b = append(t.b, p...)
	if len(t.b) > 2048 {
		t.b = t.b[len(t.b)-2048:]
	}
	return len(p), nil
}

func (t *tailBuffer) String() string { return string(t.b) }

func isUpgradeFailure(err error) bool {
	return strings.Contains(err.Error(), "upgrade") || strings.Contains(err.Error(), "Upgrade")
}

// CLI describes how to run valkey-cli (or redis-cli) inside a pod.
type CLI struct {
	Binary    string // "valkey-cli" (default) or "redis-cli"
	Container string // container name ("" = default)
	User      string // ACL user ("" = default user)
	Password  string // sent as REDISCLI_AUTH through stdin, never on a command line
	Host      string // -h (default: the pod itself)
	Port      int    // -p (default 6379)
}

// ValkeyCLI runs `valkey-cli args...` in pod and returns its trimmed stdout. valkey-cli exits 0 on
// server error replies, so callers check the reply text (e.g. "ERR ...", "NOPERM ...").
func ValkeyCLI(ctx context.Context, ns, pod string, c CLI, args ...string) (string, error) {
	bin := c.Binary
	if bin == "" {
		bin = "valkey-cli"
	}
	cmd := []string{bin}
	if c.Host != "" {
		cmd = append(cmd, "-h", c.Host)
	}
	if c.Port != 0 {
		cmd = append(cmd, "-p", fmt.Sprint(c.Port))
	}
	if c.User != "" {
		cmd = append(cmd, "--user", c.User)
	}
	cmd = append(cmd, args...)
	var stdin io.Reader
	if c.Password != "" {
		// the password travels on stdin into REDISCLI_AUTH; argv stays free of secrets
		cmd = append([]string{"sh", "-c", `read -r REDISCLI_AUTH && export REDISCLI_AUTH && exec "$@"`, "sh"}, cmd...)
		stdin = strings.NewReader(c.Password + "\n")
	}
	out, _, err := Exec(ctx, ns, pod, c.Container, stdin, cmd...)
	return strings.TrimSpace(out), err
}

// ErrNotFound is returned by helpers that look something up by label and find nothing.
var ErrNotFound = errors.New("not found")
