package controller

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/valkey-ha/valkey-ha/internal/contract"

	"k8s.io/client-go/kubernetes"

	"github.com/valkey-ha/valkey-ha/internal/acl"
	"github.com/valkey-ha/valkey-ha/internal/kube"
	"github.com/valkey-ha/valkey-ha/internal/spec"
)

// quorumCredentials caches the quorum passwords an instance controller sends to the Sentinels: the
// acl.SentinelInstance password of Secret <S>-auth-instance (discovery, failover) and the
// acl.SentinelController password of Secret <S>-auth-controller (SENTINEL RESET only), which charts/valkey lets
// this controller `get` by name for the quorum named in sentinel.release (docs/contract.md). A read is kept a
// minute (a failed one 10 s: the quorum's credentials Job creates the Secrets at install, and S-auth-controller
// on the upgrade that introduced it), so a pass that dials every Sentinel reads each at most once. The zero
// value is ready to use.
type quorumCredentials struct {
	mu      sync.Mutex
	entries map[string]quorumCredential
}

type quorumCredential struct {
	password string
	err      string
	readAt   time.Time
}

// credential returns the acl.SentinelInstance user and password for si's Sentinels, or none when si is not the
// quorum in names (spec.SentinelInfo.CheckCanonical with clusterDomain: a rewritten <F>-sentinels gets no
// password) or the Secret cannot be read (the Sentinels then refuse the commands, which the caller reports as
// unreachable).
func (q *quorumCredentials) credential(ctx context.Context, cs kubernetes.Interface, log *slog.Logger, in spec.Instance,
	si spec.SentinelInfo, clusterDomain string) (user, password string) {
	user, password, _ = q.credentialOf(ctx, cs, log, in, si, clusterDomain, acl.SentinelInstance)
	return user, password
}

// credentialOf is credential for the quorum user u (acl.SentinelInstance or acl.SentinelController, Secret
// <S>-auth-<u>); why says why there is none ("" when there is one).
func (q *quorumCredentials) credentialOf(ctx context.Context, cs kubernetes.Interface, log *slog.Logger, in spec.Instance,
	si spec.SentinelInfo, clusterDomain, u string) (user, password, why string) {
	if err := si.CheckCanonical(in, clusterDomain); err != nil {
		return "", "", err.Error()
	}
	name := spec.SentinelSecretName(in.SentinelRelease, u)
	key := in.Namespace + "/" + name
	q.mu.Lock()
	defer q.mu.Unlock()
	e, ok := q.entries[key]
	if !ok || time.Since(e.readAt) > time.Minute || (e.err != "" && time.Since(e.readAt) > 10*time.Second) {
		pw, err := kube.ReadSecretKey(ctx, cs, in.Namespace, name, contract.KeyPassword)
		next := quorumCredential{password: pw, readAt: time.Now()}
		if err != nil {
			next.err = err.Error()
			if !ok || e.err != next.err {
				log.Warn("quorum credential unreadable; the Sentinels will refuse this controller", "instance", in.Name, "user", u, "error", err)
			}
		}
		if q.entries == nil {
			q.entries = map[string]quorumCredential{}
		}
		q.entries[key], e = next, next
	}
	if e.password == "" {
		return "", "", "Secret " + name + " unreadable: " + e.err
	}
	return u, e.password, ""
}
