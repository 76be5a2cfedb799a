package templatestests

import (
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
)

const backupValues = `
persistence: {enabled: true}
backup: {enabled: true, persistentVolumeClaim: backups, retention: 3, schedule: "15 2 * * *"}
restoreFrom: {persistentVolumeClaim: old-backups, file: cache-valkey-20261203T030000Z.rdb}
`

// secretVolumes returns the Secret names a pod spec mounts.
func secretVolumes(spec *corev1.PodSpec) []string {
	var out []string
	for _, v := range spec.Volumes {
		if v.Secret != nil {
			out = append(out, v.Secret.SecretName)
		}
	}
	return out
}

// TestBackupCronJob: backup.enabled renders one CronJob that runs `valkey-sentinel-ctl backup` in the server
// image (its own valkey-cli / redis-cli), one Job at a time, without a service-account token, with the backup
// PVC and the _backup password; that password (F-backup-auth) is mounted by no other pod. Off by default.
func TestBackupCronJob(t *testing.T) {
	off := decode(t, mustRender(t, "valkey", ""))
	assert.Empty(t, off.ofKind("CronJob"), "no backup unless backup.enabled")
	for name, spec := range off.podSpecs() {
		assert.NotContains(t, secretVolumes(spec), valkeyF+"-backup-auth", name)
		for _, c := range allContainers(spec) {
			assert.NotEqual(t, "restore", c.Name, "%s: no restore step unless restoreFrom", name)
		}
	}

	objs := decode(t, mustRender(t, "valkey", backupValues))
	cjs := objs.ofKind("CronJob")
	require.Len(t, cjs, 1)
	cj := cjs[0].(*batchv1.CronJob)
	assert.Equal(t, valkeyF+"-backup", cj.Name)
	assert.Equal(t, "15 2 * * *", cj.Spec.Schedule)
	assert.Equal(t, batchv1.ForbidConcurrent, cj.Spec.ConcurrencyPolicy)
	pod := cj.Spec.JobTemplate.Spec.Template.Spec
	require.NotNil(t, pod.AutomountServiceAccountToken)
	assert.False(t, *pod.AutomountServiceAccountToken, "the backup Job needs no API access")
	c := container(t, &pod, "backup")
	assert.Equal(t, "valkey/valkey:9.1", c.Image, "the server image carries the engine's CLI")
	args := strings.Join(c.Command, " ")
	assert.Contains(t, args, "/opt/valkey-ha/bin/valkey-sentinel-ctl backup ")
	assert.Contains(t, args, "--retention 3")
	assert.Contains(t, args, "--cli valkey-cli")
	assert.Equal(t, c.Resources.Limits, c.Resources.Requests)
	assert.True(t, *c.SecurityContext.ReadOnlyRootFilesystem)
	assert.True(t, *c.SecurityContext.RunAsNonRoot)
	var claim string
	for _, v := range pod.Volumes {
		if v.PersistentVolumeClaim != nil {
			claim = v.PersistentVolumeClaim.ClaimName
		}
	}
	assert.Equal(t, "backups", claim)
	assert.Equal(t, []string{valkeyF + "-backup-auth"}, secretVolumes(&pod), "the backup Job mounts only the _backup password")
	for name, spec := range objs.podSpecs() {
		assert.NotContains(t, secretVolumes(spec), valkeyF+"-backup-auth", "%s must not hold the _backup password", name)
	}

	redis := decode(t, mustRender(t, "valkey", backupValues+"engine: redis\n"))
	rc := redis.ofKind("CronJob")[0].(*batchv1.CronJob)
	assert.Contains(t, strings.Join(rc.Spec.JobTemplate.Spec.Template.Spec.Containers[0].Command, " "), "--cli redis-cli")

	// the NetworkPolicy admits this release's backup pods, selected by release and component
	var admitted bool
	for _, o := range objs.ofKind("NetworkPolicy") {
		np := o.(*networkingv1.NetworkPolicy)
		for _, in := range np.Spec.Ingress {
			for _, from := range in.From {
				if from.PodSelector != nil && from.PodSelector.MatchLabels["app.kubernetes.io/component"] == "backup" {
					admitted = true
					assert.Equal(t, "cache", from.PodSelector.MatchLabels["app.kubernetes.io/instance"])
				}
			}
		}
	}
	assert.True(t, admitted, "the data pods' NetworkPolicy admits the backup Job")
}

// TestRestoreFromOnlyNodeZero: restoreFrom adds the restore step to node 0 only (the others start empty and
// replicate from it), before the server starts, with the backup volume read-only.
func TestRestoreFromOnlyNodeZero(t *testing.T) {
	objs := decode(t, mustRender(t, "valkey", backupValues))
	sts := objs.statefulSets()
	require.Len(t, sts, 3)
	for _, s := range sts {
		spec := &s.Spec.Template.Spec
		has := slices.ContainsFunc(spec.InitContainers, func(c corev1.Container) bool { return c.Name == "restore" })
		if s.Name != valkeyF+"-0" {
			assert.False(t, has, "%s: only node 0 restores", s.Name)
			continue
		}
		require.True(t, has)
		c := container(t, spec, "restore")
		assert.Equal(t, "install-ctl", spec.InitContainers[0].Name, "the restore step runs after the binary is installed")
		cmd := strings.Join(c.Command, " ")
		assert.Contains(t, cmd, "restore --from /restore/cache-valkey-20261203T030000Z.rdb --data-dir /data")
		assert.Contains(t, cmd, "--server valkey-server")
		var ro bool
		for _, v := range spec.Volumes {
			if v.Name == "restore" {
				require.NotNil(t, v.PersistentVolumeClaim)
				assert.Equal(t, "old-backups", v.PersistentVolumeClaim.ClaimName)
				ro = v.PersistentVolumeClaim.ReadOnly
			}
		}
		assert.True(t, ro, "the backup volume is mounted read-only")
	}
}

// TestBackupCronJobS3: backup.s3 adds the upload to the same backup step: the target's values as flags, the
// credentials Secret (only its two keys) and the CA mounted read-only in the backup Job alone; without a PVC the
// snapshot is staged in an emptyDir (--scratch); with a PVC both targets get it and there is no --scratch.
func TestBackupCronJobS3(t *testing.T) {
	const s3 = `
backup:
  enabled: true
  s3: {endpoint: "https://minio.storage.svc:9000", bucket: valkey-backups, prefix: valkey/cache, region: eu-1, forcePathStyle: true, existingSecret: backup-s3, caSecret: storage-ca}
`
	objs := decode(t, mustRender(t, "valkey", s3))
	cjs := objs.ofKind("CronJob")
	require.Len(t, cjs, 1)
	pod := cjs[0].(*batchv1.CronJob).Spec.JobTemplate.Spec.Template.Spec
	c := container(t, &pod, "backup")
	args := strings.Join(c.Command, " ")
	for _, want := range []string{"--s3-endpoint https://minio.storage.svc:9000", "--s3-bucket valkey-backups", "--s3-prefix valkey/cache",
		"--s3-region eu-1", "--s3-force-path-style", "--s3-credentials-dir /etc/valkey-ha/s3-credentials",
		"--s3-ca-file /etc/valkey-ha/s3-ca/ca.crt", "--scratch"} {
		assert.Contains(t, args, want)
	}
	vols := map[string]corev1.Volume{}
	for _, v := range pod.Volumes {
		vols[v.Name] = v
	}
	require.NotNil(t, vols["backup"].EmptyDir, "no PVC: the snapshot is staged in an emptyDir")
	require.NotNil(t, vols["s3-credentials"].Secret)
	assert.Equal(t, "backup-s3", vols["s3-credentials"].Secret.SecretName)
	assert.Len(t, vols["s3-credentials"].Secret.Items, 2, "only accessKeyId and secretAccessKey")
	require.NotNil(t, vols["s3-ca"].Secret)
	assert.Equal(t, "storage-ca", vols["s3-ca"].Secret.SecretName)
	for _, m := range c.VolumeMounts {
		if m.Name == "s3-credentials" || m.Name == "s3-ca" {
			assert.True(t, m.ReadOnly, m.Name)
		}
	}
	for name, spec := range objs.podSpecs() {
		if strings.Contains(name, "backup") {
			continue
		}
		assert.NotContains(t, secretVolumes(spec), "backup-s3", "%s must not hold the S3 credentials", name)
	}

	both := decode(t, mustRender(t, "valkey", s3+"  persistentVolumeClaim: backups\n"))
	bp := both.ofKind("CronJob")[0].(*batchv1.CronJob).Spec.JobTemplate.Spec.Template.Spec
	bargs := strings.Join(container(t, &bp, "backup").Command, " ")
	assert.Contains(t, bargs, "--s3-bucket valkey-backups")
	assert.NotContains(t, bargs, "--scratch", "with a PVC the volume keeps its copy")

	plain := decode(t, mustRender(t, "valkey", backupValues))
	pp := plain.ofKind("CronJob")[0].(*batchv1.CronJob).Spec.JobTemplate.Spec.Template.Spec
	assert.NotContains(t, strings.Join(container(t, &pp, "backup").Command, " "), "--s3-")
}

// TestRestoreFromS3: restoreFrom.s3 gives node 0's restore step the download flags, an emptyDir to download
// into (instead of the read-only PVC), the credentials Secret (two keys) and the CA; no other node gets them,
// and the data pods' NetworkPolicy lets them reach the endpoint's port (9000 here; 443 for https without one).
func TestRestoreFromS3(t *testing.T) {
	const vals = `
persistence: {enabled: true}
restoreFrom:
  file: cache-valkey-20261203T030000Z.rdb
  s3: {endpoint: "https://minio.storage.svc:9000", bucket: valkey-backups, prefix: valkey/cache, forcePathStyle: true, existingSecret: backup-s3, caSecret: storage-ca}
`
	objs := decode(t, mustRender(t, "valkey", vals))
	for _, s := range objs.statefulSets() {
		spec := &s.Spec.Template.Spec
		if s.Name != valkeyF+"-0" {
			assert.NotContains(t, secretVolumes(spec), "backup-s3", s.Name)
			continue
		}
		c := container(t, spec, "restore")
		cmd := strings.Join(c.Command, " ")
		for _, want := range []string{"--from /restore/cache-valkey-20261203T030000Z.rdb", "--s3-endpoint https://minio.storage.svc:9000",
			"--s3-bucket valkey-backups", "--s3-prefix valkey/cache", "--s3-force-path-style",
			"--s3-credentials-dir /etc/valkey-ha/s3-credentials", "--s3-ca-file /etc/valkey-ha/s3-ca/ca.crt"} {
			assert.Contains(t, cmd, want)
		}
		vols := map[string]corev1.Volume{}
		for _, v := range spec.Volumes {
			vols[v.Name] = v
		}
		require.NotNil(t, vols["restore"].EmptyDir, "the download goes to an emptyDir")
		require.NotNil(t, vols["s3-credentials"].Secret)
		assert.Equal(t, "backup-s3", vols["s3-credentials"].Secret.SecretName)
		assert.Len(t, vols["s3-credentials"].Secret.Items, 2)
		assert.Equal(t, "storage-ca", vols["s3-ca"].Secret.SecretName)
		for _, o := range allContainers(spec) {
			if o.Name == "restore" {
				continue
			}
			for _, m := range o.VolumeMounts {
				assert.NotEqual(t, "s3-credentials", m.Name, "%s must not mount the S3 credentials", o.Name)
			}
		}
	}
	var port bool
	for _, o := range objs.ofKind("NetworkPolicy") {
		for _, eg := range o.(*networkingv1.NetworkPolicy).Spec.Egress {
			if len(eg.To) == 0 && len(eg.Ports) == 1 && eg.Ports[0].Port.IntValue() == 9000 {
				port = true
			}
		}
	}
	assert.True(t, port, "the data pods may reach the S3 endpoint's port")
	https := decode(t, mustRender(t, "valkey", strings.Replace(vals, "minio.storage.svc:9000", "s3.example.internal", 1)))
	var p443 bool
	for _, o := range https.ofKind("NetworkPolicy") {
		for _, eg := range o.(*networkingv1.NetworkPolicy).Spec.Egress {
			if len(eg.To) == 0 && len(eg.Ports) == 1 && eg.Ports[0].Port.IntValue() == 443 {
				p443 = true
			}
		}
	}
	assert.True(t, p443, "https without a port: 443")
	plain := decode(t, mustRender(t, "valkey", backupValues))
	for _, o := range plain.ofKind("NetworkPolicy") {
		for _, eg := range o.(*networkingv1.NetworkPolicy).Spec.Egress {
			assert.NotEmpty(t, eg.To, "without restoreFrom.s3 no egress rule is open to any address")
		}
	}
}
