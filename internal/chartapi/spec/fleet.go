package spec

import (
	"fmt"
	"regexp"
	"strings"
)

// ServiceAccountRef names a ServiceAccount: the identity of a controller that an instance grants access to
// (docs/fleet.md). In instance.json it is {"namespace": ..., "serviceAccount": ...}.
type ServiceAccountRef struct {
	Namespace string `json:"namespace"`
	Name      string `json:"serviceAccount"`
}

// String returns "<namespace>/<serviceAccount>".
func (r ServiceAccountRef) String() string { return r.Namespace + "/" + r.Name }

// IsZero reports whether r names nothing.
func (r ServiceAccountRef) IsZero() bool { return r.Namespace == "" && r.Name == "" }

var saNameRE = regexp.MustCompile(`^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$`)

// validate checks that r names a namespace (a DNS label) and a ServiceAccount (a DNS subdomain name).
func (r ServiceAccountRef) validate(field string) error {
	if !dnsLabelRE.MatchString(r.Namespace) || len(r.Namespace) > 63 {
		return fmt.Errorf("instance.json: %s.namespace: %q is not a namespace name", field, r.Namespace)
	}
	if !saNameRE.MatchString(r.Name) {
		return fmt.Errorf("instance.json: %s.serviceAccount: %q is not a ServiceAccount name", field, r.Name)
	}
	return nil
}

// ParseServiceAccountRef parses "<namespace>/<serviceAccount>" (the controllers' --shared-identity and the
// sentinel controller's identity).
func ParseServiceAccountRef(s string) (ServiceAccountRef, error) {
	ns, name, ok := strings.Cut(s, "/")
	r := ServiceAccountRef{Namespace: ns, Name: name}
	if !ok {
		return r, fmt.Errorf("%q is not <namespace>/<serviceAccount>", s)
	}
	if err := r.validate("identity"); err != nil {
		return r, fmt.Errorf("%q: %w", s, err)
	}
	return r, nil
}

// validateFleet checks the fleet fields of a descriptor (version 1.1).
func (in Instance) validateFleet() error {
	if in.InstanceController != nil {
		if err := in.InstanceController.validate("instanceController"); err != nil {
			return err
		}
	}
	if in.SentinelGrant != nil {
		if err := in.SentinelGrant.validate("sentinelGrant"); err != nil {
			return err
		}
	}
	return nil
}

// SharedController reports whether the descriptor asks to be served by a shared instance controller
// (charts/valkey controller.mode shared) rather than by its own Deployment F-controller.
func (in Instance) SharedController() bool { return in.InstanceController != nil }

// ServedBy reports whether a shared instance controller with identity id serves this instance: the
// descriptor names exactly that ServiceAccount and namespace.
func (in Instance) ServedBy(id ServiceAccountRef) bool {
	return in.InstanceController != nil && *in.InstanceController == id
}

// GrantsSentinel reports whether the quorum whose controller runs as id may monitor this instance, and when
// not, why (a sentence for events and the quorum status). A descriptor with a sentinelGrant grants exactly
// the quorum it names; one without (charts/valkey before descriptor 1.1) grants only a quorum of its own
// namespace, as those charts did. An empty id (a controller started without its identity: tests, older
// charts/valkey-sentinel) is granted by any descriptor of its own namespace and by none elsewhere.
func (in Instance) GrantsSentinel(id ServiceAccountRef) (bool, string) {
	if in.SentinelGrant == nil {
		if id.IsZero() || in.Namespace == id.Namespace {
			return true, ""
		}
		return false, fmt.Sprintf("instance %s/%s grants no quorum of another namespace (no sentinelGrant: set sentinel.namespace %s and sentinel.controllerServiceAccount %s in its release)",
			in.Namespace, in.Name, id.Namespace, id.Name)
	}
	if id.IsZero() {
		if in.SentinelGrant.Namespace == in.Namespace {
			return true, ""
		}
		return false, fmt.Sprintf("instance %s/%s grants %s, and this controller runs without --service-account", in.Namespace, in.Name, in.SentinelGrant)
	}
	if *in.SentinelGrant != id {
		return false, fmt.Sprintf("instance %s/%s grants monitoring to %s, not to this quorum's %s", in.Namespace, in.Name, in.SentinelGrant, id)
	}
	return true, ""
}

// HostNamespace returns the namespace of a node FQDN <pod>.<service>.<namespace>.svc.<domain> (a Sentinel
// monitor's registered host), or "" when host has another form (loopback tests).
func HostNamespace(host string) string {
	parts := strings.Split(NormalizeHost(host), ".")
	if len(parts) >= 5 && parts[3] == "svc" && parts[2] != "" {
		return parts[2]
	}
	return ""
}

// PublishedBy reports whether this Sentinel info was published by the quorum release in namespace
// quorumNS, for an instance of namespace instanceNS (an info without sentinelNamespace was written by a
// quorum of the instance's own namespace).
func (si SentinelInfo) PublishedBy(quorumNS, release, instanceNS string) bool {
	ns := si.SentinelNamespace
	if ns == "" {
		ns = instanceNS
	}
	return si.SentinelRelease == release && ns == quorumNS
}

// Quorum returns "<namespace>/<release>" of the quorum that published the info (namespace as PublishedBy
// reads it).
func (si SentinelInfo) Quorum(instanceNS string) string {
	ns := si.SentinelNamespace
	if ns == "" {
		ns = instanceNS
	}
	return ns + "/" + si.SentinelRelease
}
