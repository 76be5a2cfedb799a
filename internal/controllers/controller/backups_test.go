package controller

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/valkey-ha/valkey-ha/internal/chartapi/contract"
	"github.com/valkey-ha/valkey-ha/internal/chartapi/spec"
	"github.com/valkey-ha/valkey-ha/internal/chartapi/status"
	"github.com/valkey-ha/valkey-ha/internal/controllers/metrics"
	"github.com/valkey-ha/valkey-ha/internal/podsteps/backup"
)

// backupPod is a backup Job pod of instance vk as the kubelet reports it: its phase and the backup
// container's exit code and termination message.
func backupPod(name string, phase corev1.PodPhase, exit int32, msg string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns,
			Labels: map[string]string{contract.LabelComponent: contract.ComponentBackup, contract.LabelBackupOf: "vk"}},
		Status: corev1.PodStatus{Phase: phase, ContainerStatuses: []corev1.ContainerStatus{{Name: "backup",
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: exit, Message: msg}}}}},
	}
}

func metaJSON(t *testing.T, instance string, size int64, dur float64, end time.Time) string {
	b, err := json.Marshal(backup.Meta{Version: backup.MetaVersion, Instance: instance, File: instance + "-20261203T030000Z.rdb",
		Size: size, DurationSeconds: dur, UploadSeconds: dur / 2, FinishedAt: end})
	require.NoError(t, err)
	return string(b)
}

// TestBackupMetricsFromTheJobPods: the last successful backup's size, snapshot and upload durations and end time become the
// valkey_ha_backup_* gauges and the status document's lastBackup, read from the newest succeeded backup pod's termination message; failed pods,
// garbage messages and another instance's backups are skipped; the pods are listed at most once a minute, a
// failed List changes nothing, and the gauges keep the newest backup once its pod is gone.
func TestBackupMetricsFromTheJobPods(t *testing.T) {
	end := time.Date(2026, 12, 3, 3, 0, 12, 0, time.UTC)
	cs := fake.NewClientset(
		backupPod("b-old", corev1.PodSucceeded, 0, metaJSON(t, "vk", 1000, 1.5, end.Add(-24*time.Hour))),
		backupPod("b-new", corev1.PodSucceeded, 0, metaJSON(t, "vk", 2048, 3.25, end)),
		backupPod("b-failed", corev1.PodFailed, 1, "backup failed: backup.s3.existingSecret: refused"),
		backupPod("b-garbage", corev1.PodSucceeded, 0, "{not json"),
		backupPod("b-other", corev1.PodSucceeded, 0, metaJSON(t, "other", 9999, 9, end.Add(time.Hour))),
	)
	m := metrics.New()
	c := &InstanceController{cs: cs, metrics: m, log: quietLog()}
	mem := &instanceMemory{}
	in := spec.Instance{Name: "vk", Namespace: ns}
	c.observeBackups(context.Background(), in, mem)
	key := ns + "/vk"
	assert.Equal(t, 2048.0, testutil.ToFloat64(m.BackupLastSizeBytes.WithLabelValues(key)))
	assert.Equal(t, 3.25, testutil.ToFloat64(m.BackupLastDurationSeconds.WithLabelValues(key)))
	assert.Equal(t, 1.625, testutil.ToFloat64(m.BackupLastUploadSeconds.WithLabelValues(key)), "the upload's duration")
	assert.Equal(t, float64(end.Unix()), testutil.ToFloat64(m.BackupLastSuccess.WithLabelValues(key)))
	assert.Equal(t, &status.Backup{File: "vk-20261203T030000Z.rdb", FinishedAt: end, SizeBytes: 2048, DurationSeconds: 3.25, UploadSeconds: 1.625},
		backupStatus(mem.lastBackup), "the status document's lastBackup")
	assert.Nil(t, backupStatus(backup.Meta{}), "no lastBackup before the first backup")

	lists := func() int {
		n := 0
		for _, a := range cs.Actions() {
			if a.GetVerb() == "list" && a.GetResource().Resource == "pods" {
				n++
			}
		}
		return n
	}
	c.observeBackups(context.Background(), in, mem)
	assert.Equal(t, 1, lists(), "at most one List a minute")

	// the pod is gone (Job history) and the List fails: the gauges keep the newest backup
	require.NoError(t, cs.CoreV1().Pods(ns).Delete(context.Background(), "b-new", metav1.DeleteOptions{}))
	cs.PrependReactor("list", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, errors.New("injected: the API server is away")
	})
	mem.backupListedAt = time.Time{}
	c.observeBackups(context.Background(), in, mem)
	assert.Equal(t, 2048.0, testutil.ToFloat64(m.BackupLastSizeBytes.WithLabelValues(key)))
	cs.ReactionChain = cs.ReactionChain[1:]
	mem.backupListedAt = time.Time{}
	c.observeBackups(context.Background(), in, mem)
	assert.Equal(t, 2048.0, testutil.ToFloat64(m.BackupLastSizeBytes.WithLabelValues(key)), "an older backup never replaces a newer one")

	m.ForgetInstance(key)
	assert.Equal(t, 0, testutil.CollectAndCount(m.BackupLastSizeBytes), "a deleted instance releases its backup series")
}
