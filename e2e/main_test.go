//go:build e2e

// Package e2e runs the charts and the controller on a real Kubernetes cluster (the one KUBECONFIG
// points at; hack/e2e.sh brings up the local one and loads the images first). Every test works in
// its own namespace (NewNamespace) and removes what it installed.
//
//	go test -tags e2e -count=1 -timeout 40m ./e2e/...
//
// Environment:
//
//	KUBECONFIG          kubeconfig of the cluster (default: ~/.kube/config rules)
//	E2E_KEEP=1          keep every test namespace (for debugging); E2E_KEEP_FAILED=1 keeps only failed ones
//	E2E_HELM_DEBUG=1    log the Helm SDK's debug lines
//	E2E_PSS=restricted  Pod Security level enforced on test namespaces ("none" disables; default restricted)
//	E2E_PARALLEL=1      run the deployment tests in parallel (default: one at a time, see maybeParallel)
//	E2E_LONG=1          also run the tests make e2e leaves to make e2e-long for time (longTest)
//	E2E_HELD_CLIENTS=1  also run TestPrimaryServiceClientsFollowEverySwitch (make e2e-clients; a measurement kept out of make test)
//	E2E_HELD_MODES, E2E_HELD_VALUES, E2E_HELD_SENTINEL_VALUES  its modes (labels,ours) and YAML merged last into
//	                    the instance's and the Sentinel release's values
//	E2E_VALKEY_IMAGE, E2E_CTL_IMAGE   override the charts' default server and controller images (default: none,
//	                    the charts' defaults, which hack/images.sh builds locally under those names)
//	E2E_REDIS_IMAGE     the redis image of the engine tests (default redis:7.0, built by hack/images.sh)
//	E2E_DNS_CACHE=off   install both charts with dnsCache.enabled false (default: the charts' default, the cache on)
package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

var (
	// restConfig and kube reach the cluster under test; set up once by TestMain.
	restConfig *rest.Config
	kube       kubernetes.Interface
	// kubeconfigPath is the file the Helm SDK is pointed at ("" = default loading rules).
	kubeconfigPath string
	// repoRoot is the repository root (charts are under repoRoot/charts).
	repoRoot string

	// valkeyImage runs the bare pods of the harness tests (the charts' default server image unless overridden)
	valkeyImage = envOr("E2E_VALKEY_IMAGE", "valkey/valkey:9.1")
	redisImage  = envOr("E2E_REDIS_IMAGE", "redis:7.0")
)

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

func TestMain(m *testing.M) {
	if err := setup(); err != nil {
		fmt.Fprintf(os.Stderr, "e2e: %v\n", err)
		os.Exit(1)
	}
	os.Exit(m.Run())
}

func setup() error {
	kubeconfigPath = os.Getenv("KUBECONFIG")
	rules := clientcmd.NewDefaultClientConfigLoadingRules() // honours KUBECONFIG (also a path list)
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		return fmt.Errorf("no usable kubeconfig (KUBECONFIG=%q): %w; run hack/e2e.sh, which brings up the local cluster", kubeconfigPath, err)
	}
	cfg.QPS, cfg.Burst = 50, 100
	restConfig = cfg
	if kube, err = kubernetes.NewForConfig(cfg); err != nil {
		return fmt.Errorf("kubernetes client: %w", err)
	}
	if _, err := kube.Discovery().ServerVersion(); err != nil {
		return fmt.Errorf("cluster %s not reachable: %w", cfg.Host, err)
	}
	wd, err := os.Getwd()
	if err != nil {
		return err
	}
	for d := wd; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			repoRoot = d
			break
		}
		if filepath.Dir(d) == d {
			return fmt.Errorf("go.mod not found above %s", wd)
		}
	}
	return nil
}
