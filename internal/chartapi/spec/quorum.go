package spec

import (
	"encoding/json"
	"fmt"
	"net"
	"reflect"
	"strconv"
	"strings"

	"github.com/valkey-ha/valkey-ha/internal/chartapi/contract"
)

// QuorumVersion is the "<major>.<minor>" of the quorum document this build reads and charts/valkey-sentinel
// writes; a document of a newer major version is refused.
const QuorumVersion = "1.1"

// Quorum is the document charts/valkey-sentinel publishes in ConfigMap S-quorum, key quorum.json, the way
// charts/valkey publishes its nodes in the descriptor: the quorum's Sentinels, by stable FQDN, for every
// ordinal the chart's replicas value renders. The sentinel controller reads it each pass (with the count of
// Sentinels from the StatefulSet's spec.replicas, which may still be changing during an upgrade) instead of
// re-deriving the chart's names from flags.
type Quorum struct {
	Version     string `json:"version,omitempty"`
	Release     string `json:"release"`
	Namespace   string `json:"namespace"`
	StatefulSet string `json:"statefulSet"`
	Service     string `json:"service"`
	Port        int    `json:"port"`
	TLS         bool   `json:"tls"`
	// Hosts are the Sentinels' FQDNs S-i.S-headless.NS.svc.D, index = pod ordinal. A host that carries its
	// own port ("localhost:26380") keeps it (tests on loopback).
	Hosts []string `json:"hosts"`
	// Selector is the quorum's valkeySelector as a label selector string (the controller's --selector; an
	// empty string selects nothing); nil in a document before 1.1. Informational: instance controllers read
	// it to say why the quorum their instance names does not select it (plan.QuorumMismatches); the sentinel
	// controller selects with its flag.
	Selector *string `json:"valkeySelector,omitempty"`
	// ControllerServiceAccount is the ServiceAccount the quorum's controller runs as (the chart's
	// controller.serviceAccountName; "" in a document before 1.1): an instance grants monitoring to exactly
	// one (its sentinelGrant), and instance controllers read it to say when the two differ.
	ControllerServiceAccount string `json:"controllerServiceAccount,omitempty"`
	// Unknown lists fields of the parsed document this build does not know (reported, not refused).
	Unknown []string `json:"-"`
}

// ParseQuorum decodes and validates quorum.json (forward-compatibly, like ParseInstance: unknown fields are
// listed in Unknown, a newer major version is refused with a *VersionError).
func ParseQuorum(data []byte) (Quorum, error) {
	var q Quorum
	if err := json.Unmarshal(data, &q); err != nil {
		return q, fmt.Errorf("%s: %w", contract.KeyQuorum, err)
	}
	q.Unknown = unknownFields(data, reflect.TypeOf(q))
	if err := checkDocVersion(contract.KeyQuorum, q.Version, QuorumVersion); err != nil {
		return q, err
	}
	bad := func(field, format string, args ...any) error {
		return fmt.Errorf("%s: %s: %s", contract.KeyQuorum, field, fmt.Sprintf(format, args...))
	}
	switch {
	case !dnsLabelRE.MatchString(q.Release):
		return q, bad("release", "%q is not a DNS label", q.Release)
	case q.Namespace == "":
		return q, bad("namespace", "empty")
	case q.StatefulSet == "" || q.Service == "":
		return q, bad("statefulSet", "statefulSet and service are required")
	case q.Port < 1 || q.Port > 65535:
		return q, bad("port", "%d is not a port", q.Port)
	case len(q.Hosts) == 0:
		return q, bad("hosts", "empty")
	}
	for i, h := range q.Hosts {
		host := h
		if hh, _, err := net.SplitHostPort(h); err == nil {
			host = hh
		}
		if host == "" || net.ParseIP(host) != nil {
			return q, bad(fmt.Sprintf("hosts[%d]", i), "%q must be a hostname, not empty or an IP", h)
		}
	}
	return q, nil
}

// CheckCanonical refuses a quorum document that names anything but what charts/valkey-sentinel renders for
// quorum S whose document is ConfigMap cmName in namespace cmNamespace: release S = cmName without
// -quorum, StatefulSet S, Service S-headless, port 26379, and, when clusterDomain is not empty, host i =
// S-i.S-headless.<namespace>.svc.<clusterDomain>. The document decides where the quorum's controller sends
// its _admin password, and whoever may write ConfigMaps can rewrite it.
func (q Quorum) CheckCanonical(cmName, cmNamespace, clusterDomain string) error {
	bad := func(field, format string, args ...any) error {
		return fmt.Errorf("%s: %s: %s (the quorum document may only name its own Sentinels)", contract.KeyQuorum, field, fmt.Sprintf(format, args...))
	}
	if q.Release == "" || contract.Quorum(q.Release) != cmName {
		return bad("release", "is %q, the ConfigMap is %s", q.Release, cmName)
	}
	if q.Namespace != cmNamespace {
		return bad("namespace", "is %q, the ConfigMap lives in %q", q.Namespace, cmNamespace)
	}
	if want := contract.SentinelStatefulSet(q.Release); q.StatefulSet != want {
		return bad("statefulSet", "is %q, must be %q", q.StatefulSet, want)
	}
	if want := contract.SentinelHeadless(q.Release); q.Service != want {
		return bad("service", "is %q, must be %q", q.Service, want)
	}
	if clusterDomain == "" {
		return nil
	}
	if q.Port != contract.SentinelPort {
		return bad("port", "is %d, must be %d", q.Port, contract.SentinelPort)
	}
	for i, h := range q.Hosts {
		if want := contract.SentinelHost(q.Release, i, cmNamespace, clusterDomain); NormalizeHost(h) != want {
			return bad(fmt.Sprintf("hosts[%d]", i), "is %q, must be %q", h, want)
		}
	}
	return nil
}

// Addrs returns host:port for the first n Sentinels (all when n is larger).
func (q Quorum) Addrs(n int) []string {
	n = min(n, len(q.Hosts))
	out := make([]string, n)
	for i, h := range q.Hosts[:n] {
		if _, _, err := net.SplitHostPort(h); err == nil {
			out[i] = h
			continue
		}
		out[i] = net.JoinHostPort(h, strconv.Itoa(q.Port))
	}
	return out
}

// checkDocVersion refuses a document (named doc) whose major version is newer than ours; "" reads as 1.0.
func checkDocVersion(doc, v, ours string) error {
	if v == "" {
		return nil
	}
	maj, _, ok := strings.Cut(v, ".")
	ourMaj, _, _ := strings.Cut(ours, ".")
	n, err := strconv.Atoi(maj)
	o, _ := strconv.Atoi(ourMaj)
	switch {
	case !ok || err != nil || n < 1:
		return fmt.Errorf("%s: version: %q is not <major>.<minor> (this controller reads %q)", doc, v, ours)
	case n > o:
		return fmt.Errorf("%s: version %s is newer than this controller reads (%s): upgrade valkey-sentinel-ctl", doc, v, ours)
	}
	return nil
}
