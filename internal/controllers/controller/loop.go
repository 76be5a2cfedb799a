package controller

// The worker loop both controllers share (the shape of controller-runtime's and cert-manager's): a worker takes
// a key from the controller's work queue, runs the controller's pass for it with the worker's context, and is
// the only code that touches the queue afterwards (Forget, AddRateLimited, Add, AddAfter), from the pass's
// Result and error. A pass never touches the queue and makes no context of its own: the one it gets ends when
// the controller stops (shutdown, leadership lost).

import (
	"context"
	"log/slog"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"

	"github.com/valkey-ha/valkey-ha/internal/controllers/metrics"
)

// Result says when the worker takes a pass's key up again. The zero Result asks for no further pass: the
// object is gone or not this controller's (an event enqueues it again when that changes); its pass records
// no success (its metric series were forgotten).
type Result struct {
	// Requeue takes the key up again as soon as this pass ends (a disruptive step was taken, one per pass,
	// and the instance is observed again at once; an observation a +switch-master superseded).
	Requeue bool
	// RequeueAfter, when positive, takes the key up again after this long (the resync, a reclose window).
	// The work queue keeps the earliest of several waits for one key.
	RequeueAfter time.Duration
}

// worker runs the passes of one controller's work queue. Each key is handed to one worker at a time (the
// work queue's guarantee), so a controller may run several workers on one queue (the instance controller's
// lanes, fleet.go).
type worker struct {
	// controller names the controller in the loop's metrics and logs ("instance", "sentinel")
	controller string
	// namespace is the controller's own: a key without a namespace is re-queued under it before any pass
	// runs (one key per object: two keys of one object would be handed to two workers at once)
	namespace string
	queue     workqueue.TypedRateLimitingInterface[types.NamespacedName]
	reconcile func(context.Context, types.NamespacedName) (Result, error)
	// observe, when set, is called after each pass with its key, result, duration and error
	observe func(key types.NamespacedName, res Result, took time.Duration, err error)
	metrics *metrics.Metrics
	log     *slog.Logger
}

// run processes keys until the queue shuts down.
func (w *worker) run(ctx context.Context) {
	for w.processNext(ctx) {
	}
}

// processNext runs one pass for the next key and settles the key from its outcome; false when the queue
// has shut down.
func (w *worker) processNext(ctx context.Context) bool {
	key, quit := w.queue.Get()
	if quit {
		return false
	}
	defer w.queue.Done(key)
	if key.Namespace == "" {
		w.queue.Add(types.NamespacedName{Namespace: w.namespace, Name: key.Name})
		return true
	}
	start := time.Now()
	res, err := w.reconcile(ctx, key)
	took := time.Since(start)
	w.metrics.ReconcileSeconds.WithLabelValues(w.controller).Observe(took.Seconds())
	if w.observe != nil {
		w.observe(key, res, took, err)
	}
	w.settle(key, res, err)
	return true
}

// settle applies a pass's outcome to the queue: an error backs the key off (its own exponential back-off,
// AddRateLimited), a success resets that back-off (Forget) and records the success; then, error or not, the
// key is queued again as res asks (at once, after a while, or both; not at all for the zero Result).
func (w *worker) settle(key types.NamespacedName, res Result, err error) {
	if err != nil {
		w.metrics.ReconcileErrors.WithLabelValues(w.controller).Inc()
		w.log.Warn("reconcile failed", w.controller, key.String(), "error", err)
		w.queue.AddRateLimited(key)
	} else {
		w.queue.Forget(key)
		if res != (Result{}) {
			w.metrics.ReconcileSucceeded(w.controller, key.String(), time.Now())
		}
	}
	if res.Requeue {
		w.queue.Add(key)
	}
	if res.RequeueAfter > 0 {
		w.queue.AddAfter(key, res.RequeueAfter)
	}
}

// resync returns res waiting at most d (the resync after a served pass; a shorter wait res already asks for
// is kept, as the work queue keeps the earliest).
func (res Result) resync(d time.Duration) Result {
	if res.RequeueAfter <= 0 || d < res.RequeueAfter {
		res.RequeueAfter = d
	}
	return res
}
