package migrate

import (
	"context"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/valkey-ha/valkey-ha/internal/valkeyapi/valkey"
)

// The backoff between failed attempts to reach the source (Observer): doubling from MinSourceBackoff to
// MaxSourceBackoff.
const (
	MinSourceBackoff = 2 * time.Second
	MaxSourceBackoff = time.Minute
)

// Observer observes a migration over kept connections, for a caller that observes every few seconds (the
// instance controller): the source is another team's primary, and a dial per observation is a connection
// churn there (a connection, an AUTH and often a log line every pass). It keeps one connection to the source
// and one to node 0 between calls and re-dials only after a failure: a command that failed closes its
// connection; a failed dial or command towards the source is tried again only after a backoff that doubles
// from MinSourceBackoff to MaxSourceBackoff (the last failure is reported meanwhile), and at once when the
// source's address or credentials change. Once node 0 is a primary (Switched), the source is no longer asked
// and its connection is closed. Safe for concurrent use; Close releases the connections.
type Observer struct {
	mu   sync.Mutex
	src  kept
	node kept
	// srcFail is the source's last failed answer, reported until retryAt; backoff the current wait
	srcFail SourceView
	retryAt time.Time
	backoff time.Duration
	dials   int
	now     func() time.Time
}

// kept is one kept connection and what it was dialled with.
type kept struct {
	c   *valkey.Client
	key string
}

// NewObserver returns an Observer with no connection yet.
func NewObserver() *Observer { return &Observer{now: time.Now} }

// SourceDials is how many times the Observer dialled the source (successfully or not).
func (ob *Observer) SourceDials() int {
	ob.mu.Lock()
	defer ob.mu.Unlock()
	return ob.dials
}

// Close closes the kept connections; the Observer may be used again (it re-dials).
func (ob *Observer) Close() {
	ob.mu.Lock()
	defer ob.mu.Unlock()
	ob.src.close()
	ob.node.close()
}

func (k *kept) close() {
	if k.c != nil {
		go k.c.Close() // Close waits for commands in flight; a stopped server answers them only at their timeout
		k.c = nil
	}
}

// client returns the kept connection when it was dialled with key, else dials a new one (closing the old).
func (k *kept) client(ctx context.Context, addr, key string, o valkey.Options) (*valkey.Client, error) {
	if k.c != nil && k.key == key {
		return k.c, nil
	}
	k.close()
	c, err := valkey.Dial(ctx, addr, o)
	if err != nil {
		return nil, err
	}
	k.c, k.key = c, key
	return c, nil
}

func optionsKey(addr string, o valkey.Options) string {
	return addr + "\x00" + o.Username + "\x00" + o.Password
}

// Observe is Observe (the function) over the kept connections: node 0 first, then the source unless node 0
// is a primary (the migration is over: Plan says Switched whatever the source says). The source's offset is
// read after node 0's, so Behind is never less than the truth.
func (ob *Observer) Observe(ctx context.Context, cfg Config, switchAsked bool) Observation {
	ob.mu.Lock()
	defer ob.mu.Unlock()
	o := Observation{SourceHost: cfg.SourceHost, SourcePort: cfg.SourcePort, SwitchAsked: switchAsked, MaxLag: cfg.MaxLag}
	o.Node0 = ob.observeNode(ctx, cfg)
	if o.Node0.Err == nil && o.Node0.Repl.Role == valkey.RolePrimary {
		ob.src.close()
		return o
	}
	o.Source = ob.observeSource(ctx, cfg)
	return o
}

func (ob *Observer) observeNode(ctx context.Context, cfg Config) NodeView {
	c, err := ob.node.client(ctx, cfg.Node0Addr, optionsKey(cfg.Node0Addr, cfg.Node0), cfg.Node0)
	if err != nil {
		return NodeView{Err: err}
	}
	var v NodeView
	v.Repl, v.Engine, v.Version, v.Err = readNode(ctx, c)
	if v.Err != nil {
		ob.node.close()
	}
	return v
}

func (ob *Observer) observeSource(ctx context.Context, cfg Config) SourceView {
	addr := net.JoinHostPort(cfg.SourceHost, strconv.Itoa(cfg.SourcePort))
	o := cfg.sourceOptions()
	key := optionsKey(addr, o)
	now := ob.now()
	if ob.src.c == nil && ob.src.key == key && now.Before(ob.retryAt) {
		return ob.srcFail // backing off: the last failure stands
	}
	v := ob.askSource(ctx, addr, key, o)
	if v.Err != nil && v.reused && !v.Refused {
		// the kept connection broke (the source restarted, a proxy closed it): one fresh dial at once
		ob.src.close()
		v = ob.askSource(ctx, addr, key, o)
	}
	if v.Err == nil {
		ob.backoff, ob.retryAt = 0, time.Time{}
		return v.SourceView
	}
	ob.src.close()
	ob.src.key = key // remembered: the backoff applies to these credentials; others are tried at once
	switch {
	case ob.backoff == 0:
		ob.backoff = MinSourceBackoff
	case ob.backoff < MaxSourceBackoff:
		ob.backoff = min(2*ob.backoff, MaxSourceBackoff)
	}
	ob.srcFail, ob.retryAt = v.SourceView, now.Add(ob.backoff)
	return v.SourceView
}

// asked is a SourceView and whether it came over a connection kept from before.
type asked struct {
	SourceView
	reused bool
}

func (ob *Observer) askSource(ctx context.Context, addr, key string, o valkey.Options) asked {
	reused := ob.src.c != nil && ob.src.key == key
	if !reused {
		ob.dials++
	}
	c, err := ob.src.client(ctx, addr, key, o)
	if err != nil {
		return asked{SourceView: SourceView{Err: err, WrongPass: valkey.IsWrongPass(err), Refused: valkey.IsServerError(err)}}
	}
	var v SourceView
	v.Repl, v.Engine, v.Version, v.Err = readNode(ctx, c)
	v.Refused = v.Err != nil && valkey.IsServerError(v.Err)
	return asked{SourceView: v, reused: reused}
}
