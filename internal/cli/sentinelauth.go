package cli

import (
	"context"
	"crypto/rand"
	"fmt"
	"log/slog"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/valkey-ha/valkey-ha/internal/acl"
	"github.com/valkey-ha/valkey-ha/internal/kube"
	"github.com/valkey-ha/valkey-ha/internal/spec"
)

// generatePassword returns a random password: crypto/rand.Text, 26 base32 characters (130 bits).
func generatePassword() string { return rand.Text() }

// ensureSentinelAuth makes sure the quorum's three credential Secrets exist (docs/contract.md: S-auth-admin,
// S-auth-instance, S-auth-client, keys username and password) and returns the _admin password. A missing
// Secret is generated here, at run time, never at render time (no Helm lookup: offline renders stay
// identical); an existing one is used as it is, whoever created it. Generated Secrets are owned by ConfigMap
// S-config, so `helm uninstall` removes them. It retries every 2 s until it succeeds or ctx ends: the
// Sentinel pods mount these Secrets and start once they exist.
func ensureSentinelAuth(ctx context.Context, cs kubernetes.Interface, namespace, release string, log *slog.Logger) (string, error) {
	for {
		pw, err := ensureSentinelAuthOnce(ctx, cs, namespace, release, log)
		if err == nil {
			return pw, nil
		}
		log.Warn("Sentinel credentials not ready; retrying", "error", err)
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("Sentinel credentials: %w (last error: %w)", ctx.Err(), err)
		case <-time.After(2 * time.Second):
		}
	}
}

func ensureSentinelAuthOnce(ctx context.Context, cs kubernetes.Interface, namespace, release string, log *slog.Logger) (string, error) {
	owner, err := cs.CoreV1().ConfigMaps(namespace).Get(ctx, release+"-config", metav1.GetOptions{})
	if err != nil {
		return "", fmt.Errorf("get configmap %s/%s-config (owner of the generated Secrets): %w", namespace, release, err)
	}
	admin := ""
	for _, u := range []string{acl.SentinelAdmin, acl.SentinelInstance, acl.SentinelClient} {
		name := spec.SentinelSecretName(release, u)
		want := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace,
				Labels: map[string]string{spec.LabelPartOf: spec.PartOfValue, spec.LabelComponent: spec.ComponentSentinl,
					spec.LabelSentinel: release, "app.kubernetes.io/managed-by": "valkey-sentinel-ctl"},
				OwnerReferences: []metav1.OwnerReference{kube.OwnerRef(owner)}},
			Type: corev1.SecretTypeOpaque,
			Data: map[string][]byte{"username": []byte(u), "password": []byte(generatePassword())},
		}
		s, created, err := kube.EnsureSecret(ctx, cs, want)
		if err != nil {
			return "", err
		}
		if created {
			log.Info("generated Sentinel credential", "secret", name, "user", u)
		}
		pw := strings.TrimRight(string(s.Data["password"]), "\r\n")
		if pw == "" || strings.ContainsAny(pw, "\r\n") {
			return "", fmt.Errorf("secret %s/%s: key password is empty or holds a line break; give it one line (or delete the Secret to have one generated)", namespace, name)
		}
		if u == acl.SentinelAdmin {
			admin = pw
		}
	}
	return admin, nil
}
