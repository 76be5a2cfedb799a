package controller

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"

	"github.com/valkey-ha/valkey-ha/internal/chartapi/spec"
	"github.com/valkey-ha/valkey-ha/internal/planners/plan"
	"github.com/valkey-ha/valkey-ha/internal/testsupport/testenv"
)

func testSecret(ns, name string, data map[string]string) *corev1.Secret {
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Type: corev1.SecretTypeOpaque}
	if data != nil {
		s.Data = map[string][]byte{}
		for k, v := range data {
			s.Data[k] = []byte(v)
		}
	}
	return s
}

// TestCopyCredentialAcrossNamespaces (issue 17 with issue 15's Sentinel auth): the quorum of namespace
// platform copies its _instance credential, with its namespace and release as the scope, into F-quorum-auth
// of each selected instance of another namespace; instances of its own namespace (they mount S-auth-instance)
// and refused ones get nothing. A copy that does not exist yet is reported once (CredentialNotCopied), never
// created (the quorum may not create Secrets there) and is no pass error; a converged copy costs no request
// until its recheck; a new quorum password is copied on the next pass; a forbidden write is reported.
func TestCopyCredentialAcrossNamespaces(t *testing.T) {
	ctx := context.Background()
	cs := fake.NewClientset(
		testSecret("platform", "q-auth-instance", map[string]string{"username": "_instance", "password": "pw-1"}),
		testSecret("t1", "vk-quorum-auth", nil))
	rec := record.NewFakeRecorder(100)
	c := &SentinelController{opts: SentinelOptions{Namespace: "platform", Release: "q", CopyCredential: true, CommandTimeout: time.Second},
		cs: cs, recorder: rec, log: quietLog()}
	qi := func(ns, name, refused string) plan.MonitoredInstance {
		return plan.MonitoredInstance{Descriptor: name + "-instance", Namespace: ns, Instance: spec.Instance{Name: name, Namespace: ns}, Refused: refused}
	}
	w := plan.SentinelWorld{Namespace: "platform", Release: "q", Instances: []plan.MonitoredInstance{qi("t1", "vk", ""), qi("t2", "other", ""), qi("", "local", ""), qi("t1", "bad", "not canonical")}}
	descs := map[string]*corev1.ConfigMap{}
	for _, i := range w.Instances {
		descs[i.Key()] = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: i.Descriptor, Namespace: i.Namespace}}
	}
	// the copies' share of a pass: gather, plan, apply, memory, report
	pass := func() ([]error, []string) {
		w.Now = time.Now()
		objs := gathered{descs: descs, copies: map[string]*corev1.Secret{}}
		c.observeCopies(ctx, &w, objs)
		steps := plan.PlanCopies(w)
		var res applied
		c.applyCopies(ctx, steps, objs.copies, &res)
		for _, cp := range res.remembered {
			c.copies.remember(cp.Key(), cp.Sum)
		}
		c.reportCopies(steps, res.copyFailed, descs)
		c.reported.sweep("")
		return res.errs, testenv.DrainEvents(rec, "")
	}

	errs, events := pass()
	assert.Empty(t, errs, "a missing copy is reported, not a pass error")
	got, err := cs.CoreV1().Secrets("t1").Get(ctx, "vk-quorum-auth", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, map[string][]byte{"username": []byte("_instance"), "password": []byte("pw-1"), "namespace": []byte("platform"), "release": []byte("q")}, got.Data)
	assert.Equal(t, spec.CredentialScope{Namespace: "platform", Release: "q"}, spec.ScopeOf(func(k string) string { return string(got.Data[k]) }))
	require.Len(t, events, 1, "%v", events)
	assert.Contains(t, events[0], "CredentialNotCopied")
	assert.Contains(t, events[0], "t2/other-quorum-auth does not exist yet")
	for _, a := range cs.Actions() {
		assert.NotEqual(t, "create", a.GetVerb(), "the quorum creates no Secret: %v", a)
		if g, ok := a.(k8stesting.GetAction); ok {
			assert.NotContains(t, []string{"local-quorum-auth", "bad-quorum-auth"}, g.GetName(), "same-namespace and refused instances get no copy")
		}
	}

	cs.ClearActions()
	errs, events = pass()
	assert.Empty(t, errs)
	assert.Empty(t, events, "the same condition: no second Event")
	for _, a := range cs.Actions() {
		if a.GetNamespace() == "t1" {
			t.Errorf("a converged copy costs no request before its recheck: %v", a)
		}
	}

	// the quorum's password changes (its Secrets were replaced): the copy follows on the next pass
	_, err = cs.CoreV1().Secrets("platform").Update(ctx, testSecret("platform", "q-auth-instance", map[string]string{"username": "_instance", "password": "pw-2"}), metav1.UpdateOptions{})
	require.NoError(t, err)
	_, _ = pass()
	got, err = cs.CoreV1().Secrets("t1").Get(ctx, "vk-quorum-auth", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, "pw-2", string(got.Data["password"]))

	// t2's release creates its copy but the grant is missing (an update is Forbidden): reported, no error
	_, err = cs.CoreV1().Secrets("t2").Create(ctx, testSecret("t2", "other-quorum-auth", nil), metav1.CreateOptions{})
	require.NoError(t, err)
	cs.PrependReactor("update", "secrets", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.GetNamespace() == "t2" {
			return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "secrets"}, "other-quorum-auth", errors.New("no grant"))
		}
		return false, nil, nil
	})
	errs, events = pass()
	assert.Empty(t, errs)
	require.Len(t, events, 1, "%v", events)
	assert.Contains(t, events[0], "cannot write Secret t2/other-quorum-auth")
}

// TestInstanceSendsTheCopyOnlyToItsScope: the instance controller of a t1 instance whose quorum lives in
// platform reads F-quorum-auth and sends it only to the Sentinels of the quorum that wrote it (its scope),
// not to a quorum a rewritten descriptor and F-sentinels name.
func TestInstanceSendsTheCopyOnlyToItsScope(t *testing.T) {
	ctx := context.Background()
	cs := fake.NewClientset(testSecret("t1", "vk-quorum-auth", map[string]string{"username": "_instance", "password": "pw", "namespace": "platform", "release": "q"}))
	in := spec.Instance{Name: "vk", Namespace: "t1", MonitorName: "vk", SentinelRelease: "q",
		SentinelGrant: &spec.ServiceAccountRef{Namespace: "platform", Name: "q-controller"}}
	si := spec.SentinelInfo{MonitorName: "vk", SentinelRelease: "q", SentinelNamespace: "platform", Port: 26379,
		Hosts: []string{"q-0.q-headless.platform.svc.cluster.local"}}
	var q quorumCredentials
	log := slog.New(slog.DiscardHandler)
	user, pw := q.credential(ctx, cs, log, in, si, "cluster.local")
	assert.Equal(t, "_instance", user)
	assert.Equal(t, "pw", pw)

	evilIn := in
	evilIn.SentinelGrant = &spec.ServiceAccountRef{Namespace: "evil", Name: "q-controller"}
	evil := si
	evil.SentinelNamespace, evil.Hosts = "evil", []string{"q-0.q-headless.evil.svc.cluster.local"}
	_, pw = q.credential(ctx, cs, log, evilIn, evil, "cluster.local")
	assert.Empty(t, pw, "the descriptor and F-sentinels rewritten to namespace evil: no password")

	local := si
	local.SentinelNamespace, local.Hosts = "", []string{"q-0.q-headless.t1.svc.cluster.local"}
	_, pw = q.credential(ctx, cs, log, in, local, "cluster.local")
	assert.Empty(t, pw, "a quorum named q in the instance's own namespace is another quorum")
}
