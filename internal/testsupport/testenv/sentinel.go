package testenv

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"os"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/valkey-ha/valkey-ha/internal/chartapi/contract"
	"github.com/valkey-ha/valkey-ha/internal/testsupport/valkeytest"
	"github.com/valkey-ha/valkey-ha/internal/valkeyapi/valkey"
)

// StopTopology kills every process of top now (the test's cleanup would only do it at the very end).
func StopTopology(top *valkeytest.Topology) {
	for _, p := range append(append([]*valkeytest.Proc{}, top.Nodes...), top.Sentinels...) {
		p.Kill()
	}
}

// SetReplicaOf rewrites p's config so that it starts as a replica of valkeytest.Host:port (what the chart's
// bootstrap does for a node that restarts while another one is primary).
func SetReplicaOf(p *valkeytest.Proc, port int) error {
	var keep []string
	for _, l := range strings.Split(p.Config(), "\n") {
		f := strings.Fields(l)
		if len(f) > 0 && (strings.EqualFold(f[0], "replicaof") || strings.EqualFold(f[0], "slaveof")) {
			continue
		}
		if l != "" {
			keep = append(keep, l)
		}
	}
	keep = append(keep, fmt.Sprintf("replicaof %s %d", valkeytest.Host, port))
	return os.WriteFile(p.ConfPath, []byte(strings.Join(keep, "\n")+"\n"), 0o600)
}

// SentinelHealthy reports an error until every running Sentinel knows the monitor at primaryPort with want
// replicas none of which is flagged down or disconnected, all its peers, and CKQUORUM OK.
func SentinelHealthy(top *valkeytest.Topology, primaryPort, want int) error {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	for _, s := range top.Sentinels {
		if !s.Running() {
			continue
		}
		c, err := valkey.Dial(ctx, s.Addr(), top.SentinelOptions())
		if err != nil {
			return err
		}
		err = func() error {
			defer c.Close()
			m, found, err := c.SentinelMaster(ctx, top.Cfg.MonitorName)
			if err != nil {
				return err
			}
			if !found || m.Port != primaryPort || !m.Healthy() || m.NumOtherSentinels != int64(len(top.Sentinels)-1) {
				return fmt.Errorf("%s: monitor at %d flags %v peers %d", s.Addr(), m.Port, m.Flags, m.NumOtherSentinels)
			}
			reps, err := c.SentinelReplicas(ctx, top.Cfg.MonitorName)
			if err != nil {
				return err
			}
			good := 0
			for _, r := range reps {
				// the link itself is checked on the servers (WaitReplicationUp): Sentinel refreshes its copy
				// of master-link-status only every 10 s
				if !r.HasFlag("s_down") && !r.HasFlag("disconnected") {
					good++
				}
			}
			if good != want {
				return fmt.Errorf("%s: %d of %d replicas good", s.Addr(), good, want)
			}
			q, err := c.SentinelCKQuorum(ctx, top.Cfg.MonitorName)
			if err == nil && !q.OK {
				err = fmt.Errorf("%s: %s", s.Addr(), q.Message)
			}
			return err
		}()
		if err != nil {
			return err
		}
	}
	return nil
}

// WaitSteady waits until replication is up and every Sentinel is healthy (SentinelHealthy), and returns the
// primary's port.
func WaitSteady(t testing.TB, top *valkeytest.Topology, timeout time.Duration) int {
	t.Helper()
	top.WaitReplicationUp(timeout)
	port := 0
	valkeytest.Eventually(t, timeout, 50*time.Millisecond, "Sentinels healthy", func() error {
		p, err := top.SentinelPrimary()
		if err != nil {
			return err
		}
		port = p
		return SentinelHealthy(top, p, len(top.Nodes)-1)
	})
	return port
}

// MajorityPrimary returns the primary port a strict majority of the Sentinels name (the boot step's rule;
// a Sentinel that does not answer within 2 s counts as not naming one).
func MajorityPrimary(top *valkeytest.Topology) (int, bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	votes := map[int]int{}
	for _, s := range top.Sentinels {
		o := top.SentinelOptions()
		o.DialTimeout = 500 * time.Millisecond
		c, err := valkey.Dial(ctx, s.Addr(), o)
		if err != nil {
			continue
		}
		_, port, found, err := c.SentinelPrimaryAddr(ctx, top.Cfg.MonitorName)
		c.Close()
		if err == nil && found {
			votes[port]++
		}
	}
	for port, n := range votes {
		if n*2 > len(top.Sentinels) {
			return port, true
		}
	}
	return 0, false
}

// SwitchWatcher polls GET-MASTER-ADDR-BY-NAME on every Sentinel every 5 ms over open connections.
type SwitchWatcher struct {
	Clients []*valkey.Client
	name    string
}

// NewSwitchWatcher connects to every Sentinel of top (closed when the test ends).
func NewSwitchWatcher(t testing.TB, top *valkeytest.Topology) *SwitchWatcher {
	t.Helper()
	sw := &SwitchWatcher{name: top.Cfg.MonitorName}
	for _, s := range top.Sentinels {
		sw.Clients = append(sw.Clients, s.Client(valkey.Options{DialTimeout: time.Second, CommandTimeout: time.Second}))
	}
	return sw
}

// WaitSwitch returns when the first Sentinel names a primary other than oldPort, with that port.
func (sw *SwitchWatcher) WaitSwitch(oldPort int, timeout time.Duration) (time.Time, int, error) {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		for _, c := range sw.Clients {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			_, p, found, err := c.SentinelPrimaryAddr(ctx, sw.name)
			cancel()
			if err == nil && found && p != oldPort {
				return time.Now(), p, nil
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	return time.Time{}, 0, fmt.Errorf("no Sentinel named a new primary within %s", timeout)
}

// WaitAll waits until every Sentinel has named a primary other than oldPort and returns when the last one
// did, with the port the last one named.
func (sw *SwitchWatcher) WaitAll(oldPort int, timeout time.Duration) (time.Time, int, error) {
	deadline := time.Now().Add(timeout)
	moved := make([]bool, len(sw.Clients))
	port := 0
	for time.Now().Before(deadline) {
		all := true
		for i, c := range sw.Clients {
			if moved[i] {
				continue
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			_, p, found, err := c.SentinelPrimaryAddr(ctx, sw.name)
			cancel()
			if err == nil && found && p != oldPort {
				moved[i], port = true, p
				continue
			}
			all = false
		}
		if all {
			return time.Now(), port, nil
		}
		time.Sleep(5 * time.Millisecond)
	}
	return time.Time{}, 0, fmt.Errorf("not every Sentinel names a new primary within %s", timeout)
}

// SentinelEvent is one line a Sentinel logged about a monitor.
type SentinelEvent struct {
	At time.Time
	// Sentinel is the index of the Sentinel in the topology.
	Sentinel int
	// Kind is the event ("+monitor", "-monitor", "+reset-master", "+sdown", "+odown", "+try-failover",
	// "+switch-master", ...) or FailoverRequested.
	Kind string
	Text string
}

// FailoverRequested is the Kind of the line a Sentinel logs when a client's SENTINEL FAILOVER is accepted
// ("Executing user requested FAILOVER of '<name>'", sentinel.c): the command itself, not Sentinel's own
// decision to fail over.
const FailoverRequested = "user-failover"

func (ev SentinelEvent) String() string {
	return fmt.Sprintf("sentinel-%d %s %s %s", ev.Sentinel, ev.At.Format("15:04:05.000"), ev.Kind, ev.Text)
}

// "1234:X 29 Nov 2026 21:45:20.856 # +reset-master master vk localhost 6379"
var (
	sentinelLogLine  = regexp.MustCompile(`^\d+:X (\d{2} \w{3} \d{4} \d{2}:\d{2}:\d{2}\.\d{3}) \S ([+-][a-z-]+) (.*)$`)
	sentinelUserLine = regexp.MustCompile(`^\d+:X (\d{2} \w{3} \d{4} \d{2}:\d{2}:\d{2}\.\d{3}) \S Executing user requested FAILOVER of '([^']*)'`)
)

// SentinelEvents parses every Sentinel's log into its events about monitor name (the monitor itself, not its
// replicas or peers), oldest first. Valkey's Sentinel has no INFO commandstats section, so this is how
// tests audit the commands that took effect: +monitor (SENTINEL MONITOR), -monitor (SENTINEL REMOVE),
// +reset-master (SENTINEL RESET) and FailoverRequested (SENTINEL FAILOVER), next to Sentinel's own
// +sdown/+odown/+try-failover/+switch-master events. Timestamps have the log's millisecond resolution.
func SentinelEvents(top *valkeytest.Topology, name string) []SentinelEvent {
	var out []SentinelEvent
	for i, s := range top.Sentinels {
		for _, line := range strings.Split(s.Logs(), "\n") {
			if m := sentinelUserLine.FindStringSubmatch(line); m != nil {
				if m[2] != name {
					continue
				}
				if at, err := time.ParseInLocation("02 Jan 2006 15:04:05.000", m[1], time.Local); err == nil {
					out = append(out, SentinelEvent{At: at, Sentinel: i, Kind: FailoverRequested, Text: name})
				}
				continue
			}
			m := sentinelLogLine.FindStringSubmatch(line)
			if m == nil {
				continue
			}
			if !strings.HasPrefix(m[3], "master "+name+" ") && !(m[2] == "+switch-master" && strings.HasPrefix(m[3], name+" ")) {
				continue
			}
			at, err := time.ParseInLocation("02 Jan 2006 15:04:05.000", m[1], time.Local)
			if err != nil {
				continue
			}
			out = append(out, SentinelEvent{At: at, Sentinel: i, Kind: m[2], Text: m[3]})
		}
	}
	sort.SliceStable(out, func(a, b int) bool { return out[a].At.Before(out[b].At) })
	return out
}

// Audited keeps the events of the audited configuration commands: MONITOR (+monitor), REMOVE (-monitor),
// RESET (+reset-master).
func Audited(evs []SentinelEvent) []SentinelEvent {
	var out []SentinelEvent
	for _, ev := range evs {
		switch ev.Kind {
		case "+monitor", "-monitor", "+reset-master":
			out = append(out, ev)
		}
	}
	return out
}

// CountEvents counts events by kind.
func CountEvents(evs []SentinelEvent) map[string]int {
	out := map[string]int{}
	for _, ev := range evs {
		out[ev.Kind]++
	}
	return out
}

// EventsIn keeps the events logged in [from, to] (at the log's millisecond resolution; a zero to = no end).
func EventsIn(evs []SentinelEvent, from, to time.Time) []SentinelEvent {
	var out []SentinelEvent
	for _, ev := range evs {
		if ev.At.Before(from.Truncate(time.Millisecond)) || (!to.IsZero() && ev.At.After(to)) {
			continue
		}
		out = append(out, ev)
	}
	return out
}

// StableMyID is the Sentinel id charts/valkey-sentinel gives pod pod of namespace ns (sha1 of "ns/pod"), so a
// restarted Sentinel keeps its identity (case S11).
func StableMyID(ns, pod string) string {
	sum := sha1.Sum([]byte(ns + "/" + pod))
	return hex.EncodeToString(sum[:])
}

// RestartWithStableIDs restarts every Sentinel of top with the id the chart gives pod <release>-<i> in ns
// (StableMyID), as the chart's Sentinels run from their first start.
func RestartWithStableIDs(t testing.TB, top *valkeytest.Topology, ns, release string) {
	t.Helper()
	for i, s := range top.Sentinels {
		s.Kill()
		cfg := s.Config() + "sentinel myid " + StableMyID(ns, contract.SentinelPod(release, i)) + "\n"
		if err := os.WriteFile(s.ConfPath, []byte(cfg), 0o600); err != nil {
			t.Fatalf("sentinel config: %v", err)
		}
		s.Start()
	}
}
