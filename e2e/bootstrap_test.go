//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/valkey-ha/valkey-ha/internal/chartapi/contract"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"
)

// TestBootstrapDefaults: the charts' defaults (plus the local images and a selector label) give 1 primary +
// 2 replicas + 3 Sentinels, `helm test` passes for both releases, every pod runs restricted with a
// read-only root filesystem, and the instance status reads Ready.
func TestBootstrapDefaults(t *testing.T) {
	maybeParallel(t)
	d := Deploy(t, "boot", DeployOpts{ChartDefaults: true})
	in := d.I()
	ctx := t.Context()

	st, err := in.Status(ctx)
	if err != nil || st.State != "Ready" {
		t.Fatalf("%s-status: state %q (%v)", in.F, st.State, err)
	}
	labels, err := in.RoleLabels(ctx)
	if err != nil {
		t.Fatal(err)
	}
	roles := map[string]int{}
	for _, r := range labels {
		roles[r]++
	}
	if roles["primary"] != 1 || roles["replica"] != 2 || len(labels) != 3 {
		t.Fatalf("role labels %v: want 1 primary and 2 replicas", labels)
	}
	t.Logf("status Ready, primary %s, labels %v", st.Primary, labels)

	for _, rel := range []string{in.Release, d.S} {
		start := time.Now()
		logs, err := d.Helm.Test(rel, 3*time.Minute)
		if err != nil {
			t.Fatalf("helm test %s: %v", rel, err)
		}
		t.Logf("helm test %s passed in %s:\n%s", rel, time.Since(start).Round(time.Millisecond), indent(logs))
	}

	// posture: every pod of both releases (data, Sentinel, controllers, test pods)
	pods, err := kube.CoreV1().Pods(d.NS).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/part-of=valkey-ha"})
	if err != nil {
		t.Fatal(err)
	}
	comps := map[string]int{}
	for i := range pods.Items {
		p := &pods.Items[i]
		comps[p.Labels["app.kubernetes.io/component"]]++
		for _, problem := range restrictedProblems(p) {
			t.Errorf("pod %s: %s", p.Name, problem)
		}
	}
	// the helm test pods are deleted once they succeed: check them as rendered in the releases' test hooks
	for _, rel := range []string{in.Release, d.S} {
		r, err := d.Helm.Get(rel)
		if err != nil {
			t.Fatal(err)
		}
		for _, h := range r.Hooks {
			if h.Kind != "Pod" {
				continue
			}
			var p corev1.Pod
			if err := yaml.Unmarshal([]byte(h.Manifest), &p); err != nil {
				t.Fatalf("hook %s of %s: %v", h.Name, rel, err)
			}
			comps[p.Labels["app.kubernetes.io/component"]]++
			for _, problem := range restrictedProblems(&p) {
				t.Errorf("test pod %s (hook of %s): %s", p.Name, rel, problem)
			}
		}
	}
	for _, c := range []string{"data", "sentinel", "controller", "test", "credentials"} {
		if comps[c] == 0 {
			t.Errorf("no pod with component %s checked (%v)", c, comps)
		}
	}
	t.Logf("restricted posture checked on %d running pods and the test hooks %v", len(pods.Items), comps)

	// and at runtime: non-root uid, root filesystem not writable
	for _, target := range []struct{ pod, container string }{
		{in.Pod(0), "valkey"}, {in.Pod(1), "valkey"}, {d.SentinelPod(0), "sentinel"},
	} {
		out, _, err := Exec(ctx, d.NS, target.pod, target.container, nil, "sh", "-c", "id -u; touch /e2e-rootfs-probe 2>&1 || echo ROOTFS-READONLY")
		if err != nil {
			t.Fatalf("exec in %s: %v", target.pod, err)
		}
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if lines[0] == "0" || !strings.Contains(out, "ROOTFS-READONLY") {
			t.Errorf("%s/%s: uid %s, root filesystem probe: %q", target.pod, target.container, lines[0], out)
		}
		if !dnsCacheOff() {
			checkDNSCache(t, d.NS, target.pod, target.container, in.FQDN(2))
		}
	}
}

// checkDNSCache (RELIABILITY.md, "Found" 3; the charts' default, no value given): the server's /etc/resolv.conf
// names the pod's DNS cache first and the kubelet's nameserver (the cluster DNS) after it, the cache listens on
// 127.0.0.1:53 (UDP, the pod's network namespace), and valkey-cli reaches a peer by its FQDN (any reply but
// "Could not connect": the name resolved; the image has no getent).
func checkDNSCache(t *testing.T, ns, pod, container, peer string) {
	t.Helper()
	out, _, err := Exec(t.Context(), ns, pod, container, nil, "sh", "-c",
		"grep '^nameserver' /etc/resolv.conf; grep -ci ' 0100007F:0035 ' /proc/net/udp; valkey-cli -h "+peer+" -p 6379 ping 2>&1; true")
	if err != nil {
		t.Fatalf("exec in %s/%s: %v (%s)", pod, container, err, out)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) < 4 || lines[0] != "nameserver 127.0.0.1" || !strings.HasPrefix(lines[1], "nameserver ") ||
		strings.HasPrefix(lines[1], "nameserver 127.") || lines[2] == "0" || strings.Contains(out, "Could not connect") {
		t.Errorf("%s/%s: want nameserver 127.0.0.1 first, then the cluster DNS, the cache listening on 127.0.0.1:53 and %s resolved; got:\n%s", pod, container, peer, out)
		return
	}
	t.Logf("%s/%s: %s, %s; the cache listens; %s", pod, container, lines[0], lines[1], lines[len(lines)-1])
}

// restrictedProblems lists what keeps a pod from the restricted Pod Security Standard plus this project's
// rules (read-only root filesystem everywhere, no service-account token on data and Sentinel pods).
func restrictedProblems(p *corev1.Pod) []string {
	var out []string
	psc := p.Spec.SecurityContext
	if psc == nil {
		psc = &corev1.PodSecurityContext{}
	}
	podNonRoot := psc.RunAsNonRoot != nil && *psc.RunAsNonRoot
	podSeccomp := psc.SeccompProfile != nil && psc.SeccompProfile.Type == corev1.SeccompProfileTypeRuntimeDefault
	if psc.RunAsUser != nil && *psc.RunAsUser == 0 {
		out = append(out, "pod runAsUser 0")
	}
	switch p.Labels["app.kubernetes.io/component"] {
	case "data", "sentinel":
		if p.Spec.AutomountServiceAccountToken == nil || *p.Spec.AutomountServiceAccountToken {
			out = append(out, "automountServiceAccountToken is not false")
		}
		if p.Spec.EnableServiceLinks == nil || *p.Spec.EnableServiceLinks {
			out = append(out, "enableServiceLinks is not false")
		}
	}
	for _, c := range append(append([]corev1.Container{}, p.Spec.InitContainers...), p.Spec.Containers...) {
		sc := c.SecurityContext
		if sc == nil {
			out = append(out, c.Name+": no securityContext")
			continue
		}
		if !(podNonRoot || (sc.RunAsNonRoot != nil && *sc.RunAsNonRoot)) || (sc.RunAsNonRoot != nil && !*sc.RunAsNonRoot) {
			out = append(out, c.Name+": runAsNonRoot not true")
		}
		if sc.RunAsUser != nil && *sc.RunAsUser == 0 {
			out = append(out, c.Name+": runAsUser 0")
		}
		if sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
			out = append(out, c.Name+": readOnlyRootFilesystem not true")
		}
		if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
			out = append(out, c.Name+": allowPrivilegeEscalation not false")
		}
		if sc.Privileged != nil && *sc.Privileged {
			out = append(out, c.Name+": privileged")
		}
		dropAll := false
		if sc.Capabilities != nil {
			for _, d := range sc.Capabilities.Drop {
				if d == "ALL" {
					dropAll = true
				}
			}
			if len(sc.Capabilities.Add) > 0 {
				out = append(out, fmt.Sprintf("%s: adds capabilities %v", c.Name, sc.Capabilities.Add))
			}
		}
		if !dropAll {
			out = append(out, c.Name+": capabilities do not drop ALL")
		}
		if !(podSeccomp || (sc.SeccompProfile != nil && sc.SeccompProfile.Type == corev1.SeccompProfileTypeRuntimeDefault)) {
			out = append(out, c.Name+": seccompProfile not RuntimeDefault")
		}
		if c.Resources.Limits.Cpu().IsZero() || c.Resources.Limits.Memory().IsZero() {
			out = append(out, c.Name+": no CPU or memory limit")
		}
	}
	return out
}

func indent(s string) string {
	s = strings.TrimRight(s, "\n")
	if s == "" {
		return "    (no output)"
	}
	return "    " + strings.ReplaceAll(s, "\n", "\n    ")
}

// TestCaseS19S04FQDNsOnly: a data node's FQDN resolves and answers PING from inside other pods; everything
// the Sentinels answer (REPLICAS, SENTINELS, GET-MASTER-ADDR-BY-NAME) and everything they write into
// /data/sentinel.conf names FQDNs, never IP literals, before and after a failover; no data node replicates
// from an IP or from itself.
func TestCaseS19S04FQDNsOnly(t *testing.T) {
	longTest(t, "templates-tests TestCaseS19SentinelAnnouncesItsOwnFQDN and TestCaseS04NoIPLiteralsInHostnameTopology")
	maybeParallel(t)
	d := Deploy(t, "fqdn", DeployOpts{})
	in := d.I()
	ctx := t.Context()
	pw, err := in.OperatorPassword(ctx)
	if err != nil {
		t.Fatal(err)
	}

	// S19/S04: resolution and reachability by FQDN from another data pod and from a Sentinel pod
	target := in.FQDN(0)
	for _, from := range []struct{ pod, container string }{{in.Pod(1), "valkey"}, {d.SentinelPod(0), "sentinel"}} {
		out, _, err := Exec(ctx, d.NS, from.pod, from.container, nil, "nslookup", target)
		if err != nil || !strings.Contains(out, "Address") || len(IPLiterals(afterLine(out, target))) == 0 {
			t.Fatalf("nslookup %s in %s: %v\n%s", target, from.pod, err, out)
		}
		pong, err := ValkeyCLI(ctx, d.NS, from.pod, CLI{Container: from.container, Host: target, Port: valkeyPort, User: "_operator", Password: pw}, "ping")
		if err != nil || pong != "PONG" {
			t.Fatalf("PING %s from %s: %q, %v", target, from.pod, pong, err)
		}
		t.Logf("%s resolves in %s (%s) and answers PONG", target, from.pod, strings.Join(IPLiterals(afterLine(out, target)), ","))
	}

	checkFQDNs(t, d, in, "after bootstrap")

	in.SentinelFailover(t)
	checkFQDNs(t, d, in, "after SENTINEL FAILOVER")
}

// afterLine returns text after the first line containing marker (nslookup prints the server's address first).
func afterLine(text, marker string) string {
	if i := strings.Index(text, marker); i >= 0 {
		return text[i:]
	}
	return ""
}

func checkFQDNs(t *testing.T, d *Deployment, in *Instance, phase string) {
	t.Helper()
	ctx := t.Context()
	nodeRE, sentRE := in.NodeFQDNRE(), d.SentinelFQDNRE()
	hostOK := func(re interface{ MatchString(string) bool }, hostport string) bool {
		h := hostport
		if i := strings.LastIndex(hostport, ":"); i > 0 {
			h = hostport[:i]
		}
		return re.MatchString(h)
	}
	for j := 0; j < d.Sentinels; j++ {
		me := d.SentinelPod(j)
		addr, err := d.PrimaryAddr(ctx, j, in.F)
		if err != nil || !hostOK(nodeRE, addr) {
			t.Errorf("%s %s: GET-MASTER-ADDR-BY-NAME %q (%v), want a node FQDN", phase, me, addr, err)
		}
		for _, q := range [][]string{{"replicas", in.F}, {"sentinels", in.F}} {
			raw, err := d.Sentinel(ctx, j, "--json", "sentinel", q[0], q[1])
			if err != nil {
				t.Fatalf("%s %s: SENTINEL %s: %v", phase, me, q[0], err)
			}
			if ips := IPLiterals(raw); len(ips) > 0 {
				t.Errorf("%s %s: SENTINEL %s contains IP literals %v:\n%s", phase, me, strings.ToUpper(q[0]), ips, raw)
			}
		}
		reps, err := d.SentinelList(ctx, j, "replicas", in.F)
		if err != nil {
			t.Fatal(err)
		}
		if len(reps) != in.Replicas {
			t.Errorf("%s %s: %d replicas listed, want %d", phase, me, len(reps), in.Replicas)
		}
		for _, r := range reps {
			if !hostOK(nodeRE, r["name"]) || !nodeRE.MatchString(r["ip"]) || !nodeRE.MatchString(r["master-host"]) {
				t.Errorf("%s %s: replica name=%q ip=%q master-host=%q: not node FQDNs", phase, me, r["name"], r["ip"], r["master-host"])
			}
		}
		sents, err := d.SentinelList(ctx, j, "sentinels", in.F)
		if err != nil {
			t.Fatal(err)
		}
		var peers, want []string
		for _, s := range sents {
			peers = append(peers, s["ip"])
			if !sentRE.MatchString(s["ip"]) {
				t.Errorf("%s %s: peer Sentinel ip=%q is not a Sentinel FQDN", phase, me, s["ip"])
			}
		}
		for k := 0; k < d.Sentinels; k++ {
			if k != j {
				want = append(want, d.SentinelFQDN(k))
			}
		}
		sort.Strings(peers)
		if strings.Join(peers, ",") != strings.Join(want, ",") {
			t.Errorf("%s %s: peers %v, want %v (every Sentinel listed under its own FQDN)", phase, me, peers, want)
		}
		conf, _, err := Exec(ctx, d.NS, me, "sentinel", nil, "cat", "/data/sentinel.conf")
		if err != nil {
			t.Fatal(err)
		}
		if ips := IPLiterals(conf); len(ips) > 0 {
			t.Errorf("%s %s: /data/sentinel.conf contains IP literals %v:\n%s", phase, me, ips, conf)
		}
		if !strings.Contains(conf, "sentinel announce-ip "+d.SentinelFQDN(j)) && !strings.Contains(conf, `sentinel announce-ip "`+d.SentinelFQDN(j)+`"`) {
			t.Errorf("%s %s: /data/sentinel.conf does not announce %s:\n%s", phase, me, d.SentinelFQDN(j), conf)
		}
	}
	for i := 0; i < in.Nodes(); i++ {
		m, err := in.Info(ctx, in.Pod(i), "replication")
		if err != nil {
			t.Fatal(err)
		}
		if m["role"] == "slave" && (!nodeRE.MatchString(m["master_host"]) || m["master_host"] == in.FQDN(i)) {
			t.Errorf("%s %s: master_host %q (want another node's FQDN)", phase, in.Pod(i), m["master_host"])
		}
	}
	if !t.Failed() {
		t.Logf("%s: every Sentinel answer and sentinel.conf holds FQDNs only", phase)
	}
}

// TestUninstallLeavesNothing: after `helm test` and `helm uninstall` of both releases, no object labelled
// app.kubernetes.io/part-of=valkey-ha is left in the namespace (the ConfigMaps the controllers write
// included), nor any ConfigMap or Lease at all; PVCs are exempt (retention policy; none without persistence).
func TestUninstallLeavesNothing(t *testing.T) {
	maybeParallel(t)
	d := Deploy(t, "uninst", DeployOpts{})
	in := d.I()
	ctx := t.Context()
	for _, rel := range []string{in.Release, d.S} {
		if _, err := d.Helm.Test(rel, 3*time.Minute); err != nil {
			t.Fatalf("helm test %s: %v", rel, err)
		}
	}
	before, err := leftovers(ctx, d.NS)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"configmaps/" + contract.Status(in.F), "configmaps/" + contract.SentinelInfo(in.F), "configmaps/" + contract.Status(d.S)} {
		if !contains(before, want) {
			t.Errorf("before uninstall: %s missing (objects: %v)", want, before)
		}
	}
	t.Logf("before uninstall: %d objects", len(before))

	d.Helm.Uninstall(in.Release)
	d.Helm.Uninstall(d.S)
	var left []string
	err = Poll(ctx, 2*time.Minute, 2*time.Second, func(ctx context.Context) (bool, error) {
		var err error
		left, err = leftovers(ctx, d.NS)
		return err == nil && len(left) == 0, err
	})
	if err != nil {
		t.Fatalf("after helm uninstall of %s and %s, left in %s: %v (%v)", in.Release, d.S, d.NS, left, err)
	}
	t.Logf("namespace %s holds nothing of the releases after uninstall", d.NS)
}

func contains(l []string, s string) bool {
	for _, x := range l {
		if x == s {
			return true
		}
	}
	return false
}

// leftovers lists resource/name of every object in ns that is labelled part-of=valkey-ha or is a
// ConfigMap, Lease, Secret or ServiceAccount the namespace did not come with. Events and PVCs are exempt.
func leftovers(ctx context.Context, ns string) ([]string, error) {
	dyn, err := dynamic.NewForConfig(restConfig)
	if err != nil {
		return nil, err
	}
	lists, err := kube.Discovery().ServerPreferredNamespacedResources()
	if err != nil && len(lists) == 0 {
		return nil, err
	}
	always := map[string]bool{"configmaps": true, "leases": true, "secrets": true, "serviceaccounts": true}
	var out []string
	for _, l := range lists {
		gv, err := schema.ParseGroupVersion(l.GroupVersion)
		if err != nil {
			continue
		}
		for _, r := range l.APIResources {
			if strings.Contains(r.Name, "/") || !hasVerb(r.Verbs, "list") || r.Name == "events" || r.Name == "persistentvolumeclaims" {
				continue
			}
			res := dyn.Resource(gv.WithResource(r.Name)).Namespace(ns)
			sel := "app.kubernetes.io/part-of=valkey-ha"
			if always[r.Name] {
				sel = ""
			}
			items, err := res.List(ctx, metav1.ListOptions{LabelSelector: sel})
			if err != nil {
				continue
			}
			for _, it := range items.Items {
				name := it.GetName()
				if (r.Name == "configmaps" && name == "kube-root-ca.crt") || (r.Name == "serviceaccounts" && name == "default") {
					continue
				}
				out = append(out, r.Name+"/"+name)
			}
		}
	}
	sort.Strings(out)
	return out, nil
}

func hasVerb(verbs []string, v string) bool {
	for _, x := range verbs {
		if x == v {
			return true
		}
	}
	return false
}
