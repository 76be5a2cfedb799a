package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/valkey-ha/valkey-ha/internal/chartapi/contract"
	"github.com/valkey-ha/valkey-ha/internal/chartapi/spec"
	"github.com/valkey-ha/valkey-ha/internal/chartjobs/credentials"
	"github.com/valkey-ha/valkey-ha/internal/controllers/kube"
	"github.com/valkey-ha/valkey-ha/internal/valkeyapi/acl"
)

// sentinelUsers are the users whose credential Secrets a quorum publishes, in the order they are created
// (charts/valkey-sentinel's vs.authUsers lists the same). The Job creates each missing one, so an upgrade from a
// version without _controller adds S-auth-controller and leaves the others as they are.
var sentinelUsers = []string{acl.SentinelAdmin, acl.SentinelInstance, acl.SentinelClient, acl.SentinelController}

// SentinelCredentialsOptions are the flags of `sentinel-credentials`.
type SentinelCredentialsOptions struct {
	Kubeconfig string
	Namespace  string
	Release    string
	Timeout    time.Duration
	Interval   time.Duration
}

// Validate checks the options.
func (o *SentinelCredentialsOptions) Validate() error {
	if o.Namespace == "" {
		return errors.New("--namespace is required (or set POD_NAMESPACE)")
	}
	if o.Release == "" {
		return errors.New("--release is required: the quorum's fullname S")
	}
	if o.Timeout <= 0 || o.Interval <= 0 {
		return errors.New("--timeout and --interval must be > 0")
	}
	return nil
}

func newSentinelCredentialsCmd() *cobra.Command {
	o := &SentinelCredentialsOptions{}
	cmd := &cobra.Command{
		Use:   "sentinel-credentials",
		Short: "Create a Sentinel quorum's credential Secrets once (the valkey-sentinel chart's credentials Job)",
		Long: `sentinel-credentials creates Secrets <S>-auth-admin, <S>-auth-instance, <S>-auth-client and
<S>-auth-controller (keys username, password: the Sentinels' users _admin, _instance, _client and _controller)
with random passwords when they do not exist (on an upgrade: the ones an older version did not create), never
overwriting one (a Secret created beforehand is the way to bring your own), owned by ConfigMap
<S>-config so helm uninstall removes them. The Sentinel pods wait for them. It retries until ConfigMap
<S>-config exists and every Secret holds a one-line password, and exits 0, or 1 after --timeout with the reason.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.Validate(); err != nil {
				return err
			}
			cs, err := kube.NewClient(o.Kubeconfig)
			if err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), o.Timeout)
			defer cancel()
			_, err = ensureSentinelAuth(ctx, cs, o.Namespace, o.Release, o.Interval, slog.Default())
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.Kubeconfig, "kubeconfig", "", "kubeconfig (default: in-cluster, or $KUBECONFIG)")
	f.StringVar(&o.Namespace, "namespace", os.Getenv("POD_NAMESPACE"), "namespace of the quorum")
	f.StringVar(&o.Release, "release", "", "the quorum's fullname S")
	f.DurationVar(&o.Timeout, "timeout", 10*time.Minute, "give up after this long")
	f.DurationVar(&o.Interval, "interval", 2*time.Second, "pause between attempts that could not complete")
	return cmd
}

// ensureSentinelAuth makes sure the quorum's credential Secrets exist (docs/contract.md: S-auth-admin,
// S-auth-instance, S-auth-client, S-auth-controller, keys username and password) and returns the _admin password. A missing
// Secret is generated here, at run time, never at render time (no Helm lookup: offline renders stay
// identical; passwords from credentials.GeneratePassword, as the instances' credentials Job makes them); an
// existing one is used as it is, whoever created it. Generated Secrets are owned by ConfigMap S-config, so
// `helm uninstall` removes them. It retries every interval until it succeeds or ctx ends.
func ensureSentinelAuth(ctx context.Context, cs kubernetes.Interface, namespace, release string, interval time.Duration, log *slog.Logger) (string, error) {
	return retry(ctx, interval, log, "Sentinel credentials not ready", func() (string, error) {
		return ensureSentinelAuthOnce(ctx, cs, namespace, release, log)
	})
}

// readSentinelAdmin returns the _admin password of Secret S-auth-admin (the sentinel controller's --auth),
// waiting every interval while it does not exist yet (the credentials Job creates it) or holds no one-line
// password, until ctx ends.
func readSentinelAdmin(ctx context.Context, cs kubernetes.Interface, namespace, release string, interval time.Duration, log *slog.Logger) (string, error) {
	name := spec.SentinelSecretName(release, acl.SentinelAdmin)
	return retry(ctx, interval, log, "waiting for the quorum's _admin credential (the credentials Job creates it)", func() (string, error) {
		s, err := cs.CoreV1().Secrets(namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return "", fmt.Errorf("get secret %s/%s: %w", namespace, name, err)
		}
		return oneLinePassword(s)
	})
}

func retry(ctx context.Context, interval time.Duration, log *slog.Logger, what string, fn func() (string, error)) (string, error) {
	for {
		v, err := fn()
		if err == nil {
			return v, nil
		}
		log.Warn(what+"; retrying", "error", err)
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("%s: %w (last error: %w)", what, ctx.Err(), err)
		case <-time.After(interval):
		}
	}
}

// oneLinePassword returns key password of s, refusing an empty one, one that holds a line break (it could not be
// written into sentinel.conf) and one that starts or ends with whitespace: the Sentinels' probes and preStop hook
// send REDISCLI_AUTH from the Secret as it is while the start step hashes it without a trailing newline, and the
// data pods and instance controllers read _instance trimmed, so such a password would be refused by some and
// not others (the chart's start step refuses it with the same words).
func oneLinePassword(s *corev1.Secret) (string, error) {
	pw := string(s.Data[contract.KeyPassword])
	switch trimmed := strings.TrimRight(pw, "\r\n"); {
	case trimmed == "" || strings.ContainsAny(trimmed, "\r\n"):
		return "", fmt.Errorf("secret %s/%s: key password is empty or holds a line break; give it one line (or delete the Secret to have one generated)", s.Namespace, s.Name)
	case strings.TrimSpace(pw) != pw:
		return "", fmt.Errorf("secret %s/%s: key password starts or ends with whitespace (a newline from kubectl create secret --from-file?); "+
			"remove it: the probes and clients send the password as it is and would be refused", s.Namespace, s.Name)
	}
	return pw, nil
}

func ensureSentinelAuthOnce(ctx context.Context, cs kubernetes.Interface, namespace, release string, log *slog.Logger) (string, error) {
	owner, err := cs.CoreV1().ConfigMaps(namespace).Get(ctx, contract.Config(release), metav1.GetOptions{})
	if err != nil {
		return "", fmt.Errorf("get configmap %s/%s (owner of the generated Secrets): %w", namespace, contract.Config(release), err)
	}
	admin := ""
	for _, u := range sentinelUsers {
		name := spec.SentinelSecretName(release, u)
		want := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace,
				// the labels of the instances' credentials Job (never app.kubernetes.io/instance: GitOps tools
				// would take a run-time Secret for part of the application and prune it)
				Labels: map[string]string{contract.LabelPartOf: contract.PartOf, contract.LabelManagedBy: contract.ManagedBy,
					contract.LabelComponent: contract.ComponentCredentials, contract.LabelSentinel: release},
				OwnerReferences: []metav1.OwnerReference{kube.OwnerRef(owner)}},
			Type: corev1.SecretTypeOpaque,
			Data: map[string][]byte{contract.KeyUsername: []byte(u), contract.KeyPassword: []byte(credentials.GeneratePassword())},
		}
		s, created, err := kube.EnsureSecret(ctx, cs, want)
		if err != nil {
			return "", err
		}
		if created {
			log.Info("generated Sentinel credential", "secret", name, "user", u)
		}
		pw, err := oneLinePassword(s)
		if err != nil {
			return "", err
		}
		if u == acl.SentinelAdmin {
			admin = pw
		}
	}
	return admin, nil
}
