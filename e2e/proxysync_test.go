//go:build e2e

package e2e

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
)

// Where a Service's routing lags a label (issue 30): when the EndpointSlice of the primary Service changed
// (a watch), and when the local cluster's kube-proxy finished a sync of its rules (its metrics on loopback).

// kubeProxyMetrics is the metrics address of the local cluster's kube-proxy (hack/k8s-local/up.sh
// metricsBindAddress); other clusters do not expose it here and the sampler records nothing.
const kubeProxyMetrics = "http://127.0.0.1:10249/metrics"

// routeEvent is one change the routing samplers saw: an EndpointSlice of the Service (what: its ready
// addresses) or a kube-proxy sync that ended (what: "sync").
type routeEvent struct {
	At   time.Time
	What string
}

// routeLog collects routeEvents from an EndpointSlice watch and a kube-proxy sampler until the test ends.
type routeLog struct {
	mu     sync.Mutex
	events []routeEvent
}

func (l *routeLog) add(at time.Time, what string) {
	l.mu.Lock()
	l.events = append(l.events, routeEvent{At: at, What: what})
	l.mu.Unlock()
}

// Since returns the events at or after t, each as "+<ms> <what>" relative to t, in order of arrival.
func (l *routeLog) Since(t time.Time, until time.Duration) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, e := range l.events {
		if d := e.At.Sub(t); d >= 0 && d <= until {
			out = append(out, fmt.Sprintf("+%dms %s", d.Milliseconds(), e.What))
		}
	}
	return out
}

// watchRouting starts both samplers for Service svc in namespace ns: EndpointSlice events (their ready
// addresses; the watch restarts when the server ends it) and, when kube-proxy's metrics answer on loopback,
// its kubeproxy_sync_proxy_rules_last_timestamp_seconds sampled every 20 ms (each new value is a sync that
// ended: the metric's own time, to the millisecond).
func watchRouting(t testing.TB, ns, svc string) *routeLog {
	l := &routeLog{}
	ctx := t.Context()
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		for ctx.Err() == nil {
			w, err := kube.DiscoveryV1().EndpointSlices(ns).Watch(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=" + svc})
			if err != nil {
				select {
				case <-ctx.Done():
				case <-time.After(200 * time.Millisecond):
				}
				continue
			}
			for ev := range w.ResultChan() {
				sl, ok := ev.Object.(*discoveryv1.EndpointSlice)
				if !ok || ev.Type == watch.Bookmark {
					continue
				}
				var ready []string
				for _, ep := range sl.Endpoints {
					if ep.Conditions.Ready == nil || *ep.Conditions.Ready {
						ready = append(ready, strings.Join(ep.Addresses, ","))
					}
				}
				l.add(time.Now(), fmt.Sprintf("slice %s %s [%s]", sl.Name, ev.Type, strings.Join(ready, " ")))
			}
			w.Stop()
		}
	}()
	go func() {
		defer wg.Done()
		last := 0.0
		cl := &http.Client{Timeout: time.Second}
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			if v, err := kubeProxyLastSync(ctx, cl); err == nil && v != last {
				if last != 0 {
					sec, frac := math.Modf(v)
					l.add(time.Unix(int64(sec), int64(frac*1e9)), "kube-proxy sync")
				}
				last = v
			}
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	t.Cleanup(wg.Wait)
	return l
}

// kubeProxyLastSync reads kubeproxy_sync_proxy_rules_last_timestamp_seconds (Unix seconds) from
// kubeProxyMetrics; an error when it does not answer or lacks the metric.
func kubeProxyLastSync(ctx context.Context, cl *http.Client) (float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, kubeProxyMetrics, nil)
	if err != nil {
		return 0, err
	}
	resp, err := cl.Do(req)
	if err != nil {
		return 0, fmt.Errorf("GET %s: %w", kubeProxyMetrics, err)
	}
	defer resp.Body.Close()
	v, err := parseKubeProxyLastSync(resp.Body)
	if err != nil {
		return 0, fmt.Errorf("GET %s: %w", kubeProxyMetrics, err)
	}
	return v, nil
}

// parseKubeProxyLastSync returns the value of kubeproxy_sync_proxy_rules_last_timestamp_seconds in a Prometheus
// text exposition: the IPv4 family's series (kube-proxy labels it ip_family="IPv4" since Kubernetes 1.29 and syncs
// each family on its own), or the series without labels (older kube-proxy). An error when neither is there.
func parseKubeProxyLastSync(r io.Reader) (float64, error) {
	const name = "kubeproxy_sync_proxy_rules_last_timestamp_seconds"
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), name)
		if !ok {
			continue
		}
		if labels, ok := strings.CutPrefix(rest, "{"); ok {
			end := strings.IndexByte(labels, '}')
			if end < 0 || !strings.Contains(labels[:end], `ip_family="IPv4"`) {
				continue
			}
			rest = labels[end+1:]
		} else if !strings.HasPrefix(rest, " ") {
			continue // another metric whose name starts with this one's
		}
		return strconv.ParseFloat(strings.TrimSpace(rest), 64)
	}
	return 0, fmt.Errorf("no %s series for IPv4 (%v)", name, sc.Err())
}

// TestParseKubeProxyLastSync: the sampler read no kube-proxy sync at all on the local cluster (kube-proxy 1.34
// labels the series by ip_family, the former prefix match wanted none); both shapes parse, other series do not.
func TestParseKubeProxyLastSync(t *testing.T) {
	for _, tc := range []struct {
		text string
		want float64
		err  bool
	}{
		{"kubeproxy_sync_proxy_rules_last_queued_timestamp_seconds{ip_family=\"IPv4\"} 1.5e+09\n" +
			"kubeproxy_sync_proxy_rules_last_timestamp_seconds{ip_family=\"IPv6\"} 1.7e+09\n" +
			"kubeproxy_sync_proxy_rules_last_timestamp_seconds{ip_family=\"IPv4\"} 1.7964066527925196e+09\n", 1.7964066527925196e+09, false},
		{"# TYPE kubeproxy_sync_proxy_rules_last_timestamp_seconds gauge\nkubeproxy_sync_proxy_rules_last_timestamp_seconds 1.6e+09\n", 1.6e+09, false},
		{"kubeproxy_sync_proxy_rules_last_timestamp_seconds{ip_family=\"IPv6\"} 1.7e+09\n", 0, true},
		{"kubeproxy_sync_proxy_rules_last_timestamp_seconds{ip_family=\"IPv4\"} garbage\n", 0, true},
		{"", 0, true},
	} {
		got, err := parseKubeProxyLastSync(strings.NewReader(tc.text))
		if tc.err {
			if err == nil {
				t.Errorf("%q: want an error, got %v", tc.text, got)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%q: got %v, %v; want %v", tc.text, got, err, tc.want)
		}
	}
}
