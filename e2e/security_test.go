//go:build e2e

package e2e

import (
	"fmt"
	"testing"

	"github.com/valkey-ha/valkey-ha/internal/chartapi/contract"

	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestSecurityRBACOnTheAPIServer (issue 19): the charts' RBAC as the real API server's RBAC authorizer decides
// it (SubjectAccessReview), for the ServiceAccounts of an installed instance and quorum: each may do what its
// component needs and is refused the rest.
func TestSecurityRBACOnTheAPIServer(t *testing.T) {
	maybeParallel(t)
	d := Deploy(t, "rbac", DeployOpts{Replicas: 1})
	in := d.I()
	ctx := t.Context()
	sa := func(name string) string { return fmt.Sprintf("system:serviceaccount:%s:%s", d.NS, name) }
	cases := []struct {
		user, verb, resource, name string
		allowed                    bool
	}{
		{sa(contract.Controller(in.F)), "patch", "pods", contract.NodePod(in.F, 0), true},
		{sa(contract.Controller(in.F)), "delete", "pods", contract.NodePod(in.F, 1), true},
		{sa(contract.Controller(in.F)), "delete", "pods", contract.SentinelPod(d.S, 0), false},
		{sa(contract.Controller(in.F)), "patch", "pods", "someone-else", false},
		{sa(contract.Controller(in.F)), "get", "secrets", contract.SystemSecret(in.F), true},
		{sa(contract.Controller(in.F)), "get", "secrets", contract.ACLSecret(in.F), true},
		{sa(contract.Controller(in.F)), "get", "secrets", contract.SentinelAuthSecret(in.F), false},
		{sa(contract.Controller(in.F)), "list", "secrets", "", false},
		{sa(contract.Controller(in.F)), "update", "configmaps", contract.Descriptor(in.F), false},
		{sa(contract.Controller(in.F)), "update", "configmaps", contract.Status(in.F), true},
		{sa(in.F + "-test"), "get", "configmaps", contract.Descriptor(in.F), true},
		{sa(in.F + "-test"), "get", "secrets", contract.ACLSecret(in.F), false},
		{sa(in.F + "-test"), "delete", "pods", contract.NodePod(in.F, 0), false},
		{sa(contract.Controller(d.S)), "get", "secrets", contract.SentinelAuthSecret(in.F), true},
		{sa(contract.Controller(d.S)), "get", "secrets", contract.SystemSecret(in.F), false},
		{sa(contract.Controller(d.S)), "delete", "pods", contract.SentinelPod(d.S, 0), true},
		{sa(contract.Controller(d.S)), "delete", "pods", contract.NodePod(in.F, 0), false},
		{sa(d.S + "-test"), "get", "secrets", contract.SentinelAuthSecret(in.F), false},
		{sa("valkey-sentinel-controller"), "get", "secrets", contract.SentinelAuthSecret(in.F), false},
		{sa("default"), "get", "secrets", contract.SentinelAuthSecret(in.F), false},
		// the credentials Job (issue 15): creates Secrets, never rewrites a generated system password
		{sa(in.F + "-credentials"), "create", "secrets", "", true},
		{sa(in.F + "-credentials"), "update", "secrets", contract.ACLSecret(in.F), true},
		{sa(in.F + "-credentials"), "update", "secrets", contract.SystemSecret(in.F), false},
		{sa(in.F + "-credentials"), "update", "secrets", contract.SentinelAuthSecret(in.F), false},
		{sa(in.F + "-credentials"), "get", "secrets", contract.SystemSecret(in.F), true},
		{sa(in.F + "-credentials"), "get", "secrets", d.S + "-auth-instance", false},
		{sa(in.F + "-credentials"), "list", "secrets", "", false},
		{sa(in.F + "-credentials"), "delete", "pods", contract.NodePod(in.F, 0), false},
		{sa(contract.Controller(in.F)), "create", "secrets", "", false},
		// the quorum's credentials (Sentinel auth, on by default): the instance naming the quorum reads its
		// _instance Secret, the quorum's controller its _admin, its credentials Job creates the three
		{sa(in.F + "-controller"), "get", "secrets", d.S + "-auth-instance", true},
		{sa(in.F + "-test"), "get", "secrets", d.S + "-auth-instance", true},
		{sa(in.F + "-controller"), "get", "secrets", d.S + "-auth-admin", false},
		{sa(in.F + "-controller"), "get", "secrets", d.S + "-auth-client", false},
		{sa(in.F), "get", "secrets", d.S + "-auth-instance", false},
		{sa(d.S + "-controller"), "get", "secrets", d.S + "-auth-admin", true},
		{sa(d.S + "-controller"), "get", "secrets", d.S + "-auth-client", false},
		{sa(d.S + "-controller"), "create", "secrets", "", false},
		{sa(d.S + "-controller"), "update", "secrets", d.S + "-auth-admin", false},
		{sa(d.S + "-credentials"), "create", "secrets", "", true},
		{sa(d.S + "-credentials"), "get", "secrets", d.S + "-auth-instance", true},
		{sa(d.S + "-credentials"), "update", "secrets", d.S + "-auth-admin", false},
		{sa(d.S + "-credentials"), "get", "secrets", in.F + "-system", false},
		{sa(d.S + "-test"), "get", "secrets", d.S + "-auth-client", false},
		{sa(d.S), "get", "secrets", d.S + "-auth-admin", false},
		{sa("default"), "get", "secrets", d.S + "-auth-instance", false},
		// _controller (SENTINEL RESET, h11-reset): the instance controller only, never the helm test or a data pod
		{sa(in.F + "-controller"), "get", "secrets", d.S + "-auth-controller", true},
		{sa(in.F + "-test"), "get", "secrets", d.S + "-auth-controller", false},
		{sa(in.F), "get", "secrets", d.S + "-auth-controller", false},
		{sa(in.F + "-credentials"), "get", "secrets", d.S + "-auth-controller", false},
		{sa(d.S + "-controller"), "get", "secrets", d.S + "-auth-controller", false},
		{sa(d.S + "-credentials"), "get", "secrets", d.S + "-auth-controller", true},
		{sa("default"), "get", "secrets", d.S + "-auth-controller", false},
	}
	for _, c := range cases {
		r, err := kube.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User: c.user, Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + d.NS, "system:authenticated"},
			ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: d.NS, Verb: c.verb, Resource: c.resource, Name: c.name}}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("SubjectAccessReview: %v", err)
		}
		if r.Status.Allowed != c.allowed {
			t.Errorf("%s %s %s/%s: allowed=%v, want %v (%s)", c.user, c.verb, c.resource, c.name, r.Status.Allowed, c.allowed, r.Status.Reason)
		}
	}
	t.Logf("%d access reviews answered by the API server as the rendered RBAC says", len(cases))
}
