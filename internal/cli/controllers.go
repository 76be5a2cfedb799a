package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/sync/errgroup"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"

	"github.com/valkey-ha/valkey-ha/internal/chartapi/contract"
	"github.com/valkey-ha/valkey-ha/internal/chartapi/spec"
	"github.com/valkey-ha/valkey-ha/internal/controllers/controller"
	"github.com/valkey-ha/valkey-ha/internal/controllers/kube"
	"github.com/valkey-ha/valkey-ha/internal/controllers/metrics"
)

// CommonOptions are the flags shared by the two controllers.
type CommonOptions struct {
	Kubeconfig  string
	Namespace   string
	MetricsAddr string
	HealthAddr  string
	LeaderElect bool
	LeaseName   string
	// Identity is this replica's name in the Lease; empty means the host name (the pod name in a pod).
	Identity string
}

func (o *CommonOptions) bind(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVar(&o.Kubeconfig, "kubeconfig", "", "kubeconfig (default: in-cluster, or $KUBECONFIG)")
	f.StringVar(&o.Namespace, "namespace", os.Getenv("POD_NAMESPACE"), "namespace to watch")
	f.StringVar(&o.MetricsAddr, "metrics-addr", ":9090", "address of /metrics (empty = off)")
	f.StringVar(&o.HealthAddr, "health-addr", "", "address of /healthz and /readyz (empty = served on --metrics-addr)")
	f.BoolVar(&o.LeaderElect, "leader-elect", false, "use a Lease so only one replica acts (needed with more than one replica)")
	f.StringVar(&o.LeaseName, "lease-name", "", "name of the Lease (default: <release>-controller)")
}

func (o *CommonOptions) validate() error {
	if o.Namespace == "" {
		return errors.New("--namespace is required (or set POD_NAMESPACE)")
	}
	return nil
}

// runController serves metrics and runs fn, under a Lease when leader election is on. fn runs only while
// this replica holds the Lease; on shutdown the Lease is released after fn has returned, so a successor takes
// over at once and never acts while this replica still does. A lost Lease stops fn and returns an error, so
// the process exits and restarts as a follower. Under leader election a follower reports ready on /readyz
// (a healthy standby): otherwise a Deployment with several replicas never finishes a rolling update and
// `helm install --wait` never returns, since only the leader would ever be ready.
func runController(ctx context.Context, o CommonOptions, cs kubernetes.Interface, m *metrics.Metrics, h *metrics.Health, lease string,
	fn func(context.Context) error) error {
	if o.LeaderElect {
		h.SetReady(true)
	}
	ApplyMemoryLimit(slog.Default())
	g, ctx := errgroup.WithContext(ctx)
	g.Go(func() error { return metrics.Serve(ctx, o.MetricsAddr, o.HealthAddr, m, h) })
	g.Go(func() error {
		if !o.LeaderElect {
			return fn(ctx)
		}
		return runLeading(ctx, o, cs, lease, fn)
	})
	return g.Wait()
}

// RunLeading runs fn while this process, as identity, holds the Lease lease in namespace, exactly as a
// controller started with --leader-elect does (runLeading; tests run several replicas of a controller in one
// process with it). It returns nil when ctx ended before this replica led, fn's error otherwise, and an error
// naming the Lease when it was lost while fn ran (the process then exits and restarts as a follower).
func RunLeading(ctx context.Context, cs kubernetes.Interface, namespace, lease, identity string, fn func(context.Context) error) error {
	return runLeading(ctx, CommonOptions{Namespace: namespace, Identity: identity}, cs, lease, fn)
}

// runLeading runs fn while holding the Lease lease (client-go leaderelection: 15 s lease, 10 s renew
// deadline, 2 s retry). The election runs on its own context, cancelled (which releases the Lease) only once
// fn has returned, or at once when ctx ends before this replica led.
func runLeading(ctx context.Context, o CommonOptions, cs kubernetes.Interface, lease string, fn func(context.Context) error) error {
	id := o.Identity
	if id == "" {
		id, _ = os.Hostname()
	}
	lock := &resourcelock.LeaseLock{LeaseMeta: metav1.ObjectMeta{Name: lease, Namespace: o.Namespace},
		Client: cs.CoordinationV1(), LockConfig: resourcelock.ResourceLockConfig{Identity: id}}
	leCtx, leCancel := context.WithCancel(context.WithoutCancel(ctx))
	defer leCancel()
	var (
		mu      sync.Mutex
		leading bool
		stopped bool
	)
	result := make(chan error, 1)
	stopFollower := context.AfterFunc(ctx, func() {
		mu.Lock()
		stopped = true
		l := leading
		mu.Unlock()
		if !l {
			leCancel()
		}
	})
	defer stopFollower()
	leaderelection.RunOrDie(leCtx, leaderelection.LeaderElectionConfig{
		Lock: lock, ReleaseOnCancel: true, LeaseDuration: 15 * time.Second, RenewDeadline: 10 * time.Second, RetryPeriod: 2 * time.Second,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(lctx context.Context) {
				mu.Lock()
				if stopped {
					mu.Unlock()
					leCancel()
					return
				}
				leading = true
				mu.Unlock()
				runCtx, cancel := context.WithCancel(lctx)
				stop := context.AfterFunc(ctx, cancel)
				err := fn(runCtx)
				stop()
				cancel()
				result <- err
				leCancel() // release the Lease only now that fn has stopped
			},
			OnStoppedLeading: func() { slog.Info("leader lease lost or released", "lease", lease, "identity", id) },
		},
	})
	mu.Lock()
	l := leading
	mu.Unlock()
	if !l {
		return nil
	}
	err := <-result // fn's context is cancelled: with the Lease lost or released it returns
	if err == nil && ctx.Err() == nil {
		err = fmt.Errorf("lease %s lost", lease)
	}
	return err
}

// FleetFlags are the flags of both controllers that serve more namespaces than their own (docs/fleet.md).
type FleetFlags struct {
	// Namespaces is a comma-separated list of further namespaces.
	Namespaces string
	// NamespaceSelector is a label selector over namespaces (empty: none).
	NamespaceSelector string
}

func (f *FleetFlags) bindFleet(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.Namespaces, "namespaces", "", "further namespaces to serve, comma-separated (each must grant this controller access)")
	cmd.Flags().StringVar(&f.NamespaceSelector, "namespace-selector", "", "also serve every namespace whose labels match this selector (needs get/list/watch on namespaces)")
}

// options parses the flags into controller.FleetOptions with identity id.
func (f FleetFlags) options(id spec.ServiceAccountRef) (controller.FleetOptions, error) {
	o := controller.FleetOptions{Identity: id}
	for _, ns := range strings.Split(f.Namespaces, ",") {
		if ns = strings.TrimSpace(ns); ns != "" {
			o.Namespaces = append(o.Namespaces, ns)
		}
	}
	if f.NamespaceSelector != "" {
		sel, err := labels.Parse(f.NamespaceSelector)
		if err != nil {
			return o, fmt.Errorf("--namespace-selector %q: %w", f.NamespaceSelector, err)
		}
		o.NamespaceSelector = sel
	}
	return o, nil
}

// InstanceCmdOptions are the flags of `instance`.
type InstanceCmdOptions struct {
	CommonOptions
	FleetFlags
	Instance       string
	Resync         time.Duration
	NoSubscribe    bool
	ClusterDomain  string
	SharedIdentity string
	Workers        int
	// MigrateFrom, MigrateUser, MigratePasswordFile and MigrateSwitch run a migration (controller.MigrateOptions).
	MigrateFrom         string
	MigrateUser         string
	MigratePasswordFile string
	MigrateSwitch       bool
	// CloseDemotedClients (--close-demoted-clients, default true) is the negation of
	// controller.InstanceOptions.KeepDemotedClients.
	CloseDemotedClients bool
}

// controllerOptions returns the instance controller's options from the flags, with the fleet and migration
// options already parsed (FleetFlags.options, migrate).
func (o *InstanceCmdOptions) controllerOptions(fleet controller.FleetOptions, mig *controller.MigrateOptions) controller.InstanceOptions {
	return controller.InstanceOptions{Namespace: o.Namespace, Instance: o.Instance, Resync: o.Resync, NoSubscribe: o.NoSubscribe,
		Version: Version, ClusterDomain: o.ClusterDomain, Fleet: fleet, Workers: o.Workers, Migrate: mig,
		KeepDemotedClients: !o.CloseDemotedClients}
}

// migrate returns the --migrate-from options, nil without --migrate-from.
func (o *InstanceCmdOptions) migrate() (*controller.MigrateOptions, error) {
	if o.MigrateFrom == "" {
		if o.MigrateSwitch {
			return nil, errors.New("--migrate-switch needs --migrate-from")
		}
		return nil, nil
	}
	host, port, err := parseMigrateFrom(o.MigrateFrom, o.MigratePasswordFile)
	if err != nil {
		return nil, err
	}
	if o.Instance == "" {
		return nil, errors.New("--migrate-from needs --instance (one migrating instance per controller)")
	}
	return &controller.MigrateOptions{Host: host, Port: port, User: o.MigrateUser, PasswordFile: o.MigratePasswordFile, Switch: o.MigrateSwitch}, nil
}

func newInstanceCmd() *cobra.Command {
	o := &InstanceCmdOptions{}
	cmd := &cobra.Command{
		Use:   "instance",
		Short: "Run the data-side controller: repair orphan primaries, keep role labels true, write status",
		Long: `instance observes INFO replication on every data node and, when monitored, Sentinel's
GET-MASTER-ADDR-BY-NAME and MASTER; Sentinel's answer is the truth. One disruptive step per pass, never while a
failover is in flight: an orphan primary gets REPLICAOF <primary>; an unmonitored instance with no primary
promotes the replica with the highest offset. It keeps valkey.io/role pod labels (removal before addition, so
the primary Service never has two endpoints) and subscribes to +switch-master for sub-second moves.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.validate(); err != nil {
				return err
			}
			var id spec.ServiceAccountRef
			if o.SharedIdentity != "" {
				r, err := spec.ParseServiceAccountRef(o.SharedIdentity)
				if err != nil {
					return fmt.Errorf("--shared-identity: %w", err)
				}
				if r.Namespace != o.Namespace {
					return fmt.Errorf("--shared-identity %s: the namespace must be this controller's own (--namespace %s)", o.SharedIdentity, o.Namespace)
				}
				if o.Instance != "" {
					return errors.New("--shared-identity serves every instance that names it; leave --instance empty")
				}
				id = r
			}
			fleet, err := o.FleetFlags.options(id)
			if err != nil {
				return err
			}
			mig, err := o.migrate()
			if err != nil {
				return err
			}
			cs, err := kube.NewClient(o.Kubeconfig)
			if err != nil {
				return err
			}
			m, h := metrics.New(), &metrics.Health{}
			rec, stop := kube.NewRecorder(cs, "valkey-sentinel-ctl-instance")
			defer stop()
			lease := o.LeaseName
			if lease == "" {
				lease = contract.Controller(o.Instance)
				if o.Instance == "" {
					lease = "valkey-ha-instance-controller"
				}
			}
			c := controller.NewInstanceController(cs, o.controllerOptions(fleet, mig), m, rec, slog.Default())
			return runController(cmd.Context(), o.CommonOptions, cs, m, h, lease, func(ctx context.Context) error { return c.Run(ctx, h) })
		},
	}
	o.bind(cmd)
	cmd.Flags().StringVar(&o.Instance, "instance", "", "instance (release fullname) to manage; empty = every instance in the namespace")
	cmd.Flags().DurationVar(&o.Resync, "resync", contract.DefaultInstanceResync, "polling period per instance")
	cmd.Flags().BoolVar(&o.NoSubscribe, "no-subscribe", false, "do not subscribe to +switch-master (polling only)")
	cmd.Flags().BoolVar(&o.CloseDemotedClients, "close-demoted-clients", true, "close a demoted node's application connections when the primary label leaves it, so clients of the primary Service reconnect to the new primary (false: labels only; README \"Clients without Sentinel\")")
	clusterDomainFlag(cmd.Flags(), &o.ClusterDomain)
	cmd.Flags().StringVar(&o.SharedIdentity, "shared-identity", "", "run as the shared instance controller <namespace>/<serviceAccount>: serve every instance whose descriptor names it (controller.mode shared)")
	cmd.Flags().IntVar(&o.Workers, "workers", 0, "parallel passes at most (0: one worker lane per instance, so a stuck instance never delays another)")
	cmd.Flags().StringVar(&o.MigrateFrom, "migrate-from", "", "host:port of a primary outside the chart this instance migrates from (README \"Migration\"; needs --instance)")
	cmd.Flags().StringVar(&o.MigrateUser, "migrate-user", "", "the source's ACL user (empty: default)")
	cmd.Flags().StringVar(&o.MigratePasswordFile, "migrate-password-file", "", "file holding the source user's password")
	cmd.Flags().BoolVar(&o.MigrateSwitch, "migrate-switch", false, "switch the migration over once node 0 is caught up (migrateFrom.switch)")
	o.bindFleet(cmd)
	return cmd
}

// SentinelCmdOptions are the flags of `sentinel`. Where the Sentinels are (hosts, port, TLS) is read from
// the quorum document S-quorum the chart publishes, how many there are from the StatefulSet S: neither is
// a flag (the --statefulset, --service, --port, --replicas and --tls of older charts are accepted and
// ignored).
type SentinelCmdOptions struct {
	CommonOptions
	FleetFlags
	// ServiceAccount is the controller's own ServiceAccount (in --namespace): instances grant it by name.
	ServiceAccount string
	Release        string
	ClusterDomain  string
	Selector       string
	Resync         time.Duration
	// Auth makes the controller authenticate as the quorum's _admin user with the password of Secret
	// S-auth-admin (the chart's credentials Job, sentinel-credentials, creates it; the controller waits for it).
	Auth bool
}

func newSentinelCmd() *cobra.Command {
	o := &SentinelCmdOptions{}
	cmd := &cobra.Command{
		Use:   "sentinel",
		Short: "Run the sentinel-side controller: register, update and remove monitors for selected instances",
		Long: `sentinel registers every selected instance (descriptor labels match --selector, failover mode Sentinel)
on every ready Sentinel that lacks it: SENTINEL MONITOR <name> <primary FQDN> <port> <quorum>, then SENTINEL SET
auth-user/auth-pass and the per-monitor keys. It diffs against SENTINEL MASTERS first (a changed quorum or key is
SET, not re-monitored), removes monitors of de-selected instances with an Event, publishes <F>-sentinels for the
data pods, refuses an instance another quorum already monitors, and never removes a monitor whose primary is down.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.validate(); err != nil {
				return err
			}
			if o.Release == "" {
				return errors.New("--release is required")
			}
			sel := labels.Nothing()
			if o.Selector != "" {
				s, err := labels.Parse(o.Selector)
				if err != nil {
					return fmt.Errorf("--selector %q: %w", o.Selector, err)
				}
				sel = s
			}
			var id spec.ServiceAccountRef
			if o.ServiceAccount != "" {
				r, err := spec.ParseServiceAccountRef(o.Namespace + "/" + o.ServiceAccount)
				if err != nil {
					return fmt.Errorf("--service-account: %w", err)
				}
				id = r
			}
			fleet, err := o.FleetFlags.options(id)
			if err != nil {
				return err
			}
			cs, err := kube.NewClient(o.Kubeconfig)
			if err != nil {
				return err
			}
			m, h := metrics.New(), &metrics.Health{}
			rec, stop := kube.NewRecorder(cs, "valkey-sentinel-ctl-sentinel")
			defer stop()
			lease := o.LeaseName
			if lease == "" {
				lease = contract.Controller(o.Release)
			}
			copts := controller.SentinelOptions{Namespace: o.Namespace, Release: o.Release, ClusterDomain: o.ClusterDomain,
				Selector: sel, Resync: o.Resync, Fleet: fleet}
			return runController(cmd.Context(), o.CommonOptions, cs, m, h, lease, func(ctx context.Context) error {
				if o.Auth {
					pw, err := readSentinelAdmin(ctx, cs, o.Namespace, o.Release, 2*time.Second, slog.Default())
					if err != nil {
						return err
					}
					copts.AuthPassword = pw
					// the instances of other namespaces get the _instance credential as a copy (docs/fleet.md)
					copts.CopyCredential = len(fleet.Namespaces) > 0 || fleet.NamespaceSelector != nil
				}
				return controller.NewSentinelController(cs, copts, m, rec, slog.Default()).Run(ctx, h)
			})
		},
	}
	o.bind(cmd)
	f := cmd.Flags()
	f.StringVar(&o.Release, "release", "", "the quorum's fullname S")
	clusterDomainFlag(f, &o.ClusterDomain)
	f.StringVar(&o.Selector, "selector", "", "label selector over instance descriptors; empty matches nothing")
	f.DurationVar(&o.Resync, "resync", contract.DefaultSentinelResync, "polling period")
	// read from the quorum document S-quorum and the StatefulSet now; an older chart still passes them
	var ignored string
	for _, name := range []string{"statefulset", "service", "port", "replicas"} {
		f.StringVar(&ignored, name, "", "ignored: read from the quorum document "+contract.Quorum("<release>"))
		_ = f.MarkDeprecated(name, "the Sentinels are read from the quorum document <release>-quorum and the StatefulSet")
	}
	var ignoredTLS bool
	f.BoolVar(&ignoredTLS, "tls", false, "ignored: read from the quorum document")
	_ = f.MarkDeprecated("tls", "TLS is read from the quorum document <release>-quorum")
	f.BoolVar(&o.Auth, "auth", false, "authenticate to the Sentinels as _admin with the password of Secret <release>-auth-admin (waits until it exists)")
	f.StringVar(&o.ServiceAccount, "service-account", "", "this controller's ServiceAccount in --namespace: instances grant it by name (sentinelGrant); empty: only descriptors of --namespace, without a grant check")
	o.bindFleet(cmd)
	return cmd
}
