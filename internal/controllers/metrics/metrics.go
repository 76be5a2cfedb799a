// Package metrics defines the controllers' Prometheus collectors and serves /metrics, /healthz and /readyz.
package metrics

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"golang.org/x/sync/errgroup"

	"github.com/valkey-ha/valkey-ha/internal/chartapi/status"
)

// Metrics holds every collector; labels name the instance (namespace/name) or the quorum release.
type Metrics struct {
	Registry *prometheus.Registry
	// Repairs counts REPLICAOF / promotions issued by the instance controller, by kind.
	Repairs *prometheus.CounterVec
	// Registrations / Removals count SENTINEL MONITOR and REMOVE issued by the sentinel controller.
	Registrations *prometheus.CounterVec
	Removals      *prometheus.CounterVec
	// ForeignPrimaries counts, per monitor, the Sentinels found naming a primary that is not a node of the
	// monitor's instance (what a forged hello on a shared quorum causes), one per Sentinel and pass;
	// ForeignRestores the monitors the sentinel controller re-registered at the observed real primary
	// (SENTINEL REMOVE + MONITOR + SET on one Sentinel). Alert ValkeyHAForeignPrimary fires on either.
	ForeignPrimaries *prometheus.CounterVec
	ForeignRestores  *prometheus.CounterVec
	// FailoversObserved counts primary changes seen (Sentinel's answer changed or +switch-master).
	FailoversObserved *prometheus.CounterVec
	// LabelPatches counts valkey.io/role patches.
	LabelPatches *prometheus.CounterVec
	// DemotedClientsClosed counts application connections closed on demoted nodes (internal/podsteps/handoff
	// CloseClients); DemotedClientsNotClosed counts demotions after which they could not be closed (the node
	// did not answer in time or refused): those clients get READONLY until they reconnect.
	DemotedClientsClosed    *prometheus.CounterVec
	DemotedClientsNotClosed *prometheus.CounterVec
	// ReconcileSeconds is the duration of one pass in seconds; ReconcileErrors counts failed passes.
	ReconcileSeconds *prometheus.HistogramVec
	ReconcileErrors  *prometheus.CounterVec
	// TimeToReady is seconds from the descriptor's creation to the first Ready, observed once per instance.
	TimeToReady *prometheus.HistogramVec
	// LastReconcileSuccess is the Unix time in seconds of the last pass that ended without error, by controller
	// (instance|sentinel) and object (namespace/name of the instance, or of the Sentinel release).
	LastReconcileSuccess *prometheus.GaugeVec

	// The instance controller's view of one instance (label valkey_instance = namespace/name), set each pass.
	// InstanceNodes is the number of data nodes the descriptor lists; InstanceNodesReachable those that
	// answered INFO replication; InstancePrimaries those of them reporting role master (1 is healthy, 0 is no
	// primary, 2 or more is a split).
	InstanceNodes          *prometheus.GaugeVec
	InstanceNodesReachable *prometheus.GaugeVec
	InstancePrimaries      *prometheus.GaugeVec
	// ReplicaLinkUp is 1 when a reachable replica's master_link_status is up and it replicates from the
	// instance's primary, else 0; ReplicaLagBytes is the primary's master_repl_offset minus the replica's
	// slave_repl_offset in bytes (only while the primary is known and reachable). Labels valkey_instance and
	// replica (the replica's pod name; not "pod", which Prometheus gives the scraped controller pod).
	ReplicaLinkUp   *prometheus.GaugeVec
	ReplicaLagBytes *prometheus.GaugeVec
	// InstanceQuorumOK is 1 when SENTINEL CKQUORUM <monitor> answered OK on the first Sentinel that answered,
	// 0 when it did not (or none answered); absent while the instance is not monitored.
	InstanceQuorumOK *prometheus.GaugeVec
	// InstanceSentinelsNotWatching counts the Sentinels that name the primary the controller reaches but read
	// its INFO more than 30 s ago (plan.SentinelsNotWatching: cut off from it, or their timers stopped);
	// absent while the instance is not monitored.
	InstanceSentinelsNotWatching *prometheus.GaugeVec
	// InstanceMonitored is, for an instance whose failover mode is sentinel, 1 when a quorum has published
	// its Sentinel info (<F>-sentinels: some quorum's valkeySelector matched it and its monitor is managed)
	// and 0 when none has: no Sentinel will fail it over. Absent for instances without Sentinel failover.
	// It exists so that "no quorum monitors the instance" is a series of its own (InstanceQuorumOK vanishes).
	InstanceMonitored *prometheus.GaugeVec
	// HandoffUnavailable counts terminating primary pods whose preStop hook the instance controller saw
	// unable to hand the primary role off (the HandoffUnavailable Event; once per pod UID): the failover
	// then waits for Sentinel's down-after-milliseconds. Initialized to 0 per instance so increase() sees
	// the first one.
	HandoffUnavailable *prometheus.CounterVec
	// FailoverStalls counts stalled failovers the instance controller saw (the FailoverStalled Event; once per
	// stall, plan.FailoverStalled): every answering Sentinel held the primary o_down past the election timeout
	// and none failed it over, so Sentinel waits 2 x failover-timeout before it tries again. Initialized to 0
	// per instance so increase() sees the first one.
	FailoverStalls *prometheus.CounterVec
	// InstanceRollHeldSeconds is how long in seconds a planned data roll has been waiting (the status's
	// rollWait reason has been set without a step), 0 when no roll waits.
	InstanceRollHeldSeconds *prometheus.GaugeVec

	// The last successful backup of an instance (label valkey_instance), read by the instance controller from
	// the termination message of the newest succeeded backup Job pod (the backup's metadata): its size in
	// bytes, its snapshot duration in seconds and its end as Unix time in seconds. Absent until the controller
	// saw one; kept when the Job's pod is gone.
	BackupLastSizeBytes       *prometheus.GaugeVec
	BackupLastDurationSeconds *prometheus.GaugeVec
	BackupLastUploadSeconds   *prometheus.GaugeVec
	BackupLastSuccess         *prometheus.GaugeVec

	// The sentinel controller's view of its quorum (label quorum = namespace/release), set each pass.
	// Sentinels is the number of Sentinel pods of the release; SentinelReachable is 1 per Sentinel pod
	// (label sentinel) that answered SENTINEL MASTERS, else 0.
	Sentinels         *prometheus.GaugeVec
	SentinelReachable *prometheus.GaugeVec
	// MonitorRegistered is the number of reachable Sentinels that know the monitor (label monitor), for every
	// monitor the quorum should hold; MonitorQuorumOK is 1 when every Sentinel knows it and SENTINEL CKQUORUM
	// answered OK on each, else 0.
	MonitorRegistered *prometheus.GaugeVec
	MonitorQuorumOK   *prometheus.GaugeVec
	// MonitorRefused is 1 for a selected instance (label valkey_instance = namespace/name) whose monitor is not
	// managed this pass: refused (claimed by another quorum, TLS mismatch, invalid descriptor) or unresolved
	// (its _sentinel Secret could not be read). The reason is in the quorum status and the instance's Events.
	MonitorRefused *prometheus.GaugeVec
	// SentinelRollHeldSeconds is how long in seconds a planned Sentinel roll has been waiting, 0 when none waits.
	SentinelRollHeldSeconds *prometheus.GaugeVec

	// Per-instance work of the instance controller (a shared controller serves many instances, and one must
	// never hide another). InstancePassSeconds is the duration in seconds of the instance's last
	// pass; InstancePassErrors counts its passes that failed (each retried with a backoff of its own).
	InstancePassSeconds *prometheus.GaugeVec
	InstancePassErrors  *prometheus.CounterVec
	// InstanceWorkers is the number of worker lanes the instance controller runs (one per instance unless
	// capped).
	InstanceWorkers prometheus.Gauge

	mu sync.Mutex
	// series remembers the label values last set per instance or quorum, so a pass deletes the series of
	// pods and monitors that are gone (forgetting an object releases its metric series).
	series map[string]map[string]bool
}

// New registers every collector on a fresh registry (plus Go and process collectors).
func New() *Metrics {
	r := prometheus.NewRegistry()
	m := &Metrics{
		Registry: r,
		Repairs: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "valkey_ha_repairs_total",
			Help: "Topology repairs issued (repoint = REPLICAOF <primary>, promote = REPLICAOF NO ONE)."}, []string{"valkey_instance", "kind"}),
		Registrations: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "valkey_ha_sentinel_registrations_total",
			Help: "SENTINEL MONITOR commands issued."}, []string{"monitor"}),
		Removals: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "valkey_ha_sentinel_removals_total",
			Help: "SENTINEL REMOVE commands issued."}, []string{"monitor"}),
		ForeignPrimaries: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "valkey_ha_sentinel_foreign_primary_total",
			Help: "Sentinels found naming, for a monitor, a primary that is not a node of its instance (one per Sentinel and pass)."}, []string{"quorum", "monitor"}),
		ForeignRestores: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "valkey_ha_sentinel_foreign_primary_restores_total",
			Help: "Monitors re-registered (SENTINEL REMOVE + MONITOR) at the observed real primary after a Sentinel named a foreign one."}, []string{"quorum", "monitor"}),
		FailoversObserved: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "valkey_ha_failovers_observed_total",
			Help: "Primary changes observed."}, []string{"valkey_instance"}),
		LabelPatches: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "valkey_ha_role_label_patches_total",
			Help: "valkey.io/role label patches."}, []string{"valkey_instance"}),
		DemotedClientsClosed: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "valkey_ha_demoted_clients_closed_total",
			Help: "Application connections closed on a demoted node so that they reconnect to the new primary."}, []string{"valkey_instance"}),
		DemotedClientsNotClosed: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "valkey_ha_demoted_clients_not_closed_total",
			Help: "Demotions after which the node's application connections could not be closed (they get READONLY until they reconnect)."},
			[]string{"valkey_instance"}),
		ReconcileSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "valkey_ha_reconcile_duration_seconds",
			Help: "Duration of one reconcile pass in seconds.", Buckets: prometheus.ExponentialBuckets(0.005, 2, 12)}, []string{"controller"}),
		ReconcileErrors: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "valkey_ha_reconcile_errors_total",
			Help: "Reconcile passes that failed."}, []string{"controller"}),
		TimeToReady: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "valkey_ha_instance_time_to_ready_seconds",
			Help:    "Seconds from the instance descriptor's creation to its first Ready, observed once per instance.",
			Buckets: []float64{5, 10, 15, 20, 30, 45, 60, 90, 120, 180, 300, 600}}, []string{"engine"}),
	}
	gauge := func(name, help string, labels ...string) *prometheus.GaugeVec {
		return prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: help}, labels)
	}
	m.LastReconcileSuccess = gauge("valkey_ha_reconcile_last_success_timestamp_seconds",
		"Unix time in seconds of the last reconcile pass that ended without error.", "controller", "object")
	m.InstanceNodes = gauge("valkey_ha_instance_nodes", "Data nodes the instance descriptor lists.", "valkey_instance")
	m.InstanceNodesReachable = gauge("valkey_ha_instance_nodes_reachable",
		"Data nodes that answered INFO replication in the last pass.", "valkey_instance")
	m.InstancePrimaries = gauge("valkey_ha_instance_primaries",
		"Reachable data nodes reporting role master (1 healthy, 0 no primary, 2+ split).", "valkey_instance")
	m.ReplicaLinkUp = gauge("valkey_ha_replica_link_up",
		"1 when the replica's link to the instance's primary is up, else 0.", "valkey_instance", "replica")
	m.ReplicaLagBytes = gauge("valkey_ha_replica_lag_bytes",
		"Primary master_repl_offset minus the replica's slave_repl_offset, in bytes.", "valkey_instance", "replica")
	m.InstanceQuorumOK = gauge("valkey_ha_instance_quorum_ok",
		"1 when SENTINEL CKQUORUM of the instance's monitor answered OK, else 0.", "valkey_instance")
	m.InstanceSentinelsNotWatching = gauge("valkey_ha_instance_sentinels_not_watching",
		"Sentinels that name the primary the controller reaches but read its INFO more than 30 s ago.", "valkey_instance")
	m.InstanceMonitored = gauge("valkey_ha_instance_monitored",
		"1 when a quorum published the Sentinel info of the instance (Sentinel failover mode only), else 0.", "valkey_instance")
	m.HandoffUnavailable = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "valkey_ha_handoff_unavailable_total",
		Help: "Terminating primary pods whose preStop hook could not hand the primary role off."}, []string{"valkey_instance"})
	m.FailoverStalls = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "valkey_ha_failover_stalls_total",
		Help: "Stalled failovers seen: every answering Sentinel held the primary down and none failed it over (an election without a leader, or no replica to promote)."},
		[]string{"valkey_instance"})
	m.InstanceRollHeldSeconds = gauge("valkey_ha_instance_roll_held_seconds",
		"Seconds a planned data roll has been waiting without a step (0: none waits).", "valkey_instance")
	m.BackupLastSizeBytes = gauge("valkey_ha_backup_last_size_bytes", "Size in bytes of the instance's last successful backup.", "valkey_instance")
	m.BackupLastDurationSeconds = gauge("valkey_ha_backup_last_duration_seconds",
		"Seconds the instance's last successful backup took (snapshot start to its check).", "valkey_instance")
	m.BackupLastUploadSeconds = gauge("valkey_ha_backup_last_upload_duration_seconds",
		"Seconds the upload of the instance's last successful backup to S3-compatible storage took (0: not uploaded).", "valkey_instance")
	m.BackupLastSuccess = gauge("valkey_ha_backup_last_success_timestamp_seconds",
		"Unix time in seconds at which the instance's last successful backup ended.", "valkey_instance")
	m.Sentinels = gauge("valkey_ha_sentinels", "Sentinel pods of the quorum.", "quorum")
	m.SentinelReachable = gauge("valkey_ha_sentinel_reachable",
		"1 when the Sentinel answered SENTINEL MASTERS in the last pass, else 0.", "quorum", "sentinel")
	m.MonitorRegistered = gauge("valkey_ha_sentinel_monitor_registered",
		"Reachable Sentinels that know the monitor.", "quorum", "monitor")
	m.MonitorQuorumOK = gauge("valkey_ha_sentinel_monitor_quorum_ok",
		"1 when every Sentinel knows the monitor and SENTINEL CKQUORUM answered OK on each, else 0.", "quorum", "monitor")
	m.MonitorRefused = gauge("valkey_ha_sentinel_monitor_refused",
		"1 for a selected instance whose monitor is refused or unresolved this pass.", "quorum", "valkey_instance")
	m.SentinelRollHeldSeconds = gauge("valkey_ha_sentinel_roll_held_seconds",
		"Seconds a planned Sentinel roll has been waiting without a step (0: none waits).", "quorum")
	m.InstancePassSeconds = gauge("valkey_ha_instance_pass_duration_seconds",
		"Duration in seconds of the instance's last reconcile pass.", "valkey_instance")
	m.InstancePassErrors = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "valkey_ha_instance_pass_errors_total",
		Help: "Reconcile passes of the instance that failed."}, []string{"valkey_instance"})
	m.InstanceWorkers = prometheus.NewGauge(prometheus.GaugeOpts{Name: "valkey_ha_instance_workers",
		Help: "Worker lanes of the instance controller (one per instance unless capped)."})
	m.series = map[string]map[string]bool{}
	r.MustRegister(m.Repairs, m.Registrations, m.Removals, m.ForeignPrimaries, m.ForeignRestores, m.FailoversObserved, m.LabelPatches,
		m.DemotedClientsClosed, m.DemotedClientsNotClosed,
		m.ReconcileSeconds, m.ReconcileErrors, m.TimeToReady, m.LastReconcileSuccess,
		m.InstanceNodes, m.InstanceNodesReachable, m.InstancePrimaries, m.ReplicaLinkUp, m.ReplicaLagBytes,
		m.InstanceQuorumOK, m.InstanceSentinelsNotWatching, m.InstanceMonitored, m.HandoffUnavailable, m.FailoverStalls, m.InstanceRollHeldSeconds,
		m.BackupLastSizeBytes, m.BackupLastDurationSeconds, m.BackupLastUploadSeconds, m.BackupLastSuccess,
		m.Sentinels, m.SentinelReachable, m.MonitorRegistered, m.MonitorQuorumOK, m.MonitorRefused, m.SentinelRollHeldSeconds,
		m.InstancePassSeconds, m.InstancePassErrors, m.InstanceWorkers,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// ReconcileSucceeded records that a pass of controller (instance|sentinel) over object (namespace/name) ended
// without error at t.
func (m *Metrics) ReconcileSucceeded(controller, object string, t time.Time) {
	m.LastReconcileSuccess.WithLabelValues(controller, object).Set(float64(t.UnixNano()) / 1e9)
}

// ObserveInstance sets the instance gauges of instance (namespace/name) from one pass and deletes the replica
// series of pods that are no longer replicas.
func (m *Metrics) ObserveInstance(instance string, o status.InstanceObservation) {
	m.InstanceNodes.WithLabelValues(instance).Set(float64(o.Nodes))
	m.InstanceNodesReachable.WithLabelValues(instance).Set(float64(o.Reachable))
	m.InstancePrimaries.WithLabelValues(instance).Set(float64(o.Primaries))
	m.InstanceRollHeldSeconds.WithLabelValues(instance).Set(o.RollHeld.Seconds())
	// counters of events that alerts take increase() of start at 0, so the first event counts
	m.FailoversObserved.WithLabelValues(instance).Add(0)
	m.HandoffUnavailable.WithLabelValues(instance).Add(0)
	if o.SentinelFailover {
		m.FailoverStalls.WithLabelValues(instance).Add(0)
	} else {
		m.FailoverStalls.DeleteLabelValues(instance)
	}
	if o.SentinelFailover {
		m.InstanceMonitored.WithLabelValues(instance).Set(b2f(o.Monitored))
	} else {
		m.InstanceMonitored.DeleteLabelValues(instance)
	}
	if o.Monitored {
		m.InstanceQuorumOK.WithLabelValues(instance).Set(b2f(o.QuorumOK))
		m.InstanceSentinelsNotWatching.WithLabelValues(instance).Set(float64(o.SentinelsNotWatching))
	} else {
		m.InstanceQuorumOK.DeleteLabelValues(instance)
		m.InstanceSentinelsNotWatching.DeleteLabelValues(instance)
	}
	links, lags := map[string]bool{}, map[string]bool{}
	for _, r := range o.Replicas {
		m.ReplicaLinkUp.WithLabelValues(instance, r.Pod).Set(b2f(r.LinkUp))
		links[r.Pod] = true
		if r.LagKnown {
			m.ReplicaLagBytes.WithLabelValues(instance, r.Pod).Set(float64(r.LagBytes))
			lags[r.Pod] = true
		}
	}
	m.sweep("link/"+instance, links, func(pod string) { m.ReplicaLinkUp.DeleteLabelValues(instance, pod) })
	m.sweep("lag/"+instance, lags, func(pod string) { m.ReplicaLagBytes.DeleteLabelValues(instance, pod) })
}

// ForgetInstance deletes every series of instance (namespace/name), its counters too: it no longer exists.
func (m *Metrics) ForgetInstance(instance string) {
	l := prometheus.Labels{"valkey_instance": instance}
	for _, v := range []*prometheus.GaugeVec{m.InstanceNodes, m.InstanceNodesReachable, m.InstancePrimaries,
		m.ReplicaLinkUp, m.ReplicaLagBytes, m.InstanceQuorumOK, m.InstanceSentinelsNotWatching, m.InstanceMonitored, m.InstanceRollHeldSeconds, m.InstancePassSeconds,
		m.BackupLastSizeBytes, m.BackupLastDurationSeconds, m.BackupLastUploadSeconds, m.BackupLastSuccess} {
		v.DeletePartialMatch(l)
	}
	m.InstancePassErrors.DeletePartialMatch(l)
	for _, v := range []*prometheus.CounterVec{m.Repairs, m.FailoversObserved, m.LabelPatches, m.HandoffUnavailable, m.FailoverStalls,
		m.DemotedClientsClosed, m.DemotedClientsNotClosed} {
		v.DeletePartialMatch(l)
	}
	m.LastReconcileSuccess.DeleteLabelValues("instance", instance)
	m.sweep("link/"+instance, nil, func(string) {})
	m.sweep("lag/"+instance, nil, func(string) {})
}

// ObserveBackup sets the last-backup gauges of instance (namespace/name): size in bytes, the snapshot's and
// the upload's durations in seconds (upload 0: not uploaded), end time.
func (m *Metrics) ObserveBackup(instance string, sizeBytes int64, durationSeconds, uploadSeconds float64, finished time.Time) {
	m.BackupLastSizeBytes.WithLabelValues(instance).Set(float64(sizeBytes))
	m.BackupLastDurationSeconds.WithLabelValues(instance).Set(durationSeconds)
	m.BackupLastUploadSeconds.WithLabelValues(instance).Set(uploadSeconds)
	m.BackupLastSuccess.WithLabelValues(instance).Set(float64(finished.UnixNano()) / 1e9)
}

// ObserveQuorum sets the quorum gauges of quorum (namespace/release) from one pass and deletes the series
// of Sentinels, monitors and refusals that are gone.
func (m *Metrics) ObserveQuorum(quorum string, o status.QuorumObservation) {
	m.Sentinels.WithLabelValues(quorum).Set(float64(len(o.Reachable)))
	m.SentinelRollHeldSeconds.WithLabelValues(quorum).Set(o.RollHeld.Seconds())
	pods, monitors, refused := map[string]bool{}, map[string]bool{}, map[string]bool{}
	for pod, ok := range o.Reachable {
		m.SentinelReachable.WithLabelValues(quorum, pod).Set(b2f(ok))
		pods[pod] = true
	}
	for _, mo := range o.Monitors {
		m.MonitorRegistered.WithLabelValues(quorum, mo.Name).Set(float64(mo.Registered))
		m.MonitorQuorumOK.WithLabelValues(quorum, mo.Name).Set(b2f(mo.QuorumOK))
		monitors[mo.Name] = true
	}
	for _, in := range o.Refused {
		m.MonitorRefused.WithLabelValues(quorum, in).Set(1)
		refused[in] = true
	}
	m.sweep("sentinel/"+quorum, pods, func(p string) { m.SentinelReachable.DeleteLabelValues(quorum, p) })
	m.sweep("monitor/"+quorum, monitors, func(n string) {
		m.MonitorRegistered.DeleteLabelValues(quorum, n)
		m.MonitorQuorumOK.DeleteLabelValues(quorum, n)
	})
	m.sweep("refused/"+quorum, refused, func(n string) { m.MonitorRefused.DeleteLabelValues(quorum, n) })
}

// sweep calls drop for every value remembered under key that is not in now, then remembers now.
func (m *Metrics) sweep(key string, now map[string]bool, drop func(string)) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for v := range m.series[key] {
		if !now[v] {
			drop(v)
		}
	}
	if len(now) == 0 {
		delete(m.series, key)
		return
	}
	m.series[key] = now
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// Health tracks readiness for /readyz (set once caches are synced).
type Health struct{ ready atomic.Bool }

// SetReady marks the process ready.
func (h *Health) SetReady(v bool) { h.ready.Store(v) }

// Ready reports what /readyz answers: true once SetReady(true) was called.
func (h *Health) Ready() bool { return h.ready.Load() }

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
	// each server runs in a goroutine of g, which Serve waits for: one that fails stops the other
	g, ctx := errgroup.WithContext(ctx)
	if metricsAddr != "" {
		mux := http.NewServeMux()
		mux.Handle("/metrics", promhttp.HandlerFor(m.Registry, promhttp.HandlerOpts{}))
		if healthAddr == "" {
			health(mux)
		}
		g.Go(func() error { return serve(ctx, metricsAddr, mux) })
	}
	if healthAddr != "" {
		mux := http.NewServeMux()
		health(mux)
		g.Go(func() error { return serve(ctx, healthAddr, mux) })
	}
	g.Go(func() error { <-ctx.Done(); return nil })
	return g.Wait()
}

// serve runs one HTTP server until ctx ends (then shuts it down, waiting at most 2 s for requests in
// flight) or it fails; it returns only once the server has stopped.
func serve(ctx context.Context, addr string, mux *http.ServeMux) error {
	srv := &http.Server{Addr: addr, Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.ListenAndServe() }()
	var err error
	select {
	case err = <-errc:
	case <-ctx.Done():
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_ = srv.Shutdown(sctx)
		cancel()
		err = <-errc
	}
	if err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serve %s: %w", addr, err)
	}
	return nil
}
