package templatestests

import (
	"context"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/valkey-ha/valkey-ha/internal/cli"
	"github.com/valkey-ha/valkey-ha/internal/podsteps/prestop"
	"github.com/valkey-ha/valkey-ha/internal/testsupport/valkeytest"
	"github.com/valkey-ha/valkey-ha/internal/valkeyapi/acl"
)

// preStopFlags parses a rendered preStop command with the real valkey-sentinel-ctl command tree and returns
// the subcommand's name and its flag values.
func preStopFlags(t *testing.T, c *corev1.Container) (string, map[string]string) {
	t.Helper()
	require.NotNil(t, c.Lifecycle, "lifecycle")
	require.NotNil(t, c.Lifecycle.PreStop, "preStop")
	require.NotNil(t, c.Lifecycle.PreStop.Exec, "an exec hook")
	args := c.Lifecycle.PreStop.Exec.Command
	require.Equal(t, "/opt/valkey-ha/bin/valkey-sentinel-ctl", args[0], "the binary install-ctl put into the bin volume")
	cmd, rest, err := cli.NewRoot().Find(args[1:])
	require.NoError(t, err)
	require.NoError(t, cmd.ParseFlags(rest), "the rendered flags are the command's own")
	require.Empty(t, cmd.Flags().Args(), "no stray arguments")
	out := map[string]string{}
	for _, name := range []string{"node-index", "instance-file", "sentinels-file", "secrets-dir", "runtime-dir", "timeout", "log-file", "cluster-domain"} {
		f := cmd.Flags().Lookup(name)
		require.NotNil(t, f, name)
		out[name] = f.Value.String()
	}
	return cmd.Name(), out
}

// TestDataPreStopHook (issue 14): every data container runs `valkey-sentinel-ctl prestop` before it stops,
// with its own node index, the paths the bootstrap uses, its log on the container's stdout and a timeout of
// what terminationGracePeriodSeconds leaves after the server's shutdown-timeout and 2 s, and the values'
// clusterDomain (the hook checks the Sentinel hosts against it; the flag's own default is only cluster.local).
func TestDataPreStopHook(t *testing.T) {
	for _, tc := range []struct {
		vals    string
		grace   int64
		timeout string
		domain  string
	}{
		{"", 30, "18s", "cluster.local"},
		{"terminationGracePeriodSeconds: 60\nconfig: {shutdown-timeout: 5}\n", 60, "53s", "cluster.local"},
		{"engine: redis\n", 30, "18s", "cluster.local"},
		{"failover: {mode: None}\nterminationGracePeriodSeconds: 20\n", 20, "8s", "cluster.local"},
		{"clusterDomain: k8s.example.internal\n", 30, "18s", "k8s.example.internal"},
	} {
		objs := decode(t, mustRender(t, "valkey", tc.vals))
		for i, s := range objs.statefulSets() {
			spec := &s.Spec.Template.Spec
			assert.Equal(t, tc.grace, *spec.TerminationGracePeriodSeconds, tc.vals)
			name, f := preStopFlags(t, container(t, spec, "valkey"))
			assert.Equal(t, "prestop", name)
			assert.Equal(t, map[string]string{"node-index": strconv.Itoa(i), "instance-file": "/etc/valkey-ha/instance/instance.json",
				"sentinels-file": "/etc/valkey-ha/sentinels/sentinels.json", "secrets-dir": "/etc/valkey-ha/system",
				"runtime-dir": "/etc/valkey-ha/runtime", "timeout": tc.timeout, "log-file": "/proc/1/fd/1", "cluster-domain": tc.domain}, f, "%s node %d", tc.vals, i)
		}
	}
	off := decode(t, mustRender(t, "valkey", "preStop: {enabled: false}\n"))
	for _, s := range off.statefulSets() {
		assert.Nil(t, container(t, &s.Spec.Template.Spec, "valkey").Lifecycle, "preStop.enabled false: no hook")
	}
}

// TestGracePeriodFitsTheHandoffBound: the smallest terminationGracePeriodSeconds the chart accepts is
// prestop.Bound (rounded up to whole seconds) + shutdown-timeout + 2 s, for several down-after values and
// unmonitored; one second less is refused, naming the numbers.
func TestGracePeriodFitsTheHandoffBound(t *testing.T) {
	for _, tc := range []struct {
		vals      string
		downAfter time.Duration
		shutdown  int
	}{
		{"", 5 * time.Second, 10},
		{"sentinel: {config: {down-after-milliseconds: \"1000\"}}\n", time.Second, 10},
		{"sentinel: {config: {down-after-milliseconds: \"7001\"}}\nconfig: {shutdown-timeout: 3}\n", 7001 * time.Millisecond, 3},
		{"sentinel: {config: {down-after-milliseconds: \"60000\"}}\n", time.Minute, 10},
		{"failover: {mode: None}\n", 0, 10},
	} {
		need := int(math.Ceil(prestop.Bound(tc.downAfter).Seconds())) + tc.shutdown + 2
		_, err := renderChart(t, "valkey", fmt.Sprintf("%sterminationGracePeriodSeconds: %d\n", tc.vals, need), renderOpts{})
		assert.NoError(t, err, "%s grace %d", tc.vals, need)
		_, err = renderChart(t, "valkey", fmt.Sprintf("%sterminationGracePeriodSeconds: %d\n", tc.vals, need-1), renderOpts{})
		if assert.Error(t, err, "%s grace %d", tc.vals, need-1) {
			msg := refusal(err)
			assert.Contains(t, msg, fmt.Sprintf("terminationGracePeriodSeconds: %d is too short", need-1))
			assert.Contains(t, msg, fmt.Sprintf("set at least %d", need))
		}
	}
}

// TestSentinelPreStopHook renders the Sentinel's preStop script and runs it against a real valkey-sentinel:
// with no failover it returns at once; while that Sentinel leads a failover (its promoted replica is
// stopped, so the failover hangs until failover-timeout) it waits, says so once on the container's stdout,
// and returns when the failover ended; a timeout shorter than the failover fails the hook (the kubelet's
// FailedPreStopHook Event) with the reason on stderr.
func TestSentinelPreStopHook(t *testing.T) {
	valkeytest.Require(t, valkeytest.Default)
	cliPath, err := exec.LookPath("valkey-cli")
	if err != nil {
		t.Skip("valkey-cli not on PATH")
	}
	script := func(vals string) []string {
		objs := decode(t, mustRender(t, "valkey-sentinel", vals))
		c := container(t, &sentinelSTS(t, objs).Spec.Template.Spec, "sentinel")
		require.NotNil(t, c.Lifecycle)
		require.NotNil(t, c.Lifecycle.PreStop.Exec)
		return c.Lifecycle.PreStop.Exec.Command
	}
	off := decode(t, mustRender(t, "valkey-sentinel", "preStop: {enabled: false}\n"))
	assert.Nil(t, container(t, &sentinelSTS(t, off).Spec.Template.Spec, "sentinel").Lifecycle)
	_, err = renderChart(t, "valkey-sentinel", "preStop: {timeoutSeconds: 40}\n", renderOpts{})
	require.Error(t, err)
	assert.Equal(t, "terminationGracePeriodSeconds: 30 is shorter than the preStop wait for a running failover (preStop.timeoutSeconds 40) and 2 s for Sentinel to exit; set at least 42, lower preStop.timeoutSeconds, or set preStop.enabled: false", refusal(err))

	// Sentinel auth on (the chart's default): the hook asks as _client with REDISCLI_AUTH, as the pod's
	// environment gives it (vs.cli)
	top := valkeytest.StartTopology(t, valkeytest.TopologyConfig{Replicas: 1, Sentinels: 1, DownAfterMs: 1000, FailoverTimeoutMs: 4000, SentinelAuth: true})
	s := top.Sentinels[0]
	dir := t.TempDir()
	stdout := filepath.Join(dir, "stdout")
	require.NoError(t, os.WriteFile(stdout, nil, 0o600))
	run := func(cmd []string) (time.Duration, string, error) {
		require.Equal(t, []string{"sh", "-c"}, cmd[:2])
		sc := strings.ReplaceAll(cmd[2], "valkey-cli --user _client -p 26379", fmt.Sprintf("%s --user _client -h %s -p %d", cliPath, valkeytest.Host, s.Port))
		require.NotEqual(t, cmd[2], sc, "the hook asks its own Sentinel as _client")
		sc = strings.ReplaceAll(sc, "/proc/1/fd/1", stdout)
		start := time.Now()
		c := exec.Command("sh", "-c", sc)
		c.Env = append(os.Environ(), "REDISCLI_AUTH="+top.SentinelPasswords[acl.SentinelClient])
		out, err := c.CombinedOutput()
		return time.Since(start), string(out), err
	}

	took, out, err := run(script(""))
	require.NoError(t, err, out)
	assert.Less(t, took, 2*time.Second, "no failover: the stop is not held")

	failover := func() {
		// the replica stops answering before Sentinel sees it down: the failover selects it, its REPLICAOF NO
		// ONE hangs, and the failover runs until failover-timeout
		top.Nodes[1].Pause()
		t.Cleanup(top.Nodes[1].Resume)
		require.NoError(t, s.Client(top.SentinelOptions()).SentinelFailover(context.Background(), top.Cfg.MonitorName))
	}
	failover()
	took, out, err = run(script(""))
	require.NoError(t, err, out)
	logged, _ := os.ReadFile(stdout)
	t.Logf("waited %s: %s", took.Round(time.Millisecond), logged)
	assert.Greater(t, took, time.Second, "held while the failover ran")
	assert.Less(t, took, 15*time.Second)
	assert.Contains(t, string(logged), "this Sentinel runs a failover; the stop waits for its end (at most 20 s)")
	assert.Contains(t, string(logged), "the failover ended; stopping")
	assert.Equal(t, 1, strings.Count(string(logged), "runs a failover"), "said once")
	m, _, err := s.Client(top.SentinelOptions()).SentinelMaster(context.Background(), top.Cfg.MonitorName)
	require.NoError(t, err)
	assert.False(t, m.FailoverInProgress())

	// a wait that runs out fails the hook (a fresh topology: the first one's replica was promoted late)
	top = valkeytest.StartTopology(t, valkeytest.TopologyConfig{Replicas: 1, Sentinels: 1, DownAfterMs: 1000, FailoverTimeoutMs: 4000, SentinelAuth: true})
	s = top.Sentinels[0]
	failover()
	took, out, err = run(script("preStop: {timeoutSeconds: 1}\nterminationGracePeriodSeconds: 3\n"))
	require.Error(t, err, "the hook fails")
	assert.Contains(t, out, "this Sentinel still runs a failover after 1 s; stopping anyway")
	assert.Less(t, took, 4*time.Second)
}

// TestNotesSayWhatADrainDoes: the NOTES tell what a drain, delete or eviction does with the hook on and off.
func TestNotesSayWhatADrainDoes(t *testing.T) {
	notes := func(values string) string {
		return mustRender(t, "valkey", values, renderOpts{withNotes: true})["valkey/templates/NOTES.txt"]
	}
	on := notes("")
	assert.Contains(t, on, "Drains, deletes, evictions")
	assert.Contains(t, on, "hands its role off in its preStop hook")
	assert.Contains(t, on, "SENTINEL FAILOVER")
	assert.Contains(t, on, "FailedPreStopHook")
	assert.Contains(t, on, "one data pod at a time")
	assert.Contains(t, notes("failover: {mode: None}\n"), "FAILOVER TO")
	assert.Contains(t, notes("preStop: {enabled: false}\n"), "preStop.enabled is false: a stopped primary costs a Sentinel failover")
}

// TestDNSConfigShortResolverTimeout (RELIABILITY.md, Found 3): data and Sentinel pods resolve with a 1 s
// timeout and 2 attempts by default; null keeps the cluster's settings.
func TestDNSConfigShortResolverTimeout(t *testing.T) {
	want := &corev1.PodDNSConfig{Options: []corev1.PodDNSConfigOption{{Name: "timeout", Value: ptr("1")}, {Name: "attempts", Value: ptr("2")}}}
	for _, s := range decode(t, mustRender(t, "valkey", "")).statefulSets() {
		assert.Equal(t, want, s.Spec.Template.Spec.DNSConfig, s.Name)
	}
	assert.Equal(t, want, sentinelSTS(t, decode(t, mustRender(t, "valkey-sentinel", ""))).Spec.Template.Spec.DNSConfig)
	for _, s := range decode(t, mustRender(t, "valkey", "dnsConfig: null\n")).statefulSets() {
		assert.Nil(t, s.Spec.Template.Spec.DNSConfig)
	}
	assert.Nil(t, sentinelSTS(t, decode(t, mustRender(t, "valkey-sentinel", "dnsConfig: null\n"))).Spec.Template.Spec.DNSConfig)
	custom := decode(t, mustRender(t, "valkey", "dnsConfig: {options: [{name: ndots, value: \"2\"}]}\n")).statefulSets()[0]
	assert.Equal(t, []corev1.PodDNSConfigOption{{Name: "ndots", Value: ptr("2")}}, custom.Spec.Template.Spec.DNSConfig.Options, "a list replaces the default")
}

// TestDNSCacheInEveryPod (RELIABILITY.md, Found 3): by default, with no value, data and Sentinel pods run the
// dns-cache container on 127.0.0.1:53 (forwarding to the first nameserver of its own, the kubelet's, resolv.conf)
// and init container dns-resolv, which writes the server's resolv.conf into volume dns; only the server (Sentinel)
// container mounts it over /etc/resolv.conf, so the other init containers and the cache itself resolve through
// the kubelet's file. The pod keeps dnsPolicy ClusterFirst and dnsConfig as given, and gets the one sysctl that
// lets a non-root user bind port 53. The rendered init container, run with the real command tree on a kubelet's
// resolv.conf, writes the file the server mounts, with the cache first. dnsCache.enabled false leaves all of it
// out. The render never depends on the cluster.
func TestDNSCacheInEveryPod(t *testing.T) {
	wantDNS := &corev1.PodDNSConfig{Options: []corev1.PodDNSConfigOption{{Name: "timeout", Value: ptr("1")}, {Name: "attempts", Value: ptr("2")}}}
	type pod struct {
		spec   *corev1.PodSpec
		server string
	}
	pods := func(values string) map[string]pod {
		out := map[string]pod{"sentinel": {&sentinelSTS(t, decode(t, mustRender(t, "valkey-sentinel", values))).Spec.Template.Spec, "sentinel"}}
		for _, s := range decode(t, mustRender(t, "valkey", values)).statefulSets() {
			out[s.Name] = pod{&s.Spec.Template.Spec, "valkey"}
		}
		return out
	}
	mountOf := func(c *corev1.Container, volume string) *corev1.VolumeMount {
		for i := range c.VolumeMounts {
			if c.VolumeMounts[i].Name == volume {
				return &c.VolumeMounts[i]
			}
		}
		return nil
	}
	for name, p := range pods("") {
		spec := p.spec
		assert.Empty(t, spec.DNSPolicy, "%s: dnsPolicy stays ClusterFirst (the kubelet writes the resolv.conf the cache reads)", name)
		assert.Equal(t, wantDNS, spec.DNSConfig, name)
		assert.Equal(t, []corev1.Sysctl{{Name: "net.ipv4.ip_unprivileged_port_start", Value: "53"}}, spec.SecurityContext.Sysctls, name)
		cache := container(t, spec, "dns-cache")
		assert.Equal(t, []string{"/valkey-sentinel-ctl", "dns-cache", "--listen=127.0.0.1:53", "--resolv-conf=/etc/resolv.conf"}, cache.Command, name)
		assert.Empty(t, cache.Ports, "%s: the cache listens on loopback only", name)
		var vol *corev1.Volume
		for i := range spec.Volumes {
			if spec.Volumes[i].Name == "dns" {
				vol = &spec.Volumes[i]
			}
		}
		require.NotNil(t, vol, "%s: volume dns", name)
		require.NotNil(t, vol.EmptyDir, "%s: volume dns is an emptyDir", name)

		// the init container, run with the real command tree: it reads a kubelet's resolv.conf and writes the
		// file the server container mounts
		var init *corev1.Container
		for i, c := range spec.InitContainers {
			if c.Name == "dns-resolv" {
				init = &spec.InitContainers[i]
			}
			if c.Name != "dns-resolv" {
				assert.Nil(t, mountOf(&spec.InitContainers[i], "dns"), "%s: init container %s resolves through the kubelet's file", name, c.Name)
			}
		}
		require.NotNil(t, init, "%s: init container dns-resolv", name)
		initMount := mountOf(init, "dns")
		require.NotNil(t, initMount, "%s: dns-resolv mounts volume dns", name)
		require.Equal(t, "/valkey-sentinel-ctl", init.Command[0])
		cmd, rest, err := cli.NewRoot().Find(init.Command[1:])
		require.NoError(t, err)
		require.Equal(t, "resolv-conf", cmd.Name(), name)
		require.NoError(t, cmd.ParseFlags(rest), "%s: the rendered flags are the command's own", name)
		in, out := cmd.Flags().Lookup("in").Value.String(), cmd.Flags().Lookup("out").Value.String()
		assert.Equal(t, "/etc/resolv.conf", in, "%s: the init container reads the kubelet's file", name)
		require.True(t, strings.HasPrefix(out, initMount.MountPath+"/"), "%s: --out %s is on volume dns (%s)", name, out, initMount.MountPath)
		serverMount := mountOf(container(t, spec, p.server), "dns")
		require.NotNil(t, serverMount, "%s: the %s container mounts volume dns", name, p.server)
		assert.Equal(t, corev1.VolumeMount{Name: "dns", MountPath: "/etc/resolv.conf", SubPath: strings.TrimPrefix(out, initMount.MountPath+"/"), ReadOnly: true}, *serverMount, name)
		for _, c := range spec.Containers {
			if c.Name != p.server {
				assert.Nil(t, mountOf(&c, "dns"), "%s: container %s keeps the kubelet's resolv.conf", name, c.Name)
			}
		}
		dir := t.TempDir()
		kubelet := filepath.Join(dir, "kubelet-resolv.conf")
		require.NoError(t, os.WriteFile(kubelet, []byte("search ns1.svc.cluster.local svc.cluster.local cluster.local\nnameserver 10.96.0.10\noptions ndots:5 timeout:1 attempts:2\n"), 0o644))
		args := append([]string(nil), init.Command[1:]...)
		for i, a := range args {
			args[i] = strings.NewReplacer("--in=/etc/resolv.conf", "--in="+kubelet, "--out="+initMount.MountPath, "--out="+dir).Replace(a)
		}
		root := cli.NewRoot()
		root.SetArgs(args)
		require.NoError(t, root.Execute(), "%s: %v", name, args)
		got, err := os.ReadFile(filepath.Join(dir, serverMount.SubPath))
		require.NoError(t, err, "%s: the file the server mounts", name)
		assert.Contains(t, string(got), "\nnameserver 127.0.0.1\nnameserver 10.96.0.10\nsearch ns1.svc.cluster.local svc.cluster.local cluster.local\noptions ndots:5 timeout:1 attempts:2\n", name)
	}
	// a render never depends on the cluster (no lookup of kube-system/kube-dns)
	dnsSvc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "kube-dns", Namespace: "kube-system"}, Spec: corev1.ServiceSpec{ClusterIP: "10.43.0.10"}}
	for _, chart := range []string{"valkey", "valkey-sentinel"} {
		assert.Equal(t, mustRender(t, chart, ""), mustRender(t, chart, "", renderOpts{existing: []runtime.Object{dnsSvc}}), chart)
	}
	// one dnsConfig nameserver fits (127.0.0.1, the cluster DNS, it); the kubelet adds it after the cluster DNS
	custom := decode(t, mustRender(t, "valkey", "dnsConfig: {nameservers: [10.0.0.53], searches: [corp.example]}\n")).statefulSets()[0]
	assert.Equal(t, &corev1.PodDNSConfig{Nameservers: []string{"10.0.0.53"}, Searches: []string{"corp.example"}, Options: wantDNS.Options}, custom.Spec.Template.Spec.DNSConfig)
	// off: dnsConfig as given, no cache, no init container, no mount, no sysctl
	for name, p := range pods("dnsCache: {enabled: false}\n") {
		assert.Equal(t, wantDNS, p.spec.DNSConfig, name)
		assert.Empty(t, p.spec.SecurityContext.Sysctls, name)
		for _, c := range append(append([]corev1.Container(nil), p.spec.InitContainers...), p.spec.Containers...) {
			assert.NotContains(t, []string{"dns-cache", "dns-resolv"}, c.Name, name)
			assert.Nil(t, mountOf(&c, "dns"), "%s %s", name, c.Name)
		}
		for _, v := range p.spec.Volumes {
			assert.NotEqual(t, "dns", v.Name, name)
		}
	}
}

func ptr[T any](v T) *T { return &v }

// TestReadinessWaitsForTheFirstSync runs the rendered readiness probe against real servers: a replica
// that never completed a sync since it started (its primary unreachable) is not ready, the same replica
// once synced is, and so is the primary. The PodDisruptionBudget counts only ready pods, so a drain waits
// until a restarted replica holds the data before it evicts the next data pod.
func TestReadinessWaitsForTheFirstSync(t *testing.T) {
	valkeytest.Require(t, valkeytest.Default)
	cliPath, err := exec.LookPath("valkey-cli")
	if err != nil {
		t.Skip("valkey-cli not on PATH")
	}
	objs := decode(t, mustRender(t, "valkey", ""))
	probe := container(t, &objs.statefulSets()[0].Spec.Template.Spec, "valkey").ReadinessProbe.Exec.Command
	require.Equal(t, []string{"sh", "-c"}, probe[:2])
	top := valkeytest.StartTopology(t, valkeytest.TopologyConfig{Replicas: 1, Sentinels: -1})
	ready := func(p *valkeytest.Proc) error {
		sc := strings.ReplaceAll(probe[2], "valkey-cli", cliPath+" -h "+valkeytest.Host)
		sc = strings.ReplaceAll(sc, "-p 6379", "-p "+strconv.Itoa(p.Port))
		c := exec.Command("sh", "-c", sc)
		c.Env = append(os.Environ(), "REDISCLI_AUTH="+top.Passwords["_probe"])
		out, err := c.CombinedOutput()
		if err != nil {
			return fmt.Errorf("%v: %s", err, out)
		}
		return nil
	}
	assert.NoError(t, ready(top.Nodes[0]), "the primary is ready")
	assert.NoError(t, ready(top.Nodes[1]), "a synced replica is ready")
	top.Nodes[0].Kill()
	time.Sleep(500 * time.Millisecond)
	assert.NoError(t, ready(top.Nodes[1]), "a replica whose link dropped after a sync still serves (stale) reads")
	top.Nodes[1].Stop()
	top.Nodes[1].Start() // comes back empty, its primary gone: it never synced
	assert.Error(t, ready(top.Nodes[1]), "a replica that never completed a sync since it started is not ready")
	top.Nodes[0].Start()
	valkeytest.Eventually(t, 30*time.Second, 200*time.Millisecond, "ready once its first sync completed", func() error { return ready(top.Nodes[1]) })
}
