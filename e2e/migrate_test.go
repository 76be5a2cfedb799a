//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/valkey-io/valkey-go"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/valkey-ha/valkey-ha/internal/chartapi/contract"
)

// TestMigrateFromPlainValkey (issue 28.3, README "Migration from another chart"): a plain valkey Deployment with
// requirepass stands in for another chart's release; a writer writes to it through its Service. A release
// installed with migrateFrom follows it (status "bytes behind", not registered by the quorum); helm upgrade with
// migrateFrom.switch: true switches; the writer moves to node 0 at its first NOREPLICAS from the source, and
// every acknowledged write is on node 0 afterwards; the quorum registers the instance.
func TestMigrateFromPlainValkey(t *testing.T) { migrateFromPlain(t, valkeyImage, "valkey-server") }

// TestMigrateFromPlainRedis is TestMigrateFromPlainValkey with a redis 7.0 server as the other chart's primary
// (the Bitnami redis chart's engine): node 0 (valkey 9.1) loads its RDB and follows it, then switches.
func TestMigrateFromPlainRedis(t *testing.T) {
	longTest(t, "TestMigrateFromPlainValkey (make e2e) and internal/podsteps/migrate with a real redis-server")
	migrateFromPlain(t, redisImage, "redis-server")
}

// migrateFromPlain runs the migration e2e with the source server of image (its binary server).
func migrateFromPlain(t *testing.T, image, server string) {
	maybeParallel(t)
	start := time.Now()
	WaitForCPU(t, 2*(50+dnsCacheCPU())+100+3*(50+dnsCacheCPU())+100+100, 5*time.Minute)
	ns := NewNamespace(t, "mig")
	d := &Deployment{t: t, NS: ns, Helm: NewHelm(t, ns), Label: "q1", S: "sentinel", Sentinels: 3}
	ctx := t.Context()
	const pw = "old-app-password-0123456789"
	startSource(t, ns, pw, image, server)

	in := &Instance{d: d, Release: "new", F: valkeyFullname("new"), Replicas: 1, Extra: `
users: [{name: app, access: readwrite, keys: ["*"]}]
migrateFrom:
  host: old
  existingSecret: old
  secretKey: password
  egressTo: [{podSelector: {matchLabels: {app: old}}}]
`}
	d.Instances = append(d.Instances, in)
	d.Helm.Install(in.Release, ChartPath("valkey"), in.Values(), HelmOpts{Timeout: installTimeout})
	d.Helm.Install(d.S, ChartPath("valkey-sentinel"), d.SentinelValues(), HelmOpts{Timeout: installTimeout})
	appPW := waitSecretKey(t, d, in.F+"-user-app", "password")

	dialer, err := ClusterDialer(ctx)
	if err != nil {
		t.Fatal(err)
	}
	w := &migWriter{}
	src := clusterClientOption(dialer, "", pw, fmt.Sprintf("old.%s.svc.%s:6379", ns, clusterDomain))
	dst := clusterClientOption(dialer, "app", appPW, fmt.Sprintf("%s:6379", in.FQDN(0)))
	src.ForceSingleClient, dst.ForceSingleClient = true, true
	wctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); w.run(wctx, t, src, dst) }()
	defer func() { stop(); <-done }()

	Eventually(t, 3*time.Minute, time.Second, "migrating, 0 bytes behind", func(ctx context.Context) (bool, error) {
		m, err := migration(ctx, in)
		if err != nil || !strings.Contains(m, ": 0 bytes behind") {
			return false, fmt.Errorf("migration %q: %v", m, err)
		}
		return true, nil
	})
	if s, err := in.Status(ctx); err == nil {
		for _, c := range s.Conditions {
			if c.Type == "Monitored" && c.Status == "True" {
				t.Errorf("monitored while migrating: %+v", c)
			}
		}
	}
	t.Logf("migrating %s after the install; %d writes acknowledged by the source", time.Since(start).Round(time.Second), w.acks())

	t0 := time.Now()
	d.Helm.Upgrade(in.Release, ChartPath("valkey"), in.Values("migrateFrom: {switch: true}\n"), HelmOpts{Timeout: installTimeout})
	Eventually(t, 2*time.Minute, 500*time.Millisecond, "writer moved to node 0", func(ctx context.Context) (bool, error) {
		if !w.movedAfter(200) {
			return false, fmt.Errorf("%d acknowledged, moved %t", w.acks(), w.moved())
		}
		return true, nil
	})
	t.Logf("switched %s after the upgrade began", time.Since(t0).Round(time.Second))
	stop()
	<-done
	d.WaitConverged(t, 2*time.Minute, true)

	c, err := valkey.NewClient(dst)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	acked, gap := w.snapshot()
	missing := 0
	for lo := 0; lo < len(acked); lo += 1000 {
		hi := min(lo+1000, len(acked))
		var keys []string
		for _, i := range acked[lo:hi] {
			keys = append(keys, "mig-"+strconv.Itoa(i))
		}
		vals, err := c.Do(ctx, c.B().Mget().Key(keys...).Build()).ToArray()
		if err != nil {
			t.Fatal(err)
		}
		for j, v := range vals {
			if s, err := v.ToString(); err != nil || s != strconv.Itoa(acked[lo+j]) {
				missing++
			}
		}
	}
	if missing > 0 {
		t.Errorf("%d of %d acknowledged writes missing on node 0", missing, len(acked))
	}
	sc, err := valkey.NewClient(src)
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Close()
	if err := sc.Do(ctx, sc.B().Set().Key("late").Value("x").Build()).Error(); err == nil || !strings.Contains(err.Error(), "NOREPLICAS") {
		t.Errorf("a write to the old primary after the switch: %v, want NOREPLICAS", err)
	}
	t.Logf("%d acknowledged writes, %d lost; write outage (longest gap between acknowledgements) %s; whole test %s",
		len(acked), missing, gap.Round(time.Millisecond), time.Since(start).Round(time.Second))
}

// migration reads F-status's migration field.
func migration(ctx context.Context, in *Instance) (string, error) {
	cm, err := kube.CoreV1().ConfigMaps(in.d.NS).Get(ctx, contract.Status(in.F), metav1.GetOptions{})
	if err != nil {
		return "", err
	}
	var st struct {
		Migration string `json:"migration"`
	}
	err = json.Unmarshal([]byte(cm.Data[contract.KeyStatus]), &st)
	return st.Migration, err
}

// startSource runs the stand-in for another chart's primary: Deployment and Service "old", a server of image
// (valkey or redis, binary server) with requirepass from Secret "old" (key password), restricted pod security.
func startSource(t *testing.T, ns, pw, image, server string) {
	t.Helper()
	ctx := t.Context()
	if _, err := kube.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "old"},
		StringData: map[string]string{"password": pw}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	labels := map[string]string{"app": "old"}
	yes, uid := true, int64(999)
	one := int32(1)
	dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "old"}, Spec: appsv1.DeploymentSpec{Replicas: &one,
		Selector: &metav1.LabelSelector{MatchLabels: labels},
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{
			SecurityContext: &corev1.PodSecurityContext{RunAsNonRoot: &yes, RunAsUser: &uid, RunAsGroup: &uid,
				SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
			Containers: []corev1.Container{{Name: "server", Image: image,
				Command: []string{server, "--requirepass", "$(PW)", "--save", "", "--appendonly", "no", "--dir", "/tmp"},
				Env: []corev1.EnvVar{{Name: "PW", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
					LocalObjectReference: corev1.LocalObjectReference{Name: "old"}, Key: "password"}}}},
				Ports:     []corev1.ContainerPort{{ContainerPort: 6379}},
				Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("128Mi")}},
				SecurityContext: &corev1.SecurityContext{AllowPrivilegeEscalation: new(bool),
					Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}}}}}}}}
	if _, err := kube.AppsV1().Deployments(ns).Create(ctx, dep, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := kube.CoreV1().Services(ns).Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "old"},
		Spec: corev1.ServiceSpec{Selector: labels, Ports: []corev1.ServicePort{{Port: 6379, TargetPort: intstr.FromInt32(6379)}}}},
		metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	WaitPodsReady(t, ns, "app=old", 1, 3*time.Minute)
}

// migWriter writes mig-<i> = i to the source, one SET at a time; at the first NOREPLICAS (the fenced source)
// it moves to node 0, as an application does, and retries the same key there. Any other failure is retried on
// the same target (its outcome is unknown, so the key is neither required nor forbidden afterwards; the retry
// writes the same value).
type migWriter struct {
	mu      sync.Mutex
	acked   []int
	onDst   int
	gap     time.Duration
	lastAck time.Time
	isMoved bool
}

func (w *migWriter) run(ctx context.Context, t *testing.T, src, dst valkey.ClientOption) {
	connect := func(o valkey.ClientOption) valkey.Client {
		for ctx.Err() == nil {
			if c, err := valkey.NewClient(o); err == nil {
				return c
			}
			time.Sleep(200 * time.Millisecond)
		}
		return nil
	}
	c := connect(src)
	for i := 0; ctx.Err() == nil && c != nil; {
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		err := c.Do(cctx, c.B().Set().Key("mig-"+strconv.Itoa(i)).Value(strconv.Itoa(i)).Build()).Error()
		cancel()
		now := time.Now()
		w.mu.Lock()
		switch {
		case err == nil:
			if !w.lastAck.IsZero() && now.Sub(w.lastAck) > w.gap {
				w.gap = now.Sub(w.lastAck)
			}
			w.lastAck = now
			w.acked = append(w.acked, i)
			if w.isMoved {
				w.onDst++
			}
			i++
		case strings.Contains(err.Error(), "NOREPLICAS") && !w.isMoved:
			w.isMoved = true
			w.mu.Unlock()
			c.Close()
			c = connect(dst)
			continue
		}
		w.mu.Unlock()
		time.Sleep(5 * time.Millisecond)
	}
	if c != nil {
		c.Close()
	}
}

func (w *migWriter) acks() int   { w.mu.Lock(); defer w.mu.Unlock(); return len(w.acked) }
func (w *migWriter) moved() bool { w.mu.Lock(); defer w.mu.Unlock(); return w.isMoved }
func (w *migWriter) movedAfter(n int) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.isMoved && w.onDst >= n
}
func (w *migWriter) snapshot() ([]int, time.Duration) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]int(nil), w.acked...), w.gap
}
