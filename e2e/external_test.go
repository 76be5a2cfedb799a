//go:build e2e

package e2e

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/valkey-io/valkey-go"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/valkey-ha/valkey-ha/internal/valkeyapi/acl"
)

// ---- a client outside the cluster (externalAccess) --------------------------------------------------------

// ReadAddressMap reads addresses.json of the externalAccess ConfigMaps (F-external of a valkey release,
// S-external of a valkey-sentinel release): announced "fqdn:port" -> external "host:port", merged.
func ReadAddressMap(ctx context.Context, ns string, configMaps ...string) (map[string]string, error) {
	m := map[string]string{}
	for _, name := range configMaps {
		cm, err := kube.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil, fmt.Errorf("ConfigMap %s/%s: %w", ns, name, err)
		}
		raw, ok := cm.Data["addresses.json"]
		if !ok {
			return nil, fmt.Errorf("ConfigMap %s/%s has no addresses.json (externalAccess without host and nodePorts)", ns, name)
		}
		var part map[string]string
		if err := json.Unmarshal([]byte(raw), &part); err != nil {
			return nil, fmt.Errorf("ConfigMap %s/%s addresses.json: %w", ns, name, err)
		}
		for k, v := range part {
			m[k] = v
		}
	}
	return m, nil
}

// DialLog counts what a MappedDialer dialled: per external address, and the addresses it refused.
type DialLog struct {
	mu      sync.Mutex
	Dialled map[string]int
	Refused map[string]int
}

func (l *DialLog) add(to map[string]int, addr string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	to[addr]++
}

// Snapshot returns copies of the counts.
func (l *DialLog) Snapshot() (dialled, refused map[string]int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	dialled, refused = map[string]int{}, map[string]int{}
	for k, v := range l.Dialled {
		dialled[k] = v
	}
	for k, v := range l.Refused {
		refused[k] = v
	}
	return dialled, refused
}

// MappedDialer is the valkey-go DialCtxFn of an outside client (README, "Clients outside the cluster"): every
// address the Sentinels name (an in-cluster FQDN:port) is dialled at its external address from the map, an
// external address itself (the client's InitAddress) as given, anything else is refused: a client outside
// the cluster could not reach it. With TLS it still verifies the announced name, which the certificates
// carry. log (may be nil) counts the dials.
func MappedDialer(m map[string]string, log *DialLog) func(ctx context.Context, addr string, d *net.Dialer, tlsCfg *tls.Config) (net.Conn, error) {
	external := map[string]bool{}
	for _, v := range m {
		external[v] = true
	}
	return func(ctx context.Context, addr string, d *net.Dialer, tlsCfg *tls.Config) (net.Conn, error) {
		target, ok := m[addr]
		if !ok && external[addr] {
			target, ok = addr, true
		}
		if !ok {
			if log != nil {
				log.add(log.Refused, addr)
			}
			return nil, fmt.Errorf("dial %s: not in the externalAccess address map", addr)
		}
		if log != nil {
			log.add(log.Dialled, target)
		}
		if tlsCfg != nil {
			host, _, _ := net.SplitHostPort(addr)
			cfg := tlsCfg.Clone()
			cfg.ServerName = host // verify the name Sentinel announced, not the node's address
			return (&tls.Dialer{NetDialer: d, Config: cfg}).DialContext(ctx, "tcp", target)
		}
		return d.DialContext(ctx, "tcp", target)
	}
}

// TestOutsideClientFollowsFailoverThroughNodePorts (issue 27, externalAccess): both releases with
// externalAccess NodePort on the node's address and fixed node ports, so F-external and S-external carry the
// whole address map. From the host, a valkey-go Sentinel-aware client that dials only through that map (its
// dialer refuses every other address, the in-cluster FQDNs included) finds the primary through the Sentinels'
// node ports and writes every 10 ms; the primary's pod is deleted, gracefully (its preStop hook hands off),
// then, once the replaced pod is back, forced (grace 0: no handoff, a Sentinel failover); each time the
// client follows the Sentinels to the new primary's node port and keeps writing, and every acknowledged write
// is on the new primary.
// The Sentinels and the data nodes still announce their in-cluster FQDNs. The local cluster's bridge CNI
// enforces no NetworkPolicy, so allowedSources (the node's address: the NodePort's SNAT source) is rendered
// but not exercised here.
func TestOutsideClientFollowsFailoverThroughNodePorts(t *testing.T) {
	maybeParallel(t)
	ctx := t.Context()
	nodes, err := Nodes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	host := nodes[0].InternalIP
	if host == "" || net.ParseIP(host).To4() == nil {
		t.Fatalf("node %s has no IPv4 InternalIP (%q)", nodes[0].Name, host)
	}
	// five node ports (2 data pods, 3 Sentinels) from a random base, so concurrent runs do not collide
	base := 30100 + rand.IntN(2500)
	ext := func(ports ...int) string {
		b, _ := json.Marshal(ports)
		return fmt.Sprintf("externalAccess: {enabled: true, type: NodePort, host: %q, nodePorts: %s}\nallowedSources: [%s/32]\n", host, b, host)
	}
	d := Deploy(t, "outside", DeployOpts{Replicas: 1,
		DataExtra:     appUsers + "\n" + ext(base, base+1),
		SentinelExtra: ext(base+2, base+3, base+4)})
	in := d.I()
	appPW := waitSecretKey(t, d, in.F+"-user-app", "password")
	m, err := ReadAddressMap(ctx, d.NS, in.F+"-external", d.S+"-external")
	if err != nil {
		t.Fatal(err)
	}
	var sentinels []string
	for j := 0; j < d.Sentinels; j++ {
		a, ok := m[net.JoinHostPort(d.SentinelFQDN(j), strconv.Itoa(sentinelPort))]
		if !ok || a != net.JoinHostPort(host, strconv.Itoa(base+2+j)) {
			t.Fatalf("address map: Sentinel %d -> %q, want %s:%d (map %v)", j, a, host, base+2+j, m)
		}
		sentinels = append(sentinels, a)
	}
	for i := 0; i < in.Nodes(); i++ {
		if a := m[net.JoinHostPort(in.FQDN(i), strconv.Itoa(valkeyPort))]; a != net.JoinHostPort(host, strconv.Itoa(base+i)) {
			t.Fatalf("address map: node %d -> %q, want %s:%d (map %v)", i, a, host, base+i, m)
		}
	}
	// announcements unchanged: the Sentinels name the primary by its in-cluster FQDN
	addr, err := d.PrimaryAddr(ctx, 0, in.F)
	if h, _, _ := net.SplitHostPort(addr); err != nil || !in.NodeFQDNRE().MatchString(h) {
		t.Fatalf("Sentinel 0 names the primary %q (%v), want an in-cluster FQDN", addr, err)
	}

	su, spw, err := d.SentinelCredential(ctx, acl.SentinelClient)
	if err != nil {
		t.Fatal(err)
	}
	zero := int64(0)
	for round, grace := range []*int64{nil, &zero} {
		kind := map[bool]string{true: "graceful (preStop handoff)", false: "forced (grace 0: no preStop handoff)"}[grace == nil]
		if round > 0 {
			d.WaitConverged(t, 3*time.Minute, true) // the replaced pod back as a replica
		}
		log := &DialLog{Dialled: map[string]int{}, Refused: map[string]int{}}
		opt := valkey.ClientOption{
			InitAddress:  sentinels,
			Username:     "app",
			Password:     appPW,
			DialCtxFn:    MappedDialer(m, log),
			DisableCache: true,
			Sentinel:     valkey.SentinelOption{MasterSet: in.F, Username: su, Password: spw, TopologyRefreshInterval: 5 * time.Second},
		}
		w := StartSentinelWriterWith(t, opt, fmt.Sprintf("out%d-%d:", round, time.Now().UnixNano()), 10*time.Millisecond)
		w.WaitAcked(t, 100, "the outside writer is acknowledged 100 times")
		old, err := in.SentinelPrimary(ctx)
		if err != nil {
			t.Fatal(err)
		}
		logs := FollowLogs(t, d.NS, in.Pod(old), "valkey")
		t0 := time.Now()
		DeletePod(t, d.NS, in.Pod(old), grace)
		newPrimary, at := in.waitNewPrimary(t, old, downAfter+failoverTimeout+10*time.Second)
		t.Logf("%s: the Sentinels name %s %s after the delete", kind, in.Pod(newPrimary), at.Sub(t0).Round(time.Millisecond))
		w.WaitAcked(t, w.Acked()+100, "the outside writer is acknowledged 100 more times after the failover")
		w.Stop()
		stats := w.Stats()
		dialled, refused := log.Snapshot()
		t.Logf("%s: writer: %s", kind, stats)
		if !stats.AckGapStart.IsZero() {
			t.Logf("%s: the longest gap began %s after the delete", kind, stats.AckGapStart.Sub(t0).Round(time.Millisecond))
		}
		if grace == nil {
			t.Logf("hook log: %s", strings.Join(preStopLines(logs.Wait(5*time.Second)), " | "))
		}
		logs.Stop()
		t.Logf("%s: dials by external address: %v; refused (not in the map): %v", kind, countsString(dialled), countsString(refused))

		missing, err := w.MissingOn(ctx, net.JoinHostPort(in.FQDN(newPrimary), strconv.Itoa(valkeyPort)), "app", appPW)
		if err != nil {
			t.Fatal(err)
		}
		if len(missing) != 0 {
			t.Errorf("%s: %d of %d acknowledged writes missing on the new primary %s (first %s)", kind, len(missing), stats.Acked, in.Pod(newPrimary), missing[0])
		}
		if len(refused) != 0 {
			t.Errorf("%s: the client dialled addresses outside the map: %v", kind, refused)
		}
		newExt := m[net.JoinHostPort(in.FQDN(newPrimary), strconv.Itoa(valkeyPort))]
		if dialled[newExt] == 0 {
			t.Errorf("%s: the client never dialled the new primary's external address %s: %v", kind, newExt, dialled)
		}
		if stats.LongestAckGap > downAfter+failoverTimeout {
			t.Errorf("%s: longest gap between acknowledgements %s, above down-after + failover-timeout (%s)", kind, stats.LongestAckGap, downAfter+failoverTimeout)
		}
		t.Logf("outside client through node ports, %s: %d writes, %d acknowledged, %d failed, longest gap %s, %d lost",
			kind, stats.Writes, stats.Acked, stats.Failed, stats.LongestAckGap.Round(time.Millisecond), len(missing))
	}
}

// WaitAcked waits up to 30 s until the writer has n acknowledged writes in all.
func (w *SentinelWriter) WaitAcked(t testing.TB, n int, what string) {
	t.Helper()
	Eventually(t, 30*time.Second, 50*time.Millisecond, what, func(context.Context) (bool, error) {
		if got := w.Acked(); got < n {
			return false, fmt.Errorf("%d of %d acknowledged; %s", got, n, w.Stats())
		}
		return true, nil
	})
}

// countsString formats a count map with its keys in order.
func countsString(m map[string]int) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	s := "{"
	for i, k := range keys {
		if i > 0 {
			s += " "
		}
		s += fmt.Sprintf("%s:%d", k, m[k])
	}
	return s + "}"
}
