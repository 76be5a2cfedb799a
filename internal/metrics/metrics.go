// Package metrics defines the controllers' Prometheus collectors and serves /metrics, /healthz and /readyz.
package metrics

import (
	"context"
	"errors"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Metrics holds every collector; labels name the instance (namespace/name) or the quorum release.
type Metrics struct {
	Registry *prometheus.Registry
	// Repairs counts REPLICAOF / promotions issued by the instance controller, by kind.
	Repairs *prometheus.CounterVec
	// Registrations / Removals count SENTINEL MONITOR and REMOVE issued by the sentinel controller.
	Registrations *prometheus.CounterVec
	Removals      *prometheus.CounterVec
	// FailoversObserved counts primary changes seen (Sentinel's answer changed or +switch-master).
	FailoversObserved *prometheus.CounterVec
	// LabelPatches counts valkey.io/role patches.
	LabelPatches *prometheus.CounterVec
	// ReconcileSeconds is the duration of one pass in seconds; ReconcileErrors counts failed passes.
	ReconcileSeconds *prometheus.HistogramVec
	ReconcileErrors  *prometheus.CounterVec
	// TimeToReady is seconds from the descriptor's creation to the first Ready, observed once per instance.
	TimeToReady *prometheus.HistogramVec
}

// New registers every collector on a fresh registry (plus Go and process collectors).
func New() *Metrics {
	r := prometheus.NewRegistry()
	m := &Metrics{
		Registry: r,
		Repairs: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "valkey_ha_repairs_total",
			Help: "Topology repairs issued (repoint = REPLICAOF <primary>, promote = REPLICAOF NO ONE)."}, []string{"instance", "kind"}),
		Registrations: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "valkey_ha_sentinel_registrations_total",
			Help: "SENTINEL MONITOR commands issued."}, []string{"monitor"}),
		Removals: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "valkey_ha_sentinel_removals_total",
			Help: "SENTINEL REMOVE commands issued."}, []string{"monitor"}),
		FailoversObserved: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "valkey_ha_failovers_observed_total",
			Help: "Primary changes observed."}, []string{"instance"}),
		LabelPatches: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "valkey_ha_role_label_patches_total",
			Help: "valkey.io/role label patches."}, []string{"instance"}),
		ReconcileSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "valkey_ha_reconcile_duration_seconds",
			Help: "Duration of one reconcile pass in seconds.", Buckets: prometheus.ExponentialBuckets(0.005, 2, 12)}, []string{"controller"}),
		ReconcileErrors: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "valkey_ha_reconcile_errors_total",
			Help: "Reconcile passes that failed."}, []string{"controller"}),
		TimeToReady: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "valkey_ha_instance_time_to_ready_seconds",
			Help:    "Seconds from the instance descriptor's creation to its first Ready, observed once per instance.",
			Buckets: []float64{5, 10, 15, 20, 30, 45, 60, 90, 120, 180, 300, 600}}, []string{"engine"}),
	}
	r.MustRegister(m.Repairs, m.Registrations, m.Removals, m.FailoversObserved, m.LabelPatches,
		m.ReconcileSeconds, m.ReconcileErrors, m.TimeToReady,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// Health tracks readiness for /readyz (set once caches are synced).
type Health struct{ ready atomic.Bool }

// SetReady marks the process ready.
func (h *Health) SetReady(v bool) { h.ready.Store(v) }

// Serve runs /metrics on metricsAddr and /healthz and /readyz on healthAddr (on metricsAddr too when
// healthAddr is empty) until ctx ends. Empty addresses serve nothing.
func Serve(ctx context.Context, metricsAddr, healthAddr string, m *Metrics, h *Health) error {
	health := func(mux *http.ServeMux) {
		mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })
		mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
			if !h.ready.Load() {
				http.Error(w, "caches not synced", http.StatusServiceUnavailable)
				return
			}
			_, _ = w.Write([]byte("ok"))
		})
	}
	errs := make(chan error, 2)
	n := 0
	if metricsAddr != "" {
		mux := http.NewServeMux()
		mux.Handle("/metrics", promhttp.HandlerFor(m.Registry, promhttp.HandlerOpts{}))
		if healthAddr == "" {
			health(mux)
		}
		n++
		go func() { errs <- serve(ctx, metricsAddr, mux) }()
	}
	if healthAddr != "" {
		mux := http.NewServeMux()
		health(mux)
		n++
		go func() { errs <- serve(ctx, healthAddr, mux) }()
	}
	if n == 0 {
		<-ctx.Done()
		return nil
	}
	for i := 0; i < n; i++ {
		if err := <-errs; err != nil {
			return err
		}
	}
	return nil
}

func serve(ctx context.Context, addr string, mux *http.ServeMux) error {
	srv := &http.Server{Addr: addr, Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	if err := srv.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
