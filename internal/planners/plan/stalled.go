package plan

import (
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/valkey-ha/valkey-ha/internal/chartapi/spec"
	"github.com/valkey-ha/valkey-ha/internal/valkeyapi/valkey"
)

// A stalled failover (docs/design.md, "Stalled elections"). When a primary is objectively down, every Sentinel
// that sees o_down starts an election (+try-failover) unless it voted for another Sentinel in the last
// 2 x failover-timeout. A Sentinel that is not elected within min(10 s, failover-timeout) aborts
// (-failover-abort-not-elected), and none tries again until 2 x failover-timeout after its last try (sentinel.c
// sentinelStartFailoverIfNeeded, SENTINEL_ELECTION_TIMEOUT; Sentinel docs, failover-timeout). Sentinels that
// start at the same moment each vote for themselves (a split vote), a leader lost mid-election leaves its
// voters waiting out the same back-off, and a leader that finds no replica to promote aborts
// (-failover-abort-no-good-slave) into it: in each case the primary stays down, every Sentinel reports it o_down
// and none reports a failover in progress. With the charts' defaults (down-after 5000 ms, failover-timeout
// 15000 ms) that is about 30 s without a primary. The controller only reports it (an Event and a metric):
// forcing SENTINEL FAILOVER there could race a leader it cannot see.

// electionTimeout is Sentinel's SENTINEL_ELECTION_TIMEOUT (sentinel.c): an election that found no leader is
// aborted after min(electionTimeout, failover-timeout).
const electionTimeout = 10 * time.Second

// electionSlack is added to the election timeout before a silent o_down counts as stalled: Sentinel's own
// desync (up to 1 s added to the start of each try) and a pass's delay.
const electionSlack = 1500 * time.Millisecond

// Stalled describes a stalled failover: the primary every answering Sentinel holds objectively down while none
// of them fails it over.
type Stalled struct {
	// Primary is host:port of the primary they hold down.
	Primary string
	// Down is the shortest o-down-time among them (SENTINEL MASTER "o-down-time", milliseconds).
	Down time.Duration
	// Answered is how many Sentinels answered (all of them hold it down), Asked how many were asked.
	Answered, Asked int
	// Retry is 2 x failover-timeout: Sentinel's wait between two tries of one Sentinel.
	Retry time.Duration
}

// String is the Event message.
func (s Stalled) String() string {
	return fmt.Sprintf("every answering Sentinel (%d of %d) holds primary %s objectively down for %.1fs and none is failing it over: "+
		"an election found no leader (Sentinels that started together each voted for themselves, or the leader was lost) or no replica to promote; "+
		"Sentinel tries again 2 x failover-timeout (%s) after its last try", s.Answered, s.Asked, s.Primary, s.Down.Seconds(), s.Retry)
}

// FailoverStalled reports a stalled failover of a monitored instance: a strict majority of the Sentinels
// answered, every one that answered knows the monitor, names the same primary, reports it o_down for longer
// than min(10 s, failover-timeout) + electionSlack, and reports no failover in progress. A Sentinel that did not
// answer is not assumed to be idle: a majority must answer, and the Event says how many did. ok is false
// otherwise, also when an o-down-time is missing or unreadable.
func FailoverStalled(w World) (s Stalled, ok bool) {
	if !w.Monitored() || len(w.Sentinels) == 0 {
		return Stalled{}, false
	}
	s.Asked = len(w.Sentinels)
	var primary string
	for _, st := range w.Sentinels {
		if !st.Answered() {
			continue
		}
		m := st.Monitor
		if !st.Found || !m.ObjectivelyDown() || m.FailoverInProgress() {
			return Stalled{}, false
		}
		addr := net.JoinHostPort(m.Host, strconv.Itoa(m.Port))
		if primary != "" && addr != primary {
			return Stalled{}, false
		}
		primary = addr
		ms, err := strconv.ParseInt(m.Fields["o-down-time"], 10, 64)
		if err != nil || ms < 0 {
			return Stalled{}, false
		}
		down := time.Duration(ms) * time.Millisecond
		if min(electionTimeout, time.Duration(m.FailoverTimeoutMs)*time.Millisecond)+electionSlack > down {
			return Stalled{}, false
		}
		if s.Answered == 0 || down < s.Down {
			s.Down = down
		}
		s.Retry = max(s.Retry, 2*time.Duration(m.FailoverTimeoutMs)*time.Millisecond)
		s.Answered++
	}
	if 2*s.Answered <= s.Asked {
		return Stalled{}, false
	}
	s.Primary = primary
	return s, true
}

// A Sentinel that no longer watches the primary. Sentinel asks every primary for INFO every 10 s (sentinel.c
// SENTINEL_INFO_PERIOD; every second during a failover) and reports how long ago the last reply came as
// SENTINEL MASTER "info-refresh" (milliseconds, from the wall clock). A Sentinel cut off from a primary the
// controller reaches stops refreshing it and soon flags it s_down; one whose timers stopped while it still
// answers commands stops refreshing it without ever flagging it (RELIABILITY.md "Found" 8: valkey 9.1.2's TSC
// clock on kvm-clock VMs). Either way it does not watch the primary: it would neither start nor vote for a
// failover in time.

// infoRefreshStale is how old a Sentinel's last INFO of a reachable primary may get: three missed periods.
const infoRefreshStale = 30 * time.Second

// NotWatching is a Sentinel whose last INFO of the primary is older than infoRefreshStale.
type NotWatching struct {
	// Sentinel is its address; Primary host:port of the primary it names.
	Sentinel, Primary string
	// Refresh is its info-refresh (SENTINEL MASTER, milliseconds).
	Refresh time.Duration
	// Down is true when it flags the primary s_down (cut off), false when it does not (its timers may have stopped).
	Down bool
}

// String is the Event message.
func (n NotWatching) String() string {
	why := "it does not flag it down either: its timers may have stopped while it answers commands (valkey 9.1.2 on kvm-clock VMs, RELIABILITY.md \"Found\" 8); restart it"
	if n.Down {
		why = "it flags it down: it is cut off from the primary (network, NetworkPolicy, DNS)"
	}
	return fmt.Sprintf("Sentinel %s last read INFO from primary %s %.0fs ago (every 10 s when healthy) while the controller reaches it: %s",
		n.Sentinel, n.Primary, n.Refresh.Seconds(), why)
}

// SentinelsNotWatching returns the Sentinels that name the primary the controller reaches (a node at that
// address answered INFO with role master) and report an info-refresh older than infoRefreshStale. Nothing when
// the instance is not monitored, the primary is not reached, or a failover runs anywhere; a Sentinel whose
// info-refresh is missing or unreadable is skipped.
func SentinelsNotWatching(w World) []NotWatching {
	v := w.SentinelView()
	if !v.Monitored || !v.Known || v.FailoverInProgress {
		return nil
	}
	reached := false
	for _, n := range w.Nodes {
		if n.Reachable && n.Repl.Role == valkey.RolePrimary && w.Instance.SameAddr(n.Node, v.PrimaryHost, v.PrimaryPort) {
			reached = true
		}
	}
	if !reached {
		return nil
	}
	var out []NotWatching
	for _, s := range w.Sentinels {
		m := s.Monitor
		if !s.Answered() || !s.Found || spec.NormalizeHost(m.Host) != spec.NormalizeHost(v.PrimaryHost) || m.Port != v.PrimaryPort {
			continue
		}
		ms, err := strconv.ParseInt(m.Fields["info-refresh"], 10, 64)
		if err != nil || time.Duration(ms)*time.Millisecond <= infoRefreshStale {
			continue
		}
		out = append(out, NotWatching{Sentinel: s.Addr, Primary: net.JoinHostPort(m.Host, strconv.Itoa(m.Port)),
			Refresh: time.Duration(ms) * time.Millisecond, Down: m.SubjectivelyDown() || m.ObjectivelyDown()})
	}
	return out
}
