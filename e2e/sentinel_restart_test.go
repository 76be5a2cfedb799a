//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestCaseS11SentinelRestartsLeaveNoGhosts: every Sentinel pod is deleted, one at a time, each round
// (case S11 asks for 5 rounds; E2E_S11_ROUNDS, default 1, keeps CI short: one round already proves a ghost
// free restart, more rounds only repeat it). A replaced Sentinel keeps its myid (the chart derives it from
// the pod name) and announces its FQDN, so after every deletion each Sentinel lists exactly the other N-1
// myids as peers, none with port 0 or an address that is not a Sentinel FQDN, and CKQUORUM is OK on every
// Sentinel. Then the primary pod is deleted: a single primary holds within down-after + failover-timeout.
func TestCaseS11SentinelRestartsLeaveNoGhosts(t *testing.T) {
	longTest(t, "TestReplacedSentinelHoldsTheNextEvictionControllersOff (make e2e: a replaced Sentinel pod), templates-tests TestCaseS19SentinelAnnouncesItsOwnFQDN (one stable myid per pod) and TestReplacedSentinelsStillFailOverWithControllersDown")
	maybeParallel(t)
	d := Deploy(t, "s11", DeployOpts{})
	in := d.I()
	ctx := t.Context()

	ids := make([]string, d.Sentinels)
	for j := range ids {
		out, err := d.Sentinel(ctx, j, "sentinel", "myid")
		if err != nil || len(strings.TrimSpace(out)) != 40 {
			t.Fatalf("SENTINEL MYID on %s: %q %v", d.SentinelPod(j), out, err)
		}
		ids[j] = strings.TrimSpace(out)
	}

	rounds := 1
	if v, err := strconv.Atoi(os.Getenv("E2E_S11_ROUNDS")); err == nil && v > 0 {
		rounds = v
	}
	for r := 1; r <= rounds; r++ {
		for j := 0; j < d.Sentinels; j++ {
			uid := DeletePod(t, d.NS, d.SentinelPod(j), nil)
			Eventually(t, 3*time.Minute, time.Second, fmt.Sprintf("round %d: %s replaced, no ghost peers, CKQUORUM OK everywhere", r, d.SentinelPod(j)),
				func(ctx context.Context) (bool, error) {
					if _, _, err := ReplacedPod(ctx, d.NS, d.SentinelPod(j), uid); err != nil {
						return false, err
					}
					return true, d.checkPeersAreExactly(ctx, in, ids)
				})
		}
	}

	old, err := in.SentinelPrimary(ctx)
	if err != nil {
		t.Fatal(err)
	}
	DeletePod(t, d.NS, in.Pod(old), nil)
	deadline := time.Now().Add(downAfter + failoverTimeout)
	WithinOf(t, deadline, time.Second, "single primary after the primary pod was deleted", func(ctx context.Context) error {
		_, err := in.singlePrimary(ctx)
		return err
	})
	d.WaitConverged(t, 3*time.Minute, true)
	if err := d.checkPeersAreExactly(ctx, in, ids); err != nil {
		t.Fatalf("after the failover: %v", err)
	}
}

// checkPeersAreExactly checks, on every Sentinel (one exec), that SENTINEL SENTINELS lists exactly the other
// Sentinels' myids from ids, each with a Sentinel FQDN and a non-zero port, that SENTINEL MYID is still
// ids[j], and that CKQUORUM answers OK.
func (d *Deployment) checkPeersAreExactly(ctx context.Context, in *Instance, ids []string) error {
	res, err := d.QuerySentinels(ctx, []string{"sentinel", "myid"}, []string{"sentinel", "sentinels", in.F}, []string{"sentinel", "ckquorum", in.F})
	if err != nil {
		return err
	}
	fqdn := d.SentinelFQDNRE()
	for j, r := range res {
		var myid string
		if err := json.Unmarshal([]byte(r[0]), &myid); err != nil {
			return fmt.Errorf("%s: SENTINEL MYID: %w", d.SentinelPod(j), err)
		}
		if myid != ids[j] {
			return fmt.Errorf("%s changed its myid: %s, was %s", d.SentinelPod(j), myid, ids[j])
		}
		var peers []map[string]string
		if err := json.Unmarshal([]byte(r[1]), &peers); err != nil {
			return fmt.Errorf("%s: SENTINEL SENTINELS: %w", d.SentinelPod(j), err)
		}
		var got, want []string
		for _, p := range peers {
			if p["port"] == "0" || !fqdn.MatchString(p["ip"]) {
				return fmt.Errorf("%s lists a ghost peer %s at %s:%s (flags %s)", d.SentinelPod(j), p["runid"], p["ip"], p["port"], p["flags"])
			}
			got = append(got, p["runid"])
		}
		for k, id := range ids {
			if k != j {
				want = append(want, id)
			}
		}
		sort.Strings(got)
		sort.Strings(want)
		if strings.Join(got, ",") != strings.Join(want, ",") {
			return fmt.Errorf("%s knows peers %v, want exactly %v", d.SentinelPod(j), got, want)
		}
		if !strings.Contains(r[2], "OK") {
			return fmt.Errorf("%s: CKQUORUM %s: %s", d.SentinelPod(j), in.F, r[2])
		}
	}
	return nil
}

// singlePrimary checks that every Sentinel names the same node, that node reports role master and every
// other node reports role slave of it; it returns the primary's index.
func (in *Instance) singlePrimary(ctx context.Context) (int, error) {
	p, err := in.SentinelPrimary(ctx)
	if err != nil {
		return -1, err
	}
	for i := 0; i < in.Nodes(); i++ {
		r, err := in.ReplRole(ctx, i)
		if err != nil {
			if i == p {
				return -1, err
			}
			continue // a replica still restarting is not a second primary
		}
		if i == p && r.Role != "master" {
			return -1, fmt.Errorf("%s is the Sentinels' primary but reports role %s", in.Pod(i), r.Role)
		}
		if i != p && r.Role == "master" {
			return -1, fmt.Errorf("two primaries: %s (Sentinels) and %s", in.Pod(p), in.Pod(i))
		}
	}
	return p, nil
}
