// Package check holds the read-mostly health checks that `valkey-sentinel-ctl test` (helm test) runs against a
// live deployment. Each check returns a Result; the only write is one marker key under __valkey-ha: that the
// replication check writes on the primary and reads back from every replica.
package check

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/valkey-ha/valkey-ha/internal/chartapi/contract"
	"github.com/valkey-ha/valkey-ha/internal/chartapi/spec"
	"github.com/valkey-ha/valkey-ha/internal/controllers/kube"
	"github.com/valkey-ha/valkey-ha/internal/valkeyapi/acl"
	"github.com/valkey-ha/valkey-ha/internal/valkeyapi/valkey"
)

// Result is the outcome of one check.
type Result struct {
	Name string
	OK   bool
	// Detail says what was seen (on success) or what is wrong (on failure).
	Detail string
}

func pass(name, format string, a ...any) Result {
	return Result{Name: name, OK: true, Detail: fmt.Sprintf(format, a...)}
}
func fail(name, format string, a ...any) Result {
	return Result{Name: name, Detail: fmt.Sprintf(format, a...)}
}

// Failed returns the failed results.
func Failed(rs []Result) []Result {
	var out []Result
	for _, r := range rs {
		if !r.OK {
			out = append(out, r)
		}
	}
	return out
}

// Instance checks one instance: exactly one node reports primary; every Sentinel names it; the role labels
// match the real roles; every replica's link is up; a marker written on the primary is read back from every
// replica; the default user is refused and the probe user cannot write. A descriptor that names anything but
// the instance's own pods and Secrets (spec.Instance.CheckCanonical with clusterDomain) is refused before
// any password is sent. It reads the descriptor, F-sentinels, the system Secret and each data pod by name
// (the chart's F-test Role allows exactly that).
func Instance(ctx context.Context, cs kubernetes.Interface, namespace, name, clusterDomain string, timeout time.Duration) ([]Result, error) {
	cm, err := cs.CoreV1().ConfigMaps(namespace).Get(ctx, contract.Descriptor(name), metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("get descriptor %s: %w", contract.Descriptor(name), err)
	}
	in, err := spec.ParseInstance([]byte(cm.Data[contract.KeyInstance]))
	if err != nil {
		return nil, err
	}
	if err := in.CheckCanonical(cm.Name, cm.Namespace, clusterDomain); err != nil {
		return nil, err
	}
	opPW, err := kube.ReadSecretKey(ctx, cs, namespace, in.SystemSecret, acl.Operator)
	if err != nil {
		return nil, err
	}
	probePW, _ := kube.ReadSecretKey(ctx, cs, namespace, in.SystemSecret, acl.Probe)
	op := valkey.Options{Username: acl.Operator, Password: opPW, DialTimeout: 2 * time.Second, CommandTimeout: timeout}.WithTLS(in.TLS.Enabled, valkey.DefaultCAFile)
	var rs []Result

	clients := map[int]*valkey.Client{}
	repl := map[int]valkey.Replication{}
	for _, n := range in.Nodes {
		c, err := valkey.Dial(ctx, in.Addr(n), op)
		if err != nil {
			rs = append(rs, fail("reachable", "%s: %v", n.Pod, err))
			continue
		}
		defer c.Close()
		r, err := c.InfoReplication(ctx)
		if err != nil {
			rs = append(rs, fail("reachable", "%s: %v", n.Pod, err))
			continue
		}
		clients[n.Index], repl[n.Index] = c, r
	}
	if len(clients) == len(in.Nodes) {
		rs = append(rs, pass("reachable", "all %d nodes answer INFO replication as %s", len(in.Nodes), acl.Operator))
	}

	primary := -1
	var primaries []string
	for _, n := range in.Nodes {
		if r, ok := repl[n.Index]; ok && r.Role == valkey.RolePrimary {
			primary = n.Index
			primaries = append(primaries, n.Pod)
		}
	}
	if len(primaries) != 1 {
		rs = append(rs, fail("single-primary", "%d nodes report primary: %v", len(primaries), primaries))
		return rs, nil
	}
	p := in.Nodes[primary]
	rs = append(rs, pass("single-primary", "%s is the only primary", p.Pod))

	// Sentinels
	if in.Monitored() {
		rs = append(rs, checkSentinelsAgree(ctx, cs, in, p, clusterDomain))
	}

	// labels
	var bad []string
	labelled := 0
	for _, n := range in.Nodes {
		pod, err := cs.CoreV1().Pods(namespace).Get(ctx, n.Pod, metav1.GetOptions{})
		if err != nil {
			bad = append(bad, fmt.Sprintf("get pod %s: %v", n.Pod, err))
			continue
		}
		want := contract.RoleReplica
		if n.Index == primary {
			want = contract.RolePrimary
		}
		if got := pod.Labels[contract.LabelRole]; got != want {
			bad = append(bad, fmt.Sprintf("%s has %s=%q, is %s", pod.Name, contract.LabelRole, got, want))
		}
		labelled++
	}
	if len(bad) > 0 || labelled != len(in.Nodes) {
		rs = append(rs, fail("role-labels", "%d/%d pods checked; %s", labelled, len(in.Nodes), strings.Join(bad, "; ")))
	} else {
		rs = append(rs, pass("role-labels", "every pod's %s matches its role", contract.LabelRole))
	}

	// links
	var down []string
	for _, n := range in.Nodes {
		if n.Index == primary {
			continue
		}
		r, ok := repl[n.Index]
		if !ok || r.Role != valkey.RoleReplica || !r.LinkUp || !in.SameAddr(p, r.PrimaryHost, r.PrimaryPort) {
			down = append(down, n.Pod)
		}
	}
	if len(down) > 0 {
		rs = append(rs, fail("replica-links", "not replicating from %s with the link up: %v", p.Pod, down))
	} else {
		rs = append(rs, pass("replica-links", "%d replica(s) linked to %s", len(in.Nodes)-1, p.Pod))
	}

	// write on the primary, read back everywhere
	rs = append(rs, checkWriteReadBack(ctx, in, clients, primary, timeout))

	// ACL negatives
	if _, err := valkey.Dial(ctx, in.Addr(p), valkey.Options{DialTimeout: 2 * time.Second}.WithTLS(in.TLS.Enabled, valkey.DefaultCAFile)); err == nil {
		rs = append(rs, fail("default-user-off", "the default user can connect to %s", p.Pod))
	} else {
		rs = append(rs, pass("default-user-off", "the default user is refused"))
	}
	if probePW != "" {
		pc, err := valkey.Dial(ctx, in.Addr(p), valkey.Options{Username: acl.Probe, Password: probePW, RESP2: true, DialTimeout: 2 * time.Second}.WithTLS(in.TLS.Enabled, valkey.DefaultCAFile))
		if err != nil {
			rs = append(rs, fail("probe-least-privilege", "%s cannot log in: %v", acl.Probe, err))
		} else {
			err := pc.Set(ctx, "__valkey-ha:probe", "1", 0)
			pc.Close()
			if err != nil && strings.Contains(err.Error(), "NOPERM") {
				rs = append(rs, pass("probe-least-privilege", "%s may not write", acl.Probe))
			} else {
				rs = append(rs, fail("probe-least-privilege", "%s SET: %v", acl.Probe, err))
			}
		}
	}
	return rs, nil
}

func checkSentinelsAgree(ctx context.Context, cs kubernetes.Interface, in spec.Instance, p spec.Node, clusterDomain string) Result {
	const name = "sentinels-agree"
	info, err := cs.CoreV1().ConfigMaps(in.Namespace).Get(ctx, contract.SentinelInfo(in.Name), metav1.GetOptions{})
	if err != nil {
		return fail(name, "no Sentinel info %s (is a quorum selecting this instance?): %v", contract.SentinelInfo(in.Name), err)
	}
	si, err := spec.ParseSentinelInfo([]byte(info.Data[contract.KeySentinels]))
	if err != nil {
		return fail(name, "%v", err)
	}
	o := valkey.Options{DialTimeout: 2 * time.Second}.WithTLS(si.TLS, valkey.DefaultCAFile)
	if in.SentinelRelease != "" {
		// the quorum's _instance password (Secret S-auth-instance, or the instance's copy F-quorum-auth of a
		// quorum in another namespace; the chart's F-test Role may get the one it renders by name), sent only
		// to the quorum it is for (its scope). A quorum without auth has no such Secret (or leaves the copy
		// empty): then no credentials are sent.
		data, err := kube.ReadSecret(ctx, cs, in.Namespace, in.QuorumCredentialSecret())
		if err != nil && !apierrors.IsNotFound(err) {
			return fail(name, "%v", err)
		}
		if err := si.CheckCanonicalFor(in, spec.ScopeOf(func(k string) string { return data[k] }), clusterDomain); err != nil {
			return fail(name, "%v", err)
		}
		if pw := data[contract.KeyPassword]; pw != "" {
			o.Username, o.Password = acl.SentinelInstance, pw
		}
	}
	var bad []string
	for _, addr := range si.Addrs() {
		c, err := valkey.Dial(ctx, addr, o)
		if err != nil {
			bad = append(bad, err.Error())
			continue
		}
		host, port, found, err := c.SentinelPrimaryAddr(ctx, in.MonitorName)
		if err == nil && !found {
			err = errors.New("does not know the monitor")
		}
		if err == nil && !in.SameAddr(p, host, port) {
			err = fmt.Errorf("names %s:%d, the primary is %s", host, port, in.Addr(p))
		}
		if err == nil {
			var q valkey.Quorum
			if q, err = c.SentinelCKQuorum(ctx, in.MonitorName); err == nil && !q.OK {
				err = errors.New(q.Message)
			}
		}
		c.Close()
		if err != nil {
			bad = append(bad, addr+": "+err.Error())
		}
	}
	if len(bad) > 0 {
		return fail(name, "%s", strings.Join(bad, "; "))
	}
	return pass(name, "%d Sentinels name %s and CKQUORUM is OK", len(si.Hosts), p.Pod)
}

func checkWriteReadBack(ctx context.Context, in spec.Instance, clients map[int]*valkey.Client, primary int, timeout time.Duration) Result {
	const name = "write-read-back"
	pc := clients[primary]
	key := "__valkey-ha:helm-test"
	val := strconv.FormatInt(time.Now().UnixNano(), 10)
	if err := pc.Set(ctx, key, val, 300*time.Second); err != nil {
		return fail(name, "SET on the primary: %v", err)
	}
	deadline := time.Now().Add(timeout)
	for _, n := range in.Nodes {
		if n.Index == primary {
			continue
		}
		c, ok := clients[n.Index]
		if !ok {
			return fail(name, "%s unreachable", n.Pod)
		}
		for {
			v, _, err := c.Get(ctx, key)
			if err == nil && v == val {
				break
			}
			if time.Now().After(deadline) {
				return fail(name, "%s did not return the marker within %s (last: %v, %v)", n.Pod, timeout, v, err)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	_, _ = pc.Del(ctx, key)
	return pass(name, "a write on the primary was read back from %d replica(s)", len(in.Nodes)-1)
}

// Quorum checks one Sentinel quorum: every Sentinel answers, and for every monitor it knows CKQUORUM is OK
// and it sees the other Sentinels. o carries TLS and, with Sentinel auth, the credentials (the chart's test
// pod: acl.SentinelClient); then an unauthenticated client must be refused (NOAUTH) and o's user may not
// remove a monitor (NOPERM; asked for one that does not exist, so nothing happens when it may).
func Quorum(ctx context.Context, addrs []string, o valkey.Options) []Result {
	o.DialTimeout = 2 * time.Second
	var rs []Result
	if o.Password != "" && len(addrs) > 0 {
		rs = append(rs, checkSentinelAuth(ctx, addrs[0], o))
	}
	for _, addr := range addrs {
		c, err := valkey.Dial(ctx, addr, o)
		if err != nil {
			rs = append(rs, fail("sentinel-reachable", "%v", err))
			continue
		}
		ms, err := c.SentinelMasters(ctx)
		if err != nil {
			c.Close()
			rs = append(rs, fail("sentinel-masters", "%v", err))
			continue
		}
		rs = append(rs, pass("sentinel-reachable", "%s monitors %d instance(s)", addr, len(ms)))
		for _, m := range ms {
			q, err := c.SentinelCKQuorum(ctx, m.Name)
			switch {
			case err != nil:
				rs = append(rs, fail("ckquorum", "%s %s: %v", addr, m.Name, err))
			case !q.OK:
				rs = append(rs, fail("ckquorum", "%s %s: %s", addr, m.Name, q.Message))
			case m.NumOtherSentinels != int64(len(addrs)-1):
				rs = append(rs, fail("peers", "%s %s sees %d other Sentinels, want %d", addr, m.Name, m.NumOtherSentinels, len(addrs)-1))
			default:
				rs = append(rs, pass("ckquorum", "%s %s: %s", addr, m.Name, q.Message))
			}
		}
		c.Close()
	}
	return rs
}

// checkSentinelAuth asks one Sentinel, without credentials and as o's user, for what they must not do.
func checkSentinelAuth(ctx context.Context, addr string, o valkey.Options) Result {
	const name = "sentinel-auth"
	anon := o
	anon.Username, anon.Password = "", ""
	if c, err := valkey.Dial(ctx, addr, anon); err == nil {
		_, err = c.SentinelMasters(ctx)
		c.Close()
		if err == nil || !strings.Contains(err.Error(), "NOAUTH") {
			return fail(name, "%s answers SENTINEL MASTERS without credentials (%v)", addr, err)
		}
	} else if !strings.Contains(err.Error(), "NOAUTH") {
		return fail(name, "%s: unauthenticated connection: %v (want NOAUTH)", addr, err)
	}
	c, err := valkey.Dial(ctx, addr, o)
	if err != nil {
		return fail(name, "%s as %s: %v", addr, o.Username, err)
	}
	defer c.Close()
	if err := c.SentinelRemove(ctx, "valkey-ha-helm-test-no-such-monitor"); err == nil || !strings.Contains(err.Error(), "NOPERM") {
		return fail(name, "%s lets %s run SENTINEL REMOVE (%v)", addr, o.Username, err)
	}
	return pass(name, "%s refuses unauthenticated clients (NOAUTH) and SENTINEL REMOVE by %s (NOPERM)", addr, o.Username)
}
