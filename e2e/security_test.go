//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"testing"

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
	ctx := context.Background()
	sa := func(name string) string { return fmt.Sprintf("system:serviceaccount:%s:%s", d.NS, name) }
	cases := []struct {
		user, verb, resource, name string
		allowed                    bool
	}{
		{sa(in.F + "-controller"), "patch", "pods", in.F + "-0-0", true},
		{sa(in.F + "-controller"), "delete", "pods", in.F + "-1-0", true},
		{sa(in.F + "-controller"), "delete", "pods", d.S + "-0", false},
		{sa(in.F + "-controller"), "patch", "pods", "someone-else", false},
		{sa(in.F + "-controller"), "get", "secrets", in.F + "-system", true},
		{sa(in.F + "-controller"), "get", "secrets", in.F + "-acl", true},
		{sa(in.F + "-controller"), "get", "secrets", in.F + "-sentinel-auth", false},
		{sa(in.F + "-controller"), "list", "secrets", "", false},
		{sa(in.F + "-controller"), "update", "configmaps", in.F + "-instance", false},
		{sa(in.F + "-controller"), "update", "configmaps", in.F + "-status", true},
		{sa(in.F + "-test"), "get", "configmaps", in.F + "-instance", true},
		{sa(in.F + "-test"), "get", "secrets", in.F + "-acl", false},
		{sa(in.F + "-test"), "delete", "pods", in.F + "-0-0", false},
		{sa(d.S + "-controller"), "get", "secrets", in.F + "-sentinel-auth", true},
		{sa(d.S + "-controller"), "get", "secrets", in.F + "-system", false},
		{sa(d.S + "-controller"), "delete", "pods", d.S + "-0", true},
		{sa(d.S + "-controller"), "delete", "pods", in.F + "-0-0", false},
		{sa(d.S + "-test"), "get", "secrets", in.F + "-sentinel-auth", false},
		{sa("valkey-sentinel-controller"), "get", "secrets", in.F + "-sentinel-auth", false},
		{sa("default"), "get", "secrets", in.F + "-sentinel-auth", false},
		// the credentials Job (issue 15): creates Secrets, never rewrites a generated system password
		{sa(in.F + "-credentials"), "create", "secrets", "", true},
		{sa(in.F + "-credentials"), "update", "secrets", in.F + "-acl", true},
		{sa(in.F + "-credentials"), "update", "secrets", in.F + "-system", false},
		{sa(in.F + "-credentials"), "update", "secrets", in.F + "-sentinel-auth", false},
		{sa(in.F + "-credentials"), "get", "secrets", in.F + "-system", true},
		{sa(in.F + "-credentials"), "get", "secrets", d.S + "-auth", false},
		{sa(in.F + "-credentials"), "list", "secrets", "", false},
		{sa(in.F + "-credentials"), "delete", "pods", in.F + "-0-0", false},
		{sa(in.F + "-controller"), "create", "secrets", "", false},
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
