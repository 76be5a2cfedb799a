package dnscache

import (
	"context"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// upstream is a real DNS server on loopback that behaves like a cluster DNS Service with one dead backend:
// each new flow (client address) is pinned to a backend for as long as it lives, as kube-proxy's conntrack does,
// and the flows pinned to the dead one get no reply. dead(n) decides for the n-th new flow.
type upstream struct {
	addr string
	mu   sync.Mutex
	flow map[string]bool // client address -> pinned to the dead backend
	n    int
	dead func(n int) bool
	ip   string // A record answered for every name but nx.test.
	srv  *dns.Server
}

func startUpstream(t *testing.T, dead func(n int) bool) *upstream {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	u := &upstream{addr: pc.LocalAddr().String(), flow: map[string]bool{}, dead: dead, ip: "10.1.2.3"}
	u.srv = &dns.Server{PacketConn: pc, Handler: dns.HandlerFunc(u.serve)}
	go func() { _ = u.srv.ActivateAndServe() }()
	t.Cleanup(func() { _ = u.srv.Shutdown() })
	return u
}

func (u *upstream) serve(w dns.ResponseWriter, req *dns.Msg) {
	u.mu.Lock()
	from := w.RemoteAddr().String()
	d, seen := u.flow[from]
	if !seen {
		d = u.dead(u.n)
		u.n++
		u.flow[from] = d
	}
	ip := u.ip
	u.mu.Unlock()
	if d {
		return // the dead backend: no reply, ever, on this flow
	}
	m := new(dns.Msg)
	m.SetReply(req)
	q := req.Question[0]
	switch {
	case q.Name == "nx.test.":
		m.Rcode = dns.RcodeNameError
		m.Ns = []dns.RR{&dns.SOA{Hdr: dns.RR_Header{Name: "test.", Rrtype: dns.TypeSOA, Class: dns.ClassINET, Ttl: 5},
			Ns: "ns.test.", Mbox: "h.test.", Serial: 1, Refresh: 1, Retry: 1, Expire: 1, Minttl: 5}}
	case q.Qtype == dns.TypeA:
		m.Answer = []dns.RR{&dns.A{Hdr: dns.RR_Header{Name: q.Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 1}, A: net.ParseIP(ip)}}
	}
	_ = w.WriteMsg(m)
}

func (u *upstream) setIP(ip string)          { u.mu.Lock(); u.ip = ip; u.mu.Unlock() }
func (u *upstream) setDead(f func(int) bool) { u.mu.Lock(); u.dead = f; u.mu.Unlock() }

func startCache(t *testing.T, up string) (*Cache, string) {
	t.Helper()
	// Run needs a fixed address: take a free UDP port first. Run listens on UDP and TCP, and that TCP port may
	// be taken by another process meanwhile, so a listen error is retried on another port (never waited on
	// again: the cleanup only waits for a Run that started).
	var lastErr error
	for attempt := 0; attempt < 5; attempt++ {
		c, err := New(Config{Listen: "127.0.0.1:0", Upstream: up, TryEvery: 100 * time.Millisecond, StaleAfter: 300 * time.Millisecond, Deadline: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		pc, err := net.ListenPacket("udp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		c.cfg.Listen = pc.LocalAddr().String()
		pc.Close()
		ctx, cancel := context.WithCancel(context.Background())
		ready := make(chan struct{})
		done := make(chan error, 1)
		go func() { done <- c.Run(ctx, ready) }()
		select {
		case <-ready:
			t.Cleanup(func() { cancel(); <-done })
			return c, c.cfg.Listen
		case lastErr = <-done:
			cancel()
		}
	}
	t.Fatalf("the cache did not start on 5 free ports: %v", lastErr)
	return nil, ""
}

// lookup asks addr for name's A record over UDP, as a stub resolver does (one socket, one flow).
func lookup(t *testing.T, addr, name string) (*dns.Msg, time.Duration) {
	t.Helper()
	q := new(dns.Msg)
	q.SetQuestion(name, dns.TypeA)
	start := time.Now()
	m, _, err := (&dns.Client{Net: "udp", Timeout: 5 * time.Second}).Exchange(q, addr)
	if err != nil {
		t.Fatalf("lookup %s at %s: %v", name, addr, err)
	}
	return m, time.Since(start)
}

// TestAnswersWhileEveryOtherUpstreamFlowIsDead: with every other new flow to the upstream pinned to a dead
// backend (the first of each lookup included), every lookup of a new name is answered well before the cache's
// 1 s Deadline (a retry on a new flow after TryEvery, 100 ms, about 0.1-0.4 s measured on 2 busy cores; the bound
// is 800 ms so that a loaded machine does not fail it, while waiting for the dead flow would take the Deadline),
// where a stub resolver that retries on its own socket (glibc) waits timeout x attempts and fails.
func TestAnswersWhileEveryOtherUpstreamFlowIsDead(t *testing.T) {
	u := startUpstream(t, func(n int) bool { return n%2 == 0 })
	// the stub's way: one flow, pinned to the dead backend, no answer
	q := new(dns.Msg)
	q.SetQuestion("direct.test.", dns.TypeA)
	start := time.Now()
	if _, _, err := (&dns.Client{Net: "udp", Timeout: 500 * time.Millisecond}).Exchange(q, u.addr); err == nil {
		t.Fatalf("the first flow to the upstream was answered: the dead backend is not simulated")
	}
	t.Logf("a lookup on one flow pinned to the dead backend: no answer after %s", time.Since(start).Round(time.Millisecond))

	_, addr := startCache(t, u.addr)
	var worst time.Duration
	for i := 0; i < 20; i++ {
		name := "n" + string(rune('a'+i)) + ".test."
		m, took := lookup(t, addr, name)
		if m.Rcode != dns.RcodeSuccess || len(m.Answer) != 1 {
			t.Fatalf("%s: rcode %s, %d answers", name, dns.RcodeToString[m.Rcode], len(m.Answer))
		}
		if took > worst {
			worst = took
		}
	}
	if bound := 800 * time.Millisecond; worst > bound {
		t.Errorf("slowest lookup took %s, want at most %s", worst, bound)
	}
	t.Logf("20 new names through the cache: slowest %s", worst.Round(time.Millisecond))
}

// TestServesStaleWhenTheUpstreamIsDead: once every upstream flow is dead, an expired answer is served after
// StaleAfter (TTL 5), not SERVFAIL after the deadline; a fresh answer replaces it once the upstream is back.
func TestServesStaleWhenTheUpstreamIsDead(t *testing.T) {
	u := startUpstream(t, func(int) bool { return false })
	c, addr := startCache(t, u.addr)
	if m, _ := lookup(t, addr, "p.test."); len(m.Answer) != 1 {
		t.Fatalf("first lookup: %v", m)
	}
	u.setDead(func(int) bool { return true })
	u.setIP("10.9.9.9")
	c.mu.Lock()
	c.now = func() time.Time { return time.Now().Add(1100 * time.Millisecond) } // the answer's TTL (1 s) ran out
	c.mu.Unlock()
	m, took := lookup(t, addr, "p.test.")
	if len(m.Answer) != 1 || m.Answer[0].(*dns.A).A.String() != "10.1.2.3" || m.Answer[0].Header().Ttl != 5 {
		t.Fatalf("after expiry with the upstream dead: %v, want the stale 10.1.2.3 with TTL 5", m.Answer)
	}
	if took > 500*time.Millisecond {
		t.Errorf("stale answer after %s, want about StaleAfter (300 ms)", took)
	}
	if s := c.Stats(); s.Stale != 1 {
		t.Errorf("stats %+v, want 1 stale", s)
	}
	u.setDead(func(int) bool { return false })
	deadline := time.Now().Add(3 * time.Second)
	for {
		m, _ := lookup(t, addr, "p.test.")
		if len(m.Answer) == 1 && m.Answer[0].(*dns.A).A.String() == "10.9.9.9" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the cache still answers %v 3 s after the upstream came back", m.Answer)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestNothingCachedAndUpstreamDead: SERVFAIL after the deadline, not a hang.
func TestNothingCachedAndUpstreamDead(t *testing.T) {
	u := startUpstream(t, func(int) bool { return true })
	_, addr := startCache(t, u.addr)
	m, took := lookup(t, addr, "x.test.")
	if m.Rcode != dns.RcodeServerFailure {
		t.Fatalf("rcode %s, want SERVFAIL", dns.RcodeToString[m.Rcode])
	}
	if took < 900*time.Millisecond || took > 1500*time.Millisecond {
		t.Errorf("SERVFAIL after %s, want about the deadline (1 s)", took)
	}
}

// TestNegativeAnswersCached: NXDOMAIN passes through and is cached for the SOA's TTL.
func TestNegativeAnswersCached(t *testing.T) {
	u := startUpstream(t, func(int) bool { return false })
	c, addr := startCache(t, u.addr)
	for i := 0; i < 2; i++ {
		if m, _ := lookup(t, addr, "nx.test."); m.Rcode != dns.RcodeNameError {
			t.Fatalf("lookup %d: rcode %s, want NXDOMAIN", i, dns.RcodeToString[m.Rcode])
		}
	}
	if s := c.Stats(); s.Fresh != 1 || s.Upstream != 1 {
		t.Errorf("stats %+v, want 1 upstream and 1 from the cache", s)
	}
}

func TestConfigErrors(t *testing.T) {
	for _, tc := range []struct {
		cfg  Config
		want string
	}{
		{Config{Listen: "127.0.0.1", Upstream: "10.96.0.10:53"}, `listen address "127.0.0.1"`},
		{Config{Listen: "127.0.0.1:53", Upstream: ""}, `upstream ""`},
		{Config{Listen: "127.0.0.1:53", Upstream: "10.96.0.10:53", StaleAfter: 3 * time.Second, Deadline: time.Second}, "stale-after 3s is longer than the deadline 1s"},
	} {
		err := tc.cfg.Validate()
		if err == nil || !contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want %q", tc.cfg, err, tc.want)
		}
	}
	for in, want := range map[string]string{"10.96.0.10": "10.96.0.10:53", "10.96.0.10:5353": "10.96.0.10:5353", "fd00::a": "[fd00::a]:53"} {
		if got, err := ParseUpstream(in); err != nil || got != want {
			t.Errorf("ParseUpstream(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := ParseUpstream(""); err != ErrNoUpstream {
		t.Errorf("ParseUpstream(\"\") = %v", err)
	}
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }
