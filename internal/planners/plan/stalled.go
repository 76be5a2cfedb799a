package plan

import (
	"fmt"
	"net"
	"strconv"
	"time"
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
