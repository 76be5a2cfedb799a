package controller

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/valkey-ha/valkey-ha/internal/chartapi/contract"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/valkey-ha/valkey-ha/internal/chartapi/spec"
	"github.com/valkey-ha/valkey-ha/internal/controllers/kube"
	"github.com/valkey-ha/valkey-ha/internal/valkeyapi/acl"
)

// quorumCredentials caches the quorum passwords an instance controller sends to the Sentinels: the
// acl.SentinelInstance password of Secret <S>-auth-instance (discovery, failover), or, for a quorum of
// another namespace, of the instance's copy F-quorum-auth with the scope that quorum wrote into it
// (spec.CredentialScope), and the acl.SentinelController password of Secret <S>-auth-controller (SENTINEL
// RESET only; a quorum of the instance's own namespace only: a quorum of another namespace copies no
// _controller password), which charts/valkey lets this controller `get` by name for the quorum named in
// sentinel.release (docs/contract.md). A read is kept a minute (a failed one 10 s: the quorum's credentials
// Job creates the Secrets at install, and S-auth-controller on the upgrade that introduced it), so a pass
// that dials every Sentinel reads each at most once. The zero value is ready to use.
type quorumCredentials struct {
	mu      sync.Mutex
	entries map[types.NamespacedName]quorumCredential
}

type quorumCredential struct {
	password string
	scope    spec.CredentialScope
	err      string
	readAt   time.Time
}

// credential returns the acl.SentinelInstance user and password for si's Sentinels, or none when the Secret
// cannot be read (the Sentinels then refuse the commands, which the caller reports as unreachable) or si is
// not the quorum the credential is for (spec.SentinelInfo.CheckCanonicalFor with clusterDomain: a rewritten
// <F>-sentinels or <F>-instance gets no password).
func (q *quorumCredentials) credential(ctx context.Context, cs kubernetes.Interface, log *slog.Logger, in spec.Instance,
	si spec.SentinelInfo, clusterDomain string) (user, password string) {
	user, password, _ = q.credentialOf(ctx, cs, log, in, si, clusterDomain, acl.SentinelInstance)
	return user, password
}

// credentialOf is credential for the quorum user u (acl.SentinelInstance: Secret in.QuorumCredentialSecret();
// acl.SentinelController: Secret <S>-auth-controller of a quorum in the instance's own namespace); why says
// why there is none ("" when there is one).
func (q *quorumCredentials) credentialOf(ctx context.Context, cs kubernetes.Interface, log *slog.Logger, in spec.Instance,
	si spec.SentinelInfo, clusterDomain, u string) (user, password, why string) {
	if err := si.CheckCanonicalFor(in, spec.CredentialScope{Namespace: si.SentinelNamespace, Release: si.SentinelRelease}, clusterDomain); err != nil {
		return "", "", err.Error() // refused whatever the credential's scope: nothing to read
	}
	name := in.QuorumCredentialSecret()
	if u != acl.SentinelInstance {
		if name != spec.SentinelSecretName(in.SentinelRelease, acl.SentinelInstance) {
			return "", "", "the quorum is in another namespace and copies no " + u + " password"
		}
		name = spec.SentinelSecretName(in.SentinelRelease, u)
	}
	key := types.NamespacedName{Namespace: in.Namespace, Name: name}
	q.mu.Lock()
	defer q.mu.Unlock()
	e, ok := q.entries[key]
	if !ok || time.Since(e.readAt) > time.Minute || (e.err != "" && time.Since(e.readAt) > 10*time.Second) {
		data, err := kube.ReadSecret(ctx, cs, in.Namespace, name)
		next := quorumCredential{password: data[contract.KeyPassword], scope: spec.ScopeOf(func(k string) string { return data[k] }), readAt: time.Now()}
		if err == nil && next.password == "" {
			err = fmt.Errorf("secret %s/%s has no key %q yet", in.Namespace, name, contract.KeyPassword)
		}
		if err != nil {
			next.err = err.Error()
			if !ok || e.err != next.err {
				log.Warn("quorum credential unreadable; the Sentinels will refuse this controller", "instance", in.Name, "user", u, "error", err)
			}
		}
		if q.entries == nil {
			q.entries = map[types.NamespacedName]quorumCredential{}
		}
		q.entries[key], e = next, next
	}
	if e.password == "" {
		return "", "", "Secret " + name + " unreadable: " + e.err
	}
	if err := si.CheckCanonicalFor(in, e.scope, clusterDomain); err != nil {
		return "", "", err.Error()
	}
	return u, e.password, ""
}
