// Package contract is every name, label, annotation, key, port, mount path and default that charts/valkey,
// charts/valkey-sentinel and valkey-sentinel-ctl share (docs/contract.md, which lists them for people). It is
// the one place the Go side spells them: the controllers, the boot step, the helm-test checks, the test
// environment and the e2e suite all call it. The charts' _helpers.tpl (and charts/_shared/helpers.tpl, which
// both charts share) spell the same names in templates;
// templates-tests render both charts and check the rendered objects and documents against this package
// (TestContractNames) and through the real parsers (internal/chartapi/spec).
//
// F is an instance's fullname (one charts/valkey release), S a quorum's fullname (one
// charts/valkey-sentinel release), i a node or Sentinel ordinal, ns the namespace and domain the cluster
// DNS domain.
package contract

import (
	"fmt"
	"strings"
	"time"
)

// Labels every object of the project carries, and the labels the controllers select and route by.
const (
	// LabelPartOf is on every object; the controllers' informers list only objects with PartOf.
	LabelPartOf = "app.kubernetes.io/part-of"
	PartOf      = "valkey-ha"
	// LabelComponent tells the objects of one release apart (the Component* values).
	LabelComponent = "app.kubernetes.io/component"
	// LabelManagedBy marks the objects the controllers write themselves (status, Sentinel info).
	LabelManagedBy = "app.kubernetes.io/managed-by"
	ManagedBy      = "valkey-sentinel-ctl"
	// LabelInstance is on every data pod and StatefulSet and on the ConfigMaps written for an instance: F.
	LabelInstance = "valkey.io/instance"
	// LabelBackupOf is on the backup Job's pods (charts/valkey backup-cronjob.yaml): F of the instance they
	// back up. Not LabelInstance: the data pods' NetworkPolicy, PDB and PodMonitor select on that.
	LabelBackupOf = "valkey.io/backup-of"
	// LabelNodeIndex is a data pod's node ordinal i.
	LabelNodeIndex = "valkey.io/node-index"
	// LabelRole is patched onto data pods by the instance controller (never in a template): RolePrimary or
	// RoleReplica; the F-primary and F-replicas Services select on it.
	LabelRole   = "valkey.io/role"
	RolePrimary = "primary"
	RoleReplica = "replica"
	// LabelSentinel is on every Sentinel pod and StatefulSet, and on the F-sentinels a quorum publishes: S.
	LabelSentinel = "valkey.io/sentinel"
	// LabelUser is on a customer user's Secret F-user-<name>: the user's name.
	LabelUser = "valkey.io/user"
	// LabelRevision is the StatefulSet controller's pod label naming the pod's revision (Kubernetes'
	// controller-revision-hash); a pod whose revision is not its StatefulSet's update revision is stale.
	LabelRevision = "controller-revision-hash"
)

// Components (LabelComponent values).
const (
	ComponentData         = "data"
	ComponentSentinel     = "sentinel"
	ComponentController   = "controller"
	ComponentInstance     = "instance"      // the descriptor F-instance
	ComponentQuorum       = "quorum"        // the quorum document S-quorum
	ComponentSentinelInfo = "sentinel-info" // F-sentinels
	ComponentStatus       = "status"        // F-status, S-status
	ComponentTest         = "test"
	ComponentBackup       = "backup" // the backup Job's pods
	// ComponentCredentials is on the credentials Jobs and on the Secrets they and `sentinel-credentials`
	// generate at run time.
	ComponentCredentials = "credentials"
)

// Annotations.
const (
	// AnnotationReleaseRevision is set by charts/valkey on every data StatefulSet (metadata) to the Helm
	// revision that applied it; differing values mean an upgrade is half applied and nothing is rolled.
	AnnotationReleaseRevision = "valkey.io/release-revision"
	// AnnotationConfigHash is the sha256 of the rendered server or Sentinel config in the pod template.
	AnnotationConfigHash = "valkey.io/config-hash"
	// AnnotationTimeToReady is on F-status: "pending" until the instance was first Ready, then the seconds
	// from its descriptor's creation (observed once).
	AnnotationTimeToReady = "valkey.io/time-to-ready"
)

// StartRefusedPrefix begins the termination message a data container writes when its start step refuses the
// values (valkey-sentinel-ctl bootstrap, e.g. a changed engine on existing data); the instance controller
// reports what follows it (StartRefused event, ValuesAccepted condition).
const StartRefusedPrefix = "start refused: "

// ConfigMap and Secret keys.
const (
	KeyInstance  = "instance.json"  // in F-instance (charts/valkey)
	KeyQuorum    = "quorum.json"    // in S-quorum (charts/valkey-sentinel)
	KeySentinels = "sentinels.json" // in F-sentinels (written by the sentinel controller)
	KeyStatus    = "status.json"    // in F-status and S-status (written by the controllers)
	KeyPassword  = "password"       // in F-sentinel-auth and S-auth-<user>
	// KeyUsers (users.json: the desired users, acl.DesiredUser list, that the instance controller applies live
	// and the boot step turns into the runtime ACL file) and KeyACLFile (users.acl: the server's ACL file) are
	// in F-acl, written by the credentials Job; the data pods mount them side by side.
	KeyUsers    = "users.json"
	KeyACLFile  = "users.acl"
	KeyUsername = "username" // in S-auth-<user> and F-user-<name>
	// KeyNamespace and KeyRelease are in F-quorum-auth (QuorumCopy): the namespace and fullname of the quorum
	// that wrote the credential, the only Sentinels it may be sent to.
	KeyNamespace = "namespace"
	KeyRelease   = "release"
)

// Where a data pod's containers mount what the in-pod steps (bootstrap, prestop, first-sync-guard, backup,
// restore) read and write (charts/valkey statefulset.yaml); the steps' flags default to these paths, and the
// chart passes them anyway.
const (
	MountConfig    = "/etc/valkey-ha/config"    // Config(F): the server config template, key KeyServerConfig
	MountInstance  = "/etc/valkey-ha/instance"  // Descriptor(F), key KeyInstance
	MountSentinels = "/etc/valkey-ha/sentinels" // SentinelInfo(F), key KeySentinels; optional (absent: not monitored)
	MountSystem    = "/etc/valkey-ha/system"    // SystemSecret(F): one file per system password the pod uses
	MountRuntime   = "/etc/valkey-ha/runtime"   // an emptyDir: the runtime config KeyServerConfig, node-local passwords
	MountTLS       = "/etc/valkey-ha/tls"       // the server certificate Secret (tls.enabled): ca.crt, tls.crt, tls.key
	// MountBackupAuth (the _backup password, key KeyPassword) and MountS3Credentials (backup.s3 and
	// restoreFrom.s3's credentials) are mounted by the backup Job; the restore init container mounts the latter.
	MountBackupAuth    = "/etc/valkey-ha/backup-auth"
	MountS3Credentials = "/etc/valkey-ha/s3-credentials"
	// KeyServerConfig is the server config in F-config, and the runtime config the bootstrap writes from it.
	KeyServerConfig = "valkey.conf"
)

// Ports and failover modes.
const (
	DataPort     = 6379
	SentinelPort = 26379

	FailoverSentinel = "Sentinel"
	FailoverNone     = "None"
)

// Defaults of the controllers' flags (and of the charts' values).
const (
	DefaultClusterDomain  = "cluster.local"
	DefaultInstanceResync = 2 * time.Second
	DefaultSentinelResync = 3 * time.Second
)

// Names of charts/valkey's objects of instance F.
const (
	// DescriptorSuffix ends the name of every descriptor ConfigMap, F-instance (Descriptor, InstanceOf).
	DescriptorSuffix = "-instance"
	statusSuffix     = "-status"
	sentinelsSuffix  = "-sentinels"
)

// Descriptor is the name of F's descriptor ConfigMap, F-instance.
func Descriptor(f string) string { return f + DescriptorSuffix }

// InstanceOf returns F for a descriptor name F-instance (false for any other name).
func InstanceOf(descriptor string) (string, bool) {
	f, ok := strings.CutSuffix(descriptor, DescriptorSuffix)
	return f, ok && f != ""
}

// Config is the name of the ConfigMap with the rendered server config of an instance F or the Sentinel config
// of a quorum S (F-config, S-config). S-config owns the Secrets `sentinel-credentials` generates, so
// helm uninstall removes them.
func Config(name string) string { return name + "-config" }

// Status is the name of the status ConfigMap of an instance F or a quorum S (F-status, S-status).
func Status(name string) string { return name + statusSuffix }

// SentinelInfo is the name of the Sentinel info ConfigMap a quorum publishes for F, F-sentinels.
func SentinelInfo(f string) string { return f + sentinelsSuffix }

// SystemSecret is the default name of F's system Secret (F-system; auth.existingSecret may name another).
func SystemSecret(f string) string { return f + "-system" }

// SentinelAuthSecret is the name of the Secret with F's _sentinel password, F-sentinel-auth.
func SentinelAuthSecret(f string) string { return f + "-sentinel-auth" }

// ACLSecret is the name of F's ACL Secret, F-acl.
func ACLSecret(f string) string { return f + "-acl" }

// UserSecret is the default name of customer user's Secret, F-user-<name>.
func UserSecret(f, user string) string { return f + "-user-" + user }

// NodeStatefulSet is the name of node i's StatefulSet (and per-node headless Service), F-i.
func NodeStatefulSet(f string, i int) string { return fmt.Sprintf("%s-%d", f, i) }

// NodePod is the name of node i's pod, F-i-0.
func NodePod(f string, i int) string { return NodeStatefulSet(f, i) + "-0" }

// DataClaim is the name of the data StatefulSets' volumeClaimTemplate (persistence on).
const DataClaim = "data"

// Claim is the name of the PersistentVolumeClaim of data pod pod (F-i-0): data-F-i-0, as Kubernetes names a
// StatefulSet's claims <template>-<pod>.
func Claim(pod string) string { return DataClaim + "-" + pod }

// NodeHost is node i's stable FQDN, F-i-0.F-i.ns.svc.domain.
func NodeHost(f string, i int, ns, domain string) string {
	return fmt.Sprintf("%s.%s.%s.svc.%s", NodePod(f, i), NodeStatefulSet(f, i), ns, domain)
}

// Controller is the name of a release's controller Deployment, ServiceAccount, Role and default Lease,
// F-controller or S-controller.
func Controller(name string) string { return name + "-controller" }

// Names of charts/valkey-sentinel's objects of quorum S.

// Quorum is the name of S's quorum document ConfigMap, S-quorum.
func Quorum(s string) string { return s + "-quorum" }

// SentinelStatefulSet is the name of S's Sentinel StatefulSet, S.
func SentinelStatefulSet(s string) string { return s }

// SentinelHeadless is the name of S's headless Service, S-headless.
func SentinelHeadless(s string) string { return s + "-headless" }

// SentinelPod is the name of Sentinel i's pod, S-i.
func SentinelPod(s string, i int) string { return fmt.Sprintf("%s-%d", SentinelStatefulSet(s), i) }

// SentinelHost is Sentinel i's stable FQDN, S-i.S-headless.ns.svc.domain.
func SentinelHost(s string, i int, ns, domain string) string {
	return fmt.Sprintf("%s.%s.%s.svc.%s", SentinelPod(s, i), SentinelHeadless(s), ns, domain)
}

// QuorumSecret is the name of the Secret of quorum S's Sentinel user (acl.SentinelAdmin, SentinelInstance
// or SentinelClient: "_admin" -> S-auth-admin).
func QuorumSecret(s, user string) string { return s + "-auth-" + strings.TrimPrefix(user, "_") }

// QuorumCopy is the name of instance F's copy of the _instance credential of a quorum in another namespace,
// F-quorum-auth (keys KeyUsername, KeyPassword, KeyNamespace, KeyRelease): charts/valkey's credentials Job
// creates it empty, that quorum's controller fills it (docs/fleet.md).
func QuorumCopy(f string) string { return f + "-quorum-auth" }
