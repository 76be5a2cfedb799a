// Package dnscache is the DNS cache that runs beside valkey-sentinel and valkey-server in their pods
// (`valkey-sentinel-ctl dns-cache`, listening on 127.0.0.1:53, the pod's only nameserver).
//
// Why: both servers resolve host names with blocking getaddrinfo calls on their single event-loop thread
// (Sentinel at every reconnect and INFO with resolve-hostnames, a replica at every connect to its primary).
// The cluster DNS Service balances per UDP flow and glibc retries on the same socket (the same flow), so while a
// dead node's CoreDNS replica is still an endpoint of the Service (about 50 s after the node died) a lookup that
// lands on it blocks for timeout x attempts (at least 1 s: glibc counts in whole seconds), and Sentinel, stalled
// for more than 2 s, enters TILT mode for 30 s (RELIABILITY.md, "Found" 3).
//
// The cache answers every question within a bound: a fresh cached answer at once; otherwise it asks the upstream
// on a new socket (a new source port: the Service picks a backend again) every TryEvery until one answers, and
// when none answered within StaleAfter and an expired answer is cached, it serves that (while the question goes
// on in the background and refreshes the cache); with nothing cached it answers SERVFAIL after Deadline.
package dnscache

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/miekg/dns"
)

// Config configures a Cache.
type Config struct {
	// Listen is the address served over UDP and TCP (host:port), e.g. 127.0.0.1:53.
	Listen string
	// Upstream is the DNS server asked (host:port), the cluster DNS Service.
	Upstream string
	// TryEvery is how long one upstream question waits before another is sent on a new socket (both stay
	// open: the first answer wins). Default 100 ms.
	TryEvery time.Duration
	// StaleAfter is how long a question whose cached answer expired waits for the upstream before that
	// expired answer is served. Default 50 ms: a healthy cluster DNS answers within a few milliseconds, and
	// Sentinel makes several lookups in one pass of its timer, which must stay under 2 s (TILT): at 400 ms
	// four lookups in one pass put a Sentinel into TILT mode on the local cluster.
	StaleAfter time.Duration
	// Deadline bounds the upstream questions of one lookup (SERVFAIL after it when nothing is cached).
	// Default 900 ms: below the pod resolver's 1 s timeout, so that a SERVFAIL sends it on to its second
	// nameserver (the upstream itself) at once.
	Deadline time.Duration
	// MaxTTL caps how long an answer is cached (a pod's record changes when the pod is replaced).
	// Default 30 s. Negative answers (NXDOMAIN, NODATA) are cached for the SOA's TTL, at most MaxTTL.
	MaxTTL time.Duration
	// MaxStale is how long after its expiry an answer may still be served when the upstream does not answer.
	// Default 10 min.
	MaxStale time.Duration
	// Log receives the cache's log lines (nil: slog.Default()).
	Log *slog.Logger
}

// Validate checks the configuration and fills the defaults.
func (c *Config) Validate() error {
	if _, _, err := net.SplitHostPort(c.Listen); err != nil {
		return fmt.Errorf("dns-cache: listen address %q: want host:port: %w", c.Listen, err)
	}
	if _, _, err := net.SplitHostPort(c.Upstream); err != nil {
		return fmt.Errorf("dns-cache: upstream %q: want host:port (the cluster DNS Service, e.g. 10.96.0.10:53): %w", c.Upstream, err)
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&c.TryEvery, 100*time.Millisecond)
	def(&c.StaleAfter, 50*time.Millisecond)
	def(&c.Deadline, 900*time.Millisecond)
	def(&c.MaxTTL, 30*time.Second)
	def(&c.MaxStale, 10*time.Minute)
	if c.StaleAfter > c.Deadline {
		return fmt.Errorf("dns-cache: stale-after %s is longer than the deadline %s", c.StaleAfter, c.Deadline)
	}
	if c.Log == nil {
		c.Log = slog.Default()
	}
	return nil
}

// Cache is a caching DNS forwarder. Use New, then Run.
type Cache struct {
	cfg Config

	mu       sync.Mutex
	now      func() time.Time // the clock (tests move it); read under mu
	entries  map[key]*entry
	inflight map[key]*flight
	stats    Stats
}

// Stats counts how questions were answered since the start.
type Stats struct {
	Fresh, Upstream, Stale, Failed int64
}

type key struct {
	name          string // lower case, fully qualified
	qtype, qclass uint16
}

type entry struct {
	msg     *dns.Msg // the upstream reply (Id and question of the first asker)
	stored  time.Time
	expires time.Time
}

// flight is one lookup going to the upstream; askers wait on done.
type flight struct {
	done chan struct{}
	msg  *dns.Msg // nil: no answer within Deadline
}

// New returns a Cache for cfg (validated).
func New(cfg Config) (*Cache, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Cache{cfg: cfg, now: time.Now, entries: map[key]*entry{}, inflight: map[key]*flight{}}, nil
}

// Stats returns the counters.
func (c *Cache) Stats() Stats {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stats
}

// Run serves cfg.Listen over UDP and TCP until ctx ends; ready (if not nil) is closed once both listen.
func (c *Cache) Run(ctx context.Context, ready chan<- struct{}) error {
	pc, err := net.ListenPacket("udp", c.cfg.Listen)
	if err != nil {
		return fmt.Errorf("dns-cache: listen udp %s: %w", c.cfg.Listen, err)
	}
	ln, err := net.Listen("tcp", c.cfg.Listen)
	if err != nil {
		pc.Close()
		return fmt.Errorf("dns-cache: listen tcp %s: %w", c.cfg.Listen, err)
	}
	h := dns.HandlerFunc(c.serve)
	servers := []*dns.Server{{PacketConn: pc, Handler: h}, {Listener: ln, Handler: h}}
	errs := make(chan error, len(servers))
	for _, s := range servers {
		go func(s *dns.Server) { errs <- s.ActivateAndServe() }(s)
	}
	c.cfg.Log.Info("dns-cache: serving", "listen", c.cfg.Listen, "upstream", c.cfg.Upstream,
		"tryEvery", c.cfg.TryEvery.String(), "staleAfter", c.cfg.StaleAfter.String(), "deadline", c.cfg.Deadline.String())
	if ready != nil {
		close(ready)
	}
	tick := time.NewTicker(time.Minute)
	defer tick.Stop()
	var last Stats
	for {
		select {
		case <-ctx.Done():
			for _, s := range servers {
				_ = s.Shutdown()
			}
			return nil
		case err := <-errs:
			for _, s := range servers {
				_ = s.Shutdown()
			}
			return fmt.Errorf("dns-cache: serve %s: %w", c.cfg.Listen, err)
		case <-tick.C:
			if s := c.Stats(); s.Stale != last.Stale || s.Failed != last.Failed {
				c.cfg.Log.Warn("dns-cache: the upstream did not answer in time", "upstream", c.cfg.Upstream,
					"staleServed", s.Stale-last.Stale, "failed", s.Failed-last.Failed, "lastMinute", true)
				last = s
			}
		}
	}
}

// serve answers one request.
func (c *Cache) serve(w dns.ResponseWriter, req *dns.Msg) {
	reply := c.Answer(req)
	if _, udp := w.RemoteAddr().(*net.UDPAddr); udp {
		size := dns.MinMsgSize
		if o := req.IsEdns0(); o != nil {
			size = int(o.UDPSize())
		}
		reply.Truncate(size)
	}
	_ = w.WriteMsg(reply)
}

// Answer returns the reply to req (never nil): from the cache, from the upstream, a stale cached answer, or
// SERVFAIL (see the package comment for the bounds).
func (c *Cache) Answer(req *dns.Msg) *dns.Msg {
	if req.Opcode != dns.OpcodeQuery || len(req.Question) != 1 {
		m := new(dns.Msg)
		m.SetRcode(req, dns.RcodeNotImplemented)
		return m
	}
	q := req.Question[0]
	k := key{strings.ToLower(dns.Fqdn(q.Name)), q.Qtype, q.Qclass}
	c.mu.Lock()
	now := c.now()
	e := c.entries[k]
	if e != nil && now.Before(e.expires) {
		c.stats.Fresh++
		c.mu.Unlock()
		return fromCache(req, e, now, false)
	}
	f := c.inflight[k]
	if f == nil {
		f = &flight{done: make(chan struct{})}
		c.inflight[k] = f
		go c.fly(k, req, f)
	}
	c.mu.Unlock()

	wait := c.cfg.Deadline
	if e != nil && now.Sub(e.expires) < c.cfg.MaxStale {
		wait = c.cfg.StaleAfter
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-f.done:
		if f.msg != nil {
			c.count(func(s *Stats) { s.Upstream++ })
			return withID(req, f.msg)
		}
	case <-t.C:
	}
	if e != nil && now.Sub(e.expires) < c.cfg.MaxStale {
		c.count(func(s *Stats) { s.Stale++ })
		return fromCache(req, e, now, true)
	}
	c.count(func(s *Stats) { s.Failed++ })
	m := new(dns.Msg)
	m.SetRcode(req, dns.RcodeServerFailure)
	m.RecursionAvailable = true
	return m
}

func (c *Cache) count(f func(*Stats)) {
	c.mu.Lock()
	f(&c.stats)
	c.mu.Unlock()
}

// fly asks the upstream for k (the question of req) and stores the answer.
func (c *Cache) fly(k key, req *dns.Msg, f *flight) {
	q := new(dns.Msg)
	q.SetQuestion(k.name, k.qtype)
	q.Question[0].Qclass = k.qclass
	q.RecursionDesired = req.RecursionDesired
	if o := req.IsEdns0(); o != nil {
		q.SetEdns0(o.UDPSize(), o.Do())
	}
	msg := c.ask(q)
	c.mu.Lock()
	now := c.now()
	if msg != nil {
		if ttl, ok := cacheTTL(msg, c.cfg.MaxTTL); ok {
			c.entries[k] = &entry{msg: msg, stored: now, expires: now.Add(ttl)}
		}
	}
	f.msg = msg
	delete(c.inflight, k)
	c.mu.Unlock()
	close(f.done)
}

// ask sends q to the upstream on a new UDP socket every TryEvery until one reply comes (a truncated reply is
// asked again over TCP) or Deadline passes (nil). SERVFAIL and REFUSED replies count as no reply.
func (c *Cache) ask(q *dns.Msg) *dns.Msg {
	ctx, cancel := context.WithTimeout(context.Background(), c.cfg.Deadline)
	defer cancel()
	replies := make(chan *dns.Msg, 1)
	try := func(network string) {
		cl := &dns.Client{Net: network, Timeout: c.cfg.Deadline}
		m, _, err := cl.ExchangeContext(ctx, q.Copy(), c.cfg.Upstream)
		if err != nil || m == nil || m.Rcode == dns.RcodeServerFailure || m.Rcode == dns.RcodeRefused {
			return
		}
		if m.Truncated && network == "udp" {
			go func() {
				cl := &dns.Client{Net: "tcp", Timeout: c.cfg.Deadline}
				if m, _, err := cl.ExchangeContext(ctx, q.Copy(), c.cfg.Upstream); err == nil && m != nil && !m.Truncated {
					select {
					case replies <- m:
					default:
					}
				}
			}()
			return
		}
		select {
		case replies <- m:
		default:
		}
	}
	tick := time.NewTicker(c.cfg.TryEvery)
	defer tick.Stop()
	go try("udp")
	for {
		select {
		case m := <-replies:
			return m
		case <-tick.C:
			go try("udp")
		case <-ctx.Done():
			return nil
		}
	}
}

// cacheTTL is how long msg may be cached: the smallest TTL of its answer records, or for a negative answer
// (NXDOMAIN, or no answer records) the SOA's; at most maxTTL. ok is false for replies not to cache.
func cacheTTL(msg *dns.Msg, maxTTL time.Duration) (time.Duration, bool) {
	if msg.Rcode != dns.RcodeSuccess && msg.Rcode != dns.RcodeNameError {
		return 0, false
	}
	ttl := maxTTL
	found := false
	min := func(s uint32) {
		if d := time.Duration(s) * time.Second; d < ttl {
			ttl = d
		}
		found = true
	}
	if msg.Rcode == dns.RcodeSuccess && len(msg.Answer) > 0 {
		for _, rr := range msg.Answer {
			min(rr.Header().Ttl)
		}
	} else {
		for _, rr := range msg.Ns {
			if soa, ok := rr.(*dns.SOA); ok {
				min(soa.Hdr.Ttl)
				min(soa.Minttl)
			}
		}
	}
	if !found || ttl <= 0 {
		return 0, false
	}
	return ttl, true
}

// fromCache returns e's reply for req with its TTLs lowered by the time it spent in the cache (stale: 5 s).
func fromCache(req *dns.Msg, e *entry, now time.Time, stale bool) *dns.Msg {
	m := withID(req, e.msg)
	age := uint32(now.Sub(e.stored) / time.Second)
	for _, sec := range [][]dns.RR{m.Answer, m.Ns, m.Extra} {
		for _, rr := range sec {
			h := rr.Header()
			if h.Rrtype == dns.TypeOPT {
				continue
			}
			switch {
			case stale:
				h.Ttl = 5
			case h.Ttl > age:
				h.Ttl -= age
			default:
				h.Ttl = 1
			}
		}
	}
	return m
}

// withID returns a copy of reply answering req (its Id and question as asked, case included).
func withID(req, reply *dns.Msg) *dns.Msg {
	m := reply.Copy()
	m.Id = req.Id
	m.Question = append([]dns.Question(nil), req.Question...)
	m.Response = true
	m.RecursionDesired = req.RecursionDesired
	return m
}

// ErrNoUpstream is returned by ParseUpstream for an empty address.
var ErrNoUpstream = errors.New("dns-cache: no upstream")

// ParseUpstream returns addr as host:port (port 53 when none is given).
func ParseUpstream(addr string) (string, error) {
	if addr == "" {
		return "", ErrNoUpstream
	}
	if ip := net.ParseIP(strings.Trim(addr, "[]")); ip != nil {
		return net.JoinHostPort(ip.String(), "53"), nil
	}
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return "", fmt.Errorf("dns-cache: upstream %q: want IP or IP:port: %w", addr, err)
	}
	return addr, nil
}
