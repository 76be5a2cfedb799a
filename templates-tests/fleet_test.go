package templatestests

// Fleets (issue 17, docs/fleet.md): the shared instance controller and the cross-namespace quorum, judged on
// the rendered RBAC (the API server's own rule matching, across namespaces and ClusterRoles) and the rendered
// NetworkPolicies (matched against the rendered pod labels): each grant reaches one instance's objects and
// nothing else.

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/labels"
	rbacvalidation "k8s.io/component-helpers/auth/rbac/validation"

	"github.com/valkey-ha/valkey-ha/internal/chartapi/spec"
	"github.com/valkey-ha/valkey-ha/internal/chartjobs/credentials"
)

// clusterRBAC is the RBAC of releases rendered in several namespaces, with ClusterRoles.
type clusterRBAC struct {
	roles        map[string][]rbacv1.PolicyRule // namespace/name
	clusterRoles map[string][]rbacv1.PolicyRule
	bindings     []*rbacv1.RoleBinding
	crBindings   []*rbacv1.ClusterRoleBinding
}

func clusterRBACOf(all ...objects) clusterRBAC {
	r := clusterRBAC{roles: map[string][]rbacv1.PolicyRule{}, clusterRoles: map[string][]rbacv1.PolicyRule{}}
	for _, objs := range all {
		for _, o := range objs.ofKind("Role") {
			role := o.(*rbacv1.Role)
			r.roles[role.Namespace+"/"+role.Name] = append(r.roles[role.Namespace+"/"+role.Name], role.Rules...)
		}
		for _, o := range objs.ofKind("ClusterRole") {
			role := o.(*rbacv1.ClusterRole)
			r.clusterRoles[role.Name] = append(r.clusterRoles[role.Name], role.Rules...)
		}
		for _, o := range objs.ofKind("RoleBinding") {
			r.bindings = append(r.bindings, o.(*rbacv1.RoleBinding))
		}
		for _, o := range objs.ofKind("ClusterRoleBinding") {
			r.crBindings = append(r.crBindings, o.(*rbacv1.ClusterRoleBinding))
		}
	}
	return r
}

func isSA(s rbacv1.Subject, sa spec.ServiceAccountRef) bool {
	return s.Kind == rbacv1.ServiceAccountKind && s.Name == sa.Name && s.Namespace == sa.Namespace
}

// rulesIn returns the rules ServiceAccount sa holds in namespace ns ("" = cluster-scoped requests).
func (r clusterRBAC) rulesIn(sa spec.ServiceAccountRef, ns string) []rbacv1.PolicyRule {
	var out []rbacv1.PolicyRule
	for _, b := range r.bindings {
		if b.Namespace != ns || ns == "" {
			continue
		}
		for _, s := range b.Subjects {
			if isSA(s, sa) {
				if b.RoleRef.Kind == "Role" {
					out = append(out, r.roles[b.Namespace+"/"+b.RoleRef.Name]...)
				} else {
					out = append(out, r.clusterRoles[b.RoleRef.Name]...)
				}
			}
		}
	}
	for _, b := range r.crBindings {
		for _, s := range b.Subjects {
			if isSA(s, sa) {
				out = append(out, r.clusterRoles[b.RoleRef.Name]...)
			}
		}
	}
	return out
}

// can reports whether sa may run verb on resource (API group group) named name ("" = without a name) in
// namespace ns ("" = a cluster-scoped resource).
func (r clusterRBAC) can(sa spec.ServiceAccountRef, verb, ns, group, resource, name string) bool {
	req := rbacv1.PolicyRule{Verbs: []string{verb}, APIGroups: []string{group}, Resources: []string{resource}}
	if name != "" {
		req.ResourceNames = []string{name}
	}
	ok, _ := rbacvalidation.Covers(r.rulesIn(sa, ns), []rbacv1.PolicyRule{req})
	return ok
}

// a fleet: quorum "fleet" (namespace platform, with the shared instance controller) serving t1 and t2
const (
	platformNS = "platform"
	fleetRel   = "fleet"
)

var (
	fleetCtl    = spec.ServiceAccountRef{Namespace: platformNS, Name: "fleet-controller"}
	fleetShared = spec.ServiceAccountRef{Namespace: platformNS, Name: "fleet-instance-controller"}
)

func renderFleet(t *testing.T, extraSentinel string) (quorum objects, shared, dedicated, tenant2 objects) {
	quorum = decode(t, mustRender(t, "valkey-sentinel", "sharedTrustDomain: accept\ninstanceController: {enabled: true}\nnamespaces: [t1, t2]\n"+extraSentinel,
		renderOpts{release: fleetRel, namespace: platformNS}))
	grant := "sentinel: {release: fleet, namespace: platform}\n"
	sharedMode := "controller: {mode: shared, shared: {serviceAccount: fleet-instance-controller, namespace: platform}}\n"
	shared = decode(t, mustRender(t, "valkey", grant+sharedMode+usersValues, renderOpts{release: "cache", namespace: "t1"}))
	dedicated = decode(t, mustRender(t, "valkey", grant, renderOpts{release: "own", namespace: "t1"}))
	tenant2 = decode(t, mustRender(t, "valkey", grant+sharedMode, renderOpts{release: "sessions", namespace: "t2"}))
	return
}

// TestSecuritySharedControllerRBAC (issue 17): an instance in controller.mode shared renders no controller of
// its own and grants the shared controller exactly the dedicated controller's rights, for its own objects
// only; an instance that did not opt in grants it nothing, and the shared controller's own release grants it
// nothing about any instance.
func TestSecuritySharedControllerRBAC(t *testing.T) {
	quorum, shared, dedicated, tenant2 := renderFleet(t, "")
	r := clusterRBACOf(quorum, shared, dedicated, tenant2)

	d := quorum.get(t, "Deployment", "fleet-instance-controller").(*appsv1.Deployment)
	assert.Equal(t, fleetShared.Name, d.Spec.Template.Spec.ServiceAccountName)
	assert.Equal(t, "instance-controller", d.Spec.Template.Labels["app.kubernetes.io/component"])
	args := append(d.Spec.Template.Spec.Containers[0].Command, d.Spec.Template.Spec.Containers[0].Args...)
	assert.Subset(t, args, []string{"instance", "--shared-identity", "platform/fleet-instance-controller", "--namespaces", "t1,t2", "--lease-name", "fleet-instance-controller"})
	sentinelCtl := quorum.get(t, "Deployment", "fleet-controller").(*appsv1.Deployment)
	sel, err := labelsSelector(sentinelCtl.Spec.Selector.MatchLabels)
	require.NoError(t, err)
	assert.False(t, sel.Matches(labels.Set(d.Spec.Template.Labels)), "the two controller Deployments of the release never select each other's pods")

	for _, kind := range []string{"Deployment", "ServiceAccount", "Role"} {
		for _, o := range shared.ofKind(kind) {
			assert.NotEqual(t, "cache-valkey-controller", nameOf(o), "shared mode renders no dedicated %s", kind)
		}
	}
	_ = dedicated.get(t, "Deployment", "own-valkey-controller")
	desc := descriptorOf(t, shared, "cache-valkey")
	assert.Equal(t, map[string]any{"namespace": platformNS, "serviceAccount": fleetShared.Name}, desc["instanceController"])
	assert.NotContains(t, descriptorOf(t, dedicated, "own-valkey"), "instanceController")

	for ns, f := range map[string]string{"t1": "cache-valkey", "t2": "sessions-valkey"} {
		for i := 0; i < 3; i++ {
			pod := fmt.Sprintf("%s-%d-0", f, i)
			for _, verb := range []string{"get", "patch", "delete"} {
				assert.True(t, r.can(fleetShared, verb, ns, "", "pods", pod), "%s %s/%s", verb, ns, pod)
			}
		}
		for _, s := range []string{f + "-system", f + "-acl"} {
			assert.True(t, r.can(fleetShared, "get", ns, "", "secrets", s), "get %s/%s", ns, s)
		}
		assert.True(t, r.can(fleetShared, "update", ns, "", "configmaps", f+"-status"))
		assert.True(t, r.can(fleetShared, "list", ns, "", "pods", ""), "informers list the namespace (documented)")
		for _, s := range []string{f + "-sentinel-auth", f + "-user-app", f + "-user-writer"} {
			assert.False(t, r.can(fleetShared, "get", ns, "", "secrets", s), "%s/%s: never the shared controller's", ns, s)
		}
		for _, cm := range []string{f + "-instance", f + "-sentinels", f + "-config"} {
			assert.False(t, r.can(fleetShared, "update", ns, "", "configmaps", cm), "update %s/%s", ns, cm)
		}
		assert.False(t, r.can(fleetShared, "list", ns, "", "secrets", ""))
	}
	// the instance in t1 that did not opt in: nothing by name
	for i := 0; i < 3; i++ {
		for _, verb := range []string{"patch", "delete"} {
			assert.False(t, r.can(fleetShared, verb, "t1", "", "pods", fmt.Sprintf("own-valkey-%d-0", i)), "the dedicated instance's pods")
		}
	}
	for _, s := range []string{"own-valkey-system", "own-valkey-acl"} {
		assert.False(t, r.can(fleetShared, "get", "t1", "", "secrets", s), "the dedicated instance's %s", s)
	}
	assert.False(t, r.can(fleetShared, "update", "t1", "", "configmaps", "own-valkey-status"))
	// no instance granted anything in t3, nor in its own namespace beyond its Lease and Events
	for _, verb := range []string{"list", "get"} {
		assert.False(t, r.can(fleetShared, verb, "t3", "", "pods", ""), "%s pods in t3", verb)
		assert.False(t, r.can(fleetShared, verb, platformNS, "", "pods", ""), "%s pods of the platform namespace", verb)
	}
	assert.False(t, r.can(fleetShared, "delete", platformNS, "", "pods", "fleet-0"), "the Sentinel pods are not its")
	assert.True(t, r.can(fleetShared, "update", platformNS, "coordination.k8s.io", "leases", "fleet-instance-controller"))
	assert.False(t, r.can(fleetShared, "update", platformNS, "coordination.k8s.io", "leases", "fleet-controller"), "not the quorum's Lease")
	// the quorum's controller holds no instance master key
	assert.False(t, r.can(fleetCtl, "get", "t1", "", "secrets", "cache-valkey-system"))
	assert.Empty(t, quorum.ofKind("ClusterRole"), "a namespace list needs no ClusterRole")
}

// TestSecurityCrossNamespaceGrant (issue 17): an instance in t1 grants the quorum of namespace platform
// (sentinel.namespace) its _sentinel password, the discovery of its descriptor and F-sentinels,
// nothing else; another quorum of platform and every other namespace get nothing. A namespaceSelector adds a
// ClusterRole with get/list/watch on namespaces only.
func TestSecurityCrossNamespaceGrant(t *testing.T) {
	quorum, shared, dedicated, tenant2 := renderFleet(t, "")
	other := decode(t, mustRender(t, "valkey-sentinel", "sharedTrustDomain: accept\nnamespaces: [t1]\n", renderOpts{release: "other", namespace: platformNS}))
	r := clusterRBACOf(quorum, other, shared, dedicated, tenant2)
	otherCtl := spec.ServiceAccountRef{Namespace: platformNS, Name: "other-controller"}

	sc := quorum.get(t, "Deployment", "fleet-controller").(*appsv1.Deployment)
	args := append(sc.Spec.Template.Spec.Containers[0].Command, sc.Spec.Template.Spec.Containers[0].Args...)
	assert.Subset(t, args, []string{"--service-account", "fleet-controller", "--namespaces", "t1,t2"})
	assert.Equal(t, map[string]any{"namespace": platformNS, "serviceAccount": fleetCtl.Name}, descriptorOf(t, shared, "cache-valkey")["sentinelGrant"])

	for ns, f := range map[string]string{"t1": "cache-valkey", "t2": "sessions-valkey"} {
		assert.True(t, r.can(fleetCtl, "get", ns, "", "secrets", f+"-sentinel-auth"), "the _sentinel password of %s/%s", ns, f)
		assert.True(t, r.can(fleetCtl, "list", ns, "", "configmaps", ""), "find the descriptors of %s", ns)
		assert.True(t, r.can(fleetCtl, "watch", ns, "", "configmaps", ""))
		assert.True(t, r.can(fleetCtl, "create", ns, "", "configmaps", ""), "publish F-sentinels (create cannot be bound to a name)")
		for _, verb := range []string{"update", "delete"} {
			assert.True(t, r.can(fleetCtl, verb, ns, "", "configmaps", f+"-sentinels"))
			for _, cm := range []string{f + "-instance", f + "-status", f + "-config"} {
				assert.False(t, r.can(fleetCtl, verb, ns, "", "configmaps", cm), "%s %s/%s", verb, ns, cm)
			}
		}
		for _, s := range []string{f + "-system", f + "-acl", f + "-user-app"} {
			assert.False(t, r.can(fleetCtl, "get", ns, "", "secrets", s), "%s/%s", ns, s)
		}
		for _, verb := range []string{"delete", "patch"} {
			assert.False(t, r.can(fleetCtl, verb, ns, "", "pods", f+"-0-0"), "the quorum deletes no data pod")
		}
		assert.False(t, r.can(otherCtl, "get", ns, "", "secrets", f+"-sentinel-auth"), "another quorum of the platform namespace")
		assert.False(t, r.can(otherCtl, "list", ns, "", "configmaps", ""), "another quorum sees nothing in %s", ns)
	}
	assert.False(t, r.can(fleetCtl, "list", "t3", "", "configmaps", ""), "a namespace without a grant")
	assert.False(t, r.can(fleetCtl, "list", "", "", "namespaces", ""), "no namespace list without namespaceSelector")

	// a same-namespace quorum (the default) needs no cross-namespace grant
	local := decode(t, mustRender(t, "valkey", ""))
	for _, o := range local.ofKind("Role") {
		assert.NotEqual(t, valkeyF+"-sentinel-grant", nameOf(o))
	}

	bysel, _, _, _ := renderFleet(t, "namespaceSelector: {matchLabels: {team: cache}}\n")
	r = clusterRBACOf(bysel, shared, tenant2)
	crs := bysel.ofKind("ClusterRole")
	require.Len(t, crs, 1)
	cr := crs[0].(*rbacv1.ClusterRole)
	assert.Equal(t, []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"get", "list", "watch"}}}, cr.Rules,
		"the ClusterRole names namespaces only")
	for _, sa := range []spec.ServiceAccountRef{fleetCtl, fleetShared} {
		assert.True(t, r.can(sa, "list", "", "", "namespaces", ""), "%s follows namespace labels", sa)
		for _, res := range []string{"configmaps", "secrets", "pods"} {
			assert.False(t, r.can(sa, "list", "t3", "", res, ""), "%s: %s of an ungranted namespace", sa, res)
		}
	}
	assert.Subset(t, bysel.get(t, "Deployment", "fleet-controller").(*appsv1.Deployment).Spec.Template.Spec.Containers[0].Args,
		[]string{"--namespace-selector", "team=cache"})
}

// TestSecurityCrossNamespaceCredentialCopy (issue 17 with issue 15's Sentinel auth): an instance whose quorum
// is in another namespace cannot mount that quorum's S-auth-instance. Its credentials Job creates the empty
// F-quorum-auth (and may only read it after); the quorum's controller may get and update exactly that Secret
// (no create: with create and get a quorum could mint a ServiceAccount token Secret of the tenant and read
// it), and get its own S-auth-instance to copy; the data pods mount the copy with its scope (namespace,
// release), the instance's controllers and helm test read it by name; nobody else gets it.
func TestSecurityCrossNamespaceCredentialCopy(t *testing.T) {
	quorum, shared, dedicated, tenant2 := renderFleet(t, "")
	other := decode(t, mustRender(t, "valkey-sentinel", "sharedTrustDomain: accept\nnamespaces: [t1]\n", renderOpts{release: "other", namespace: platformNS}))
	r := clusterRBACOf(quorum, other, shared, dedicated, tenant2)
	otherCtl := spec.ServiceAccountRef{Namespace: platformNS, Name: "other-controller"}

	assert.True(t, r.can(fleetCtl, "get", platformNS, "", "secrets", "fleet-auth-instance"), "the quorum reads its own _instance credential to copy it")
	assert.False(t, r.can(fleetCtl, "get", platformNS, "", "secrets", "fleet-auth-client"))
	local := decode(t, mustRender(t, "valkey-sentinel", "", renderOpts{release: fleetRel, namespace: platformNS}))
	assert.False(t, clusterRBACOf(local).can(fleetCtl, "get", platformNS, "", "secrets", "fleet-auth-instance"),
		"a quorum of its own namespace only needs S-auth-admin")

	for ns, f := range map[string]string{"t1": "cache-valkey", "t2": "sessions-valkey"} {
		cp := f + "-quorum-auth"
		for _, verb := range []string{"get", "update", "patch"} {
			assert.True(t, r.can(fleetCtl, verb, ns, "", "secrets", cp), "%s %s/%s", verb, ns, cp)
		}
		for _, verb := range []string{"create", "delete", "list", "watch"} {
			assert.False(t, r.can(fleetCtl, verb, ns, "", "secrets", cp), "%s %s/%s", verb, ns, cp)
		}
		assert.False(t, r.can(fleetCtl, "create", ns, "", "secrets", ""), "the quorum creates no Secret in %s", ns)
		assert.False(t, r.can(otherCtl, "get", ns, "", "secrets", cp), "another quorum")
		assert.False(t, r.can(fleetCtl, "get", ns, "", "secrets", "fleet-auth-instance"), "no S-auth-instance in the tenant namespace")

		credSA := spec.ServiceAccountRef{Namespace: ns, Name: f + "-credentials"}
		assert.True(t, r.can(credSA, "get", ns, "", "secrets", cp), "the credentials Job sees whether it exists")
		assert.False(t, r.can(credSA, "update", ns, "", "secrets", cp), "and never writes it after creating it")
		assert.True(t, r.can(spec.ServiceAccountRef{Namespace: ns, Name: f + "-test"}, "get", ns, "", "secrets", cp), "the helm test")
	}
	assert.True(t, r.can(fleetShared, "get", "t1", "", "secrets", "cache-valkey-quorum-auth"), "the shared controller, for the instances that chose it")
	assert.False(t, r.can(fleetShared, "get", "t1", "", "secrets", "own-valkey-quorum-auth"), "not for the dedicated one")
	assert.True(t, r.can(spec.ServiceAccountRef{Namespace: "t1", Name: "own-valkey-controller"}, "get", "t1", "", "secrets", "own-valkey-quorum-auth"))

	// the credentials Job's spec asks for the empty copy; the data pods mount it with its scope
	cspec, err := credentials.ParseSpec(shared.secret(t, "cache-valkey-acl-spec").Data[credentials.SpecKey])
	require.NoError(t, err)
	assert.Equal(t, "cache-valkey-quorum-auth", cspec.QuorumSecret)
	sts := shared.get(t, "StatefulSet", "cache-valkey-0").(*appsv1.StatefulSet)
	var vol *corev1.Volume
	for i := range sts.Spec.Template.Spec.Volumes {
		if sts.Spec.Template.Spec.Volumes[i].Name == "sentinel-auth" {
			vol = &sts.Spec.Template.Spec.Volumes[i]
		}
	}
	require.NotNil(t, vol)
	assert.Equal(t, "cache-valkey-quorum-auth", vol.Secret.SecretName)
	assert.True(t, *vol.Secret.Optional, "empty until the quorum filled it")
	var keys []string
	for _, it := range vol.Secret.Items {
		keys = append(keys, it.Key)
	}
	assert.Equal(t, []string{"password", "namespace", "release"}, keys)
	in, err := spec.ParseInstance([]byte(shared.configMap(t, "cache-valkey-instance").Data["instance.json"]))
	require.NoError(t, err)
	assert.Equal(t, vol.Secret.SecretName, in.QuorumCredentialSecret(), "the name the chart renders is the one the Go side reads")

	// a quorum of the instance's own namespace: no copy, S-auth-instance as before
	same := decode(t, mustRender(t, "valkey", ""))
	cspec, err = credentials.ParseSpec(same.secret(t, valkeyF+"-acl-spec").Data[credentials.SpecKey])
	require.NoError(t, err)
	assert.Empty(t, cspec.QuorumSecret)
}

func labelsSelector(m map[string]string) (labels.Selector, error) {
	return labels.SelectorFromSet(m), nil
}

// TestSecurityNetworkPolicyCrossNamespace (issue 17): three namespaces. The data pods of a t1 instance that
// grants the platform quorum admit that quorum's Sentinels, its controller and the shared instance
// controller, and reach those Sentinels; the Sentinels admit the data, controller and test pods of the
// namespaces the quorum selects and reach those data pods; a namespace the quorum does not select (t3), and
// other pods of the platform namespace, get neither.
func TestSecurityNetworkPolicyCrossNamespace(t *testing.T) {
	quorum, shared, _, _ := renderFleet(t, "")
	sentinelPod := podIn(platformNS, quorum.get(t, "StatefulSet", fleetRel).(*appsv1.StatefulSet).Spec.Template.Labels)
	sentinelCtlPod := podIn(platformNS, quorum.get(t, "Deployment", "fleet-controller").(*appsv1.Deployment).Spec.Template.Labels)
	sharedPod := podIn(platformNS, quorum.get(t, "Deployment", "fleet-instance-controller").(*appsv1.Deployment).Spec.Template.Labels)
	dataPod := podIn("t1", shared.statefulSets()[0].Spec.Template.Labels)
	dataPod.ports = map[string]int{}
	for _, c := range shared.statefulSets()[0].Spec.Template.Spec.Containers {
		for _, p := range c.Ports {
			dataPod.ports[p.Name] = int(p.ContainerPort)
		}
	}
	testPod := podIn("t1", map[string]string{"app.kubernetes.io/part-of": "valkey-ha", "app.kubernetes.io/component": "test"})
	foreignData := podIn("t3", shared.statefulSets()[0].Spec.Template.Labels)
	platformApp := podIn(platformNS, labels.Set{"app": "web"})

	np := policyOf(t, shared, "cache-valkey")
	for _, e := range []endpoint{sentinelPod, sentinelCtlPod, sharedPod} {
		assert.True(t, admits(t, np, e, 6379), "the data pods admit %v", e.pod)
	}
	assert.True(t, reaches(t, np, sentinelPod, 26379), "the bootstrap asks the platform Sentinels")
	assert.False(t, admits(t, np, platformApp, 6379), "other pods of the platform namespace")
	assert.False(t, admits(t, np, podIn("t3", sentinelPod.pod), 6379), "Sentinels of a namespace not granted")
	assert.False(t, reaches(t, np, podIn("t3", sentinelPod.pod), 26379))

	sp := policyOf(t, quorum, fleetRel)
	for _, e := range []endpoint{dataPod, testPod, podIn("t1", sharedPod.pod)} {
		assert.True(t, admits(t, sp, e, 26379), "the Sentinels admit %s %v", e.ns, e.pod)
	}
	assert.True(t, admits(t, sp, sharedPod, 26379), "the shared controller of its own namespace")
	assert.True(t, reaches(t, sp, dataPod, 6379), "the Sentinels reach the monitored data pods")
	// issue 25: on the data port only (the container port named valkey), not the exporter's or any other
	exporter := dataPod
	exporter.ports = map[string]int{"valkey": 6379, "metrics": 9121} // metrics.enabled
	assert.False(t, reaches(t, sp, exporter, 9121), "the Sentinels do not reach the data pods' exporter port")
	assert.False(t, reaches(t, sp, dataPod, 22), "nor any other port")
	other := dataPod
	other.ports = map[string]int{"valkey": 7000}
	assert.True(t, reaches(t, sp, other, 7000), "an instance with another port is reached on it")
	assert.False(t, reaches(t, sp, other, 6379))
	assert.False(t, admits(t, sp, foreignData, 26379), "a namespace the quorum does not select")
	assert.False(t, reaches(t, sp, foreignData, 6379))
	assert.False(t, admits(t, sp, podIn("t1", labels.Set{"app": "web"}), 26379), "a tenant's other pods do not run SENTINEL commands")

	bysel, _, _, _ := renderFleet(t, "namespaceSelector: {matchLabels: {team: cache}}\n")
	ssp := policyOf(t, bysel, fleetRel)
	labelled := endpoint{ns: "t9", nsLabels: labels.Set{"kubernetes.io/metadata.name": "t9", "team": "cache"}, pod: dataPod.pod, ports: dataPod.ports}
	assert.True(t, admits(t, ssp, labelled, 26379), "a namespace the selector matches")
	assert.True(t, reaches(t, ssp, labelled, 6379))
	assert.False(t, admits(t, ssp, foreignData, 26379))
}

// TestSharedControllerDefaultsToTheQuorumsOwn: controller.mode shared without controller.shared grants the
// shared instance controller of the quorum the instance names (<sentinel.release>-instance-controller in
// sentinel.namespace), the one that quorum's release runs. Before, the defaults named
// sentinel-instance-controller in the instance's own namespace, which no release rendered: the instance ran
// with no controller at all and nothing said so (found by a new user following docs/fleet.md).
func TestSharedControllerDefaultsToTheQuorumsOwn(t *testing.T) {
	quorum := decode(t, mustRender(t, "valkey-sentinel", "sharedTrustDomain: accept\ninstanceController: {enabled: true}\nnamespaces: [t1]\n",
		renderOpts{release: fleetRel, namespace: platformNS}))
	shared := decode(t, mustRender(t, "valkey", "sentinel: {release: fleet, namespace: platform}\ncontroller: {mode: shared}\n",
		renderOpts{release: "cache", namespace: "t1"}))
	d := quorum.get(t, "Deployment", "fleet-instance-controller").(*appsv1.Deployment)
	require.Equal(t, fleetShared.Name, d.Spec.Template.Spec.ServiceAccountName)
	r := clusterRBACOf(quorum, shared)
	assert.True(t, r.can(fleetShared, "get", "t1", "", "secrets", "cache-valkey-system"),
		"the quorum's shared controller is granted the instance by default")
	assert.True(t, r.can(fleetShared, "patch", "t1", "", "pods", "cache-valkey-0-0"))
}
