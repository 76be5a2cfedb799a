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

	"github.com/valkey-ha/valkey-ha/internal/acl"
	"github.com/valkey-ha/valkey-ha/internal/cli"
	"github.com/valkey-ha/valkey-ha/internal/prestop"
	"github.com/valkey-ha/valkey-ha/internal/valkeytest"
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
	for _, name := range []string{"node-index", "instance-file", "sentinels-file", "secrets-dir", "runtime-dir", "timeout", "log-file"} {
		f := cmd.Flags().Lookup(name)
		require.NotNil(t, f, name)
		out[name] = f.Value.String()
	}
	return cmd.Name(), out
}

// TestDataPreStopHook (issue 14): every data container runs `valkey-sentinel-ctl prestop` before it stops,
// with its own node index, the paths the bootstrap uses, its log on the container's stdout and a timeout of
// what terminationGracePeriodSeconds leaves after the server's shutdown-timeout and 2 s.
func TestDataPreStopHook(t *testing.T) {
	for _, tc := range []struct {
		vals    string
		grace   int64
		timeout string
	}{
		{"", 30, "18s"},
		{"terminationGracePeriodSeconds: 60\nconfig: {shutdown-timeout: 5}\n", 60, "53s"},
		{"engine: redis\n", 30, "18s"},
		{"failover: {mode: None}\nterminationGracePeriodSeconds: 20\n", 20, "8s"},
	} {
		objs := decode(t, mustRender(t, "valkey", tc.vals))
		for i, s := range objs.statefulSets() {
			spec := &s.Spec.Template.Spec
			assert.Equal(t, tc.grace, *spec.TerminationGracePeriodSeconds, tc.vals)
			name, f := preStopFlags(t, container(t, spec, "valkey"))
			assert.Equal(t, "prestop", name)
			assert.Equal(t, map[string]string{"node-index": strconv.Itoa(i), "instance-file": "/etc/valkey-ha/instance/instance.json",
				"sentinels-file": "/etc/valkey-ha/sentinels/sentinels.json", "secrets-dir": "/etc/valkey-ha/system",
				"runtime-dir": "/etc/valkey-ha/runtime", "timeout": tc.timeout, "log-file": "/proc/1/fd/1"}, f, "%s node %d", tc.vals, i)
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

// TestDNSCacheInEveryPod (RELIABILITY.md, Found 3): with the cluster DNS Service's IP given (dnsCache.upstream),
// data and Sentinel pods get the
// dns-cache container on 127.0.0.1:53 and resolve through it first, the upstream second (what an init container
// uses before the cache runs), with ClusterFirst's search list and ndots, the dnsConfig options after them, and
// the one sysctl that lets a non-root user bind port 53. dnsCache.enabled false, or no upstream (the default),
// leave dnsConfig as given and no cache.
func TestDNSCacheInEveryPod(t *testing.T) {
	const up = "dnsCache: {upstream: 10.96.0.10}\n"
	wantDNS := &corev1.PodDNSConfig{
		Nameservers: []string{"127.0.0.1", "10.96.0.10"},
		Searches:    []string{"ns1.svc.cluster.local", "svc.cluster.local", "cluster.local"},
		Options: []corev1.PodDNSConfigOption{{Name: "ndots", Value: ptr("5")}, {Name: "timeout", Value: ptr("1")},
			{Name: "attempts", Value: ptr("2")}},
	}
	specs := map[string]*corev1.PodSpec{"sentinel": &sentinelSTS(t, decode(t, mustRender(t, "valkey-sentinel", up))).Spec.Template.Spec}
	for _, s := range decode(t, mustRender(t, "valkey", up)).statefulSets() {
		specs[s.Name] = &s.Spec.Template.Spec
	}
	for name, spec := range specs {
		assert.Equal(t, corev1.DNSNone, spec.DNSPolicy, name)
		assert.Equal(t, wantDNS, spec.DNSConfig, name)
		assert.Equal(t, []corev1.Sysctl{{Name: "net.ipv4.ip_unprivileged_port_start", Value: "53"}}, spec.SecurityContext.Sysctls, name)
		c := container(t, spec, "dns-cache")
		assert.Equal(t, []string{"/valkey-sentinel-ctl", "dns-cache", "--listen=127.0.0.1:53", "--upstream=10.96.0.10"}, c.Command, name)
		assert.Empty(t, c.Ports, "%s: the cache listens on loopback only", name)
	}
	// no dnsCache.upstream: no cache, also when the cluster holds Service kube-system/kube-dns (a render never
	// depends on the cluster)
	dnsSvc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "kube-dns", Namespace: "kube-system"}, Spec: corev1.ServiceSpec{ClusterIP: "10.43.0.10"}}
	for _, chart := range []string{"valkey", "valkey-sentinel"} {
		assert.Equal(t, mustRender(t, chart, ""), mustRender(t, chart, "", renderOpts{existing: []runtime.Object{dnsSvc}}), chart)
	}
	// a user's own entries come after the cache's
	custom := decode(t, mustRender(t, "valkey", up+"dnsConfig: {nameservers: [10.0.0.53], searches: [corp.example], options: [{name: timeout, value: \"1\"}]}\n")).statefulSets()[0]
	assert.Equal(t, []string{"127.0.0.1", "10.96.0.10", "10.0.0.53"}, custom.Spec.Template.Spec.DNSConfig.Nameservers)
	assert.Equal(t, "corp.example", custom.Spec.Template.Spec.DNSConfig.Searches[3])
	// off, or no upstream: dnsConfig as given, no cache, no sysctl
	for _, values := range []string{"", up + "dnsCache: {enabled: false}\n"} {
		for _, s := range decode(t, mustRender(t, "valkey", values)).statefulSets() {
			assert.Empty(t, s.Spec.Template.Spec.DNSPolicy, s.Name)
			assert.Empty(t, s.Spec.Template.Spec.SecurityContext.Sysctls, s.Name)
			for _, c := range s.Spec.Template.Spec.Containers {
				assert.NotEqual(t, "dns-cache", c.Name, s.Name)
			}
		}
		sp := sentinelSTS(t, decode(t, mustRender(t, "valkey-sentinel", values))).Spec.Template.Spec
		assert.Empty(t, sp.DNSPolicy)
		assert.Len(t, sp.Containers, 1, "sentinel containers")
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
