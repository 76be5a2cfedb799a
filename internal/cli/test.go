package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/valkey-ha/valkey-ha/internal/check"
	"github.com/valkey-ha/valkey-ha/internal/kube"
	"github.com/valkey-ha/valkey-ha/internal/spec"
	"github.com/valkey-ha/valkey-ha/internal/status"
	"github.com/valkey-ha/valkey-ha/internal/valkey"
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
Sentinel sees the others. Checks are retried until --retry passes, so a deployment that is still settling
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
						addrs[i] = net.JoinHostPort(fmt.Sprintf("%s-%d.%s-headless.%s.svc.%s", o.SentinelRelease, i, o.SentinelRelease, o.Namespace, o.ClusterDomain), "26379")
					}
					rs = check.Quorum(cmd.Context(), addrs, o.TLS)
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
	f.StringVar(&o.ClusterDomain, "cluster-domain", "cluster.local", "cluster DNS domain (Sentinel hosts; with --instance, the domain every node host of the descriptor must use)")
	f.DurationVar(&o.Timeout, "timeout", 10*time.Second, "per-check timeout (replication read-back)")
	f.DurationVar(&o.Retry, "retry", 60*time.Second, "keep retrying failed checks this long")
	f.BoolVar(&o.TLS, "tls", false, "the Sentinels speak TLS (with --sentinel-release; CA at "+valkey.DefaultCAFile+")")
	return cmd
}

// StatusOptions are the flags of `status`.
type StatusOptions struct {
	Kubeconfig string
	Namespace  string
	Instance   string
	Output     string
}

func newStatusCmd() *cobra.Command {
	o := &StatusOptions{}
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Show instances (state, primary, nodes, conditions) and Sentinel quorums of a namespace",
		RunE: func(cmd *cobra.Command, args []string) error {
			if o.Namespace == "" {
				return errors.New("--namespace is required")
			}
			cs, err := kube.NewClient(o.Kubeconfig)
			if err != nil {
				return err
			}
			cms, err := cs.CoreV1().ConfigMaps(o.Namespace).List(cmd.Context(), metav1.ListOptions{
				LabelSelector: spec.LabelPartOf + "=" + spec.PartOfValue + "," + spec.LabelComponent + "=" + spec.ComponentStatus})
			if err != nil {
				return fmt.Errorf("list status configmaps: %w", err)
			}
			var instances []status.Instance
			var quorums []status.Quorum
			for _, cm := range cms.Items {
				raw := []byte(cm.Data[spec.StatusKey])
				if cm.Labels[spec.LabelSentinel] != "" {
					var q status.Quorum
					if json.Unmarshal(raw, &q) == nil {
						quorums = append(quorums, q)
					}
					continue
				}
				var st status.Instance
				if json.Unmarshal(raw, &st) == nil && (o.Instance == "" || st.Name == o.Instance) {
					instances = append(instances, st)
				}
			}
			if o.Output == "json" {
				b, _ := json.MarshalIndent(map[string]any{"instances": instances, "quorums": quorums}, "", "  ")
				cmd.Println(string(b))
				return nil
			}
			out := cmd.OutOrStdout()
			for _, st := range instances {
				fmt.Fprintf(out, "INSTANCE %s  state=%s  primary=%s  replicas=%d ready=%d synced=%d  monitored-by=%s\n", st.Name, st.State,
					st.Primary, st.Replicas, st.ReadyReplicas, st.SyncedReplicas, st.Monitoring.MonitoredBy)
				w := tabwriter.NewWriter(out, 0, 2, 2, ' ', 0)
				fmt.Fprintln(w, "  POD\tROLE\tLINK\tOFFSET\tLAG\tERROR")
				for _, n := range st.Nodes {
					link := "-"
					if n.Role == "replica" {
						link = map[bool]string{true: "up", false: "down"}[n.LinkUp]
					}
					fmt.Fprintf(w, "  %s\t%s\t%s\t%d\t%d\t%s\n", n.Pod, n.Role, link, n.Offset, n.LagBytes, n.Error)
				}
				_ = w.Flush()
				var conds []string
				for _, c := range st.Conditions {
					conds = append(conds, c.Type+"="+c.Status)
				}
				fmt.Fprintf(out, "  conditions: %s\n", strings.Join(conds, " "))
				for _, kv := range [][2]string{{"held", st.Held}, {"roll", st.Roll}, {"last action", st.LastAction}} {
					if kv[1] != "" {
						fmt.Fprintf(out, "  %s: %s\n", kv[0], kv[1])
					}
				}
			}
			for _, q := range quorums {
				fmt.Fprintf(out, "QUORUM %s  sentinels ready=%d/%d\n", q.Release, q.ReadySentinel, len(q.Sentinels))
				w := tabwriter.NewWriter(out, 0, 2, 2, ' ', 0)
				fmt.Fprintln(w, "  MONITOR\tINSTANCE\tPRIMARY\tQUORUM\tREGISTERED\tCKQUORUM\tREPLICAS")
				for _, m := range q.Monitors {
					ok := map[bool]string{true: "OK", false: "FAIL"}[m.QuorumOK]
					if m.Refused != "" {
						ok = "refused: " + m.Refused
					}
					if m.Unresolved != "" {
						ok = "unresolved (monitor kept): " + m.Unresolved
					}
					fmt.Fprintf(w, "  %s\t%s\t%s\t%d\t%d\t%s\t%d\n", m.Name, m.Instance, m.PrimaryAddress, m.Quorum, m.Registered, ok, m.Replicas)
				}
				_ = w.Flush()
				for _, warn := range q.Warnings {
					fmt.Fprintf(out, "  warning: %s\n", warn)
				}
				if q.Roll != "" {
					fmt.Fprintf(out, "  roll: %s\n", q.Roll)
				}
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.Kubeconfig, "kubeconfig", "", "kubeconfig (default: in-cluster, or $KUBECONFIG)")
	f.StringVar(&o.Namespace, "namespace", "", "namespace")
	f.StringVar(&o.Instance, "instance", "", "show only this instance (fullname F); quorums are always shown")
	f.StringVarP(&o.Output, "output", "o", "table", "table or json")
	return cmd
}
