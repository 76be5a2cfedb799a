package controller

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"

	"github.com/valkey-ha/valkey-ha/internal/controllers/metrics"
)

// recordingQueue is client-go's work queue that also records what the loop asks of it after a pass.
type recordingQueue struct {
	workqueue.TypedRateLimitingInterface[types.NamespacedName]
	mu    sync.Mutex
	calls []string
}

func (q *recordingQueue) record(format string, a ...any) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.calls = append(q.calls, fmt.Sprintf(format, a...))
}

func (q *recordingQueue) Add(k types.NamespacedName) {
	q.record("Add %s", k)
	q.TypedRateLimitingInterface.Add(k)
}

func (q *recordingQueue) AddAfter(k types.NamespacedName, d time.Duration) {
	q.record("AddAfter %s %s", k, d)
	q.TypedRateLimitingInterface.AddAfter(k, d)
}

func (q *recordingQueue) AddRateLimited(k types.NamespacedName) {
	q.record("AddRateLimited %s", k)
	q.TypedRateLimitingInterface.AddRateLimited(k)
}

func (q *recordingQueue) Forget(k types.NamespacedName) {
	q.record("Forget %s", k)
	q.TypedRateLimitingInterface.Forget(k)
}

// newRecordingQueue returns a real rate-limited work queue (per-key back-off, as the instance controller's)
// that records the loop's calls; it shuts down with the test.
func newRecordingQueue(t *testing.T) *recordingQueue {
	q := &recordingQueue{TypedRateLimitingInterface: workqueue.NewTypedRateLimitingQueue(laneLimiter())}
	t.Cleanup(q.ShutDown)
	return q
}

// TestLoopSettlesFromResult: the shared worker loop (loop.go) is the only code that touches the queue after
// a pass, and does exactly what the pass's Result and error say: success forgets the key's back-off and
// records the success (not for the zero Result: a gone or unserved object), an error backs the key off
// (AddRateLimited) and counts it, and Requeue / RequeueAfter queue it again at once / after a while, with an
// error too (a disruptive step whose status write failed is still observed again at once).
func TestLoopSettlesFromResult(t *testing.T) {
	key := types.NamespacedName{Namespace: "t1", Name: "vk"}
	boom := errors.New("boom")
	for _, tc := range []struct {
		name      string
		res       Result
		err       error
		calls     []string
		succeeded bool
	}{
		{"served pass: resync", Result{RequeueAfter: 5 * time.Second}, nil,
			[]string{"Forget t1/vk", "AddAfter t1/vk 5s"}, true},
		{"disruptive step: at once, and the resync", Result{Requeue: true, RequeueAfter: 5 * time.Second}, nil,
			[]string{"Forget t1/vk", "Add t1/vk", "AddAfter t1/vk 5s"}, true},
		{"gone or not served: forget, no further pass", Result{}, nil,
			[]string{"Forget t1/vk"}, false},
		{"error: rate limited only", Result{}, boom,
			[]string{"AddRateLimited t1/vk"}, false},
		{"error after a step: rate limited, at once, the reclose wait", Result{Requeue: true, RequeueAfter: time.Second}, boom,
			[]string{"AddRateLimited t1/vk", "Add t1/vk", "AddAfter t1/vk 1s"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q := newRecordingQueue(t)
			m := metrics.New()
			var passes []types.NamespacedName
			var observed []Result
			w := &worker{controller: "instance", namespace: "own", queue: q, metrics: m, log: quietLog(),
				reconcile: func(_ context.Context, k types.NamespacedName) (Result, error) {
					passes = append(passes, k)
					return tc.res, tc.err
				},
				observe: func(k types.NamespacedName, res Result, _ time.Duration, err error) {
					assert.Equal(t, key, k)
					assert.Equal(t, tc.err, err)
					observed = append(observed, res)
				}}
			q.TypedRateLimitingInterface.Add(key)
			require.True(t, w.processNext(context.Background()))
			assert.Equal(t, []types.NamespacedName{key}, passes, "one pass under the key")
			assert.Equal(t, []Result{tc.res}, observed, "the pass observed")
			assert.Equal(t, tc.calls, q.calls, "the queue calls after the pass")
			wantRequeues := 0
			if tc.err != nil {
				wantRequeues = 1
			}
			assert.Equal(t, wantRequeues, q.NumRequeues(key), "the key's back-off")
			errs := 0.0
			if tc.err != nil {
				errs = 1
			}
			assert.Equal(t, errs, testutil.ToFloat64(m.ReconcileErrors.WithLabelValues("instance")), "failed passes counted")
			successes := 0
			if tc.succeeded {
				successes = 1
			}
			assert.Equal(t, successes, testutil.CollectAndCount(m.LastReconcileSuccess), "success recorded")
			assert.Equal(t, 1, testutil.CollectAndCount(m.ReconcileSeconds), "pass duration observed")
		})
	}
}

// TestLoopBackOffResetsOnSuccess: with the real queue, failures grow the key's back-off and a success resets
// it (Forget), so the next failure starts again from the shortest wait.
func TestLoopBackOffResetsOnSuccess(t *testing.T) {
	key := types.NamespacedName{Namespace: "t1", Name: "vk"}
	q := newRecordingQueue(t)
	var next error
	w := &worker{controller: "instance", namespace: "t1", queue: q, metrics: metrics.New(), log: quietLog(),
		reconcile: func(context.Context, types.NamespacedName) (Result, error) { return Result{}, next }}
	pass := func(err error) {
		t.Helper()
		next = err
		q.TypedRateLimitingInterface.Add(key)
		require.True(t, w.processNext(context.Background()))
	}
	pass(errors.New("one"))
	pass(errors.New("two"))
	assert.Equal(t, 2, q.NumRequeues(key), "two failures")
	pass(nil)
	assert.Equal(t, 0, q.NumRequeues(key), "a success resets the back-off")
}

// TestLoopBareKey: a key without a namespace runs no pass; it is queued again under the controller's own
// namespace (one key per object: two keys of one object would be handed to two workers at once).
func TestLoopBareKey(t *testing.T) {
	q := newRecordingQueue(t)
	w := &worker{controller: "instance", namespace: "own", queue: q, metrics: metrics.New(), log: quietLog(),
		reconcile: func(context.Context, types.NamespacedName) (Result, error) {
			t.Error("a pass ran under a bare key")
			return Result{}, nil
		}}
	q.TypedRateLimitingInterface.Add(types.NamespacedName{Name: "vk"})
	require.True(t, w.processNext(context.Background()))
	assert.Equal(t, []string{"Add own/vk"}, q.calls)
	k, _ := q.Get()
	assert.Equal(t, types.NamespacedName{Namespace: "own", Name: "vk"}, k)
	q.Done(k)
}

// TestLoopStopsOnShutdown: run returns once the queue shuts down (the controller's Run shuts it down when
// its context ends).
func TestLoopStopsOnShutdown(t *testing.T) {
	q := newRecordingQueue(t)
	w := &worker{controller: "sentinel", queue: q, metrics: metrics.New(), log: quietLog(),
		reconcile: func(context.Context, types.NamespacedName) (Result, error) { return Result{}, nil }}
	done := make(chan struct{})
	go func() { w.run(context.Background()); close(done) }()
	q.ShutDown()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("the worker did not return after ShutDown")
	}
}

// TestResultResync: a served pass waits at most the resync; a shorter wait it already asks for (a reclose
// window) is kept, as the work queue would keep the earlier of two AddAfter.
func TestResultResync(t *testing.T) {
	for _, tc := range []struct {
		in   Result
		want Result
	}{
		{Result{}, Result{RequeueAfter: 10 * time.Second}},
		{Result{RequeueAfter: time.Second}, Result{RequeueAfter: time.Second}},
		{Result{RequeueAfter: time.Minute}, Result{RequeueAfter: 10 * time.Second}},
		{Result{Requeue: true}, Result{Requeue: true, RequeueAfter: 10 * time.Second}},
	} {
		assert.Equal(t, tc.want, tc.in.resync(10*time.Second), "%+v", tc.in)
	}
}
