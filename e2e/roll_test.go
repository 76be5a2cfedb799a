//go:build e2e

package e2e

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/valkey-ha/valkey-ha/internal/chartapi/contract"

	"github.com/valkey-io/valkey-go"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/valkey-ha/valkey-ha/internal/valkeyapi/acl"
)

// ---- reaching the cluster like a client inside it --------------------------------------------------------

// ClusterDialer returns a dialer whose resolver asks the cluster DNS Service (kube-system/kube-dns, port 53)
// instead of the host's resolver, so a client on the host resolves the *.svc.<clusterDomain> names that
// Sentinel hands out exactly as a pod would (pod IPs and ClusterIPs are routable from the host).
func ClusterDialer(ctx context.Context) (*net.Dialer, error) {
	svc, err := kube.CoreV1().Services("kube-system").Get(ctx, "kube-dns", metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("cluster DNS Service kube-system/kube-dns: %w", err)
	}
	if svc.Spec.ClusterIP == "" || svc.Spec.ClusterIP == corev1.ClusterIPNone {
		return nil, fmt.Errorf("cluster DNS Service kube-system/kube-dns has no ClusterIP")
	}
	dns := net.JoinHostPort(svc.Spec.ClusterIP, "53")
	r := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, network, dns)
	}}
	return &net.Dialer{Resolver: r, Timeout: 2 * time.Second, KeepAlive: 30 * time.Second}, nil
}

// clusterClientOption is a valkey-go ClientOption that dials through the cluster DNS (ClusterDialer), without
// client-side caching, logging in as user.
func clusterClientOption(dialer *net.Dialer, user, password string, addrs ...string) valkey.ClientOption {
	return valkey.ClientOption{
		InitAddress: addrs,
		Username:    user,
		Password:    password,
		// every dial, to the Sentinels and to the nodes they name, resolves through the cluster DNS
		DialCtxFn: func(ctx context.Context, addr string, _ *net.Dialer, _ *tls.Config) (net.Conn, error) {
			return dialer.DialContext(ctx, "tcp", addr)
		},
		DisableCache: true,
	}
}

// ---- a Sentinel-aware writer --------------------------------------------------------------------------

// writeAttempt is one SET of the writer.
type writeAttempt struct {
	start, end time.Time
	err        error
}

// SentinelWriter writes a distinct key (prefix + sequence number, value = the sequence number) every
// interval through a valkey-go Sentinel client, one SET at a time, and records every attempt and whether
// it was acknowledged (OK) or failed (error reply, connection error or timeout: the outcome is unknown, so
// the key is neither required nor forbidden afterwards).
type SentinelWriter struct {
	client   valkey.Client
	prefix   string
	cancel   context.CancelFunc
	done     chan struct{}
	stopOnce sync.Once
	mu       sync.Mutex
	attempts []writeAttempt
	dials    []writerDial
}

// writerDial is one connection the writer's client opened (to a Sentinel or a data node).
type writerDial struct {
	at         time.Time
	addr, peer string
	err        error
}

// StartSentinelWriter connects a valkey-go Sentinel client for in's monitor through the Sentinel Service
// <S>.<ns>.svc:26379 (resolved by the cluster DNS) as user and starts writing. The client also reconciles
// its primary with the Sentinels every 5 s (valkey-go's recommended TopologyRefreshInterval), on top of
// following +switch-master.
func (in *Instance) StartSentinelWriter(t testing.TB, user, password, prefix string, interval time.Duration) *SentinelWriter {
	t.Helper()
	ctx := t.Context()
	dialer, err := ClusterDialer(ctx)
	if err != nil {
		t.Fatal(err)
	}
	d := in.d
	opt := clusterClientOption(dialer, user, password, net.JoinHostPort(fmt.Sprintf("%s.%s.svc.%s", d.S, d.NS, clusterDomain), strconv.Itoa(sentinelPort)))
	opt.Sentinel = valkey.SentinelOption{MasterSet: in.F, TopologyRefreshInterval: 5 * time.Second}
	// as an application would: the Sentinels take the quorum's _client user (Secret S-auth-client), the data
	// nodes the application's own
	su, spw, err := d.SentinelCredential(ctx, acl.SentinelClient)
	if err != nil {
		t.Fatal(err)
	}
	opt.Sentinel.Username, opt.Sentinel.Password = su, spw
	return StartSentinelWriterWith(t, opt, prefix, interval)
}

// StartSentinelWriterWith starts a SentinelWriter on a valkey-go client built from opt (a Sentinel client
// option the caller filled: addresses, credentials, dialer), retrying valkey.NewClient for up to a minute.
// Every connection the client opens is recorded for Timeline.
func StartSentinelWriterWith(t testing.TB, opt valkey.ClientOption, prefix string, interval time.Duration) *SentinelWriter {
	t.Helper()
	w := &SentinelWriter{prefix: prefix, done: make(chan struct{})}
	if dial := opt.DialCtxFn; dial != nil {
		opt.DialCtxFn = func(ctx context.Context, addr string, d *net.Dialer, c *tls.Config) (net.Conn, error) {
			conn, err := dial(ctx, addr, d, c)
			rec := writerDial{at: time.Now(), addr: addr, err: err}
			if conn != nil {
				rec.peer = conn.RemoteAddr().String()
			}
			w.mu.Lock()
			w.dials = append(w.dials, rec)
			w.mu.Unlock()
			return conn, err
		}
	}
	var client valkey.Client
	Eventually(t, time.Minute, time.Second, "valkey-go Sentinel client for "+opt.Sentinel.MasterSet+" connects", func(ctx context.Context) (bool, error) {
		c, err := valkey.NewClient(opt)
		if err != nil {
			return false, fmt.Errorf("valkey.NewClient (Sentinel %s, master set %s, user %s): %w", opt.InitAddress[0], opt.Sentinel.MasterSet, opt.Username, err)
		}
		client = c
		return true, nil
	})
	wctx, cancel := context.WithCancel(t.Context())
	w.client, w.cancel = client, cancel
	go w.run(wctx, interval)
	t.Cleanup(w.Stop)
	return w
}

func (w *SentinelWriter) run(ctx context.Context, interval time.Duration) {
	defer close(w.done)
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for i := 0; ; i++ {
		k, v := w.key(i), strconv.Itoa(i)
		a := writeAttempt{start: time.Now()}
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		a.err = w.client.Do(cctx, w.client.B().Set().Key(k).Value(v).Build()).Error()
		cancel()
		a.end = time.Now()
		if ctx.Err() != nil {
			return // the attempt cut short by Stop is not recorded
		}
		w.mu.Lock()
		w.attempts = append(w.attempts, a)
		w.mu.Unlock()
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

func (w *SentinelWriter) key(i int) string { return fmt.Sprintf("%s%07d", w.prefix, i) }

// Stop ends the writer (the attempt in flight is dropped) and closes its client.
func (w *SentinelWriter) Stop() {
	w.stopOnce.Do(func() {
		w.cancel()
		<-w.done
		w.client.Close()
	})
}

// Acked returns the number of acknowledged writes so far.
func (w *SentinelWriter) Acked() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for _, a := range w.attempts {
		if a.err == nil {
			n++
		}
	}
	return n
}

// WriteStats summarises a writer's attempts.
type WriteStats struct {
	Writes, Acked, Failed int
	// LongestFailWindow spans the longest run of consecutive failed writes (start of its first attempt to
	// the end of its last); LongestFailRun is the number of writes in it, FailWindowStart its start.
	LongestFailWindow time.Duration
	LongestFailRun    int
	FailWindowStart   time.Time
	// LongestAckGap is the longest time between two consecutive acknowledgements (it includes writes that
	// blocked, e.g. during a CLIENT PAUSE WRITE, and then succeeded), starting at AckGapStart.
	LongestAckGap time.Duration
	AckGapStart   time.Time
	// Errors counts the failed writes by error text.
	Errors map[string]int
}

// Stats summarises the attempts so far.
func (w *SentinelWriter) Stats() WriteStats {
	w.mu.Lock()
	defer w.mu.Unlock()
	s := WriteStats{Writes: len(w.attempts), Errors: map[string]int{}}
	runStart, run := -1, 0
	var lastAck time.Time
	for i, a := range w.attempts {
		if a.err == nil {
			s.Acked++
			if !lastAck.IsZero() && a.end.Sub(lastAck) > s.LongestAckGap {
				s.LongestAckGap, s.AckGapStart = a.end.Sub(lastAck), lastAck
			}
			lastAck, runStart, run = a.end, -1, 0
			continue
		}
		s.Failed++
		msg := a.err.Error()
		if errors.Is(a.err, context.DeadlineExceeded) {
			msg = "timeout (2 s)"
		} else if len(msg) > 80 {
			msg = msg[:80]
		}
		s.Errors[msg]++
		if runStart < 0 {
			runStart = i
		}
		run++
		if win := a.end.Sub(w.attempts[runStart].start); win > s.LongestFailWindow {
			s.LongestFailWindow, s.LongestFailRun, s.FailWindowStart = win, run, w.attempts[runStart].start
		}
	}
	return s
}

// String is the one-line report of the stats.
func (s WriteStats) String() string {
	return fmt.Sprintf("%d writes, %d acknowledged, %d failed; longest failed window %s (%d writes, from %s); longest gap between acknowledgements %s (from %s); errors %v",
		s.Writes, s.Acked, s.Failed, s.LongestFailWindow.Round(time.Millisecond), s.LongestFailRun, clock(s.FailWindowStart),
		s.LongestAckGap.Round(time.Millisecond), clock(s.AckGapStart), s.Errors)
}

// Timeline returns what the writer did between from and to, one line per run of attempts with the same
// outcome (OK or the error text) and one per connection its client opened (Sentinel or data node, with the
// peer address the name resolved to), in time order: where its writes went while they failed.
func (w *SentinelWriter) Timeline(from, to time.Time) string {
	w.mu.Lock()
	defer w.mu.Unlock()
	type line struct {
		at  time.Time
		txt string
	}
	var out []line
	outcome := func(a writeAttempt) string {
		if a.err == nil {
			return "OK"
		}
		if errors.Is(a.err, context.DeadlineExceeded) {
			return "timeout (2 s)"
		}
		msg := a.err.Error()
		if len(msg) > 80 {
			msg = msg[:80]
		}
		return msg
	}
	for i := 0; i < len(w.attempts); {
		a := w.attempts[i]
		j := i + 1
		for j < len(w.attempts) && outcome(w.attempts[j]) == outcome(a) {
			j++
		}
		last := w.attempts[j-1]
		if !last.end.Before(from) && !a.start.After(to) {
			out = append(out, line{a.start, fmt.Sprintf("%s-%s %d x %s", clock(a.start), clock(last.end), j-i, outcome(a))})
		}
		i = j
	}
	for _, d := range w.dials {
		if d.at.Before(from) || d.at.After(to) {
			continue
		}
		txt := fmt.Sprintf("%s dial %s -> %s", clock(d.at), d.addr, d.peer)
		if d.err != nil {
			txt += fmt.Sprintf(" (%v)", d.err)
		}
		out = append(out, line{d.at, txt})
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].at.Before(out[j].at) })
	var b strings.Builder
	for _, l := range out {
		b.WriteString("\n  " + l.txt)
	}
	return b.String()
}

// clock formats a wall-clock time to the millisecond ("-" when zero).
func clock(at time.Time) string {
	if at.IsZero() {
		return "-"
	}
	return at.Format("15:04:05.000")
}

// MissingOn reads every acknowledged key back from the node at addr (host:port, resolved by the cluster
// DNS) with MGET and returns the keys that are absent or hold another value.
func (w *SentinelWriter) MissingOn(ctx context.Context, addr, user, password string) ([]string, error) {
	dialer, err := ClusterDialer(ctx)
	if err != nil {
		return nil, err
	}
	opt := clusterClientOption(dialer, user, password, addr)
	opt.ForceSingleClient = true
	c, err := valkey.NewClient(opt)
	if err != nil {
		return nil, fmt.Errorf("connect to %s: %w", addr, err)
	}
	defer c.Close()
	w.mu.Lock()
	var acked []int
	for i, a := range w.attempts {
		if a.err == nil {
			acked = append(acked, i)
		}
	}
	w.mu.Unlock()
	var missing []string
	const batch = 1000
	for lo := 0; lo < len(acked); lo += batch {
		hi := min(lo+batch, len(acked))
		keys := make([]string, 0, hi-lo)
		for _, i := range acked[lo:hi] {
			keys = append(keys, w.key(i))
		}
		vals, err := c.Do(ctx, c.B().Mget().Key(keys...).Build()).ToArray()
		if err != nil {
			return nil, fmt.Errorf("MGET on %s: %w", addr, err)
		}
		for j, v := range vals {
			got, err := v.ToString()
			if want := strconv.Itoa(acked[lo+j]); err != nil || got != want {
				missing = append(missing, keys[j])
			}
		}
	}
	return missing, nil
}

// ---- pod replacements ---------------------------------------------------------------------------------

// PodLife is one incarnation (UID) of a named pod as a PodTracker saw it: when it was first listed, first
// Ready, and first terminating or gone (zero when not seen).
type PodLife struct {
	UID               string
	Seen, Ready, Gone time.Time
}

// PodTracker lists the pods matching a selector every interval and records every incarnation of every pod
// name, so the tests can tell how often and in which order pods were replaced.
type PodTracker struct {
	ns, selector string
	cancel       context.CancelFunc
	done         chan struct{}
	mu           sync.Mutex
	lives        map[string][]*PodLife
	errs         int
}

// TrackPods starts a PodTracker; it has listed the pods once when it returns.
func TrackPods(t testing.TB, ns, selector string, interval time.Duration) *PodTracker {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	p := &PodTracker{ns: ns, selector: selector, cancel: cancel, done: make(chan struct{}), lives: map[string][]*PodLife{}}
	if err := p.poll(ctx); err != nil {
		t.Fatalf("pod tracker: %v", err)
	}
	go func() {
		defer close(p.done)
		tick := time.NewTicker(interval)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			if err := p.poll(ctx); err != nil && ctx.Err() == nil {
				p.mu.Lock()
				p.errs++
				p.mu.Unlock()
			}
		}
	}()
	t.Cleanup(p.Stop)
	return p
}

func (p *PodTracker) poll(ctx context.Context) error {
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	l, err := kube.CoreV1().Pods(p.ns).List(cctx, metav1.ListOptions{LabelSelector: p.selector})
	if err != nil {
		return fmt.Errorf("list pods %s: %w", p.selector, err)
	}
	now := time.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	alive := map[string]bool{}
	for i := range l.Items {
		pod := &l.Items[i]
		uid := string(pod.UID)
		var life *PodLife
		for _, x := range p.lives[pod.Name] {
			if x.UID == uid {
				life = x
			}
		}
		if life == nil {
			life = &PodLife{UID: uid, Seen: now}
			p.lives[pod.Name] = append(p.lives[pod.Name], life)
		}
		if pod.DeletionTimestamp != nil {
			if life.Gone.IsZero() {
				life.Gone = now
			}
			continue
		}
		alive[uid] = true
		if life.Ready.IsZero() && PodReady(pod) {
			life.Ready = now
		}
	}
	for _, ls := range p.lives {
		for _, x := range ls {
			if !alive[x.UID] && x.Gone.IsZero() {
				x.Gone = now
			}
		}
	}
	return nil
}

// Stop ends tracking.
func (p *PodTracker) Stop() {
	p.cancel()
	<-p.done
}

// Lives returns a copy of every pod name's incarnations, oldest first.
func (p *PodTracker) Lives() map[string][]PodLife {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := map[string][]PodLife{}
	for name, ls := range p.lives {
		for _, x := range ls {
			out[name] = append(out[name], *x)
		}
	}
	return out
}

// ---- Sentinel logs ------------------------------------------------------------------------------------

// SentinelLogEvent is one event line of a Sentinel's log.
type SentinelLogEvent struct {
	Pod   string
	Event string // e.g. "+switch-master", "+sdown"
	// Master is true for an event about the monitor's primary itself ("<event> master <name> ..." or
	// "+switch-master <name> ..."), false for one about a replica or peer of it ("... @ <name> ...").
	Master bool
	Line   string
}

// SentinelLogEvents returns, in log order per Sentinel pod, the event lines about monitor name that the
// Sentinels logged since since.
func (d *Deployment) SentinelLogEvents(ctx context.Context, name string, since time.Time) ([]SentinelLogEvent, error) {
	var out []SentinelLogEvent
	st := metav1.NewTime(since.Add(-time.Second))
	for j := 0; j < d.Sentinels; j++ {
		pod := d.SentinelPod(j)
		raw, err := kube.CoreV1().Pods(d.NS).GetLogs(pod, &corev1.PodLogOptions{Container: "sentinel", SinceTime: &st}).DoRaw(ctx)
		if err != nil {
			return nil, fmt.Errorf("logs of %s: %w", pod, err)
		}
		for _, line := range strings.Split(string(raw), "\n") {
			// "1:X 29 Nov 2026 21:39:43.298 # +elected-leader master <name> <host> <port>"
			f := strings.Fields(line)
			if len(f) < 8 || (f[6][0] != '+' && f[6][0] != '-') {
				continue
			}
			ev := SentinelLogEvent{Pod: pod, Event: f[6], Line: strings.TrimSpace(line)}
			switch {
			case f[7] == name || (f[7] == "master" && len(f) > 8 && f[8] == name):
				ev.Master = true
			case !strings.Contains(line, " @ "+name+" "):
				continue
			}
			out = append(out, ev)
		}
	}
	return out, nil
}

// FailoverCount is what a set of Sentinel log events says about failovers of one monitor.
type FailoverCount struct {
	// Promotions is the most +switch-master any one Sentinel logged: each Sentinel logs one per promotion it
	// learns of, so the maximum counts promotions whichever Sentinels missed some.
	Promotions int
	// Attempts is the +try-failover lines of all Sentinels: each starts an epoch (sentinel.c
	// sentinelStartFailover), so an aborted attempt raises config-epoch without a promotion.
	Attempts int
}

// countFailovers counts the primary's failovers in evs (events about replicas and peers are skipped).
func countFailovers(evs []SentinelLogEvent) FailoverCount {
	switches := map[string]int{}
	var c FailoverCount
	for _, ev := range evs {
		if !ev.Master {
			continue
		}
		switch ev.Event {
		case "+switch-master":
			switches[ev.Pod]++
		case "+try-failover":
			c.Attempts++
		}
	}
	for _, n := range switches {
		c.Promotions = max(c.Promotions, n)
	}
	return c
}

// ---- the test -----------------------------------------------------------------------------------------

// TestServerConfigRollsDataPods: `helm upgrade` of charts/valkey with a changed server directive (config:
// tcp-keepalive, which lands in valkey.conf and so in the valkey.io/config-hash pod-template annotation)
// while a valkey-go Sentinel client on the host writes a distinct key every 10 ms. The instance controller
// must roll the data pods: every data pod replaced exactly once, one at a time, the replicas first and the
// primary last, after a planned Sentinel failover (SENTINEL FAILOVER: one +try-failover, one +switch-master,
// no +sdown/+odown of the primary) that happened before the old primary's pod was deleted. Every write the
// server acknowledged is on the new primary afterwards (failed writes during the handoff are allowed and
// reported), the new pods run the new setting, the Sentinel pods are untouched, CKQUORUM is OK on every
// Sentinel and the deployment converges with every pod Ready.
func TestServerConfigRollsDataPods(t *testing.T) {
	longTest(t, "internal/controllers/controller TestPlannedDataRollLosesNoAckedWrite (in the engine matrix too) and the handoffs of TestPrimaryPodDeleteAndEvictHandOff")
	maybeParallel(t)
	const (
		writeEvery  = 10 * time.Millisecond
		rollTimeout = 6 * time.Minute
		users       = `users: [{name: app, access: full, keys: ["*"]}]`
	)
	// access full, not readwrite: valkey-go's Sentinel client checks the node it is sent to with ROLE, which
	// is in @admin/@dangerous and so refused to a readwrite user
	d := Deploy(t, "roll", DeployOpts{DataExtra: users})
	in := d.I()
	ctx := t.Context()
	oldPrimary, err := in.SentinelPrimary(ctx)
	if err != nil {
		t.Fatal(err)
	}
	appPW := waitSecretKey(t, d, in.F+"-user-app", "password")
	configHashes := func() map[string]string {
		m := map[string]string{}
		for i := 0; i < in.Nodes(); i++ {
			name := contract.NodeStatefulSet(in.F, i)
			s, err := kube.AppsV1().StatefulSets(d.NS).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				t.Fatalf("statefulset %s: %v", name, err)
			}
			m[name] = s.Spec.Template.Annotations["valkey.io/config-hash"]
		}
		return m
	}
	hashesBefore := configHashes()
	dataBefore, err := Snapshot(ctx, d.NS, in.DataSelector())
	if err != nil {
		t.Fatal(err)
	}
	sentinelsBefore, err := Snapshot(ctx, d.NS, d.SentinelSelector())
	if err != nil {
		t.Fatal(err)
	}

	tracker := TrackPods(t, d.NS, in.DataSelector(), 250*time.Millisecond)
	watch := d.WatchSwitchMaster(t, in)
	w := in.StartSentinelWriter(t, "app", appPW, "roll:", writeEvery)
	Eventually(t, 30*time.Second, 100*time.Millisecond, "the writer is acknowledged 100 times before the upgrade", func(context.Context) (bool, error) {
		if n := w.Acked(); n < 100 {
			return false, fmt.Errorf("%d acknowledged writes; %s", n, w.Stats())
		}
		return true, nil
	})

	// ---- the server-config change
	in.Extra = users + "\nconfig: {tcp-keepalive: 120}"
	t0 := time.Now()
	d.Helm.Upgrade(in.Release, ChartPath("valkey"), in.Values(), HelmOpts{NoWait: true})
	for name, h := range configHashes() {
		if h == "" || h == hashesBefore[name] {
			t.Fatalf("the server-config change left %s's valkey.io/config-hash at %q: nothing would roll", name, h)
		}
	}

	// ---- wait for the roll: every data pod has a new incarnation that is Ready
	Eventually(t, rollTimeout, time.Second, "every data pod replaced and Ready", func(context.Context) (bool, error) {
		lives := tracker.Lives()
		for i := 0; i < in.Nodes(); i++ {
			ls := lives[in.Pod(i)]
			if len(ls) < 2 {
				return false, fmt.Errorf("%s not replaced yet", in.Pod(i))
			}
			if last := ls[len(ls)-1]; last.Ready.IsZero() || !last.Gone.IsZero() {
				return false, fmt.Errorf("%s (new) not Ready yet", in.Pod(i))
			}
		}
		return true, nil
	})
	rollTime := time.Since(t0)
	d.WaitConverged(t, 2*time.Minute, true)
	// keep writing a little against the converged deployment, then stop everything
	acked := w.Acked()
	Eventually(t, 30*time.Second, 100*time.Millisecond, "the writer is acknowledged 100 more times after the roll", func(context.Context) (bool, error) {
		if n := w.Acked(); n < acked+100 {
			return false, fmt.Errorf("%d acknowledged writes after the roll; %s", n-acked, w.Stats())
		}
		return true, nil
	})
	w.Stop()
	tracker.Stop()
	stats := w.Stats()
	t.Logf("roll: every data pod replaced and Ready %s after the upgrade (at %s); writer: %s; longest failed window from +%s after the upgrade",
		rollTime.Round(time.Millisecond), clock(t0), stats, rel(stats.FailWindowStart, t0))

	// ---- zero acknowledged writes lost: every acknowledged key is on the primary the Sentinels name now
	if stats.Acked == 0 || stats.Writes < int(time.Since(t0)/(10*writeEvery)) {
		t.Errorf("the writer barely wrote: %s", stats)
	}
	newPrimary, err := in.SentinelPrimary(ctx)
	if err != nil {
		t.Fatal(err)
	}
	missing, err := w.MissingOn(ctx, net.JoinHostPort(in.FQDN(newPrimary), strconv.Itoa(valkeyPort)), "app", appPW)
	if err != nil {
		t.Fatal(err)
	}
	if len(missing) > 0 {
		t.Errorf("%d of %d acknowledged writes are missing on the new primary %s (first: %v)", len(missing), stats.Acked, in.Pod(newPrimary), missing[:min(10, len(missing))])
	} else {
		t.Logf("all %d acknowledged writes are on the new primary %s (%d failed writes, longest failed window %s)",
			stats.Acked, in.Pod(newPrimary), stats.Failed, stats.LongestFailWindow.Round(time.Millisecond))
	}

	// ---- every data pod replaced exactly once, one at a time, the old primary last
	lives := tracker.Lives()
	var order []string
	for i := 0; i < in.Nodes(); i++ {
		pod := in.Pod(i)
		ls := lives[pod]
		var desc []string
		for _, l := range ls {
			desc = append(desc, fmt.Sprintf("uid %s seen +%s ready +%s gone +%s", l.UID, rel(l.Seen, t0), rel(l.Ready, t0), rel(l.Gone, t0)))
		}
		t.Logf("%s: %s", pod, strings.Join(desc, "; "))
		if len(ls) != 2 || ls[0].UID != dataBefore[pod].UID {
			t.Errorf("%s: want the original pod (uid %s) and exactly one replacement, saw %d incarnations", pod, dataBefore[pod].UID, len(ls))
		}
		order = append(order, pod)
	}
	sort.Slice(order, func(a, b int) bool { return lives[order[a]][0].Gone.Before(lives[order[b]][0].Gone) })
	t.Logf("replacement order (old pod terminating): %v; primary before the upgrade: %s", order, in.Pod(oldPrimary))
	if order[len(order)-1] != in.Pod(oldPrimary) {
		t.Errorf("the old primary %s was not replaced last: order %v", in.Pod(oldPrimary), order)
	}
	for a := 1; a < len(order); a++ {
		prev, next := lives[order[a-1]], lives[order[a]]
		if len(prev) < 2 || len(next) < 1 {
			continue
		}
		// one at a time: the next pod goes only once the previous replacement is Ready (same poll = allowed)
		if next[0].Gone.Before(prev[len(prev)-1].Ready) {
			t.Errorf("%s was deleted at +%s, before the replacement of %s was Ready (+%s): two data pods down at once",
				order[a], rel(next[0].Gone, t0), order[a-1], rel(prev[len(prev)-1].Ready, t0))
		}
	}

	// ---- a planned Sentinel failover, before the old primary's pod went
	sw, msg, ok := watch.First()
	if !ok {
		t.Fatalf("no +switch-master for %s during the roll; subscribers: %s", in.F, watch.Output())
	}
	f := strings.Fields(msg[strings.Index(msg, ": ")+2:])
	if len(f) != 5 || f[1] != in.FQDN(oldPrimary) {
		t.Errorf("+switch-master %q does not move the primary off %s", msg, in.FQDN(oldPrimary))
	}
	if newPrimary == oldPrimary || (len(f) == 5 && f[3] != in.FQDN(newPrimary)) {
		t.Errorf("after the roll the Sentinels name %s (before: %s; +switch-master %q)", in.Pod(newPrimary), in.Pod(oldPrimary), msg)
	}
	primaryGone := lives[in.Pod(oldPrimary)][0].Gone
	t.Logf("+switch-master at +%s (%s); old primary %s terminating at +%s; new primary %s", rel(sw, t0), msg, in.Pod(oldPrimary), rel(primaryGone, t0), in.Pod(newPrimary))
	for _, pod := range order {
		if pod != in.Pod(oldPrimary) && sw.Before(lives[pod][0].Gone) {
			t.Errorf("the primary was handed off (+switch-master at +%s) before replica %s was replaced (+%s): not replicas first",
				rel(sw, t0), pod, rel(lives[pod][0].Gone, t0))
		}
	}
	if primaryGone.IsZero() || !sw.Before(primaryGone) {
		t.Errorf("the primary moved (+switch-master at +%s) only after its pod %s was deleted (+%s): a crash-style failover, not a handoff",
			rel(sw, t0), in.Pod(oldPrimary), rel(primaryGone, t0))
	}
	evs, err := d.SentinelLogEvents(ctx, in.F, t0)
	if err != nil {
		t.Fatal(err)
	}
	tries, switches := 0, 0
	for _, ev := range evs {
		switch ev.Event {
		case "+try-failover", "+switch-master", "+failover-end", "+failover-end-for-timeout", "+slave-reconf-sent",
			"+slave-reconf-done", "+fix-slave-config", "+sdown", "+odown", "-failover-abort-no-good-slave", "-failover-abort-not-elected":
			t.Logf("sentinel log %s: %s", ev.Pod, ev.Line)
		}
		switch {
		case ev.Master && ev.Event == "+try-failover":
			tries++
		case ev.Master && ev.Event == "+switch-master":
			switches++
		case ev.Master && (ev.Event == "+sdown" || ev.Event == "+odown"):
			t.Errorf("Sentinel saw the primary down during a planned roll: %s: %s", ev.Pod, ev.Line)
		}
	}
	if tries != 1 || switches != d.Sentinels {
		t.Errorf("want one failover (1 +try-failover, one +switch-master per Sentinel = %d), Sentinel logs show %d +try-failover and %d +switch-master",
			d.Sentinels, tries, switches)
	}

	// ---- the new setting is live, the Sentinels untouched, quorum healthy, everything Ready
	for i := 0; i < in.Nodes(); i++ {
		out, err := in.Op(ctx, in.Pod(i), "config", "get", "tcp-keepalive")
		if f := strings.Fields(out); err != nil || len(f) != 2 || f[1] != "120" {
			t.Errorf("%s: CONFIG GET tcp-keepalive = %q (%v), want 120", in.Pod(i), out, err)
		}
	}
	sentinelsAfter, err := Snapshot(ctx, d.NS, d.SentinelSelector())
	if err != nil {
		t.Fatal(err)
	}
	if diff := SnapshotDiff(sentinelsBefore, sentinelsAfter); diff != "" {
		t.Errorf("a data-side config change touched the Sentinel pods: %s", diff)
	}
	for j := 0; j < d.Sentinels; j++ {
		if err := d.CKQuorum(ctx, j, in.F); err != nil {
			t.Error(err)
		}
	}
	d.WaitConverged(t, time.Minute, true)
	WaitPodsReady(t, d.NS, in.DataSelector(), in.Nodes(), 10*time.Second)
	WaitPodsReady(t, d.NS, d.SentinelSelector(), d.Sentinels, 10*time.Second)
	for _, reason := range []string{"RollingPod", "PrimaryHandedOff", "RollDeferred"} {
		es, err := FindEvents(ctx, d.NS, reason, "")
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range es {
			t.Logf("event %s %s: %s (count %d)", e.Type, e.Reason, e.Message, e.Count)
		}
	}
}

// rel formats at relative to t0 ("-" when at is zero).
func rel(at, t0 time.Time) string {
	if at.IsZero() {
		return "-"
	}
	return at.Sub(t0).Round(time.Millisecond).String()
}
