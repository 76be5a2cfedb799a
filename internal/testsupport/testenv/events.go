package testenv

import (
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/tools/record"

	"github.com/valkey-ha/valkey-ha/internal/testsupport/valkeytest"
)

// DrainEvents returns the Events buffered in rec so far ("Type Reason message" each) whose reason is reason
// ("" = all), and discards the others.
func DrainEvents(rec *record.FakeRecorder, reason string) []string {
	var out []string
	for {
		select {
		case ev := <-rec.Events:
			if reason == "" || HasReason(ev, reason) {
				out = append(out, ev)
			}
		default:
			return out
		}
	}
}

// HasReason reports whether a FakeRecorder event ("Type Reason message") carries reason as a word.
func HasReason(ev, reason string) bool {
	return ev == reason || strings.Contains(ev, " "+reason+" ") || strings.HasPrefix(ev, reason+" ") || strings.HasSuffix(ev, " "+reason)
}

// EventLog drains a FakeRecorder continuously (so a full buffer never blocks a controller) and keeps the
// events for the test.
type EventLog struct {
	mu     sync.Mutex
	rec    *record.FakeRecorder
	events []string
	all    []string
}

// RecordEvents starts draining rec every 50 ms until the test ends.
func RecordEvents(t testing.TB, rec *record.FakeRecorder) *EventLog {
	l := &EventLog{rec: rec}
	stop := valkeytest.Sample(50*time.Millisecond, l.drain)
	t.Cleanup(stop)
	return l
}

func (l *EventLog) drain() {
	l.mu.Lock()
	defer l.mu.Unlock()
	evs := DrainEvents(l.rec, "")
	l.events = append(l.events, evs...)
	l.all = append(l.all, evs...)
}

// Take returns the events recorded since the last Take and forgets them (All still has them).
func (l *EventLog) Take() []string {
	l.drain()
	l.mu.Lock()
	defer l.mu.Unlock()
	out := l.events
	l.events = nil
	return out
}

// All returns every event recorded so far.
func (l *EventLog) All() []string {
	l.drain()
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string{}, l.all...)
}

// Count returns how many events recorded so far carry reason.
func (l *EventLog) Count(reason string) (n int) {
	for _, ev := range l.All() {
		if HasReason(ev, reason) {
			n++
		}
	}
	return n
}
