package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/valkey-ha/valkey-ha/internal/chartapi/contract"
	"github.com/valkey-ha/valkey-ha/internal/chartapi/status"
)

// syncBuffer is a bytes.Buffer safe for the watch goroutine and the test.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}
func (s *syncBuffer) String() string { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

func statusConfigMap(t *testing.T, st status.Instance) *corev1.ConfigMap {
	raw, err := json.Marshal(st)
	require.NoError(t, err)
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: st.Name + "-status", Namespace: "ns", Labels: map[string]string{
			contract.LabelPartOf: contract.PartOf, contract.LabelComponent: contract.ComponentStatus}},
		Data: map[string]string{contract.KeyStatus: string(raw)},
	}
}

// TestStatusWatchPrintsOnChange: `status --watch` prints the status once, again only when it changes (here a
// failover: the primary moves), a read error once, and ends without error when interrupted.
func TestStatusWatchPrintsOnChange(t *testing.T) {
	cs := fake.NewSimpleClientset(statusConfigMap(t, status.Instance{Name: "db", State: "Ready", Primary: "db-0-0"}))
	var fail sync.Mutex
	failing := false
	snapshot := func(ctx context.Context) (string, error) {
		fail.Lock()
		f := failing
		fail.Unlock()
		if f {
			return "", errors.New("list status configmaps in ns: connection refused")
		}
		in, q, err := readStatus(ctx, cs, "ns", "")
		if err != nil {
			return "", err
		}
		var b bytes.Buffer
		renderStatus(&b, "table", in, q)
		return b.String(), nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	out := &syncBuffer{}
	done := make(chan error, 1)
	go func() { done <- watchStatus(ctx, out, 10*time.Millisecond, time.Now, snapshot) }()

	waitFor := func(what string, cond func(string) bool) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for !cond(out.String()) {
			require.True(t, time.Now().Before(deadline), "waiting for %s; output:\n%s", what, out.String())
			time.Sleep(5 * time.Millisecond)
		}
	}
	waitFor("the first print", func(s string) bool { return strings.Contains(s, "primary=db-0-0") })
	time.Sleep(100 * time.Millisecond) // about 10 unchanged reads
	assert.Equal(t, 1, strings.Count(out.String(), "INSTANCE db"), "unchanged status is not printed again")

	_, err := cs.CoreV1().ConfigMaps("ns").Update(ctx, statusConfigMap(t, status.Instance{Name: "db", State: "Ready", Primary: "db-1-0"}), metav1.UpdateOptions{})
	require.NoError(t, err)
	waitFor("the print after the failover", func(s string) bool { return strings.Contains(s, "primary=db-1-0") })

	fail.Lock()
	failing = true
	fail.Unlock()
	waitFor("the error", func(s string) bool { return strings.Contains(s, "connection refused") })
	time.Sleep(100 * time.Millisecond)
	assert.Equal(t, 1, strings.Count(out.String(), "connection refused"), "the same error is printed once")
	fail.Lock()
	failing = false
	fail.Unlock()
	waitFor("the status again after the error", func(s string) bool { return strings.Count(s, "INSTANCE db") == 3 })

	cancel()
	select {
	case err := <-done:
		assert.NoError(t, err, "Ctrl-C ends the watch normally")
	case <-time.After(5 * time.Second):
		t.Fatal("watch did not end after the context was cancelled")
	}
	assert.Equal(t, 4, strings.Count(out.String(), "--- "), "first, failover, error, recovery:\n%s", out.String())
}

// TestStatusNamesAnEmptyNamespace: a namespace where nothing published a status, or an --instance that is
// not there, is an error naming what to check (a mistyped --namespace printed nothing and exited 0).
func TestStatusNamesAnEmptyNamespace(t *testing.T) {
	ctx := context.Background()
	cs := fake.NewClientset(statusConfigMap(t, status.Instance{Name: "cache"}))
	for _, tc := range []struct{ ns, instance, want string }{
		{"typo", "", `no instance or Sentinel quorum has published a status in namespace "typo"`},
		{"ns", "cahce", `no instance "cahce" has published a status in namespace "ns"`},
		{"ns", "", ""},
		{"ns", "cache", ""},
	} {
		instances, quorums, err := readStatus(ctx, cs, tc.ns, tc.instance)
		require.NoError(t, err)
		err = checkFound(tc.ns, tc.instance, instances, quorums)
		if tc.want == "" {
			assert.NoError(t, err, "%s/%s", tc.ns, tc.instance)
			continue
		}
		require.Error(t, err, "%s/%s", tc.ns, tc.instance)
		assert.Contains(t, err.Error(), tc.want)
	}
}

// TestStatusSaysWhyAMonitorIsNotRegistered (fresh user's walk: an instance whose pods stayed Pending showed
// "REGISTERED 0, CKQUORUM FAIL" and nothing else): the quorum's held reasons, sorted by monitor, and the steps
// its policy refused are printed under the monitors, and an instance's refused step under its conditions.
func TestStatusSaysWhyAMonitorIsNotRegistered(t *testing.T) {
	var b bytes.Buffer
	renderStatus(&b, "table",
		[]status.Instance{{Name: "cache", State: "Degraded", Refused: "roll: no replica may be promoted"}},
		[]status.Quorum{{Release: "sentinel",
			Monitors: []status.MonitorStatus{{Name: "cache", Instance: "ns/cache-instance"}, {Name: "b", Instance: "ns/b-instance"}},
			Held:     map[string]string{"cache": "no primary known yet to register", "b": "b-0-0 is still loading"},
			Refused:  []string{"replace sentinel-1: a failover is in flight"}}})
	out := b.String()
	assert.Contains(t, out, "  refused: roll: no replica may be promoted\n")
	assert.Contains(t, out, "  held: b: b-0-0 is still loading\n  held: cache: no primary known yet to register\n")
	assert.Contains(t, out, "  refused: replace sentinel-1: a failover is in flight\n")
}
