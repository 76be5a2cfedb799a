package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/valkey-ha/valkey-ha/internal/chartapi/contract"
	"github.com/valkey-ha/valkey-ha/internal/chartapi/status"
	"github.com/valkey-ha/valkey-ha/internal/controllers/kube"
)

// StatusOptions are the flags of `status`.
type StatusOptions struct {
	Kubeconfig string
	Namespace  string
	Instance   string
	Output     string
	// Watch re-reads the status every Interval and prints it again whenever it changed, until interrupted.
	Watch    bool
	Interval time.Duration
}

func newStatusCmd() *cobra.Command {
	o := &StatusOptions{}
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Show instances (state, primary, nodes, conditions) and Sentinel quorums of a namespace",
		Long: "Show instances (state, primary, nodes, conditions) and Sentinel quorums of a namespace, as the controllers " +
			"last published them. --watch prints it again on every change (a failover, a roll) until Ctrl-C.",
		RunE: func(cmd *cobra.Command, args []string) error {
			if o.Namespace == "" {
				return errors.New("--namespace is required")
			}
			if o.Output != "table" && o.Output != "json" {
				return fmt.Errorf("status: --output %q: want table or json", o.Output)
			}
			if o.Interval <= 0 {
				return fmt.Errorf("status: --interval %s: want a positive duration", o.Interval)
			}
			cs, err := kube.NewClient(o.Kubeconfig)
			if err != nil {
				return err
			}
			snapshot := func(ctx context.Context) (string, error) {
				instances, quorums, err := readStatus(ctx, cs, o.Namespace, o.Instance)
				if err != nil {
					return "", err
				}
				if err := checkFound(o.Namespace, o.Instance, instances, quorums); err != nil {
					return "", err
				}
				var b bytes.Buffer
				renderStatus(&b, o.Output, instances, quorums)
				return b.String(), nil
			}
			if !o.Watch {
				s, err := snapshot(cmd.Context())
				if err != nil {
					return err
				}
				_, err = io.WriteString(cmd.OutOrStdout(), s)
				return err
			}
			return watchStatus(cmd.Context(), cmd.OutOrStdout(), o.Interval, time.Now, snapshot)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.Kubeconfig, "kubeconfig", "", "kubeconfig (default: in-cluster, or $KUBECONFIG)")
	f.StringVar(&o.Namespace, "namespace", "", "namespace")
	f.StringVar(&o.Instance, "instance", "", "show only this instance (fullname F); quorums are always shown")
	f.StringVarP(&o.Output, "output", "o", "table", "table or json")
	f.BoolVarP(&o.Watch, "watch", "w", false, "print the status again whenever it changes, until interrupted (Ctrl-C)")
	f.DurationVar(&o.Interval, "interval", 2*time.Second, "with --watch: how often to read the status")
	return cmd
}

// watchStatus prints snapshot's output once, then again (under a time line) each time it differs from the last
// one printed, reading it every interval until ctx ends (nil: Ctrl-C is the normal end). A failed read is
// printed once per distinct error and the watch goes on (a failover may briefly make the API slow); the next
// good read is printed even when unchanged.
func watchStatus(ctx context.Context, out io.Writer, interval time.Duration, now func() time.Time,
	snapshot func(context.Context) (string, error)) error {
	last, lastErr := "", ""
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		s, err := snapshot(ctx)
		switch {
		case ctx.Err() != nil:
			return nil
		case err != nil:
			if msg := err.Error(); msg != lastErr {
				fmt.Fprintf(out, "--- %s  status: %v (retrying every %s)\n", now().UTC().Format(time.RFC3339), err, interval)
				lastErr = msg
			}
			last = "" // print the status again once it can be read

		case s != last:
			fmt.Fprintf(out, "--- %s\n%s", now().UTC().Format(time.RFC3339), s)
			last, lastErr = s, ""
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// readStatus reads the status ConfigMaps the controllers publish in ns: every instance (only instance when not
// empty) and every Sentinel quorum.
func readStatus(ctx context.Context, cs kubernetes.Interface, ns, instance string) ([]status.Instance, []status.Quorum, error) {
	cms, err := cs.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{
		LabelSelector: contract.LabelPartOf + "=" + contract.PartOf + "," + contract.LabelComponent + "=" + contract.ComponentStatus})
	if err != nil {
		return nil, nil, fmt.Errorf("list status configmaps in %s: %w", ns, err)
	}
	var instances []status.Instance
	var quorums []status.Quorum
	for _, cm := range cms.Items {
		raw := []byte(cm.Data[contract.KeyStatus])
		if cm.Labels[contract.LabelSentinel] != "" {
			var q status.Quorum
			if json.Unmarshal(raw, &q) == nil {
				quorums = append(quorums, q)
			}
			continue
		}
		var st status.Instance
		if json.Unmarshal(raw, &st) == nil && (instance == "" || st.Name == instance) {
			instances = append(instances, st)
		}
	}
	return instances, quorums, nil
}

// checkFound returns an error naming the namespace when nothing there has published a status (a mistyped
// --namespace printed nothing and exited 0), or when --instance names no instance of it.
func checkFound(ns, instance string, instances []status.Instance, quorums []status.Quorum) error {
	switch {
	case instance != "" && len(instances) == 0:
		return fmt.Errorf("status: no instance %q has published a status in namespace %q: check --instance (the release's fullname) and --namespace", instance, ns)
	case len(instances) == 0 && len(quorums) == 0:
		return fmt.Errorf("status: no instance or Sentinel quorum has published a status in namespace %q: check --namespace (a new release publishes one within seconds of its controller starting)", ns)
	}
	return nil
}

// renderStatus writes instances and quorums as a table or as JSON (format "json").
func renderStatus(out io.Writer, format string, instances []status.Instance, quorums []status.Quorum) {
	if format == "json" {
		b, _ := json.MarshalIndent(map[string]any{"instances": instances, "quorums": quorums}, "", "  ")
		fmt.Fprintln(out, string(b))
		return
	}
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
		for _, kv := range [][2]string{{"held", st.Held}, {"refused", st.Refused}, {"roll", st.Roll}, {"last action", st.LastAction}} {
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
		// why a monitor is not registered on every Sentinel (registration.Plan.Held: no primary known yet, a
		// primary still loading, a Sentinel stuck on another node), so REGISTERED and CKQUORUM FAIL carry a reason
		held := make([]string, 0, len(q.Held))
		for name := range q.Held {
			held = append(held, name)
		}
		sort.Strings(held)
		for _, name := range held {
			fmt.Fprintf(out, "  held: %s: %s\n", name, q.Held[name])
		}
		for _, why := range q.Refused {
			fmt.Fprintf(out, "  refused: %s\n", why)
		}
		for _, warn := range q.Warnings {
			fmt.Fprintf(out, "  warning: %s\n", warn)
		}
		if q.Roll != "" {
			fmt.Fprintf(out, "  roll: %s\n", q.Roll)
		}
	}
}
