package templatestests

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// TestRenderCorpus writes what both charts render (or the error they refuse with) for every values file in
// testdata, and for no values, into the directory $RENDER_CORPUS: one file per chart and values file, every
// template (NOTES.txt included) in name order. It skips without RENDER_CORPUS. A refactor of the templates that
// must not change any output (the shared templates, charts/_shared) is checked by writing the corpus before
// and after and diffing the two directories: `RENDER_CORPUS=/tmp/before go test -run TestRenderCorpus ./templates-tests`.
func TestRenderCorpus(t *testing.T) {
	dir := os.Getenv("RENDER_CORPUS")
	if dir == "" {
		t.Skip("set RENDER_CORPUS to a directory to write the render corpus")
	}
	files, err := filepath.Glob(filepath.Join("testdata", "*", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	files = append([]string{""}, files...)
	for _, c := range []string{"valkey", "valkey-sentinel"} {
		for i, f := range append(files, corpusExtras[c]...) {
			values := []byte{}
			name := "no-values"
			if i >= len(files) {
				values, name = []byte(f), fmt.Sprintf("extra-%d", i-len(files))
			} else if f != "" {
				if values, err = os.ReadFile(f); err != nil {
					t.Fatal(err)
				}
				name = strings.ReplaceAll(strings.TrimSuffix(f, ".yaml"), string(filepath.Separator), "_")
			}
			var b strings.Builder
			out, err := renderChart(t, c, string(values), renderOpts{withNotes: true})
			if err != nil {
				b.WriteString("ERROR: " + err.Error() + "\n")
			}
			keys := make([]string, 0, len(out))
			for k := range out {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			for _, k := range keys {
				b.WriteString("=== " + k + "\n" + out[k] + "\n")
			}
			if err := os.WriteFile(filepath.Join(dir, c+"__"+name+".txt"), []byte(b.String()), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// corpusExtras are values the testdata files leave out: the controller Deployments' every knob.
var corpusExtras = map[string][]string{
	"valkey": {
		"controller: {replicas: 2, nodeSelector: {disk: ssd}, tolerations: [{key: k, operator: Exists}], priorityClassName: high, topologySpreadConstraints: [{maxSkew: 1, topologyKey: zone, whenUnsatisfiable: DoNotSchedule}], resources: {cpu: 200m, memory: 128Mi, requests: {cpu: 50m}}}\nimagePullSecrets: [{name: pull}]\ncommonLabels: {team: a}\ncommonAnnotations: {note: x}\n",
		"controller: {affinity: {nodeAffinity: {requiredDuringSchedulingIgnoredDuringExecution: {nodeSelectorTerms: [{matchExpressions: [{key: disk, operator: In, values: [ssd]}]}]}}}}\ntls: {enabled: true, existingSecret: cache-tls}\n",
		"migrateFrom: {host: old-redis, port: 6380, username: mig, existingSecret: old, secretKey: password, switch: true, egressTo: [{podSelector: {matchLabels: {app: old}}}]}\n",
		"migrateFrom: {host: old-redis, existingSecret: old, secretKey: redis-password}\nnetworkPolicy: {enabled: false}\n",
		"controller: {enabled: false}\n",
		"metrics: {enabled: true, serviceMonitor: {enabled: true, interval: 15s, scrapeTimeout: 5s, labels: {release: prom}, relabelings: [{action: replace, sourceLabels: [a], targetLabel: b}]}}\ncontroller: {serviceMonitor: {enabled: true, honorLabels: true}}\ncommonAnnotations: {note: x}\n",
		"controller: {serviceMonitor: {enabled: true, labels: {release: prom}}}\n",
	},
	"valkey-sentinel": {
		"controller: {replicas: 3, nodeSelector: {disk: ssd}, tolerations: [{key: k, operator: Exists}], priorityClassName: high, topologySpreadConstraints: [{maxSkew: 1, topologyKey: zone, whenUnsatisfiable: DoNotSchedule}], resources: {cpu: 200m, memory: 128Mi, requests: {memory: 64Mi}}}\nimagePullSecrets: [{name: pull}]\ncommonLabels: {team: a}\ncommonAnnotations: {note: x}\nauth: {enabled: true}\nsharedTrustDomain: accept\nnamespaces: [t1, t2]\n",
		"sharedTrustDomain: accept\ninstanceController: {enabled: true, replicas: 2, workers: 4}\nnamespaces: [t1]\ntls: {enabled: true, existingSecret: q-tls}\n",
		"instanceController: {enabled: true}\ncontroller: {enabled: false}\n",
		"controller: {affinity: {nodeAffinity: {requiredDuringSchedulingIgnoredDuringExecution: {nodeSelectorTerms: [{matchExpressions: [{key: disk, operator: In, values: [ssd]}]}]}}}}\n",
		"controller: {serviceMonitor: {enabled: true, labels: {release: prom}, interval: 20s}}\ninstanceController: {enabled: true, serviceMonitor: {enabled: true, scrapeTimeout: 5s, metricRelabelings: [{action: drop, regex: x}]}}\ncommonAnnotations: {note: x}\n",
		"instanceController: {enabled: true, serviceMonitor: {enabled: true}}\n",
	},
}
