//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// TestCaseS05S01KillPrimaryControllersOff: with both controllers scaled to zero, kill the primary pod.
// Sentinel alone elects a new primary within down-after + failover-timeout (+ slack); the recreated pod's
// bootstrap asks the Sentinels and comes back as a replica of the new primary, never as a second primary
// (S05); within 2 x down-after of it being Ready no Sentinel lists a replica s_down or disconnected (S01).
func TestCaseS05S01KillPrimaryControllersOff(t *testing.T) {
	maybeParallel(t)
	d := Deploy(t, "kill", DeployOpts{})
	in := d.I()
	ctx := t.Context()
	old, err := in.SentinelPrimary(ctx)
	if err != nil {
		t.Fatal(err)
	}
	d.ScaleControllers(t, 0)

	one := int64(1) // SIGTERM, SIGKILL after 1 s
	t0 := time.Now()
	oldUID := DeletePod(t, d.NS, in.Pod(old), &one)

	// S05: while waiting, the reborn pod must never report role master
	var mu sync.Mutex
	var twoPrimaries []string
	watchReborn := func(ctx context.Context) {
		if _, err := kube.CoreV1().Pods(d.NS).Get(ctx, in.Pod(old), metavGet); err != nil {
			return
		}
		if r, err := in.ReplRole(ctx, old); err == nil && r.Role == "master" {
			mu.Lock()
			twoPrimaries = append(twoPrimaries, fmt.Sprintf("+%s", time.Since(t0).Round(time.Millisecond)))
			mu.Unlock()
		}
	}

	deadline := downAfter + failoverTimeout + 15*time.Second
	newPrimary := -1
	Eventually(t, deadline, 500*time.Millisecond, "Sentinels elect a new primary (controllers off)", func(ctx context.Context) (bool, error) {
		p, err := in.SentinelPrimary(ctx)
		if err != nil {
			return false, err
		}
		if p == old {
			return false, fmt.Errorf("Sentinels still name %s", in.Pod(old))
		}
		r, err := in.ReplRole(ctx, p)
		if err != nil || r.Role != "master" {
			return false, fmt.Errorf("%s named primary but reports %+v (%v)", in.Pod(p), r, err)
		}
		newPrimary = p
		return true, nil
	})
	t.Logf("new primary %s %s after the kill (deadline %s)", in.Pod(newPrimary), time.Since(t0).Round(time.Millisecond), deadline)

	var readyAt time.Time
	Eventually(t, 2*time.Minute, time.Second, "old primary pod back as a replica of the new primary", func(ctx context.Context) (bool, error) {
		watchReborn(ctx)
		_, at, err := ReplacedPod(ctx, d.NS, in.Pod(old), oldUID)
		if err != nil {
			return false, err
		}
		r, err := in.ReplRole(ctx, old)
		if err != nil {
			return false, err
		}
		if r.Role != "slave" || r.MasterHost != in.FQDN(newPrimary) || !r.LinkUp {
			return false, fmt.Errorf("%s: %+v", in.Pod(old), r)
		}
		readyAt = at
		return true, nil
	})
	mu.Lock()
	if len(twoPrimaries) > 0 {
		t.Errorf("S05: the reborn %s reported role master at %v (two primaries)", in.Pod(old), twoPrimaries)
	}
	mu.Unlock()
	if err := startedAsReplica(ctx, d.NS, in.Pod(old)); err != nil {
		t.Errorf("S05: %v", err)
	}

	// S01: within 2 x down-after of the pod being Ready (+1 s: Ready is recorded to the second), every
	// Sentinel sees both replicas healthy
	WithinOf(t, readyAt.Add(2*downAfter+time.Second), 300*time.Millisecond, "S01: no Sentinel lists a replica s_down or disconnected within 2 x down-after of Ready", func(ctx context.Context) error {
		return sentinelsHealthy(ctx, in, newPrimary)
	})
	if twice := time.Since(t0); twice > 0 {
		t.Logf("S01/S05 done %s after the kill; %s was Ready %s after the kill", twice.Round(time.Millisecond), in.Pod(old), readyAt.Sub(t0).Round(time.Second))
	}
}

// TestReplicaRejoinsAndS08NoKeyLoss: controllers on, 20k keys. (S01/S03) a deleted replica pod rejoins,
// catches up, and no Sentinel keeps it s_down or lists it twice. (S08) the primary pod is deleted (no
// persistence: it comes back empty, maybe before down-after): DBSIZE on the two survivors, sampled every
// 200 ms inside their pods, never drops below the key count, and the reborn pod ends as a replica of the
// new primary holding every key.
func TestReplicaRejoinsAndS08NoKeyLoss(t *testing.T) {
	longTest(t, "internal/podsteps/bootstrap TestCaseS08EmptyPrimaryNeverWipesReplicas (in the engine matrix too)")
	maybeParallel(t)
	const keys = 20000
	d := Deploy(t, "s08", DeployOpts{DataExtra: `users: [{name: app, access: readwrite, keys: ["*"]}]`})
	in := d.I()
	ctx := t.Context()
	primary, err := in.SentinelPrimary(ctx)
	if err != nil {
		t.Fatal(err)
	}
	appPW := waitSecretKey(t, d, in.F+"-user-app", "password")
	Eventually(t, time.Minute, time.Second, "user app can log in on the primary", func(ctx context.Context) (bool, error) {
		out, err := in.As(ctx, in.Pod(primary), "app", appPW, "ping")
		if err != nil || out != "PONG" {
			return false, fmt.Errorf("PING as app: %q %v", out, err)
		}
		return true, nil
	})
	in.LoadKeys(t, in.Pod(primary), "app", appPW, keys)
	in.WaitDBSize(t, keys, time.Minute)

	// ---- S01/S03: delete a replica
	replica := (primary + 1) % in.Nodes()
	oldUID := DeletePod(t, d.NS, in.Pod(replica), nil)
	t0 := time.Now()
	var readyAt time.Time
	Eventually(t, 2*time.Minute, time.Second, "deleted replica rejoins with every key", func(ctx context.Context) (bool, error) {
		_, at, err := ReplacedPod(ctx, d.NS, in.Pod(replica), oldUID)
		if err != nil {
			return false, err
		}
		r, err := in.ReplRole(ctx, replica)
		if err != nil || r.Role != "slave" || r.MasterHost != in.FQDN(primary) || !r.LinkUp {
			return false, fmt.Errorf("%s: %+v %v", in.Pod(replica), r, err)
		}
		n, err := in.DBSize(ctx, in.Pod(replica))
		if err != nil || n != keys {
			return false, fmt.Errorf("%s DBSIZE %d %v", in.Pod(replica), n, err)
		}
		readyAt = at
		return true, nil
	})
	// "keeps": the bug (S01/S03) is an entry that stays s_down or a second entry under an IP; the clean
	// state is logged against the S01 bound of 2 x down-after after Ready
	WithinOf(t, readyAt.Add(30*time.Second), 300*time.Millisecond, "S01/S03: no Sentinel keeps the rejoined replica s_down or lists it twice", func(ctx context.Context) error {
		return sentinelsHealthy(ctx, in, primary)
	})
	if late := time.Since(readyAt); late > 2*downAfter+time.Second {
		t.Logf("note: the Sentinels cleared the rejoined replica %s after it was Ready, beyond 2 x down-after (%s)", late.Round(time.Millisecond), 2*downAfter)
	} else {
		t.Logf("the Sentinels see the rejoined replica healthy %s after it was Ready (2 x down-after = %s)", late.Round(time.Millisecond), 2*downAfter)
	}
	t.Logf("replica %s rejoined: Ready %s after the delete", in.Pod(replica), readyAt.Sub(t0).Round(time.Second))
	d.WaitConverged(t, time.Minute, true)

	// ---- S08: delete the primary while sampling DBSIZE on the survivors
	var samplers []*DBSizeSampler
	for i := 0; i < in.Nodes(); i++ {
		if i != primary {
			samplers = append(samplers, in.SampleDBSize(t, in.Pod(i), 200*time.Millisecond, keys))
		}
	}
	Eventually(t, 30*time.Second, 200*time.Millisecond, "DBSIZE samplers running", func(context.Context) (bool, error) {
		for _, s := range samplers {
			if s.Samples() < 3 {
				return false, fmt.Errorf("%s", s)
			}
		}
		return true, nil
	})
	oldUID = DeletePod(t, d.NS, in.Pod(primary), nil)
	t1 := time.Now()
	var mu sync.Mutex
	var emptyPrimary []string
	newPrimary := -1
	Eventually(t, 3*time.Minute, time.Second, "S08: a survivor is primary and the reborn pod is its replica with every key", func(ctx context.Context) (bool, error) {
		if r, err := in.ReplRole(ctx, primary); err == nil && r.Role == "master" {
			if n, err := in.DBSize(ctx, in.Pod(primary)); err == nil && n < keys {
				mu.Lock()
				emptyPrimary = append(emptyPrimary, fmt.Sprintf("+%s dbsize %d", time.Since(t1).Round(time.Millisecond), n))
				mu.Unlock()
			}
		}
		p, err := in.SentinelPrimary(ctx)
		if err != nil {
			return false, err
		}
		if p == primary {
			return false, fmt.Errorf("Sentinels still name %s", in.Pod(primary))
		}
		if _, _, err := ReplacedPod(ctx, d.NS, in.Pod(primary), oldUID); err != nil {
			return false, err
		}
		r, err := in.ReplRole(ctx, primary)
		if err != nil || r.Role != "slave" || r.MasterHost != in.FQDN(p) || !r.LinkUp {
			return false, fmt.Errorf("reborn %s: %+v %v", in.Pod(primary), r, err)
		}
		n, err := in.DBSize(ctx, in.Pod(primary))
		if err != nil || n != keys {
			return false, fmt.Errorf("reborn %s DBSIZE %d %v", in.Pod(primary), n, err)
		}
		newPrimary = p
		return true, nil
	})
	t.Logf("S08: new primary %s; reborn %s replicates with %d keys, %s after the delete", in.Pod(newPrimary), in.Pod(primary), keys, time.Since(t1).Round(time.Second))
	d.WaitConverged(t, time.Minute, true)
	for _, s := range samplers {
		s.Stop()
		t.Logf("sampler %s", s)
		if err := s.Check(int(time.Since(t1)/(400*time.Millisecond)) / 2); err != nil {
			t.Errorf("S08: %v", err)
		}
	}
	if err := startedAsReplica(ctx, d.NS, in.Pod(primary)); err != nil {
		t.Errorf("S08: %v", err)
	}
	if len(emptyPrimary) > 0 {
		t.Errorf("S08: the reborn %s served as a primary with missing keys: %v", in.Pod(primary), emptyPrimary)
	}
	for i := 0; i < in.Nodes(); i++ {
		if n, err := in.DBSize(ctx, in.Pod(i)); err != nil || n != keys {
			t.Errorf("after S08: %s DBSIZE %d (%v), want %d", in.Pod(i), n, err, keys)
		}
	}
}

// waitSecretKey waits for a Secret key to exist and returns it.
func waitSecretKey(t testing.TB, d *Deployment, name, key string) string {
	t.Helper()
	var v string
	Eventually(t, time.Minute, time.Second, "secret "+name+" key "+key, func(ctx context.Context) (bool, error) {
		var err error
		v, err = d.SecretKey(ctx, name, key)
		return err == nil && v != "", err
	})
	return v
}

// LoadKeys writes n keys key:<i> through valkey-cli --pipe on pod as user.
func (in *Instance) LoadKeys(t testing.TB, pod, user, password string, n int) {
	t.Helper()
	var b strings.Builder
	b.WriteString(password + "\n")
	for i := 0; i < n; i++ {
		k := fmt.Sprintf("key:%06d", i)
		v := fmt.Sprintf("value-%06d-abcdefghijklmnopqrstuvwxyz", i)
		fmt.Fprintf(&b, "*3\r\n$3\r\nSET\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n", len(k), k, len(v), v)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	start := time.Now()
	out, stderr, err := Exec(ctx, in.d.NS, pod, "valkey", strings.NewReader(b.String()), "sh", "-c",
		`read -r REDISCLI_AUTH && export REDISCLI_AUTH && exec valkey-cli --user "$0" --pipe`, user)
	if err != nil || !strings.Contains(out, "errors: 0, replies: "+fmt.Sprint(n)) {
		t.Fatalf("valkey-cli --pipe of %d keys on %s: %v\n%s\n%s", n, pod, err, out, stderr)
	}
	t.Logf("wrote %d keys on %s in %s", n, pod, time.Since(start).Round(time.Millisecond))
}

// WaitDBSize waits until every data node holds exactly n keys.
func (in *Instance) WaitDBSize(t testing.TB, n int, timeout time.Duration) {
	t.Helper()
	Eventually(t, timeout, time.Second, fmt.Sprintf("every node holds %d keys", n), func(ctx context.Context) (bool, error) {
		for i := 0; i < in.Nodes(); i++ {
			got, err := in.DBSize(ctx, in.Pod(i))
			if err != nil || got != n {
				return false, fmt.Errorf("%s DBSIZE %d %v", in.Pod(i), got, err)
			}
		}
		return true, nil
	})
}

// TestCaseS21LabelMoveAndSingleEndpoint: controllers on, SENTINEL FAILOVER. Sampling the role labels and
// the F-primary EndpointSlices every 200 ms: never two pods labelled primary, never two ready endpoints;
// the label follows the new primary within a few seconds of +switch-master (measured and logged).
func TestCaseS21LabelMoveAndSingleEndpoint(t *testing.T) {
	maybeParallel(t)
	const labelDeadline = 5 * time.Second
	d := Deploy(t, "s21", DeployOpts{})
	in := d.I()
	ctx := t.Context()
	old, err := in.SentinelPrimary(ctx)
	if err != nil {
		t.Fatal(err)
	}

	// +switch-master as every Sentinel publishes it (the leader announces it only at failover-end, the others
	// as soon as they learn the new configuration), timestamped on arrival; the earliest one counts
	watch := d.WatchSwitchMaster(t, in)

	rs := in.SampleRoles(t, 200*time.Millisecond)
	time.Sleep(time.Second) // a baseline of samples before the switch (not an assertion)
	t0 := time.Now()
	if out, err := d.Sentinel(ctx, 0, "sentinel", "failover", in.F); err != nil || out != "OK" {
		t.Fatalf("SENTINEL FAILOVER: %q, %v", out, err)
	}
	newPrimary := -1
	Eventually(t, failoverTimeout+30*time.Second, 200*time.Millisecond, "new primary labelled and the only ready endpoint of "+in.F+"-primary", func(ctx context.Context) (bool, error) {
		p, err := in.SentinelPrimary(ctx)
		if err != nil {
			return false, err
		}
		if p == old {
			return false, fmt.Errorf("Sentinels still name %s", in.Pod(old))
		}
		pod, err := kube.CoreV1().Pods(d.NS).Get(ctx, in.Pod(p), metavGet)
		if err != nil {
			return false, err
		}
		s := rs.Samples()
		if len(s) == 0 {
			return false, fmt.Errorf("no samples")
		}
		last := s[len(s)-1]
		if strings.Join(last.Primaries, ",") != in.Pod(p) || strings.Join(last.Endpoints, ",") != pod.Status.PodIP {
			return false, fmt.Errorf("labelled primary %v, endpoints %v (want %s at %s)", last.Primaries, last.Endpoints, in.Pod(p), pod.Status.PodIP)
		}
		newPrimary = p
		return true, nil
	})
	time.Sleep(2 * time.Second) // keep sampling a little after the move (not an assertion)
	rs.Stop()
	samples := rs.Samples()

	var labelAt, endpointAt time.Time
	newIP := ""
	if p, err := kube.CoreV1().Pods(d.NS).Get(ctx, in.Pod(newPrimary), metavGet); err == nil {
		newIP = p.Status.PodIP
	}
	errs := 0
	for _, s := range samples {
		if s.Err != nil {
			errs++
			continue
		}
		if len(s.Primaries) > 1 {
			t.Errorf("S21: %s two pods labelled primary: %v", s.At.Format("15:04:05.000"), s.Primaries)
		}
		if len(s.Endpoints) > 1 {
			t.Errorf("S21: %s %s-primary has %d ready endpoints: %v", s.At.Format("15:04:05.000"), in.F, len(s.Endpoints), s.Endpoints)
		}
		if s.At.After(t0) && labelAt.IsZero() && len(s.Primaries) == 1 && s.Primaries[0] == in.Pod(newPrimary) {
			labelAt = s.At
		}
		if s.At.After(t0) && endpointAt.IsZero() && len(s.Endpoints) == 1 && s.Endpoints[0] == newIP {
			endpointAt = s.At
		}
	}
	if errs > len(samples)/10 {
		t.Errorf("%d of %d samples failed", errs, len(samples))
	}
	var sw time.Time
	var msg string
	Eventually(t, failoverTimeout, 200*time.Millisecond, "+switch-master seen on a Sentinel", func(context.Context) (bool, error) {
		var ok bool
		if sw, msg, ok = watch.First(); !ok {
			return false, fmt.Errorf("no +switch-master for %s yet; subscribers: %s", in.F, watch.Output())
		}
		return true, nil
	})
	move := labelAt.Sub(sw)
	t.Logf("S21: %d samples; SENTINEL FAILOVER at 0, +switch-master at +%s (%s), label on %s at +%s (%s after the switch, 200 ms sampling), single endpoint %s at +%s",
		len(samples), sw.Sub(t0).Round(time.Millisecond), msg, in.Pod(newPrimary), labelAt.Sub(t0).Round(time.Millisecond),
		move.Round(time.Millisecond), newIP, endpointAt.Sub(t0).Round(time.Millisecond))
	if move > labelDeadline {
		t.Errorf("S21: the primary label moved %s after +switch-master (want within %s)", move.Round(time.Millisecond), labelDeadline)
	}
}

// sentinelsHealthy is SentinelReplicaProblems as an error.
func sentinelsHealthy(ctx context.Context, in *Instance, primary int) error {
	probs, err := in.SentinelReplicaProblems(ctx, primary)
	if err != nil {
		return err
	}
	if len(probs) > 0 {
		return fmt.Errorf("%s", strings.Join(probs, "; "))
	}
	return nil
}

// startedAsReplica checks the server log of a data pod: the line where the server starts listening must carry
// the replica role marker ("1:S ... Ready to accept connections"), i.e. the bootstrap configured replicaof
// before the server accepted a single client; "1:M" means it came up as a (second) primary.
func startedAsReplica(ctx context.Context, ns, pod string) error {
	raw, err := kube.CoreV1().Pods(ns).GetLogs(pod, &corev1.PodLogOptions{Container: "valkey"}).DoRaw(ctx)
	if err != nil {
		return fmt.Errorf("logs of %s: %v", pod, err)
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if strings.Contains(line, "Ready to accept connections") {
			if strings.HasPrefix(line, "1:S ") {
				return nil
			}
			return fmt.Errorf("%s started its server as a primary: %q", pod, line)
		}
	}
	return fmt.Errorf("%s: no \"Ready to accept connections\" line in its log", pod)
}
