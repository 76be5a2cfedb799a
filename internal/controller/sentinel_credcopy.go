package controller

// A quorum's _instance credential for the instances of other namespaces (issue 17, docs/fleet.md): their data
// pods cannot mount a Secret of the quorum's namespace, so the quorum's controller copies S-auth-instance into
// each one's F-quorum-auth, with its own namespace and release as the credential's scope
// (spec.CredentialScope). The instance's release creates that Secret empty and grants get/update on it by
// name only: the quorum can neither create a Secret there nor change one's type.

import (
	"context"
	"crypto/sha256"
	"fmt"
	"sort"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/valkey-ha/valkey-ha/internal/acl"
	"github.com/valkey-ha/valkey-ha/internal/contract"
	"github.com/valkey-ha/valkey-ha/internal/kube"
	"github.com/valkey-ha/valkey-ha/internal/plan"
)

// copyRecheck is how long a written copy is trusted without reading it again (an edit by someone else is
// repaired within it).
const copyRecheck = 10 * time.Minute

// credentialCopies remembers the copies this controller wrote, by namespace/name: a pass reads or writes
// only the copies that are new, changed or due for a recheck.
type credentialCopies struct {
	mu      sync.Mutex
	written map[types.NamespacedName]copyWritten
}

type copyWritten struct {
	sum string
	at  time.Time
}

func (cc *credentialCopies) current(key types.NamespacedName, sum string) bool {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	w, ok := cc.written[key]
	return ok && w.sum == sum && time.Since(w.at) < copyRecheck
}

func (cc *credentialCopies) remember(key types.NamespacedName, sum string) {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	if cc.written == nil {
		cc.written = map[types.NamespacedName]copyWritten{}
	}
	cc.written[key] = copyWritten{sum: sum, at: time.Now()}
}

// copyCredentials keeps F-quorum-auth of every instance of another namespace this quorum monitors (selected,
// granted, not refused) equal to the quorum's _instance credential and scope. A copy that does not exist yet
// (the instance's credentials Job creates it) or cannot be written is reported once per change on the
// descriptor (Warning CredentialNotCopied), not a pass error: the monitor does not depend on it.
func (c *SentinelController) copyCredentials(ctx context.Context, w plan.QuorumWorld, descs map[string]*corev1.ConfigMap) []error {
	if !c.opts.CopyCredential {
		return nil
	}
	var pw string
	var pwErr error
	read := false
	var errs []error
	for _, qi := range w.Instances {
		if qi.Namespace == "" || qi.Refused != "" || qi.Instance.Name == "" {
			continue
		}
		if !read {
			read = true
			pw, pwErr = kube.ReadSecretKey(ctx, c.cs, c.opts.Namespace, contract.QuorumSecret(c.opts.Release, acl.SentinelInstance), contract.KeyPassword)
			if pwErr == nil && pw == "" {
				pwErr = fmt.Errorf("secret %s has an empty password", contract.QuorumSecret(c.opts.Release, acl.SentinelInstance))
			}
		}
		name := contract.QuorumCopy(qi.Instance.Name)
		reportKey := qi.Key() + "/credential"
		if pwErr != nil {
			c.reportCopy(descs[qi.Key()], reportKey, fmt.Sprintf("the quorum's credential is unreadable, not copied to %s: %v", name, pwErr))
			continue
		}
		want := map[string][]byte{contract.KeyUsername: []byte(acl.SentinelInstance), contract.KeyPassword: []byte(pw),
			contract.KeyNamespace: []byte(c.opts.Namespace), contract.KeyRelease: []byte(c.opts.Release)}
		key, sum := types.NamespacedName{Namespace: qi.Namespace, Name: name}, dataSum(want)
		if c.copies.current(key, sum) {
			c.reported.changed(reportKey, "")
			continue
		}
		s, err := c.cs.CoreV1().Secrets(qi.Namespace).Get(ctx, name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			c.reportCopy(descs[qi.Key()], reportKey, fmt.Sprintf("Secret %s/%s does not exist yet (the instance's credentials Job creates it empty); its pods send no Sentinel credential until it does", qi.Namespace, name))
			continue
		case err != nil:
			c.reportCopy(descs[qi.Key()], reportKey, fmt.Sprintf("cannot read Secret %s/%s (does the instance's release name this quorum in sentinel.namespace and sentinel.release?): %v", qi.Namespace, name, err))
			continue
		}
		if dataSum(s.Data) != sum {
			s = s.DeepCopy()
			s.Data = want
			if _, err := c.cs.CoreV1().Secrets(qi.Namespace).Update(ctx, s, metav1.UpdateOptions{}); err != nil {
				c.reportCopy(descs[qi.Key()], reportKey, fmt.Sprintf("cannot write Secret %s/%s: %v", qi.Namespace, name, err))
				if !apierrors.IsForbidden(err) {
					errs = append(errs, fmt.Errorf("copy the quorum credential to %s/%s: %w", qi.Namespace, name, err))
				}
				continue
			}
			c.log.Info("copied the quorum credential", "secret", key.String())
		}
		c.copies.remember(key, sum)
		c.reported.changed(reportKey, "")
	}
	return errs
}

// reportCopy sends Warning CredentialNotCopied on the descriptor once per change of msg.
func (c *SentinelController) reportCopy(desc *corev1.ConfigMap, key, msg string) {
	if !c.reported.changed(key, msg) {
		return
	}
	c.log.Warn(msg)
	if desc != nil {
		c.recorder.Event(desc, corev1.EventTypeWarning, "CredentialNotCopied", msg)
	}
}

// dataSum is a digest of a Secret's data, independent of map order.
func dataSum(d map[string][]byte) string {
	keys := make([]string, 0, len(d))
	for k := range d {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	h := sha256.New()
	for _, k := range keys {
		fmt.Fprintf(h, "%d:%s=%d:", len(k), k, len(d[k]))
		h.Write(d[k])
	}
	return fmt.Sprintf("%x", h.Sum(nil))
}
