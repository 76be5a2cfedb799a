//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/valkey-ha/valkey-ha/internal/valkeyapi/acl"
)

// lineWriter calls fn with every complete line written to it and the time it arrived.
type lineWriter struct {
	mu  sync.Mutex
	buf []byte
	fn  func(at time.Time, line string)
}

func (w *lineWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	now := time.Now()
	w.buf = append(w.buf, p...)
	for {
		i := bytes.IndexByte(w.buf, '\n')
		if i < 0 {
			break
		}
		line := strings.TrimRight(string(w.buf[:i]), "\r")
		w.buf = w.buf[i+1:]
		w.fn(now, line)
	}
	return len(p), nil
}

// DBSizeSampler runs `valkey-cli -r N -i 0.2 dbsize` inside one data pod (one process and one
// connection for the whole run, the password on stdin) and keeps every answer.
type DBSizeSampler struct {
	Pod    string
	cancel context.CancelFunc
	done   chan struct{}

	mu      sync.Mutex
	samples int
	min     int
	max     int
	other   []string // non-numeric replies (errors), first few
	nOther  int
	below   []string // samples below the floor, first few
	floor   int
	err     error
	started time.Time
}

// SampleDBSize starts sampling DBSIZE on pod every interval until Stop (bounded to 10 minutes in the pod).
// floor is the value under which a sample counts as a loss.
func (in *Instance) SampleDBSize(t testing.TB, pod string, interval time.Duration, floor int) *DBSizeSampler {
	t.Helper()
	pw, err := in.OperatorPassword(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	s := &DBSizeSampler{Pod: pod, cancel: cancel, done: make(chan struct{}), min: -1, floor: floor, started: time.Now()}
	count := int((10 * time.Minute) / interval)
	// Sentinel kills every normal client of the nodes it reconfigures (CLIENT KILL TYPE normal in its failover
	// transaction), so valkey-cli is restarted when its connection drops; bounded to 10 minutes
	iv := strconv.FormatFloat(interval.Seconds(), 'f', -1, 64)
	script := fmt.Sprintf(`read -r REDISCLI_AUTH && export REDISCLI_AUTH && end=$(( $(date +%%s) + 600 ))
while [ "$(date +%%s)" -lt "$end" ]; do valkey-cli --user _operator -r %d -i %s dbsize; sleep %s; done`, count, iv, iv)
	w := &lineWriter{fn: s.add}
	go func() {
		defer close(s.done)
		err := ExecStream(ctx, in.d.NS, pod, "valkey", strings.NewReader(pw+"\n"), w, w, "sh", "-c", script)
		s.mu.Lock()
		if ctx.Err() == nil {
			s.err = err
			if err == nil {
				s.err = fmt.Errorf("sampler in %s ended early", pod)
			}
		}
		s.mu.Unlock()
	}()
	t.Cleanup(s.Stop)
	return s
}

func (s *DBSizeSampler) add(at time.Time, line string) {
	line = strings.TrimSpace(line)
	if line == "" {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	n, err := strconv.Atoi(line)
	if err != nil {
		s.nOther++
		if len(s.other) < 5 {
			s.other = append(s.other, fmt.Sprintf("+%s %q", at.Sub(s.started).Round(time.Millisecond), line))
		}
		return
	}
	s.samples++
	if s.min < 0 || n < s.min {
		s.min = n
	}
	if n > s.max {
		s.max = n
	}
	if n < s.floor && len(s.below) < 10 {
		s.below = append(s.below, fmt.Sprintf("+%s %d", at.Sub(s.started).Round(time.Millisecond), n))
	}
}

// Stop ends the sampler and waits for the exec to return.
func (s *DBSizeSampler) Stop() {
	s.cancel()
	<-s.done
}

// Samples returns the number of numeric samples so far.
func (s *DBSizeSampler) Samples() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.samples
}

// Check returns an error when a sample fell below the floor, the sampler died, or it sampled fewer than
// minSamples times.
func (s *DBSizeSampler) Check(minSamples int) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.err != nil:
		return fmt.Errorf("DBSIZE sampler in %s: %v (after %d samples)", s.Pod, s.err, s.samples)
	case len(s.below) > 0:
		return fmt.Errorf("DBSIZE on %s fell below %d: %v (min %d over %d samples)", s.Pod, s.floor, s.below, s.min, s.samples)
	case s.samples < minSamples:
		return fmt.Errorf("DBSIZE on %s sampled only %d times (want at least %d; other replies %v)", s.Pod, s.samples, minSamples, s.other)
	}
	return nil
}

func (s *DBSizeSampler) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return fmt.Sprintf("%s: %d samples over %s, min %d, max %d, %d non-numeric replies %v", s.Pod, s.samples,
		time.Since(s.started).Round(time.Second), s.min, s.max, s.nOther, s.other)
}

// ---- role labels and the primary Service's endpoints ------------------------------------------------------

// RoleSample is one observation of the role labels and of the F-primary EndpointSlices.
type RoleSample struct {
	At        time.Time
	Primaries []string // pods labelled valkey.io/role=primary
	Endpoints []string // ready endpoint addresses of Service F-primary
	Err       error
}

// RoleSampler lists the role labels and the F-primary EndpointSlices every interval.
type RoleSampler struct {
	mu      sync.Mutex
	samples []RoleSample
	cancel  context.CancelFunc
	done    chan struct{}
}

// SampleRoles starts a RoleSampler for instance in.
func (in *Instance) SampleRoles(t testing.TB, interval time.Duration) *RoleSampler {
	ctx, cancel := context.WithCancel(t.Context())
	r := &RoleSampler{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(r.done)
		tick := time.NewTicker(interval)
		defer tick.Stop()
		for {
			r.sampleOnce(ctx, in)
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	t.Cleanup(r.Stop)
	return r
}

func (r *RoleSampler) sampleOnce(ctx context.Context, in *Instance) {
	s := RoleSample{At: time.Now()}
	cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	pods, err := kube.CoreV1().Pods(in.d.NS).List(cctx, metav1.ListOptions{LabelSelector: "valkey.io/instance=" + in.F + ",valkey.io/role=primary"})
	if err == nil {
		for _, p := range pods.Items {
			s.Primaries = append(s.Primaries, p.Name)
		}
		var slices *discoveryv1.EndpointSliceList
		slices, err = kube.DiscoveryV1().EndpointSlices(in.d.NS).List(cctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=" + in.F + "-primary"})
		if err == nil {
			for _, sl := range slices.Items {
				for _, ep := range sl.Endpoints {
					if ep.Conditions.Ready == nil || *ep.Conditions.Ready {
						s.Endpoints = append(s.Endpoints, strings.Join(ep.Addresses, ","))
					}
				}
			}
		}
	}
	s.Err = err
	if ctx.Err() != nil {
		return
	}
	r.mu.Lock()
	r.samples = append(r.samples, s)
	r.mu.Unlock()
}

// Stop ends sampling.
func (r *RoleSampler) Stop() {
	r.cancel()
	<-r.done
}

// Samples returns a copy of the samples so far.
func (r *RoleSampler) Samples() []RoleSample {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]RoleSample(nil), r.samples...)
}

// ---- pods ---------------------------------------------------------------------------------------------

// DeletePod deletes a pod (grace nil = the pod's own grace period) and returns the deleted pod's UID.
func DeletePod(t testing.TB, ns, name string, grace *int64) string {
	t.Helper()
	ctx := t.Context()
	p, err := kube.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get pod %s: %v", name, err)
	}
	uid := p.UID
	if err := kube.CoreV1().Pods(ns).Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: grace, Preconditions: &metav1.Preconditions{UID: &uid}}); err != nil {
		t.Fatalf("delete pod %s: %v", name, err)
	}
	t.Logf("deleted pod %s (uid %s)", name, uid)
	return string(uid)
}

// ReplacedPod returns the pod name when it exists with another UID than oldUID and is Ready, with the time
// its Ready condition last turned true.
func ReplacedPod(ctx context.Context, ns, name, oldUID string) (*corev1.Pod, time.Time, error) {
	p, err := kube.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, time.Time{}, err
	}
	if string(p.UID) == oldUID || p.DeletionTimestamp != nil {
		return nil, time.Time{}, fmt.Errorf("pod %s not replaced yet", name)
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
			return p, c.LastTransitionTime.Time, nil
		}
	}
	return nil, time.Time{}, fmt.Errorf("pod %s (new) not Ready yet", name)
}

// SentinelReplicaProblems lists, over every Sentinel (one exec), replicas of in that are flagged s_down,
// o_down or disconnected, replica entries that are not exactly the live replica nodes, and a primary entry
// that is not node primary or not healthy.
func (in *Instance) SentinelReplicaProblems(ctx context.Context, primary int) ([]string, error) {
	var probs []string
	d := in.d
	views, err := d.SentinelViews(ctx, in.F)
	if err != nil {
		return nil, err
	}
	for j, v := range views {
		if !v.Found {
			probs = append(probs, d.SentinelPod(j)+" does not monitor "+in.F)
			continue
		}
		seen := map[string]int{}
		for _, r := range v.Replicas {
			seen[r["ip"]]++
			if strings.Contains(r["flags"], "s_down") || strings.Contains(r["flags"], "o_down") || strings.Contains(r["flags"], "disconnected") {
				probs = append(probs, fmt.Sprintf("%s: %s flags %s", d.SentinelPod(j), r["name"], r["flags"]))
			}
		}
		for i := 0; i < in.Nodes(); i++ {
			if i != primary && seen[in.FQDN(i)] != 1 {
				probs = append(probs, fmt.Sprintf("%s: replica %s listed %d times", d.SentinelPod(j), in.FQDN(i), seen[in.FQDN(i)]))
			}
			delete(seen, in.FQDN(i))
		}
		for host := range seen {
			probs = append(probs, fmt.Sprintf("%s: lists unknown replica %s", d.SentinelPod(j), host))
		}
		if v.Master["ip"] != in.FQDN(primary) || v.Master["flags"] != "master" {
			probs = append(probs, fmt.Sprintf("%s: master %s flags %s", d.SentinelPod(j), v.Master["ip"], v.Master["flags"]))
		}
	}
	return probs, nil
}

// WithinOf polls cond until it holds, for as long as deadline allows; a sample that starts before the
// deadline counts even when it ends after it. It fails the test with the last sample's error.
func WithinOf(t testing.TB, deadline time.Time, interval time.Duration, what string, cond func(ctx context.Context) error) {
	t.Helper()
	start := time.Now()
	var last error
	n := 0
	for n == 0 || time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		last = cond(ctx)
		cancel()
		n++
		if last == nil {
			t.Logf("%s: after %s (%d samples, %s before the deadline)", what, time.Since(start).Round(time.Millisecond), n, time.Until(deadline).Round(time.Millisecond))
			return
		}
		time.Sleep(interval)
	}
	t.Fatalf("%s: not by the deadline (%d samples over %s): %v", what, n, time.Since(start).Round(time.Millisecond), last)
}

// ---- +switch-master ---------------------------------------------------------------------------------------

// SwitchWatcher holds one `valkey-cli subscribe +switch-master` per Sentinel pod (bounded to 5 minutes in
// the pod) and the earliest message for one monitor.
type SwitchWatcher struct {
	mu    sync.Mutex
	first time.Time
	msg   string
	lines []string
	stops []func()
}

// WatchSwitchMaster subscribes to +switch-master on every Sentinel and returns once all are subscribed.
func (d *Deployment) WatchSwitchMaster(t testing.TB, in *Instance) *SwitchWatcher {
	t.Helper()
	w := &SwitchWatcher{}
	start := time.Now()
	subscribed := make(chan struct{}, d.Sentinels)
	for j := 0; j < d.Sentinels; j++ {
		pod := d.SentinelPod(j)
		var once sync.Once
		lw := &lineWriter{fn: func(at time.Time, line string) {
			w.mu.Lock()
			defer w.mu.Unlock()
			if len(w.lines) < 60 {
				w.lines = append(w.lines, fmt.Sprintf("%s +%s %s", pod, at.Sub(start).Round(time.Millisecond), line))
			}
			if line == "+switch-master" {
				once.Do(func() { subscribed <- struct{}{} })
			}
			if strings.HasPrefix(line, in.F+" ") && (w.first.IsZero() || at.Before(w.first)) {
				w.first, w.msg = at, pod+": "+line
			}
		}}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		// as _client, whose password the sentinel container has in REDISCLI_AUTH (the chart's probes use it)
		cli := []string{"timeout", "300", "valkey-cli", "-p", strconv.Itoa(sentinelPort)}
		if user, _, err := d.SentinelCredential(ctx, acl.SentinelClient); err == nil && user != "" {
			cli = append(cli, "--user", user)
		}
		go func() {
			defer close(done)
			_ = ExecStream(ctx, d.NS, pod, "sentinel", nil, lw, lw, append(cli, "subscribe", "+switch-master")...)
		}()
		w.stops = append(w.stops, func() { cancel(); <-done })
	}
	t.Cleanup(w.Stop)
	for j := 0; j < d.Sentinels; j++ {
		select {
		case <-subscribed:
		case <-time.After(30 * time.Second):
			t.Fatalf("subscribing to +switch-master on every Sentinel: %s", w.Output())
		}
	}
	return w
}

// First returns the earliest +switch-master for the monitor.
func (w *SwitchWatcher) First() (time.Time, string, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.first, w.msg, !w.first.IsZero()
}

// Output returns what the subscribers printed so far.
func (w *SwitchWatcher) Output() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return strings.Join(w.lines, " | ")
}

// Stop ends every subscriber.
func (w *SwitchWatcher) Stop() {
	for _, s := range w.stops {
		s()
	}
	w.stops = nil
}
