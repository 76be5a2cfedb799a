package check

import (
	"context"
	"encoding/json"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/valkey-ha/valkey-ha/internal/chartapi/contract"
	"github.com/valkey-ha/valkey-ha/internal/chartapi/spec"
)

// TestInstanceRefusesARewrittenDescriptor (issue 19): helm test logs in as _operator on every node the
// descriptor names; a descriptor rewritten to name another host is refused before any connection is made.
func TestInstanceRefusesARewrittenDescriptor(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	dialled := make(chan struct{}, 1)
	go func() {
		if c, err := ln.Accept(); err == nil {
			dialled <- struct{}{}
			c.Close()
		}
	}()
	in := spec.Instance{Name: "db", Namespace: "ns", Release: "db", Engine: "valkey", MonitorName: "db", FailoverMode: contract.FailoverNone,
		Port: 6379, PodSelector: map[string]string{contract.LabelInstance: "db"}, SystemSecret: "db-system", ACLSecret: "db-acl",
		SentinelAuth: spec.SecretRef{User: "_sentinel", SecretName: "db-sentinel-auth", SecretKey: "password"},
		Nodes:        []spec.Node{{Index: 0, Pod: "db-0-0", StatefulSet: "db-0", Host: "localhost", Port: ln.Addr().(*net.TCPAddr).Port}}}
	b, _ := json.Marshal(in)
	cs := fake.NewClientset(
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "db-instance", Namespace: "ns"}, Data: map[string]string{contract.KeyInstance: string(b)}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "db-system", Namespace: "ns"}, Data: map[string][]byte{"_operator": []byte("op-secret")}})
	_, err = Instance(context.Background(), cs, "ns", "db", "cluster.local", time.Second)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "nodes[0].host")
	select {
	case <-dialled:
		t.Fatal("the test connected to the host a rewritten descriptor named")
	case <-time.After(200 * time.Millisecond):
	}
}
