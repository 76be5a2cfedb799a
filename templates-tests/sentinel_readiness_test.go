package templatestests

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/valkey-ha/valkey-ha/internal/testsupport/valkeytest"
	"github.com/valkey-ha/valkey-ha/internal/valkeyapi/acl"
	"github.com/valkey-ha/valkey-ha/internal/valkeyapi/valkey"
)

// sentinelProbe runs charts/valkey-sentinel's rendered readiness probe as the kubelet would in Sentinel i's
// pod of top: its own Sentinel on localhost, the peers' FQDNs (in index order) mapped to top's Sentinels,
// REDISCLI_AUTH from Secret S-auth-client. It returns whether the probe passed, its output, and how long it
// took.
type sentinelProbe struct {
	t      *testing.T
	cli    string
	script string
	top    *valkeytest.Topology
}

var probePeers = regexp.MustCompile(`for p in ([^;]*); do`)

func newSentinelProbe(t *testing.T, top *valkeytest.Topology, values string) *sentinelProbe {
	t.Helper()
	cliPath, err := exec.LookPath("valkey-cli")
	if err != nil {
		t.Skip("valkey-cli not on PATH")
	}
	c := container(t, &sentinelSTS(t, decode(t, mustRender(t, "valkey-sentinel", values))).Spec.Template.Spec, "sentinel")
	require.NotNil(t, c.ReadinessProbe)
	require.NotNil(t, c.ReadinessProbe.Exec)
	cmd := c.ReadinessProbe.Exec.Command
	require.Equal(t, []string{"sh", "-c"}, cmd[:2])
	return &sentinelProbe{t: t, cli: cliPath, script: cmd[2], top: top}
}

func (p *sentinelProbe) run(i int) (bool, string, time.Duration) {
	p.t.Helper()
	s := p.top.Sentinels[i]
	sc := strings.ReplaceAll(p.script, "valkey-cli --user _client -p 26379",
		fmt.Sprintf("%s --user _client -h %s -p %d", p.cli, valkeytest.Host, s.Port))
	require.NotEqual(p.t, p.script, sc, "the probe asks its own Sentinel as _client")
	sc = strings.ReplaceAll(sc, "timeout 1 valkey-cli ", "timeout 1 "+p.cli+" ")
	if m := probePeers.FindStringSubmatch(sc); m != nil {
		peers := strings.Fields(m[1])
		require.Len(p.t, peers, len(p.top.Sentinels), "one peer per Sentinel of the StatefulSet")
		addrs := make([]string, len(peers))
		for j := range peers {
			addrs[j] = fmt.Sprintf("127.0.0.1:%d", p.top.Sentinels[j].Port)
		}
		sc = strings.Replace(sc, m[0], "for p in "+strings.Join(addrs, " ")+"; do", 1)
	}
	start := time.Now()
	c := exec.Command("sh", "-c", sc)
	c.Env = append(os.Environ(), "REDISCLI_AUTH="+p.top.SentinelPasswords[acl.SentinelClient])
	out, err := c.CombinedOutput()
	return err == nil, strings.TrimSpace(string(out)), time.Since(start)
}

// ready runs the probe of Sentinel i; the kubelet's timeoutSeconds (3) bounds it.
func (p *sentinelProbe) ready(i int) bool {
	p.t.Helper()
	ok, _, took := p.run(i)
	assert.Less(p.t, took, 3*time.Second, "the probe answers within its timeoutSeconds")
	return ok
}

// evictionAllowed models the chart's PodDisruptionBudget (maxUnavailable 1, unhealthyPodEvictionPolicy
// AlwaysAllow) over the probe: an unready Sentinel may always be evicted, a ready one only while every other
// Sentinel is ready.
func (p *sentinelProbe) evictionAllowed(i int) bool {
	p.t.Helper()
	if !p.ready(i) {
		return true
	}
	for j := range p.top.Sentinels {
		if j != i && !p.ready(j) {
			return false
		}
	}
	return true
}

// replaceEmpty kills Sentinel s and starts it again with what a new pod of the chart starts from on its
// emptyDir: its settings, users and stable myid, no monitor, no known peer, epoch 0.
func replaceEmpty(t *testing.T, s *valkeytest.Proc) {
	t.Helper()
	s.Kill()
	var keep []string
	for _, line := range strings.Split(s.Config(), "\n") {
		f := strings.Fields(line)
		if len(f) >= 2 && f[0] == "sentinel" && (f[1] == "current-epoch" || f[1] == "monitor" ||
			(len(f) >= 3 && strings.HasPrefix(f[1], "known-")) || (len(f) >= 3 && f[2] == "vk")) {
			continue
		}
		keep = append(keep, line)
	}
	require.NoError(t, os.WriteFile(s.ConfPath, []byte(strings.Join(keep, "\n")+"\n"), 0o600))
	s.Start()
}

// settled waits until exactly one node reports primary and, with named, every running Sentinel names it (a
// replaced, empty Sentinel names nothing: without named only the nodes are asked), and returns its port. With
// down-after 1000 ms a loaded machine (the fresh-clone CI, load 15) sees a failover of its own now and then;
// the round starts from the settled result instead of asserting a moment of it.
func settled(t *testing.T, top *valkeytest.Topology, round int, named bool) int {
	t.Helper()
	port := 0
	valkeytest.Eventually(t, 40*time.Second, 200*time.Millisecond, fmt.Sprintf("round %d: one primary", round), func() error {
		primaries := []int{}
		for _, n := range top.Nodes {
			r, err := top.Replication(n)
			if err != nil {
				return err
			}
			if r.Role == valkey.RolePrimary {
				primaries = append(primaries, n.Port)
			}
		}
		if len(primaries) != 1 {
			return fmt.Errorf("primaries %v", primaries)
		}
		if named {
			p, err := top.SentinelPrimary()
			if err != nil {
				return err
			}
			if p != primaries[0] {
				return fmt.Errorf("the Sentinels name %d, node %d is primary", p, primaries[0])
			}
		}
		port = primaries[0]
		return nil
	})
	return port
}

// TestReplacedSentinelsStillFailOverWithControllersDown (issue 24, 2): no controller runs. Each Sentinel in
// turn is replaced with empty state (emptyDir), and a drain then evicts whatever the PodDisruptionBudget
// allows over the chart's readiness probe, as fast as it allows: every other Sentinel, and the replaced one
// again at once. Then the primary is SIGKILLed: a new primary within down-after + failover-timeout, every
// round. The probe refuses the state that allowed the bug (the replaced Sentinel answers PING but holds no
// monitor), so the PDB holds the next eviction; once the monitor is registered again (the sentinel
// controller's job, done here by the test) the replaced Sentinel is ready. A paused peer never makes a
// Sentinel unready, and the probe still answers within its timeout; a monitor registered on one Sentinel
// only holds the others until they have it too.
func TestReplacedSentinelsStillFailOverWithControllersDown(t *testing.T) {
	valkeytest.Require(t, valkeytest.Default)
	const downAfter, failoverTimeout = 1000, 5000
	top := valkeytest.StartTopology(t, valkeytest.TopologyConfig{Replicas: 2, Sentinels: 3, DownAfterMs: downAfter,
		FailoverTimeoutMs: failoverTimeout, SentinelAuth: true})
	probe := newSentinelProbe(t, top, "")
	ctx := context.Background()
	for i := range top.Sentinels {
		ok, out, _ := probe.run(i)
		require.True(t, ok, "Sentinel %d ready in steady state: %s", i, out)
	}
	bound := time.Duration(downAfter+failoverTimeout) * time.Millisecond
	for round := range top.Sentinels {
		settled(t, top, round, true)
		replaceEmpty(t, top.Sentinels[round])
		ok, out, _ := probe.run(round)
		assert.False(t, ok, "round %d: the replaced Sentinel answers PING but holds no monitor: unready", round)
		assert.Contains(t, out, "lacks 1 monitor(s) its peers hold")
		assert.Contains(t, out, "vk")
		// the drain goes on as fast as the PodDisruptionBudget allows
		evicted := []int{round}
		for j := range top.Sentinels {
			if j != round && probe.evictionAllowed(j) {
				replaceEmpty(t, top.Sentinels[j])
				evicted = append(evicted, j)
			}
		}
		if probe.evictionAllowed(round) { // an unready pod may always go: back to back
			replaceEmpty(t, top.Sentinels[round])
		}
		assert.Equal(t, []int{round}, evicted, "round %d: no other Sentinel evicted while the replaced one is empty", round)

		old := top.NodeByPort(settled(t, top, round, false))
		splitsBefore := top.SplitVotes()
		old.Kill()
		killed := time.Now()
		var promoted *valkeytest.Proc
		deadline := killed.Add(bound + 10*time.Second)
		for promoted == nil && time.Now().Before(deadline) {
			for _, n := range top.Nodes {
				if n == old {
					continue
				}
				if r, err := top.Replication(n); err == nil && r.Role == valkey.RolePrimary {
					promoted = n
				}
			}
			time.Sleep(50 * time.Millisecond)
		}
		require.NotNil(t, promoted, "round %d: no new primary %s after the primary was killed (evicted Sentinels %v)", round, bound+10*time.Second, evicted)
		took := time.Since(killed)
		t.Logf("round %d: new primary %d after %s (bound %s)", round, promoted.Port, took.Round(10*time.Millisecond), bound)
		if splits := top.SplitVotes() - splitsBefore; splits > 0 {
			// two Sentinels hold the monitor and both must vote for one leader: when both start the election at
			// once, each votes for itself and Sentinel retries after twice failover-timeout, exactly as with one
			// Sentinel down (seen once in about 30 kills)
			t.Logf("round %d: %d split vote(s) (-failover-abort-not-elected)", round, splits)
			assert.Less(t, took, bound+time.Duration(failoverTimeout)*time.Millisecond+2*time.Second, "round %d: failover within one retry after a split vote", round)
		} else {
			assert.Less(t, took, bound, "round %d: failover within down-after + failover-timeout", round)
		}

		// the old primary comes back (Sentinel makes it a replica), the sentinel controller comes back and
		// registers the monitor on the replaced Sentinel: it is ready again
		back := time.Now()
		// as the boot step does: the old primary's pod starts as a replica of the primary Sentinel names
		cfg := old.Config() + fmt.Sprintf("replicaof %s %d\n", valkeytest.Host, promoted.Port)
		require.NoError(t, os.WriteFile(old.ConfPath, []byte(cfg), 0o600))
		old.Start()
		top.Register(ctx, top.Sentinels[round], promoted)
		valkeytest.Eventually(t, 30*time.Second, 200*time.Millisecond, "the replaced Sentinel ready once registered", func() error {
			if ok, out, _ := probe.run(round); !ok {
				return fmt.Errorf("unready: %s", out)
			}
			return nil
		})
		readyAt := time.Since(back)
		top.WaitSentinelsConverged(30*time.Second, 2, 2)
		t.Logf("round %d: registered Sentinel ready after %s, converged after %s", round, readyAt.Round(10*time.Millisecond), time.Since(back).Round(10*time.Millisecond))
	}

	// a peer that does not answer (paused: a dead node) is skipped, within the probe's timeout
	top.Sentinels[2].Pause()
	for i := range 2 {
		ok, out, took := probe.run(i)
		assert.True(t, ok, "Sentinel %d ready while a peer is paused: %s", i, out)
		assert.Less(t, took, 3*time.Second)
	}
	top.Sentinels[2].Resume()

	// a monitor no Sentinel holds yet (an instance added while the controller is down) changes nothing; one
	// registered on a single Sentinel (the controller in the middle of a pass) holds the others until they
	// have it too
	port, err := top.SentinelPrimary()
	require.NoError(t, err)
	c := top.Sentinels[0].Client(top.SentinelOptions())
	require.NoError(t, c.SentinelMonitor(ctx, "vk2", valkeytest.Host, port, 2))
	t.Cleanup(func() {
		for _, s := range top.Sentinels {
			_ = s.Client(top.SentinelOptions()).SentinelRemove(context.Background(), "vk2")
		}
	})
	assert.True(t, probe.ready(0), "the Sentinel that holds both")
	for _, i := range []int{1, 2} {
		ok, out, _ := probe.run(i)
		assert.False(t, ok, "Sentinel %d lacks vk2", i)
		assert.Contains(t, out, "lacks 1 monitor(s) its peers hold, until the sentinel controller registers them: vk2")
		require.NoError(t, top.Sentinels[i].Client(top.SentinelOptions()).SentinelMonitor(ctx, "vk2", valkeytest.Host, port, 2))
	}
	for i := range top.Sentinels {
		ok, out, _ := probe.run(i)
		assert.True(t, ok, "Sentinel %d holds both: %s", i, out)
	}
}

// TestSentinelReadinessProbeAsksEveryPeer (issue 24, 2): the rendered readiness probe asks its own Sentinel
// and every other Sentinel of the StatefulSet by its FQDN (replicas of them, TLS flags with tls.enabled), each
// peer bounded (timeout 1) below the probe's timeoutSeconds, compares monitor names only (no monitor password
// in the pod), and the Sentinel keeps its emptyDir. The probe runs in the sentinel container's cgroup: with
// 13 processes per run every 5 s a 50m Sentinel was throttled in 85 % of its CFS periods and went into TILT
// mode (the CI run of 2026-12-04), so it starts one valkey-cli for itself, one per other Sentinel (not itself,
// by $HOSTNAME), one awk, and runs every 10 s.
func TestSentinelReadinessProbeAsksEveryPeer(t *testing.T) {
	for _, tc := range []struct {
		values string
		peers  int
		tls    bool
	}{
		{"", 3, false},
		{"replicas: 5\n", 5, false},
		{"tls: {enabled: true, existingSecret: s-tls}\n", 3, true},
	} {
		sts := sentinelSTS(t, decode(t, mustRender(t, "valkey-sentinel", tc.values)))
		c := container(t, &sts.Spec.Template.Spec, "sentinel")
		require.NotNil(t, c.ReadinessProbe.Exec, tc.values)
		sc := c.ReadinessProbe.Exec.Command[2]
		m := probePeers.FindStringSubmatch(sc)
		require.NotNil(t, m, "the probe asks its peers: %s", sc)
		var want []string
		for i := range tc.peers {
			want = append(want, fmt.Sprintf("%s-%d.%s-headless.%s.svc.cluster.local:26379", sts.Name, i, sts.Name, sts.Namespace))
		}
		assert.Equal(t, want, strings.Fields(m[1]), tc.values)
		assert.Contains(t, sc, "timeout 1 valkey-cli", "each peer bounded")
		assert.Contains(t, sc, "info sentinel")
		assert.Less(t, 1+1, int(c.ReadinessProbe.TimeoutSeconds), "a peer's bound fits in the probe's timeout")
		assert.Equal(t, tc.tls, strings.Contains(sc, "--tls --cacert /etc/valkey-ha/tls/ca.crt"), "TLS to the peers too")
		assert.NotContains(t, sc, "auth-pass")
		assert.Equal(t, 2, strings.Count(sc, "--user _client"), "as _client, its own Sentinel and the peers")
		assert.Equal(t, 2, strings.Count(sc, "valkey-cli"), "one valkey-cli for itself, one per peer in the loop")
		assert.Contains(t, sc, `case "$p" in "$HOSTNAME".*) continue ;; esac`, "it does not ask itself twice")
		assert.Equal(t, 1, strings.Count(sc, "awk"), "one awk for every reply")
		assert.NotContains(t, sc, "sed ", "no process per reply")
		assert.GreaterOrEqual(t, c.ReadinessProbe.PeriodSeconds, int32(10), "each run costs the container about 0.1 s of CPU")
		var data bool
		for _, v := range sts.Spec.Template.Spec.Volumes {
			if v.Name == "data" {
				data = true
				require.NotNil(t, v.EmptyDir, "state stays on an emptyDir by default")
			}
		}
		assert.True(t, data)
	}
}
