package spec

import (
	"fmt"
	"maps"
	"strings"

	"github.com/valkey-ha/valkey-ha/internal/chartapi/contract"
	"github.com/valkey-ha/valkey-ha/internal/valkeyapi/acl"
)

// CheckCanonical refuses a descriptor that names anything but what charts/valkey renders for the instance whose
// descriptor is ConfigMap cmName in namespace cmNamespace (docs/contract.md). The descriptor decides where the
// controllers send credentials (node hosts get AUTH _operator, Sentinels are told to AUTH _sentinel at the
// primary's host) and which Secret holds the _sentinel password, and any principal that may write ConfigMaps in
// the namespace can change it, and so could send a credential to a host of its choosing: only the canonical
// names are accepted, so a rewritten descriptor can point at nothing but the instance's own pods and Secrets.
//
// Checked: name = cmName without "-instance", namespace = cmNamespace, node i = pod F-i-0 of StatefulSet F-i,
// podSelector = {valkey.io/instance: F}, sentinelAuth = _sentinel in F-sentinel-auth key password, aclSecret =
// F-acl. When clusterDomain is not empty, node i's host must be F-i-0.F-i.<namespace>.svc.<clusterDomain> and
// its port the instance port; an empty clusterDomain skips the host check (tests that run every node on
// loopback). systemSecret may name auth.existingSecret: the instance controller's Role bounds which Secrets it
// can read. The error names the first offending field and what it must be.
func (in Instance) CheckCanonical(cmName, cmNamespace, clusterDomain string) error {
	bad := func(field, format string, args ...any) error {
		return fmt.Errorf("instance.json: %s: %s (a descriptor may only name its own instance's objects; who can write ConfigMaps in %s must not redirect credentials)",
			field, fmt.Sprintf(format, args...), cmNamespace)
	}
	f, ok := contract.InstanceOf(cmName)
	if !ok {
		return bad("name", "ConfigMap %q does not end in %s", cmName, contract.DescriptorSuffix)
	}
	if in.Name != f {
		return bad("name", "is %q, the ConfigMap %s says %q", in.Name, cmName, f)
	}
	if in.Namespace != cmNamespace {
		return bad("namespace", "is %q, the ConfigMap lives in %q", in.Namespace, cmNamespace)
	}
	for i, n := range in.Nodes {
		field := fmt.Sprintf("nodes[%d]", i)
		if want := contract.NodePod(f, i); n.Pod != want {
			return bad(field+".pod", "is %q, must be %q", n.Pod, want)
		}
		if want := contract.NodeStatefulSet(f, i); n.StatefulSet != want {
			return bad(field+".statefulSet", "is %q, must be %q", n.StatefulSet, want)
		}
		if clusterDomain == "" {
			continue
		}
		if want := contract.NodeHost(f, i, cmNamespace, clusterDomain); NormalizeHost(n.Host) != want {
			return bad(field+".host", "is %q, must be %q", n.Host, want)
		}
		if n.Port != 0 && n.Port != in.Port {
			return bad(field+".port", "is %d, must be the instance port %d", n.Port, in.Port)
		}
	}
	if want := map[string]string{contract.LabelInstance: f}; !maps.Equal(in.PodSelector, want) {
		return bad("podSelector", "is %v, must be %v", in.PodSelector, want)
	}
	if want := (SecretRef{User: "_sentinel", SecretName: contract.SentinelAuthSecret(f), SecretKey: contract.KeyPassword}); in.SentinelAuth != want {
		return bad("sentinelAuth", "is %+v, must be %+v", in.SentinelAuth, want)
	}
	if want := contract.ACLSecret(f); in.ACLSecret != want {
		return bad("aclSecret", "is %q, must be %q", in.ACLSecret, want)
	}
	return nil
}

// SentinelSecretName returns the Secret of quorum release's Sentinel user user (acl.SentinelAdmin, Instance or
// Client, "_admin" -> "<release>-auth-admin"). charts/valkey-sentinel's credentials Job generates these Secrets at
// run time (keys username and password) unless they exist; charts/valkey mounts and grants
// <release>-auth-instance by this name (docs/contract.md).
func SentinelSecretName(release, user string) string { return contract.QuorumSecret(release, user) }

// CredentialScope is where a quorum credential may be sent: the namespace and fullname of the quorum whose
// _instance password it is. The zero scope is that of Secret S-auth-instance mounted or read in the instance's
// own namespace (the descriptor's sentinelRelease there). A copy in F-quorum-auth, written by a quorum of
// another namespace (docs/fleet.md), carries its scope in its keys namespace and release (ScopeOf): only that
// quorum's controller may write that Secret, so its scope cannot be redirected by whoever may rewrite the
// instance's ConfigMaps (the descriptor's sentinelGrant is not trusted for it).
type CredentialScope struct {
	Namespace string
	Release   string
}

// ScopeOf returns the scope of a credential from its keys (contract.KeyNamespace, KeyRelease; get returns ""
// for a missing key).
func ScopeOf(get func(key string) string) CredentialScope {
	return CredentialScope{Namespace: strings.TrimSpace(get(contract.KeyNamespace)), Release: strings.TrimSpace(get(contract.KeyRelease))}
}

// QuorumCredentialSecret is the Secret of in's namespace that holds the _instance credential of its quorum:
// F-quorum-auth when the descriptor grants a quorum of another namespace (charts/valkey sentinel.namespace;
// its credentials Job creates it and that quorum fills it), else the quorum's own S-auth-instance. The
// descriptor only picks the name; the charts grant exactly the one they render, and the credential's own
// scope (CheckCanonicalFor) decides where it may go.
func (in Instance) QuorumCredentialSecret() string {
	if in.SentinelGrant != nil && in.SentinelGrant.Namespace != in.Namespace {
		return contract.QuorumCopy(in.Name)
	}
	return SentinelSecretName(in.SentinelRelease, acl.SentinelInstance)
}

// CheckCanonical is CheckCanonicalFor with the zero scope: a credential of the instance's own namespace.
func (si SentinelInfo) CheckCanonical(in Instance, clusterDomain string) error {
	return si.CheckCanonicalFor(in, CredentialScope{}, clusterDomain)
}

// CheckCanonicalFor refuses a sentinels.json to which in's components must not send a quorum credential of
// scope cs: one published by another quorum than the descriptor's sentinelRelease (or any, when the descriptor
// names none) or than the scope's (its release, and its namespace; the instance's own for the zero scope), or,
// when clusterDomain is not empty, one whose hosts are not exactly that quorum's pods S-<i>.S-headless.<quorum
// namespace>.svc.<clusterDomain> on port 26379. Whoever may write ConfigMaps can rewrite <F>-sentinels and
// <F>-instance, and so choose where the credential goes: with this check a rewritten one can point the
// credential at nothing but the quorum's own Sentinels. An empty clusterDomain skips the host check (tests on
// loopback).
func (si SentinelInfo) CheckCanonicalFor(in Instance, cs CredentialScope, clusterDomain string) error {
	bad := func(field, format string, args ...any) error {
		return fmt.Errorf("sentinels.json of %s: %s: %s (Sentinel credentials go only to the quorum the descriptor names)",
			in.Name, field, fmt.Sprintf(format, args...))
	}
	if in.SentinelRelease == "" {
		return bad("sentinelRelease", "the descriptor names no quorum (sentinelRelease is empty)")
	}
	if si.SentinelRelease != in.SentinelRelease {
		return bad("sentinelRelease", "is %q, the descriptor names %q", si.SentinelRelease, in.SentinelRelease)
	}
	if cs.Release != "" && si.SentinelRelease != cs.Release {
		return bad("sentinelRelease", "is %q, the credential is quorum %q's", si.SentinelRelease, cs.Release)
	}
	qns := cs.Namespace
	if qns == "" {
		qns = in.Namespace
	}
	if !si.PublishedBy(qns, in.SentinelRelease, in.Namespace) {
		return bad("sentinelNamespace", "is %q, the credential is for a quorum of namespace %q", si.Quorum(in.Namespace), qns)
	}
	if clusterDomain == "" {
		return nil
	}
	if si.Port != contract.SentinelPort {
		return bad("port", "is %d, must be %d", si.Port, contract.SentinelPort)
	}
	s := si.SentinelRelease
	for i, h := range si.Hosts {
		if want := contract.SentinelHost(s, i, qns, clusterDomain); NormalizeHost(h) != want {
			return bad(fmt.Sprintf("hosts[%d]", i), "is %q, must be %q", h, want)
		}
	}
	return nil
}
