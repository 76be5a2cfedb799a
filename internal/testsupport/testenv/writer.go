package testenv

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"sync"
	"testing"
	"time"

	vk "github.com/valkey-io/valkey-go"

	"github.com/valkey-ha/valkey-ha/internal/testsupport/valkeytest"
	"github.com/valkey-ha/valkey-ha/internal/valkeyapi/acl"
	"github.com/valkey-ha/valkey-ha/internal/valkeyapi/valkey"
)

// WriteEvent is one write attempt of a Writer.
type WriteEvent struct {
	Start, End time.Time
	OK         bool
	// N is the attempt's sequence number (from 1); Key the key it wrote.
	N   int64
	Key string
	// Lost is, in counter mode, the number of earlier acknowledged writes this write found missing (see
	// WriterOptions.PerWrite).
	Lost int
	// Err is the error of a failed attempt.
	Err string
}

// WriterOptions configure a Writer.
type WriterOptions struct {
	// First is the Sentinel the writer lists first: valkey-go subscribes to the first one that answers; the
	// others follow in order, wrapping around.
	First int
	// Key is the key written (default "__valkey-ha:counter"). With PerWrite every write sets its own key,
	// <Key>:<n> = "1", and Missing tells which acknowledged ones a node lacks. Without it (counter mode)
	// every write is SET Key n GET on the one key: each acknowledged write also reports the value it
	// replaced, and when that is older than writes acknowledged before, those were rolled back (a failover
	// or a restart with an empty dataset); the write records how many in WriteEvent.Lost.
	Key      string
	PerWrite bool
	// Interval between writes (default 10 ms) and Timeout of each (default 2 s).
	Interval time.Duration
	Timeout  time.Duration
}

// Writer is a Sentinel-aware client (valkey-go's Sentinel mode, as the _operator user) that writes one at
// a time every Interval and records every attempt.
type Writer struct {
	opts   WriterOptions
	mu     sync.Mutex
	events []WriteEvent
	acked  []int64 // counter mode: acknowledged values still expected in the dataset, increasing
	stop   chan struct{}
	done   chan struct{}
	once   sync.Once
}

// CounterKey is the default Writer key.
const CounterKey = "__valkey-ha:counter"

// StartWriter starts a Writer against top's Sentinels; it stops when the test ends at the latest.
func StartWriter(t testing.TB, top *valkeytest.Topology, o WriterOptions) *Writer {
	t.Helper()
	if o.Key == "" {
		o.Key = CounterKey
	}
	if o.Interval <= 0 {
		o.Interval = 10 * time.Millisecond
	}
	if o.Timeout <= 0 {
		o.Timeout = 2 * time.Second
	}
	var addrs []string
	for j := range top.Sentinels {
		addrs = append(addrs, top.Sentinels[(o.First+j)%len(top.Sentinels)].Addr())
	}
	c, err := vk.NewClient(vk.ClientOption{InitAddress: addrs, Sentinel: vk.SentinelOption{MasterSet: top.Cfg.MonitorName},
		Username: acl.Operator, Password: top.Passwords[acl.Operator], DisableCache: true, ClientSetInfo: vk.DisableClientSetInfo,
		ConnWriteTimeout: o.Timeout})
	if err != nil {
		t.Fatalf("writer: %v", err)
	}
	w := &Writer{opts: o, stop: make(chan struct{}), done: make(chan struct{})}
	go w.run(c)
	t.Cleanup(w.Finish)
	return w
}

// StartWriters starts one Writer per Sentinel, writer j listing the Sentinels from j on, each on its own key
// (<o.Key>:<j>): a population of clients spread over the Sentinels, as clients that reach them through the
// Sentinel Service are.
func StartWriters(t testing.TB, top *valkeytest.Topology, o WriterOptions) []*Writer {
	t.Helper()
	if o.Key == "" {
		o.Key = CounterKey
	}
	var ws []*Writer
	for j := range top.Sentinels {
		oj := o
		oj.First, oj.Key = j, fmt.Sprintf("%s:%d", o.Key, j)
		ws = append(ws, StartWriter(t, top, oj))
	}
	return ws
}

func (w *Writer) run(c vk.Client) {
	defer close(w.done)
	defer c.Close()
	tick := time.NewTicker(w.opts.Interval)
	defer tick.Stop()
	for n := int64(1); ; n++ {
		select {
		case <-w.stop:
			return
		case <-tick.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), w.opts.Timeout)
		ev := WriteEvent{Start: time.Now(), N: n, Key: w.opts.Key}
		var err error
		if w.opts.PerWrite {
			ev.Key = w.opts.Key + ":" + strconv.FormatInt(n, 10)
			err = c.Do(ctx, c.B().Set().Key(ev.Key).Value("1").Build()).Error()
		} else {
			var prev string
			prev, err = c.Do(ctx, c.B().Set().Key(ev.Key).Value(strconv.FormatInt(n, 10)).Get().Build()).ToString()
			if vk.IsValkeyNil(err) {
				prev, err = "0", nil
			}
			if err == nil {
				p, _ := strconv.ParseInt(prev, 10, 64)
				ev.Lost = w.settle(p, n)
			}
		}
		ev.End = time.Now()
		cancel()
		ev.OK = err == nil
		if err != nil {
			ev.Err = err.Error()
		}
		w.mu.Lock()
		w.events = append(w.events, ev)
		w.mu.Unlock()
	}
}

// settle records acknowledged value n that replaced p and returns how many acknowledged values above p are
// gone.
func (w *Writer) settle(p, n int64) int {
	i := sort.Search(len(w.acked), func(i int) bool { return w.acked[i] > p })
	lost := len(w.acked) - i
	w.acked = append(w.acked[:i], n)
	if len(w.acked) > 4096 { // only the tail can ever be rolled back; keep memory flat
		w.acked = append([]int64{}, w.acked[len(w.acked)-1024:]...)
	}
	return lost
}

// Finish stops the writer and returns once its last write has ended. It may be called more than once.
func (w *Writer) Finish() {
	w.once.Do(func() { close(w.stop) })
	<-w.done
}

// WaitAckedSince polls until a write that started at since or later was acknowledged: with since the writer's
// start, it has found the primary; with since the moment the primary moved, it writes to the new one. The test
// fails after timeout.
func (w *Writer) WaitAckedSince(t testing.TB, since time.Time, timeout time.Duration) {
	t.Helper()
	valkeytest.Eventually(t, timeout, 10*time.Millisecond, "a write acknowledged since "+since.Format(time.StampMilli), func() error {
		evs := w.Events()
		for i := len(evs) - 1; i >= 0 && !evs[i].Start.Before(since); i-- {
			if evs[i].OK {
				return nil
			}
		}
		return fmt.Errorf("%d attempts, none acknowledged since", len(evs))
	})
}

// Events returns the attempts so far.
func (w *Writer) Events() []WriteEvent {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]WriteEvent{}, w.events...)
}

// LastOK returns the end of the last acknowledged write.
func (w *Writer) LastOK() time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	for i := len(w.events) - 1; i >= 0; i-- {
		if w.events[i].OK {
			return w.events[i].End
		}
	}
	return time.Time{}
}

// WriterResult sums up a Writer's attempts.
type WriterResult struct {
	// Acked are the keys of the acknowledged writes (PerWrite), in order.
	Acked []string
	// OK and Failed count acknowledged and failed attempts.
	OK, Failed int
	// Longest is the longest outage (FailWindows).
	Longest time.Duration
}

// Result sums up the attempts so far.
func (w *Writer) Result() WriterResult {
	evs := w.Events()
	var r WriterResult
	for _, e := range evs {
		if e.OK {
			r.OK++
			if w.opts.PerWrite {
				r.Acked = append(r.Acked, e.Key)
			}
		} else {
			r.Failed++
		}
	}
	for _, win := range FailWindows(evs, time.Time{}) {
		r.Longest = max(r.Longest, win.D())
	}
	return r
}

// Window is one period as a client saw it.
type Window struct{ From, To time.Time }

// D returns the window's length.
func (w Window) D() time.Duration { return w.To.Sub(w.From) }

// FailWindows returns the outages among events that started at or after since: from the start of the first
// failed write to the acknowledgement of the first successful write after it. An outage still open at the
// end is closed at the last event.
func FailWindows(evs []WriteEvent, since time.Time) []Window {
	var out []Window
	var open *Window
	for _, e := range evs {
		if e.Start.Before(since) {
			continue
		}
		switch {
		case !e.OK && open == nil:
			open = &Window{From: e.Start}
		case e.OK && open != nil:
			open.To = e.End
			out = append(out, *open)
			open = nil
		}
	}
	if open != nil && len(evs) > 0 {
		open.To = evs[len(evs)-1].End
		out = append(out, *open)
	}
	return out
}

// Stalls returns the periods without an acknowledged write longer than gap (failed or blocked writes alike)
// among events that started in [since, until): from one acknowledgement to the next.
func Stalls(evs []WriteEvent, since, until time.Time, gap time.Duration) []Window {
	var out []Window
	var last time.Time
	for _, e := range evs {
		if e.Start.Before(since) || !e.Start.Before(until) || !e.OK {
			continue
		}
		if !last.IsZero() && e.End.Sub(last) > gap {
			out = append(out, Window{From: last, To: e.End})
		}
		last = e.End
	}
	return out
}

// Total returns the summed length of ws.
func Total(ws []Window) time.Duration {
	var d time.Duration
	for _, w := range ws {
		d += w.D()
	}
	return d
}

// CountWrites returns acknowledged and failed writes, and (counter mode) lost acknowledged writes, among
// events that started in [since, until).
func CountWrites(evs []WriteEvent, since, until time.Time) (ok, failed, lost int) {
	for _, e := range evs {
		if e.Start.Before(since) || !e.Start.Before(until) {
			continue
		}
		if e.OK {
			ok++
			lost += e.Lost
		} else {
			failed++
		}
	}
	return
}

// Missing returns the keys (written "1" by a PerWrite Writer) that the node behind c does not hold, in
// order. It reads them one GET at a time (the _operator user may GET but not MGET).
func Missing(ctx context.Context, c *valkey.Client, keys []string) ([]string, error) {
	var missing []string
	for _, k := range keys {
		v, _, err := c.Get(ctx, k)
		if err != nil {
			return nil, err
		}
		if v != "1" {
			missing = append(missing, k)
		}
	}
	return missing, nil
}
