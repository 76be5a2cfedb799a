package cli

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/client-go/kubernetes"

	"github.com/valkey-ha/valkey-ha/internal/chartapi/contract"
	"github.com/valkey-ha/valkey-ha/internal/chartjobs/check"
	"github.com/valkey-ha/valkey-ha/internal/controllers/kube"
	"github.com/valkey-ha/valkey-ha/internal/valkeyapi/acl"
	"github.com/valkey-ha/valkey-ha/internal/valkeyapi/valkey"
)

// TestOptions are the flags of `test`.
type TestOptions struct {
	Kubeconfig      string
	Namespace       string
	Instance        string
	SentinelRelease string
	Replicas        int
	ClusterDomain   string
	Timeout         time.Duration
	Retry           time.Duration
	TLS             bool
	// SentinelUser authenticates to the Sentinels (with --sentinel-release) with the password in
	// $SENTINEL_PASSWORD; no credentials when it is unset.
	SentinelUser string
}

func newTestCmd() *cobra.Command {
	o := &TestOptions{}
	cmd := &cobra.Command{
		Use:   "test",
		Short: "Check a live deployment (what helm test runs); exits non-zero and says what is wrong",
		Long: `test --instance F checks one instance: exactly one node reports primary, every Sentinel names it and
CKQUORUM passes, role labels match the real roles, every replica's link is up, a write on the primary is read
back from every replica, the default user is refused and the probe user cannot write.
test --sentinel-release S checks a quorum: every Sentinel answers, CKQUORUM passes for every monitor and each
Sentinel sees the others, and with $SENTINEL_PASSWORD (as --sentinel-user) that an unauthenticated client is
refused and that user may not remove a monitor. Checks are retried until --retry passes, so a deployment that is still settling
is given that long.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if o.Namespace == "" || (o.Instance == "") == (o.SentinelRelease == "") {
				return errors.New("--namespace and exactly one of --instance or --sentinel-release are required")
			}
			// only --instance needs the API (descriptor, system Secret, pods); the Sentinel check talks to the
			// Sentinels alone, so its helm test pod runs without a token
			var cs kubernetes.Interface
			if o.Instance != "" {
				c, err := kube.NewClient(o.Kubeconfig)
				if err != nil {
					return err
				}
				cs = c
			}
			var err error
			deadline := time.Now().Add(o.Retry)
			for {
				var rs []check.Result
				if o.Instance != "" {
					rs, err = check.Instance(cmd.Context(), cs, o.Namespace, o.Instance, o.ClusterDomain, o.Timeout)
				} else {
					addrs := make([]string, o.Replicas)
					for i := range addrs {
						addrs[i] = net.JoinHostPort(contract.SentinelHost(o.SentinelRelease, i, o.Namespace, o.ClusterDomain), strconv.Itoa(contract.SentinelPort))
					}
					so := valkey.Options{}.WithTLS(o.TLS, valkey.DefaultCAFile)
					if pw := os.Getenv("SENTINEL_PASSWORD"); pw != "" {
						so.Username, so.Password = o.SentinelUser, pw
					}
					rs = check.Quorum(cmd.Context(), addrs, so)
				}
				failed := check.Failed(rs)
				if err == nil && len(failed) == 0 {
					for _, r := range rs {
						cmd.Printf("PASS %-22s %s\n", r.Name, r.Detail)
					}
					return nil
				}
				if time.Now().After(deadline) {
					for _, r := range rs {
						word := "PASS"
						if !r.OK {
							word = "FAIL"
						}
						cmd.Printf("%s %-22s %s\n", word, r.Name, r.Detail)
					}
					if err != nil {
						return err
					}
					return fmt.Errorf("%d check(s) failed", len(failed))
				}
				time.Sleep(2 * time.Second)
			}
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.Kubeconfig, "kubeconfig", "", "kubeconfig (default: in-cluster, or $KUBECONFIG)")
	f.StringVar(&o.Namespace, "namespace", "", "namespace of the release")
	f.StringVar(&o.Instance, "instance", "", "instance fullname F to check")
	f.StringVar(&o.SentinelRelease, "sentinel-release", "", "Sentinel quorum fullname S to check")
	f.IntVar(&o.Replicas, "replicas", 3, "number of Sentinel pods (with --sentinel-release)")
	clusterDomainFlag(f, &o.ClusterDomain)
	f.DurationVar(&o.Timeout, "timeout", 10*time.Second, "per-check timeout (replication read-back)")
	f.DurationVar(&o.Retry, "retry", 60*time.Second, "keep retrying failed checks this long")
	f.StringVar(&o.SentinelUser, "sentinel-user", acl.SentinelClient, "Sentinel user (with --sentinel-release; password in $SENTINEL_PASSWORD, unset: no credentials)")
	f.BoolVar(&o.TLS, "tls", false, "the Sentinels speak TLS (with --sentinel-release; CA at "+valkey.DefaultCAFile+")")
	return cmd
}
