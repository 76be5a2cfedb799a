package controller

import (
	"context"
	"fmt"
	"log/slog"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/valkey-ha/valkey-ha/internal/valkeyapi/valkey"
)

// switchHub keeps one subscription to the topology events (valkey.TopologyEvents) per Sentinel (address,
// user and TLS) for every instance whose monitor that Sentinel holds, and hands each event to the instances
// of its monitor name. One controller serving K instances on one quorum so holds 3 subscriber connections
// instead of 3K (each would also be a client, and a file descriptor, of every Sentinel). Every
// goroutine it starts is owned: the registration that ends a Sentinel's subscription waits for it.
type switchHub struct {
	log *slog.Logger

	mu   sync.Mutex
	subs map[string]*switchSub
	next int
	// live counts the subscriber goroutines that have not returned yet
	live atomic.Int32
}

// switchSub is the subscription to one Sentinel.
type switchSub struct {
	addr   string
	cancel context.CancelFunc
	done   chan struct{}
	// opts are the registrants' options, by registration id. A (re)dial tries the newest first and falls back
	// to the others: on a shared controller each comes from another instance's Secret (F-quorum-auth), which
	// that tenant's namespace admin can overwrite, so one tenant's wrong password must not end the
	// subscription of every instance.
	opts map[int]func(context.Context) valkey.Options
	// watchers maps a monitor name to the callbacks of the instances registered for it, by registration id
	watchers map[string]map[int]func(valkey.MonitorEvent)
}

func newSwitchHub(log *slog.Logger) *switchHub {
	return &switchHub{log: log, subs: map[string]*switchSub{}}
}

// watch registers fn for the topology events of monitor on every Sentinel of addrs (options from opts,
// asked again at each reconnect) and returns the function that unregisters it; a Sentinel's subscription
// ends with its last registration, and that function returns once its goroutine has. A Sentinel's
// subscription also ends with the ctx of the watch that opened it (the controller's run: the instance
// controller's pass context ends when the controller stops, not with the pass).
func (h *switchHub) watch(ctx context.Context, monitor string, addrs []string, opts func(context.Context) valkey.Options, fn func(valkey.MonitorEvent)) (cancel func()) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.next++
	id := h.next
	var keys []string
	for _, addr := range addrs {
		o := opts(ctx)
		key := addr + "\x00" + o.Username + "\x00" + strconv.FormatBool(o.TLS)
		s, ok := h.subs[key]
		if !ok {
			subCtx, stop := context.WithCancel(ctx)
			s = &switchSub{addr: addr, cancel: stop, done: make(chan struct{}), watchers: map[string]map[int]func(valkey.MonitorEvent){},
				opts: map[int]func(context.Context) valkey.Options{}}
			h.subs[key] = s
			h.live.Add(1)
			go func() {
				defer close(s.done)
				defer h.live.Add(-1)
				h.run(subCtx, s)
			}()
		}
		s.opts[id] = opts
		if s.watchers[monitor] == nil {
			s.watchers[monitor] = map[int]func(valkey.MonitorEvent){}
		}
		s.watchers[monitor][id] = fn
		keys = append(keys, key)
	}
	return func() {
		var ended []*switchSub
		defer func() {
			for _, s := range ended {
				<-s.done
			}
		}()
		h.mu.Lock()
		defer h.mu.Unlock()
		for _, key := range keys {
			s, ok := h.subs[key]
			if !ok {
				continue
			}
			delete(s.watchers[monitor], id)
			delete(s.opts, id)
			if len(s.watchers[monitor]) == 0 {
				delete(s.watchers, monitor)
			}
			if len(s.watchers) == 0 {
				s.cancel()
				delete(h.subs, key)
				ended = append(ended, s)
			}
		}
	}
}

// run subscribes to one Sentinel until ctx ends, redialling a second after a lost connection.
func (h *switchHub) run(ctx context.Context, s *switchSub) {
	for ctx.Err() == nil {
		h.mu.Lock()
		ids := make([]int, 0, len(s.opts))
		for id := range s.opts {
			ids = append(ids, id)
		}
		sort.Sort(sort.Reverse(sort.IntSlice(ids)))
		cands := make([]func(context.Context) valkey.Options, 0, len(ids))
		for _, id := range ids {
			cands = append(cands, s.opts[id])
		}
		h.mu.Unlock()
		var cl *valkey.Client
		err := fmt.Errorf("no registrant")
		for _, opts := range cands {
			o := opts(ctx)
			o.CommandTimeout = 0
			if cl, err = valkey.Dial(ctx, s.addr, o); err == nil {
				break
			}
			h.log.Debug("topology event subscription: a registrant's options were refused; trying the next", "sentinel", s.addr, "error", err)
		}
		if err == nil {
			err = cl.SubscribeTopology(ctx, func(ev valkey.MonitorEvent) { h.deliver(s, ev) })
			cl.Close()
		}
		if err != nil && ctx.Err() == nil {
			h.log.Debug("topology event subscription lost", "sentinel", s.addr, "error", err)
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}

// deliver calls every callback registered for ev's monitor (in registration order).
func (h *switchHub) deliver(s *switchSub, ev valkey.MonitorEvent) {
	h.mu.Lock()
	ids := make([]int, 0, len(s.watchers[ev.Monitor]))
	for id := range s.watchers[ev.Monitor] {
		ids = append(ids, id)
	}
	sort.Ints(ids)
	fns := make([]func(valkey.MonitorEvent), 0, len(ids))
	for _, id := range ids {
		fns = append(fns, s.watchers[ev.Monitor][id])
	}
	h.mu.Unlock()
	for _, fn := range fns {
		fn(ev)
	}
}

// subscriptions returns the number of Sentinel subscriptions open (for tests and metrics).
func (h *switchHub) subscriptions() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.subs)
}

// running returns the number of subscriber goroutines that have not returned (for tests).
func (h *switchHub) running() int { return int(h.live.Load()) }
