package cli

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/valkey-ha/valkey-ha/internal/chartapi/contract"
	"github.com/valkey-ha/valkey-ha/internal/chartapi/spec"
	"github.com/valkey-ha/valkey-ha/internal/valkeyapi/acl"
)

// TestEnsureSentinelAuth: the credentials Job generates the quorum's four Secrets at run time (owned
// by S-config, so helm uninstall removes them; labelled as the project's), returns the _admin password, keeps
// existing Secrets as they are (a second start, or Secrets the platform team created first), refuses a
// password with a line break, and waits (retrying) while S-config does not exist yet.
func TestEnsureSentinelAuth(t *testing.T) {
	ctx := context.Background()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	cfg := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "q-config", Namespace: "ns", UID: "cfg-uid"}}
	cs := fake.NewClientset(cfg, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "q-auth-client", Namespace: "ns"},
		Data: map[string][]byte{"username": []byte(acl.SentinelClient), "password": []byte("brought-by-the-team")}})
	admin, err := ensureSentinelAuth(ctx, cs, "ns", "q", 100*time.Millisecond, log)
	require.NoError(t, err)
	pws := map[string]string{}
	for _, u := range []string{acl.SentinelAdmin, acl.SentinelInstance, acl.SentinelClient, acl.SentinelController} {
		s, err := cs.CoreV1().Secrets("ns").Get(ctx, spec.SentinelSecretName("q", u), metav1.GetOptions{})
		require.NoError(t, err, u)
		assert.Equal(t, u, string(s.Data["username"]))
		pws[u] = string(s.Data["password"])
		if u == acl.SentinelClient {
			assert.Empty(t, s.OwnerReferences, "an existing Secret is left as it is")
			continue
		}
		assert.Len(t, pws[u], 40)
		assert.Equal(t, []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: "q-config", UID: "cfg-uid"}}, s.OwnerReferences)
		assert.Equal(t, "q", s.Labels[contract.LabelSentinel])
		assert.Empty(t, s.Labels["app.kubernetes.io/instance"], "GitOps tools would prune a run-time Secret carrying it")
		assert.Equal(t, contract.PartOf, s.Labels[contract.LabelPartOf])
	}
	assert.Equal(t, pws[acl.SentinelAdmin], admin)
	assert.NotEqual(t, pws[acl.SentinelAdmin], pws[acl.SentinelInstance], "one password per user")
	assert.NotEqual(t, pws[acl.SentinelInstance], pws[acl.SentinelController], "one password per user")
	assert.Equal(t, "brought-by-the-team", pws[acl.SentinelClient])

	again, err := ensureSentinelAuth(ctx, cs, "ns", "q", 100*time.Millisecond, log)
	require.NoError(t, err)
	assert.Equal(t, admin, again, "a restarted controller reads what it generated")

	bad := fake.NewClientset(cfg, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "q-auth-admin", Namespace: "ns"},
		Data: map[string][]byte{"password": []byte("two\nlines")}})
	_, err = ensureSentinelAuthOnce(ctx, bad, "ns", "q", log)
	require.ErrorContains(t, err, "secret ns/q-auth-admin: key password is empty or holds a line break")

	// a brought password with surrounding whitespace (the newline of kubectl create secret --from-file) is
	// refused: the Sentinels' probes send REDISCLI_AUTH as it is, the start step hashes it without the newline
	for _, pw := range []string{"brought\n", "brought\r\n", " brought", "brought\t"} {
		ws := fake.NewClientset(cfg, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "q-auth-client", Namespace: "ns"},
			Data: map[string][]byte{"password": []byte(pw)}})
		_, err = ensureSentinelAuthOnce(ctx, ws, "ns", "q", log)
		require.EqualError(t, err, "secret ns/q-auth-client: key password starts or ends with whitespace (a newline from kubectl create "+
			"secret --from-file?); remove it: the probes and clients send the password as it is and would be refused", "%q", pw)
	}

	early := fake.NewClientset()
	cctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	go func() {
		time.Sleep(500 * time.Millisecond)
		_, _ = early.CoreV1().ConfigMaps("ns").Create(ctx, cfg, metav1.CreateOptions{})
	}()
	_, err = ensureSentinelAuth(cctx, early, "ns", "q", 100*time.Millisecond, log)
	require.NoError(t, err, "retried until the release's ConfigMap existed")

	// the controller reads _admin, waiting until the Job created it
	late := fake.NewClientset()
	go func() {
		time.Sleep(300 * time.Millisecond)
		_, _ = late.CoreV1().Secrets("ns").Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "q-auth-admin", Namespace: "ns"},
			Data: map[string][]byte{"password": []byte("adm")}}, metav1.CreateOptions{})
	}()
	rctx, rcancel := context.WithTimeout(ctx, 3*time.Second)
	defer rcancel()
	pw, err := readSentinelAdmin(rctx, late, "ns", "q", 100*time.Millisecond, log)
	require.NoError(t, err)
	assert.Equal(t, "adm", pw)
	_, err = readSentinelAdmin(rctx, fake.NewClientset(cfg), "ns", "q", 100*time.Millisecond, log)
	assert.ErrorContains(t, err, "q-auth-admin", "gives up with ctx, naming the Secret")
}

// TestEnsureSentinelAuthUpgradeAddsControllerSecret: a quorum installed before _controller existed has
// S-auth-admin, S-auth-instance and S-auth-client only; the upgrade's credentials Job adds S-auth-controller
// (owned and labelled like the others) and leaves the three it finds exactly as they were (same passwords,
// same resourceVersion: never updated).
func TestEnsureSentinelAuthUpgradeAddsControllerSecret(t *testing.T) {
	ctx := context.Background()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	cfg := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "q-config", Namespace: "ns", UID: "cfg-uid"}}
	cs := fake.NewClientset(cfg)
	var old []*corev1.Secret
	for _, u := range []string{acl.SentinelAdmin, acl.SentinelInstance, acl.SentinelClient} {
		s, err := cs.CoreV1().Secrets("ns").Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: spec.SentinelSecretName("q", u),
			Namespace: "ns", ResourceVersion: "7"}, Data: map[string][]byte{"username": []byte(u), "password": []byte("old-" + u)}}, metav1.CreateOptions{})
		require.NoError(t, err)
		old = append(old, s)
	}
	_, err := cs.CoreV1().Secrets("ns").Get(ctx, "q-auth-controller", metav1.GetOptions{})
	require.Error(t, err, "the install before the upgrade has no S-auth-controller")

	admin, err := ensureSentinelAuth(ctx, cs, "ns", "q", 100*time.Millisecond, log)
	require.NoError(t, err)
	assert.Equal(t, "old-_admin", admin)
	for _, o := range old {
		s, err := cs.CoreV1().Secrets("ns").Get(ctx, o.Name, metav1.GetOptions{})
		require.NoError(t, err)
		assert.Equal(t, o.Data, s.Data, "%s is left as it was", o.Name)
		assert.Equal(t, o.ResourceVersion, s.ResourceVersion, "%s is never updated", o.Name)
	}
	s, err := cs.CoreV1().Secrets("ns").Get(ctx, "q-auth-controller", metav1.GetOptions{})
	require.NoError(t, err, "the upgrade adds S-auth-controller")
	assert.Equal(t, acl.SentinelController, string(s.Data["username"]))
	assert.Len(t, s.Data["password"], 40)
	assert.Equal(t, []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: "q-config", UID: "cfg-uid"}}, s.OwnerReferences)
	assert.Equal(t, "credentials", s.Labels[contract.LabelComponent])
}
