//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/valkey-io/valkey-go"
)

// ---- which nodes take writes: a direct probe of every data node from the host -------------------------------

// ProbeRound is one round of the WriteProbe: for every data node, its ROLE and whether it acknowledged a probe
// write.
type ProbeRound struct {
	At       time.Time
	Role     []string // "master", "slave", or "down" (no answer within the round's timeout)
	Writable []bool   // acknowledged SET __valkey-ha-probe:<node> (tried only on nodes that report master)
}

// Writers returns the indexes of the nodes that acknowledged the probe write in this round.
func (r ProbeRound) Writers() []int {
	var out []int
	for i, w := range r.Writable {
		if w {
			out = append(out, i)
		}
	}
	return out
}

// WriteProbe connects to every data node directly (its FQDN, resolved by the cluster DNS, as a client on the
// primary's side of any partition would) and, every interval, asks each node for ROLE and writes one probe key
// on every node that says master. It is how the tests see split brain: two nodes acknowledging writes in the
// same round is a two-primary window, whatever the Sentinels or the labels say.
type WriteProbe struct {
	in     *Instance
	user   string
	pw     string
	dialer *net.Dialer
	cancel context.CancelFunc
	done   chan struct{}

	mu      sync.Mutex
	clients []valkey.Client
	rounds  []ProbeRound
}

// StartWriteProbe starts probing every data node of in as user every interval until Stop.
func (in *Instance) StartWriteProbe(t testing.TB, user, password string, interval time.Duration) *WriteProbe {
	t.Helper()
	dialer, err := ClusterDialer(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	p := &WriteProbe{in: in, user: user, pw: password, dialer: dialer, cancel: cancel, done: make(chan struct{}),
		clients: make([]valkey.Client, in.Nodes())}
	go func() {
		defer close(p.done)
		tick := time.NewTicker(interval)
		defer tick.Stop()
		for n := 0; ; n++ {
			p.round(ctx, n)
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	t.Cleanup(p.Stop)
	return p
}

func (p *WriteProbe) client(i int) (valkey.Client, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.clients[i] != nil {
		return p.clients[i], nil
	}
	opt := clusterClientOption(p.dialer, p.user, p.pw, net.JoinHostPort(p.in.FQDN(i), strconv.Itoa(valkeyPort)))
	opt.ForceSingleClient = true
	opt.ConnWriteTimeout = 500 * time.Millisecond
	c, err := valkey.NewClient(opt)
	if err != nil {
		return nil, err
	}
	p.clients[i] = c
	return c, nil
}

func (p *WriteProbe) round(ctx context.Context, n int) {
	r := ProbeRound{At: time.Now(), Role: make([]string, p.in.Nodes()), Writable: make([]bool, p.in.Nodes())}
	var wg sync.WaitGroup
	for i := 0; i < p.in.Nodes(); i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			r.Role[i] = "down"
			c, err := p.client(i)
			if err != nil {
				return
			}
			cctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
			defer cancel()
			role, err := c.Do(cctx, c.B().Role().Build()).ToArray()
			if err != nil || len(role) == 0 {
				return
			}
			r.Role[i], _ = role[0].ToString()
			if r.Role[i] != "master" {
				return
			}
			err = c.Do(cctx, c.B().Set().Key(fmt.Sprintf("__valkey-ha-probe:%d", i)).Value(strconv.Itoa(n)).Build()).Error()
			r.Writable[i] = err == nil
		}(i)
	}
	wg.Wait()
	if ctx.Err() != nil {
		return
	}
	p.mu.Lock()
	p.rounds = append(p.rounds, r)
	p.mu.Unlock()
}

// Stop ends probing and closes the clients.
func (p *WriteProbe) Stop() {
	p.cancel()
	<-p.done
	p.mu.Lock()
	defer p.mu.Unlock()
	for i, c := range p.clients {
		if c != nil {
			c.Close()
			p.clients[i] = nil
		}
	}
}

// Rounds returns a copy of the rounds so far.
func (p *WriteProbe) Rounds() []ProbeRound {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]ProbeRound(nil), p.rounds...)
}

// ProbeSummary is what the rounds say about primaries after a fault.
type ProbeSummary struct {
	// TwoWritable is the total time in which two or more nodes acknowledged probe writes (each round counts
	// until the next one); TwoWritableRounds is the number of such rounds.
	TwoWritable       time.Duration
	TwoWritableRounds int
	// SingleWritableAfter is the time from the fault to the first round after which every round had exactly
	// one writable node, the same one (-1 when the rounds never settled).
	SingleWritableAfter time.Duration
	// WritableUntil maps a node index to the time, after the fault, of the last round in which it acknowledged
	// a probe write while it was not the node every later round settled on.
	WritableUntil map[int]time.Duration
	// NoPrimary is the longest time without a writable node: from the last round that had one to the next round
	// that had one again (each primary change, or a loss of the primary, is such a gap).
	NoPrimary time.Duration
	Rounds    int
}

// Summarize analyses the rounds from the fault at from on.
func (p *WriteProbe) Summarize(from time.Time) ProbeSummary {
	rs := p.Rounds()
	s := ProbeSummary{SingleWritableAfter: -1, WritableUntil: map[int]time.Duration{}}
	var after []ProbeRound
	for _, r := range rs {
		if !r.At.Before(from) {
			after = append(after, r)
		}
	}
	s.Rounds = len(after)
	settled := -1
	for k := len(after) - 1; k >= 0; k-- {
		w := after[k].Writers()
		if len(w) != 1 || (settled >= 0 && w[0] != settled) {
			if k+1 < len(after) {
				s.SingleWritableAfter = after[k+1].At.Sub(from)
			}
			break
		}
		settled = w[0]
		if k == 0 {
			s.SingleWritableAfter = 0
		}
	}
	lastWritable := from // a primary lost at the fault counts from the fault
	for _, r := range after {
		if len(r.Writers()) == 0 {
			continue
		}
		if r.At.Sub(lastWritable) > s.NoPrimary {
			s.NoPrimary = r.At.Sub(lastWritable)
		}
		lastWritable = r.At
	}
	for k, r := range after {
		w := r.Writers()
		if len(w) >= 2 {
			s.TwoWritableRounds++
			if k+1 < len(after) {
				s.TwoWritable += after[k+1].At.Sub(r.At)
			}
		}
		for _, i := range w {
			if i != settled {
				s.WritableUntil[i] = r.At.Sub(from)
			}
		}
	}
	return s
}

// String is the summary on one line.
func (s ProbeSummary) String() string {
	var until []string
	for i, d := range s.WritableUntil {
		until = append(until, fmt.Sprintf("node %d until +%s", i, d.Round(time.Millisecond)))
	}
	single := "never"
	if s.SingleWritableAfter >= 0 {
		single = "+" + s.SingleWritableAfter.Round(time.Millisecond).String()
	}
	return fmt.Sprintf("%d rounds; single writable primary from %s; longest time without one %s; two writable primaries for %s (%d rounds); other writable nodes: %s",
		s.Rounds, single, s.NoPrimary.Round(time.Millisecond), s.TwoWritable.Round(time.Millisecond), s.TwoWritableRounds, strings.Join(until, ", "))
}
