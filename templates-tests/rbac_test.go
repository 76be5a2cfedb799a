package templatestests

// RBAC boundaries of issue 19, evaluated on the rendered Roles and RoleBindings with the API server's own
// rule matching (k8s.io/component-helpers/auth/rbac/validation): a ServiceAccount tries the forbidden thing
// and the rendered RBAC refuses it.

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	rbacvalidation "k8s.io/component-helpers/auth/rbac/validation"
)

// rbac is the RBAC of one or more rendered releases in testNamespace.
type rbac struct {
	roles    map[string][]rbacv1.PolicyRule
	bindings []*rbacv1.RoleBinding
}

func rbacOf(all ...objects) rbac {
	r := rbac{roles: map[string][]rbacv1.PolicyRule{}}
	for _, objs := range all {
		for _, o := range objs.ofKind("Role") {
			role := o.(*rbacv1.Role)
			r.roles[role.Name] = append(r.roles[role.Name], role.Rules...)
		}
		for _, o := range objs.ofKind("RoleBinding") {
			r.bindings = append(r.bindings, o.(*rbacv1.RoleBinding))
		}
	}
	return r
}

// rulesOf returns every rule bound to ServiceAccount sa of testNamespace.
func (r rbac) rulesOf(sa string) []rbacv1.PolicyRule {
	var out []rbacv1.PolicyRule
	for _, b := range r.bindings {
		for _, s := range b.Subjects {
			if s.Kind == rbacv1.ServiceAccountKind && s.Name == sa && s.Namespace == testNamespace && b.RoleRef.Kind == "Role" {
				out = append(out, r.roles[b.RoleRef.Name]...)
			}
		}
	}
	return out
}

// can reports whether ServiceAccount sa may run verb on resource (API group group) named name; an empty
// name is a request without one (list, watch, create), which a rule restricted to resourceNames never allows.
func (r rbac) can(sa, verb, group, resource, name string) bool {
	req := rbacv1.PolicyRule{Verbs: []string{verb}, APIGroups: []string{group}, Resources: []string{resource}}
	if name != "" {
		req.ResourceNames = []string{name}
	}
	ok, _ := rbacvalidation.Covers(r.rulesOf(sa), []rbacv1.PolicyRule{req})
	return ok
}

func podSA(t testing.TB, objs objects, kind, name string) (string, bool) {
	t.Helper()
	var spec corev1.PodSpec
	switch o := objs.get(t, kind, name).(type) {
	case *appsv1.Deployment:
		spec = o.Spec.Template.Spec
	case *corev1.Pod:
		spec = o.Spec
	}
	return spec.ServiceAccountName, spec.AutomountServiceAccountToken == nil || *spec.AutomountServiceAccountToken
}

// TestSecurityInstanceControllerRBAC (issue 19): the instance controller may patch and delete its own data pods
// only (by name), read exactly the two Secrets it uses (F-system for _operator, F-acl) and write only its
// status ConfigMap; before, it could patch and delete every pod of the namespace and read every user Secret
// and the _sentinel password it never uses.
func TestSecurityInstanceControllerRBAC(t *testing.T) {
	objs := decode(t, mustRender(t, "valkey", usersValues+"  - {name: ext, passwordSecret: {name: my-secret, key: pw}}\n", renderOpts{existing: []runtime.Object{
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "my-secret", Namespace: testNamespace}, Data: map[string][]byte{"pw": []byte("s3cret-s3cret")}},
	}}))
	r := rbacOf(objs)
	sa, _ := podSA(t, objs, "Deployment", valkeyF+"-controller")
	for i := 0; i < 3; i++ {
		pod := fmt.Sprintf("%s-%d-0", valkeyF, i)
		for _, verb := range []string{"get", "patch", "delete"} {
			assert.True(t, r.can(sa, verb, "", "pods", pod), "%s %s: its own data pod", verb, pod)
		}
	}
	for _, pod := range []string{"app-7d9f-xk2p", "other-valkey-0-0", valkeyF + "-3-0", "quorum-0", valkeyF + "-controller-abc"} {
		for _, verb := range []string{"patch", "delete"} {
			assert.False(t, r.can(sa, verb, "", "pods", pod), "%s %s: not a data pod of this instance", verb, pod)
		}
	}
	assert.True(t, r.can(sa, "list", "", "pods", ""), "the informer lists pods (read-only, namespace-wide: documented)")
	for _, s := range []string{valkeyF + "-system", valkeyF + "-acl"} {
		assert.True(t, r.can(sa, "get", "", "secrets", s), "get %s", s)
	}
	for _, s := range []string{valkeyF + "-sentinel-auth", valkeyF + "-user-app", valkeyF + "-user-writer", "my-secret", "other-valkey-system"} {
		assert.False(t, r.can(sa, "get", "", "secrets", s), "get %s: never used by the instance controller", s)
	}
	for _, verb := range []string{"list", "watch"} {
		assert.False(t, r.can(sa, verb, "", "secrets", ""), "%s secrets", verb)
	}
	assert.True(t, r.can(sa, "update", "", "configmaps", valkeyF+"-status"))
	for _, cm := range []string{valkeyF + "-instance", "other-valkey-instance", valkeyF + "-sentinels", "quorum-status"} {
		for _, verb := range []string{"update", "patch", "delete"} {
			assert.False(t, r.can(sa, verb, "", "configmaps", cm), "%s configmap %s", verb, cm)
		}
	}
}

// TestSecurityHelmTestPodsOwnServiceAccount (issue 19): helm test pods run under a ServiceAccount of their own,
// never a controller's; the instance test may read only what `valkey-sentinel-ctl test --instance` reads, the
// Sentinel test has no token at all.
func TestSecurityHelmTestPodsOwnServiceAccount(t *testing.T) {
	objs := decode(t, mustRender(t, "valkey", usersValues))
	r := rbacOf(objs)
	ctl, _ := podSA(t, objs, "Deployment", valkeyF+"-controller")
	sa, token := podSA(t, objs, "Pod", valkeyF+"-test")
	assert.NotEqual(t, ctl, sa, "the instance test pod must not run as the controller")
	require.True(t, token, "the instance test reads the descriptor through the API")
	for _, cm := range []string{valkeyF + "-instance", valkeyF + "-sentinels"} {
		assert.True(t, r.can(sa, "get", "", "configmaps", cm), "get %s", cm)
	}
	assert.True(t, r.can(sa, "get", "", "secrets", valkeyF+"-system"), "the test logs in as _operator")
	for i := 0; i < 3; i++ {
		assert.True(t, r.can(sa, "get", "", "pods", fmt.Sprintf("%s-%d-0", valkeyF, i)), "role labels of its pods")
	}
	for _, s := range []string{valkeyF + "-acl", valkeyF + "-sentinel-auth", valkeyF + "-user-app"} {
		assert.False(t, r.can(sa, "get", "", "secrets", s), "the test pod must not read %s", s)
	}
	for _, verb := range []string{"patch", "delete", "create", "update"} {
		assert.False(t, r.can(sa, verb, "", "pods", valkeyF+"-0-0"), "%s pods", verb)
		assert.False(t, r.can(sa, verb, "", "configmaps", valkeyF+"-instance"), "%s configmaps", verb)
	}
	assert.False(t, r.can(sa, "list", "", "secrets", ""))

	sobjs := decode(t, mustRender(t, "valkey-sentinel", ""))
	sr := rbacOf(sobjs)
	sctl, _ := podSA(t, sobjs, "Deployment", sentinelRel+"-controller")
	ssa, stoken := podSA(t, sobjs, "Pod", sentinelRel+"-test")
	assert.NotEqual(t, sctl, ssa, "the Sentinel test pod must not run as the Sentinel controller")
	assert.False(t, stoken, "the Sentinel test talks only to Sentinels: no API token")
	assert.Empty(t, sr.rulesOf(ssa), "and no RBAC")
}

// TestSecurityOnlyOneQuorumReadsTheSentinelPassword (issue 19): two Sentinel releases in one namespace; the
// instance grants its _sentinel password to the quorum that monitors it (its controller's ServiceAccount),
// and neither the other quorum's controller nor any test pod can read it. Before, every release shared the
// default ServiceAccount valkey-sentinel-controller.
func TestSecurityOnlyOneQuorumReadsTheSentinelPassword(t *testing.T) {
	quorum := decode(t, mustRender(t, "valkey-sentinel", "", renderOpts{release: "quorum"}))
	other := decode(t, mustRender(t, "valkey-sentinel", "", renderOpts{release: "other"}))
	qsa, _ := podSA(t, quorum, "Deployment", "quorum-controller")
	osa, _ := podSA(t, other, "Deployment", "other-controller")
	inst := decode(t, mustRender(t, "valkey", "sentinel: {controllerServiceAccount: "+qsa+"}\n"))
	r := rbacOf(quorum, other, inst)
	secret := valkeyF + "-sentinel-auth"
	assert.True(t, r.can(qsa, "get", "", "secrets", secret), "the monitoring quorum reads the _sentinel password")
	assert.False(t, r.can(osa, "get", "", "secrets", secret), "another quorum in the namespace (ServiceAccount %s) must not", osa)
	for _, objs := range []objects{quorum, other, inst} {
		for _, o := range objs.ofKind("Pod") {
			sa, _ := podSA(t, objs, "Pod", nameOf(o))
			assert.False(t, r.can(sa, "get", "", "secrets", secret), "test pod %s (ServiceAccount %s) must not", nameOf(o), sa)
		}
	}
	// a Sentinel controller may delete only its own Sentinel pods
	assert.True(t, r.can(qsa, "delete", "", "pods", "quorum-2"))
	for _, pod := range []string{valkeyF + "-0-0", "other-0", "app-pod"} {
		assert.False(t, r.can(qsa, "delete", "", "pods", pod), "quorum's controller deletes %s", pod)
	}
}

// TestSentinelNotesNameTheServiceAccountToGrant: the Sentinel chart's NOTES say which sentinel.release the
// monitored valkey releases must set, and when they must also set sentinel.controllerServiceAccount.
func TestSentinelNotesNameTheServiceAccountToGrant(t *testing.T) {
	notes := mustRender(t, "valkey-sentinel", "", renderOpts{release: "quorum", withNotes: true})["valkey-sentinel/templates/NOTES.txt"]
	assert.Contains(t, notes, "sentinel.release=quorum (its pods then use _instance from\nquorum-auth-instance); its _sentinel password goes to quorum-controller.")
	notes = mustRender(t, "valkey-sentinel", "controller: {serviceAccountName: q-ctl}\n", renderOpts{release: "quorum", withNotes: true})["valkey-sentinel/templates/NOTES.txt"]
	assert.Contains(t, notes, "goes to q-ctl (set the valkey chart's sentinel.controllerServiceAccount to it).")
	notes = mustRender(t, "valkey-sentinel", "", renderOpts{release: "sentinel", withNotes: true})["valkey-sentinel/templates/NOTES.txt"]
	assert.Contains(t, notes, "sentinel.release=sentinel")
	assert.Contains(t, notes, "user _client with\nthe password in Secret sentinel-auth-client", "how applications connect")
}

// TestSecurityCredentialsJobRBAC (issue 15): the credentials Job may create Secrets (create cannot be bound to
// a name), read only the Secrets the values name, update only F-acl and the customer Secrets it rotates, and
// never update the generated system or Sentinel passwords (create-only, enforced by RBAC), an
// auth.existingSecret or a users[].passwordSecret; it touches no pod, and reads only the descriptor it owns
// its Secrets by. The instance controller gains nothing from it.
func TestSecurityCredentialsJobRBAC(t *testing.T) {
	values := usersValues + "  - {name: ext, passwordSecret: {name: my-secret, key: pw}}\n"
	for _, v := range []string{values, values + "auth: {existingSecret: sys}\n", values + "controller: {enabled: false}\nupdateStrategy: RollingUpdate\n"} {
		objs := decode(t, mustRender(t, "valkey", v))
		r := rbacOf(objs)
		var job *batchv1.Job
		for _, o := range objs.ofKind("Job") {
			job = o.(*batchv1.Job)
		}
		require.NotNil(t, job, "the credentials Job renders (controller on or off)")
		sa := job.Spec.Template.Spec.ServiceAccountName
		require.Equal(t, valkeyF+"-credentials", sa)
		sys := valkeyF + "-system"
		if strings.Contains(v, "existingSecret") {
			sys = "sys"
		}
		assert.True(t, r.can(sa, "create", "", "secrets", ""), "creates the generated Secrets")
		for _, s := range []string{sys, valkeyF + "-sentinel-auth", valkeyF + "-acl", valkeyF + "-user-app", valkeyF + "-user-writer", "my-secret"} {
			assert.True(t, r.can(sa, "get", "", "secrets", s), "get %s", s)
		}
		for _, s := range []string{valkeyF + "-acl", valkeyF + "-user-app", valkeyF + "-user-analytics"} {
			assert.True(t, r.can(sa, "update", "", "secrets", s), "update %s", s)
		}
		for _, s := range []string{sys, valkeyF + "-sentinel-auth", "my-secret", valkeyF + "-acl-spec", "other-valkey-system", valkeyF + "-user-ext"} {
			assert.False(t, r.can(sa, "update", "", "secrets", s), "update %s: never", s)
			assert.False(t, r.can(sa, "patch", "", "secrets", s), "patch %s: never", s)
			assert.False(t, r.can(sa, "delete", "", "secrets", s), "delete %s: never", s)
		}
		for _, s := range []string{"other-valkey-system", "app-db-password", valkeyF + "-acl-spec", "quorum-auth"} {
			assert.False(t, r.can(sa, "get", "", "secrets", s), "get %s: not named by the values", s)
		}
		for _, verb := range []string{"list", "watch", "deletecollection"} {
			assert.False(t, r.can(sa, verb, "", "secrets", ""), "%s secrets", verb)
		}
		assert.True(t, r.can(sa, "get", "", "configmaps", valkeyF+"-instance"), "reads its owner")
		for _, verb := range []string{"list", "create", "update", "delete"} {
			assert.False(t, r.can(sa, verb, "", "configmaps", valkeyF+"-instance"), "%s configmaps", verb)
		}
		for _, verb := range []string{"get", "list", "create", "patch", "delete"} {
			assert.False(t, r.can(sa, verb, "", "pods", valkeyF+"-0-0"), "%s pods", verb)
		}
		if strings.Contains(v, "controller: {enabled: false}") {
			continue
		}
		ctl, _ := podSA(t, objs, "Deployment", valkeyF+"-controller")
		assert.NotEqual(t, ctl, sa, "the controller does not run as the credentials Job")
		assert.False(t, r.can(ctl, "create", "", "secrets", ""), "the instance controller creates no Secret")
		for _, s := range []string{valkeyF + "-sentinel-auth", valkeyF + "-user-app", "my-secret"} {
			assert.False(t, r.can(ctl, "get", "", "secrets", s), "the instance controller still never reads %s", s)
		}
	}
}
