package templatestests

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/valkey-ha/valkey-ha/internal/chartapi/contract"
	"github.com/valkey-ha/valkey-ha/internal/valkeyapi/acl"
)

// TestContractNames renders both charts and checks every object name, label, annotation, key, port and default
// that the Go side takes from internal/chartapi/contract against what the charts render: a constant and a template that
// drift apart fail here, not in a cluster (where the controllers would find no descriptor, select no pod or be
// refused by their Role). The documents' contents go through the real parsers elsewhere (internal/chartapi/spec,
// TestInstanceDescriptorParses and friends).
func TestContractNames(t *testing.T) {
	const f, s, nodes = valkeyF, sentinelRel, 3
	const user = "app"
	// a quorum in another namespace, so the instance's copy of the quorum credential (QuorumCopy) is rendered too
	v := installedValkey(t, fmt.Sprintf("replicas: %d\npersistence: {enabled: true}\nusers:\n  - {name: %s, access: readwrite, keys: [\"*\"]}\nsentinel: {release: %s, namespace: other}\n", nodes-1, user, s))
	sameNS := decode(t, mustRender(t, "valkey", fmt.Sprintf("sentinel: {release: %s}\n", s)))
	q := decode(t, mustRender(t, "valkey-sentinel", ""))

	t.Run("every object is part of the project", func(t *testing.T) {
		for _, objs := range []objects{v, q} {
			for _, o := range objs.list {
				assert.Equal(t, contract.PartOf, objMeta(o).GetLabels()[contract.LabelPartOf], "%s %s: %s", kindOf(o), nameOf(o), contract.LabelPartOf)
			}
		}
	})

	t.Run("chart defaults", func(t *testing.T) {
		for _, chart := range []string{"valkey", "valkey-sentinel"} {
			assert.Equal(t, contract.DefaultClusterDomain, loadChart(t, chart).Values["clusterDomain"], "%s values.yaml clusterDomain", chart)
		}
	})

	t.Run("instance descriptor", func(t *testing.T) {
		cm := v.configMap(t, contract.Descriptor(f))
		got, ok := contract.InstanceOf(cm.Name)
		assert.True(t, ok && got == f, "InstanceOf(%q) = %q, %v", cm.Name, got, ok)
		assert.Equal(t, contract.ComponentInstance, cm.Labels[contract.LabelComponent])
		assert.Contains(t, cm.Data, contract.KeyInstance)
		v.configMap(t, contract.Config(f))
	})

	t.Run("data nodes", func(t *testing.T) {
		for i := range nodes {
			sts := v.get(t, "StatefulSet", contract.NodeStatefulSet(f, i)).(*appsv1.StatefulSet)
			assert.Equal(t, contract.NodeStatefulSet(f, i), sts.Spec.ServiceName, "%s serviceName", sts.Name)
			v.service(t, contract.NodeStatefulSet(f, i)) // the per-node headless Service of NodeHost
			assert.Equal(t, "1", sts.Annotations[contract.AnnotationReleaseRevision], "%s %s", sts.Name, contract.AnnotationReleaseRevision)
			for what, labels := range map[string]map[string]string{"StatefulSet": sts.Labels, "pod template": sts.Spec.Template.Labels} {
				assert.Equal(t, f, labels[contract.LabelInstance], "%s %s %s", sts.Name, what, contract.LabelInstance)
				assert.Equal(t, strconv.Itoa(i), labels[contract.LabelNodeIndex], "%s %s %s", sts.Name, what, contract.LabelNodeIndex)
				assert.Equal(t, contract.ComponentData, labels[contract.LabelComponent], "%s %s %s", sts.Name, what, contract.LabelComponent)
				assert.NotContains(t, labels, contract.LabelRole, "%s %s: the role label is the controller's, never a template's", sts.Name, what)
			}
			assert.NotEmpty(t, sts.Spec.Template.Annotations[contract.AnnotationConfigHash], "%s pod template %s", sts.Name, contract.AnnotationConfigHash)
			assert.True(t, hasPort(sts.Spec.Template.Spec, contract.DataPort), "%s: a container port %d", sts.Name, contract.DataPort)
			if assert.Len(t, sts.Spec.VolumeClaimTemplates, 1, "%s: persistence on", sts.Name) {
				assert.Equal(t, contract.DataClaim, sts.Spec.VolumeClaimTemplates[0].Name, "%s volumeClaimTemplate (the PVC %s)", sts.Name, contract.Claim(contract.NodePod(f, i)))
			}
		}
		for svc, role := range map[string]string{f + "-primary": contract.RolePrimary, f + "-replicas": contract.RoleReplica} {
			sel := v.service(t, svc).Spec.Selector
			assert.Equal(t, role, sel[contract.LabelRole], "%s selects %s", svc, contract.LabelRole)
			assert.Equal(t, f, sel[contract.LabelInstance], "%s selects %s", svc, contract.LabelInstance)
		}
	})

	t.Run("data pod mounts", func(t *testing.T) {
		assert.Contains(t, v.configMap(t, contract.Config(f)).Data, contract.KeyServerConfig)
		spec := &v.get(t, "StatefulSet", contract.NodeStatefulSet(f, 0)).(*appsv1.StatefulSet).Spec.Template.Spec
		server := container(t, spec, "valkey")
		for object, dir := range map[string]string{contract.Config(f): contract.MountConfig, contract.Descriptor(f): contract.MountInstance,
			contract.SentinelInfo(f): contract.MountSentinels, contract.SystemSecret(f): contract.MountSystem} {
			assert.Equal(t, dir, mountPathOf(spec, server, object), "the server container mounts %s at %s", object, dir)
		}
		runtime := false
		for _, m := range server.VolumeMounts {
			runtime = runtime || (m.MountPath == contract.MountRuntime && !m.ReadOnly)
		}
		assert.True(t, runtime, "the server container mounts a writable %s", contract.MountRuntime)

		const s3 = `{endpoint: "https://minio.storage.svc:9000", bucket: valkey-backups, existingSecret: s3-creds}`
		tls := decode(t, mustRender(t, "valkey", "tls: {enabled: true, existingSecret: cache-tls}\n"))
		spec = &tls.get(t, "StatefulSet", contract.NodeStatefulSet(f, 0)).(*appsv1.StatefulSet).Spec.Template.Spec
		assert.Equal(t, contract.MountTLS, mountPathOf(spec, container(t, spec, "valkey"), "cache-tls"), "the server container mounts the TLS Secret at %s", contract.MountTLS)
		b := decode(t, mustRender(t, "valkey", "persistence: {enabled: true}\nbackup: {enabled: true, s3: "+s3+"}\nrestoreFrom: {file: x.rdb, s3: "+s3+"}\n"))
		spec = &b.get(t, "StatefulSet", contract.NodeStatefulSet(f, 0)).(*appsv1.StatefulSet).Spec.Template.Spec
		assert.Equal(t, contract.MountS3Credentials, mountPathOf(spec, container(t, spec, "restore"), "s3-creds"), "the restore step mounts the S3 credentials at %s", contract.MountS3Credentials)
		cjs := b.ofKind("CronJob")
		if assert.Len(t, cjs, 1) {
			job := &cjs[0].(*batchv1.CronJob).Spec.JobTemplate.Spec.Template.Spec
			c := container(t, job, "backup")
			assert.Equal(t, contract.MountInstance, mountPathOf(job, c, contract.Descriptor(f)), "the backup Job mounts %s", contract.Descriptor(f))
			assert.Equal(t, contract.MountS3Credentials, mountPathOf(job, c, "s3-creds"), "the backup Job mounts the S3 credentials")
			assert.Equal(t, contract.MountBackupAuth, mountPathOf(job, c, f+"-backup-auth"), "the backup Job mounts the _backup password")
		}
	})

	t.Run("instance Secrets", func(t *testing.T) {
		for _, name := range []string{contract.SystemSecret(f), contract.SentinelAuthSecret(f), contract.ACLSecret(f), contract.UserSecret(f, user), contract.QuorumCopy(f)} {
			sec := v.secret(t, name)
			assert.Equal(t, f, sec.Labels[contract.LabelInstance], "Secret %s %s", name, contract.LabelInstance)
			assert.Equal(t, contract.ManagedBy, sec.Labels[contract.LabelManagedBy], "Secret %s %s", name, contract.LabelManagedBy)
		}
		assert.Contains(t, v.secret(t, contract.SentinelAuthSecret(f)).Data, contract.KeyPassword)
		aclData := v.secret(t, contract.ACLSecret(f)).Data
		assert.Contains(t, aclData, contract.KeyUsers)
		assert.Contains(t, aclData, contract.KeyACLFile)
		us := v.secret(t, contract.UserSecret(f, user))
		assert.Equal(t, user, us.Labels[contract.LabelUser])
		assert.Contains(t, us.Data, contract.KeyUsername)
		assert.Contains(t, us.Data, contract.KeyPassword)
	})

	t.Run("credentials Jobs", func(t *testing.T) {
		for _, objs := range []objects{v, q} {
			jobs := objs.ofKind("Job")
			n := 0
			for _, o := range jobs {
				if job := o.(*batchv1.Job); strings.Contains(job.Name, "-credentials-") {
					n++
					assert.Equal(t, contract.ComponentCredentials, job.Labels[contract.LabelComponent], "Job %s %s", job.Name, contract.LabelComponent)
				}
			}
			assert.Equal(t, 1, n, "one credentials Job per release")
		}
	})

	t.Run("instance controller and Roles", func(t *testing.T) {
		v.get(t, "Deployment", contract.Controller(f))
		v.get(t, "ServiceAccount", contract.Controller(f))
		rules := v.get(t, "Role", contract.Controller(f)).(*rbacv1.Role).Rules
		var pods []string
		for i := range nodes {
			pods = append(pods, contract.NodePod(f, i))
		}
		assert.True(t, grants(rules, "pods", "delete", pods...), "%s may delete the pods %v", contract.Controller(f), pods)
		assert.True(t, grants(rules, "configmaps", "update", contract.Status(f)), "%s may update %s", contract.Controller(f), contract.Status(f))
		assert.True(t, grants(rules, "leases", "update", contract.Controller(f)), "%s may renew its Lease %s", contract.Controller(f), contract.Controller(f))
		assert.True(t, grants(rules, "secrets", "get", contract.SystemSecret(f), contract.ACLSecret(f)), "%s reads %s and %s", contract.Controller(f), contract.SystemSecret(f), contract.ACLSecret(f))
		grant := v.get(t, "Role", f+"-sentinel-grant").(*rbacv1.Role).Rules
		assert.True(t, grants(grant, "configmaps", "update", contract.SentinelInfo(f)), "the quorum's controller may write %s", contract.SentinelInfo(f))
		assert.True(t, grants(grant, "secrets", "update", contract.QuorumCopy(f)), "the quorum's controller may fill %s", contract.QuorumCopy(f))
		auth := v.get(t, "Role", f+"-sentinel-auth").(*rbacv1.Role).Rules
		assert.True(t, grants(auth, "secrets", "get", contract.SentinelAuthSecret(f)), "the quorum's controller may read %s", contract.SentinelAuthSecret(f))
		// a quorum of the same namespace: the data pods mount its _instance credential by name
		assert.True(t, mountsSecret(sameNS, "StatefulSet/"+contract.NodeStatefulSet(f, 0), contract.QuorumSecret(s, acl.SentinelInstance)),
			"the data pods mount %s", contract.QuorumSecret(s, acl.SentinelInstance))
	})

	t.Run("quorum", func(t *testing.T) {
		sts := q.get(t, "StatefulSet", contract.SentinelStatefulSet(s)).(*appsv1.StatefulSet)
		assert.Equal(t, contract.SentinelHeadless(s), sts.Spec.ServiceName)
		q.service(t, contract.SentinelHeadless(s))
		for what, labels := range map[string]map[string]string{"StatefulSet": sts.Labels, "pod template": sts.Spec.Template.Labels} {
			assert.Equal(t, s, labels[contract.LabelSentinel], "%s %s %s", sts.Name, what, contract.LabelSentinel)
			assert.Equal(t, contract.ComponentSentinel, labels[contract.LabelComponent], "%s %s %s", sts.Name, what, contract.LabelComponent)
		}
		assert.NotEmpty(t, sts.Spec.Template.Annotations[contract.AnnotationConfigHash], "%s pod template %s", sts.Name, contract.AnnotationConfigHash)
		assert.True(t, hasPort(sts.Spec.Template.Spec, contract.SentinelPort), "%s: a container port %d", sts.Name, contract.SentinelPort)
		q.configMap(t, contract.Config(s)) // owner of the Secrets sentinel-credentials generates
		cm := q.configMap(t, contract.Quorum(s))
		assert.Equal(t, contract.ComponentQuorum, cm.Labels[contract.LabelComponent])
		assert.Contains(t, cm.Data, contract.KeyQuorum)
		q.get(t, "Deployment", contract.Controller(s))
		q.get(t, "ServiceAccount", contract.Controller(s))
		rules := q.get(t, "Role", contract.Controller(s)).(*rbacv1.Role).Rules
		var pods []string
		for i := range 3 {
			pods = append(pods, contract.SentinelPod(s, i))
		}
		assert.True(t, grants(rules, "pods", "delete", pods...), "%s may delete the Sentinel pods %v", contract.Controller(s), pods)
		assert.True(t, grants(rules, "secrets", "get", contract.QuorumSecret(s, acl.SentinelAdmin)), "%s reads %s", contract.Controller(s), contract.QuorumSecret(s, acl.SentinelAdmin))
		assert.True(t, grants(rules, "leases", "update", contract.Controller(s)), "%s may renew its Lease %s", contract.Controller(s), contract.Controller(s))
		assert.True(t, grants(rules, "configmaps", "update", contract.Status(s)), "%s may update %s", contract.Controller(s), contract.Status(s))
		assert.True(t, grants(rules, "statefulsets", "get", contract.SentinelStatefulSet(s)), "%s reads StatefulSet %s", contract.Controller(s), contract.SentinelStatefulSet(s))
		creds := q.get(t, "Role", s+"-credentials").(*rbacv1.Role).Rules
		assert.True(t, grants(creds, "configmaps", "get", contract.Config(s)), "the quorum's credentials Job reads the owner %s", contract.Config(s))
		for _, u := range acl.SentinelUsers {
			name := contract.QuorumSecret(s, u.Name)
			assert.True(t, grants(creds, "secrets", "get", name), "the quorum's credentials Job writes %s", name)
			assert.True(t, mountsSecret(q, "StatefulSet/"+sts.Name, name), "the Sentinels mount %s", name)
		}
	})
}

// hasPort reports whether a container of the pod listens on port.
func hasPort(spec corev1.PodSpec, port int) bool {
	for _, c := range spec.Containers {
		for _, p := range c.Ports {
			if int(p.ContainerPort) == port {
				return true
			}
		}
	}
	return false
}

// grants reports whether rules allow verb on every one of the named objects of resource (a rule without
// resourceNames allows every name).
func grants(rules []rbacv1.PolicyRule, resource, verb string, names ...string) bool {
	for _, n := range names {
		ok := false
		for _, r := range rules {
			if slices.Contains(r.Resources, resource) && slices.Contains(r.Verbs, verb) &&
				(len(r.ResourceNames) == 0 || slices.Contains(r.ResourceNames, n)) {
				ok = true
			}
		}
		if !ok {
			return false
		}
	}
	return len(names) > 0
}

// mountsSecret reports whether the pod spec key ("StatefulSet/<name>") mounts Secret name (a secret or a
// projected volume).
func mountsSecret(objs objects, key, name string) bool {
	spec, ok := objs.podSpecs()[key]
	if !ok {
		return false
	}
	for _, vol := range spec.Volumes {
		if vol.Secret != nil && vol.Secret.SecretName == name {
			return true
		}
		if vol.Projected != nil {
			for _, src := range vol.Projected.Sources {
				if src.Secret != nil && src.Secret.Name == name {
					return true
				}
			}
		}
	}
	return false
}

// mountPathOf returns where container c of the pod spec mounts the ConfigMap or Secret named object ("" when it
// does not).
func mountPathOf(spec *corev1.PodSpec, c *corev1.Container, object string) string {
	for _, vol := range spec.Volumes {
		if (vol.ConfigMap != nil && vol.ConfigMap.Name == object) || (vol.Secret != nil && vol.Secret.SecretName == object) {
			for _, m := range c.VolumeMounts {
				if m.Name == vol.Name {
					return m.MountPath
				}
			}
		}
	}
	return ""
}
