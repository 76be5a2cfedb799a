// Package spec decodes and validates the documents the charts and the controllers share (docs/contract.md):
// the instance descriptor (instance.json, rendered by charts/valkey) and the Sentinel info (sentinels.json,
// written by the sentinel controller). What a CRD would validate lives here, so a malformed descriptor is
// refused with an error naming the field, never half-used.
package spec

import (
	"encoding/json"
	"fmt"
	"net"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/types"

	"github.com/valkey-ha/valkey-ha/internal/chartapi/contract"
)

// Node is one data node of an instance.
type Node struct {
	Index       int    `json:"index"`
	Pod         string `json:"pod"`
	StatefulSet string `json:"statefulSet"`
	// Host is the node's stable FQDN: <pod>.<per-node service>.<ns>.svc.<domain>.
	Host string `json:"host"`
	// Port overrides the instance port for this node (0 = the instance port). The charts never set it; tests
	// that run every node on localhost do.
	Port int `json:"port,omitempty"`
}

// TLS is the TLS setting of an instance or a quorum.
type TLS struct {
	Enabled    bool   `json:"enabled"`
	SecretName string `json:"secretName,omitempty"`
}

// SecretRef names one key of a Secret and the ACL user it authenticates.
type SecretRef struct {
	User       string `json:"user"`
	SecretName string `json:"secretName"`
	SecretKey  string `json:"secretKey"`
}

// Instance is the descriptor charts/valkey publishes in ConfigMap <F>-instance, key instance.json.
type Instance struct {
	// Version is the descriptor's "<major>.<minor>" (see DescriptorVersion; "" reads as 1.0).
	Version      string `json:"version,omitempty"`
	Name         string `json:"name"`
	Namespace    string `json:"namespace"`
	Release      string `json:"release"`
	Engine       string `json:"engine"`
	MonitorName  string `json:"monitorName"`
	FailoverMode string `json:"failoverMode"`
	// Quorum pins the Sentinel quorum; 0 lets the Sentinel side decide (Sentinels/2+1).
	Quorum int `json:"quorum"`
	// SentinelConfig holds per-monitor SENTINEL SET keys (e.g. down-after-milliseconds in ms).
	SentinelConfig map[string]string `json:"sentinelConfig"`
	Port           int               `json:"port"`
	TLS            TLS               `json:"tls"`
	Persistence    bool              `json:"persistence"`
	Nodes          []Node            `json:"nodes"`
	PodSelector    map[string]string `json:"podSelector"`
	SentinelAuth   SecretRef         `json:"sentinelAuth"`
	SystemSecret   string            `json:"systemSecret"`
	ACLSecret      string            `json:"aclSecret"`
	// SentinelRelease is the fullname S of the valkey-sentinel release that monitors the instance (the chart's
	// sentinel.release; descriptor 1.1). The instance's components authenticate to that quorum's Sentinels as
	// the _instance user with the password in Secret S-auth-instance (SentinelSecretName), and only to a
	// sentinels.json that names it (SentinelInfo.CheckCanonical). Empty (descriptor 1.0): no credentials are
	// sent to any Sentinel.
	SentinelRelease string `json:"sentinelRelease,omitempty"`
	// InstanceController names the shared instance controller that serves this instance (charts/valkey
	// controller.mode shared; descriptor 1.1); nil: its own controller F-controller (--instance F).
	InstanceController *ServiceAccountRef `json:"instanceController,omitempty"`
	// SentinelGrant names the controller of the one quorum this instance lets monitor it and read F-sentinel-auth
	// (sentinel.controllerServiceAccount and sentinel.namespace; descriptor 1.1); nil: a chart
	// before 1.1, which grants only a quorum of its own namespace (GrantsSentinel).
	SentinelGrant *ServiceAccountRef `json:"sentinelGrant,omitempty"`
	// Claims is the volume claim every data StatefulSet's volumeClaimTemplates must hold (charts/valkey
	// persistence.size and persistence.storageClass; descriptor 1.2); nil: no claims of their own
	// (persistence off, or persistence.existingClaims) or a chart before 1.2.
	Claims *Claims `json:"claims,omitempty"`

	// Unknown lists the fields of the parsed document this build does not know, as paths ("nodes[1].zone"),
	// for the controllers to report: a newer charts/valkey may add fields (see DescriptorVersion).
	Unknown []string `json:"-"`
}

var (
	monitorNameRE = regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}$`)
	dnsLabelRE    = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)
	configKeyRE   = regexp.MustCompile(`^[a-z][a-z0-9-]{0,63}$`)
)

// ParseInstance decodes and validates instance.json, forward-compatibly: fields this build does not know
// are listed in Instance.Unknown, not refused, so a newer charts/valkey that adds a field does not make an
// older controller drop the instance. A descriptor whose major version is newer than DescriptorVersion is
// refused with a *VersionError. Other errors name the offending field. The returned Instance holds whatever
// decoded, also on error, so a caller can still tell which monitor the descriptor names.
func ParseInstance(data []byte) (Instance, error) {
	var in Instance
	if err := json.Unmarshal(data, &in); err != nil {
		return in, fmt.Errorf("instance.json: %w", err)
	}
	in.Unknown = unknownFields(data, reflect.TypeOf(in))
	if err := checkVersion(in.Version); err != nil {
		return in, err
	}
	return in, in.Validate()
}

// Validate checks the descriptor's fields; the error names the first bad field.
func (in Instance) Validate() error {
	bad := func(field, format string, args ...any) error {
		return fmt.Errorf("instance.json: %s: %s", field, fmt.Sprintf(format, args...))
	}
	if !dnsLabelRE.MatchString(in.Name) {
		return bad("name", "%q is not a DNS label", in.Name)
	}
	if in.Namespace == "" {
		return bad("namespace", "empty")
	}
	if in.Engine != "valkey" && in.Engine != "redis" {
		return bad("engine", "%q is not valkey or redis", in.Engine)
	}
	if !monitorNameRE.MatchString(in.MonitorName) {
		return bad("monitorName", "%q must match %s", in.MonitorName, monitorNameRE)
	}
	if in.FailoverMode != contract.FailoverSentinel && in.FailoverMode != contract.FailoverNone {
		return bad("failoverMode", "%q is not Sentinel or None", in.FailoverMode)
	}
	if in.Quorum < 0 {
		return bad("quorum", "%d is negative", in.Quorum)
	}
	if in.Port < 1 || in.Port > 65535 {
		return bad("port", "%d is not a port", in.Port)
	}
	if len(in.Nodes) == 0 {
		return bad("nodes", "empty")
	}
	for i, n := range in.Nodes {
		if n.Index != i {
			return bad(fmt.Sprintf("nodes[%d].index", i), "is %d, want %d", n.Index, i)
		}
		if n.Host == "" || net.ParseIP(n.Host) != nil {
			return bad(fmt.Sprintf("nodes[%d].host", i), "%q must be a hostname, not empty or an IP", n.Host)
		}
		if n.Pod == "" || n.StatefulSet == "" {
			return bad(fmt.Sprintf("nodes[%d]", i), "pod and statefulSet are required")
		}
	}
	for k, v := range in.SentinelConfig {
		if !configKeyRE.MatchString(k) {
			return bad("sentinelConfig", "key %q is not a Sentinel option name", k)
		}
		if strings.ContainsAny(v, "\r\n") || v == "" {
			return bad("sentinelConfig."+k, "value must be one non-empty line")
		}
	}
	if len(in.PodSelector) == 0 {
		return bad("podSelector", "empty")
	}
	if in.SentinelAuth.SecretName == "" || in.SentinelAuth.SecretKey == "" || in.SentinelAuth.User == "" {
		return bad("sentinelAuth", "user, secretName and secretKey are required")
	}
	if in.SentinelRelease != "" && !dnsLabelRE.MatchString(in.SentinelRelease) {
		return bad("sentinelRelease", "%q is not a DNS label", in.SentinelRelease)
	}
	return in.validateFleet()
}

// NamespacedName is the instance's key: its namespace and name (the controllers' work-queue key; String gives
// "<namespace>/<name>", the valkey_instance label of the metrics).
func (in Instance) NamespacedName() types.NamespacedName {
	return types.NamespacedName{Namespace: in.Namespace, Name: in.Name}
}

// Monitored reports whether the instance asks to be monitored by Sentinel.
func (in Instance) Monitored() bool { return in.FailoverMode == contract.FailoverSentinel }

// NodeByAddr returns the node with that host (case-insensitive, trailing dot ignored) and port.
func (in Instance) NodeByAddr(host string, port int) (Node, bool) {
	h := NormalizeHost(host)
	for _, n := range in.Nodes {
		if NormalizeHost(n.Host) == h && in.PortOf(n) == port {
			return n, true
		}
	}
	return Node{}, false
}

// NodeAddrs returns "host:port" of every node, in index order (what OwnNode takes).
func (in Instance) NodeAddrs() []string {
	out := make([]string, 0, len(in.Nodes))
	for _, n := range in.Nodes {
		out = append(out, in.Addr(n))
	}
	return out
}

// OwnNode reports whether host:port is one of addrs, the "host:port" of an instance's own nodes (NodeAddrs;
// hosts compared as NormalizeHost does). It is the check every component makes before it follows, registers,
// repeats or sends a credential to a primary that Sentinel names: on a quorum shared by tenants, one tenant's
// forged hello moves any monitor of the quorum to any address, so an address Sentinel names is
// only a hint until it is one of the instance's own nodes. An empty addrs owns nothing.
func OwnNode(addrs []string, host string, port int) bool {
	h := NormalizeHost(host)
	for _, a := range addrs {
		ah, ap, err := net.SplitHostPort(a)
		if err != nil {
			continue
		}
		if NormalizeHost(ah) == h && ap == strconv.Itoa(port) {
			return true
		}
	}
	return false
}

// PortOf returns the node's port.
func (in Instance) PortOf(n Node) int {
	if n.Port != 0 {
		return n.Port
	}
	return in.Port
}

// SameAddr reports whether host:port names node n.
func (in Instance) SameAddr(n Node, host string, port int) bool {
	return NormalizeHost(n.Host) == NormalizeHost(host) && in.PortOf(n) == port
}

// NormalizeHost lower-cases a host name and drops a trailing dot.
func NormalizeHost(h string) string { return strings.TrimSuffix(strings.ToLower(h), ".") }

// Addr returns host:port of a node.
func (in Instance) Addr(n Node) string { return net.JoinHostPort(n.Host, strconv.Itoa(in.PortOf(n))) }

// ReservedSentinelKeys are per-monitor keys the controller owns; a descriptor's sentinelConfig may not set
// them (docs/design.md, "Credential boundaries": credentials and structure are the controller's).
var ReservedSentinelKeys = map[string]bool{
	"auth-user": true, "auth-pass": true, "quorum": true, "monitor": true,
	"client-reconfig-script": true, "notification-script": true,
}

// SentinelSetPairs returns the descriptor's SENTINEL SET pairs with reserved keys removed, sorted by key for
// a stable order, and the list of reserved keys that were skipped.
func (in Instance) SentinelSetPairs() (pairs [][2]string, skipped []string) {
	keys := make([]string, 0, len(in.SentinelConfig))
	for k := range in.SentinelConfig {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if ReservedSentinelKeys[k] {
			skipped = append(skipped, k)
			continue
		}
		pairs = append(pairs, [2]string{k, in.SentinelConfig[k]})
	}
	return pairs, skipped
}

// SentinelInfo is what the sentinel controller publishes for a monitored instance in ConfigMap <F>-sentinels,
// key sentinels.json; data pods read it at boot.
type SentinelInfo struct {
	MonitorName     string `json:"monitorName"`
	SentinelRelease string `json:"sentinelRelease"`
	// SentinelNamespace is the quorum's namespace; empty means the instance's own (a quorum before
	// cross-namespace selection, or one of the same namespace).
	SentinelNamespace string   `json:"sentinelNamespace,omitempty"`
	Port              int      `json:"port"`
	TLS               bool     `json:"tls"`
	Hosts             []string `json:"hosts"`
}

// ParseSentinelInfo decodes and validates sentinels.json.
func ParseSentinelInfo(data []byte) (SentinelInfo, error) {
	var si SentinelInfo
	if err := json.Unmarshal(data, &si); err != nil {
		return si, fmt.Errorf("sentinels.json: %w", err)
	}
	if !monitorNameRE.MatchString(si.MonitorName) {
		return si, fmt.Errorf("sentinels.json: monitorName %q is invalid", si.MonitorName)
	}
	if si.Port < 1 || si.Port > 65535 {
		return si, fmt.Errorf("sentinels.json: port %d is not a port", si.Port)
	}
	if len(si.Hosts) == 0 {
		return si, fmt.Errorf("sentinels.json: hosts is empty")
	}
	return si, nil
}

// Addrs returns host:port for every Sentinel. A host that already carries a port ("localhost:26380", used by
// tests that run every Sentinel on loopback) keeps it.
func (si SentinelInfo) Addrs() []string {
	out := make([]string, len(si.Hosts))
	for i, h := range si.Hosts {
		if _, _, err := net.SplitHostPort(h); err == nil {
			out[i] = h
			continue
		}
		out[i] = net.JoinHostPort(h, strconv.Itoa(si.Port))
	}
	return out
}

// Claims is the data StatefulSets' own volume claim as the values ask for it.
type Claims struct {
	// Size is persistence.size, a Kubernetes quantity such as "20Gi".
	Size string `json:"size"`
	// StorageClass is persistence.storageClass ("" = the cluster's default class).
	StorageClass string `json:"storageClass,omitempty"`
}
