// Package vote computes the Sentinels' majority in one place (docs/design.md, "One vote"): which primary
// the Sentinels name for a monitor, how many name it, and whether they disagree. The boot step, both
// controllers and the handoff read the same tally, so they never differ on host spelling (FQDNs are
// compared lower-cased without a trailing dot) or on what a majority is.
package vote

import (
	"sort"

	"github.com/valkey-ha/valkey-ha/internal/chartapi/spec"
)

// Claim is one Sentinel's answer about a monitor: Answered is false when it did not reply (a dial or
// command error), Found false when it replied but does not know the monitor; Host and Port are the primary
// it names (SENTINEL MASTER ip/port, or GET-MASTER-ADDR-BY-NAME).
type Claim struct {
	Answered bool
	Found    bool
	Host     string
	Port     int
}

// Tally is the count of a set of claims.
type Tally struct {
	// Asked, Answered and Found count the claims, those that answered and those that know the monitor.
	Asked, Answered, Found int
	// Host and Port are the address most Sentinels that know the monitor name (host normalised, ties broken
	// by the lower host, then port); Votes is how many name it. Empty when Found is 0.
	Host  string
	Port  int
	Votes int
	// Addresses is the number of different addresses named.
	Addresses int
}

// Count tallies claims (pure).
func Count(claims []Claim) Tally {
	type addr struct {
		host string
		port int
	}
	t := Tally{Asked: len(claims)}
	count := map[addr]int{}
	for _, c := range claims {
		if !c.Answered {
			continue
		}
		t.Answered++
		if !c.Found || c.Host == "" {
			continue
		}
		t.Found++
		count[addr{spec.NormalizeHost(c.Host), c.Port}]++
	}
	t.Addresses = len(count)
	keys := make([]addr, 0, len(count))
	for k := range count {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if count[keys[i]] != count[keys[j]] {
			return count[keys[i]] > count[keys[j]]
		}
		if keys[i].host != keys[j].host {
			return keys[i].host < keys[j].host
		}
		return keys[i].port < keys[j].port
	})
	if len(keys) > 0 {
		t.Host, t.Port, t.Votes = keys[0].host, keys[0].port, count[keys[0]]
	}
	return t
}

// Known reports whether a majority of the Sentinels that answered know the monitor (then Host:Port is the
// address most of them name): the instance controller's rule for "Sentinel's answer is the truth".
func (t Tally) Known() bool { return t.Found > 0 && t.Found*2 > t.Answered }

// Leader reports whether any Sentinel names a primary (Host:Port the most named): where to register a monitor
// and what a booting node follows.
func (t Tally) Leader() bool { return t.Votes > 0 }

// Disagree reports whether the Sentinels that know the monitor name different primaries.
func (t Tally) Disagree() bool { return t.Addresses > 1 }

// Unanimous reports whether every Sentinel asked answered, knows the monitor and names the same primary.
func (t Tally) Unanimous() bool { return t.Asked > 0 && t.Votes == t.Asked }

// StrictMajority reports whether more than half of the Sentinels asked name Host:Port.
func (t Tally) StrictMajority() bool { return t.Votes*2 > t.Asked }

// Names reports whether host:port is the address the tally leads with (host normalised).
func (t Tally) Names(host string, port int) bool {
	return t.Votes > 0 && t.Host == spec.NormalizeHost(host) && t.Port == port
}
