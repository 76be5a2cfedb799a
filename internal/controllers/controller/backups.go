package controller

import (
	"context"
	"encoding/json"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/valkey-ha/valkey-ha/internal/chartapi/contract"
	"github.com/valkey-ha/valkey-ha/internal/chartapi/spec"
	"github.com/valkey-ha/valkey-ha/internal/chartapi/status"
	"github.com/valkey-ha/valkey-ha/internal/podsteps/backup"
)

// backupListEvery bounds the API reads of the backup gauges: one pod List per instance and minute (the
// backup pods are not in the informer cache: they do not carry the instance label the per-instance cache
// selects on).
const backupListEvery = time.Minute

// observeBackups exports the last successful backup of in (valkey_ha_backup_* gauges): it lists the backup
// Job's pods (LabelBackupOf = F) at most once per backupListEvery and reads the newest succeeded one's
// termination message, the backup's metadata (`valkey-sentinel-ctl backup` writes it on success). A failed
// List is logged and retried on a later pass; the gauges keep the newest backup seen.
func (c *InstanceController) observeBackups(ctx context.Context, in spec.Instance, mem *instanceMemory) {
	if time.Since(mem.backupListedAt) < backupListEvery {
		return
	}
	mem.backupListedAt = time.Now()
	sel := labels.SelectorFromSet(labels.Set{contract.LabelComponent: contract.ComponentBackup, contract.LabelBackupOf: in.Name})
	l, err := c.cs.CoreV1().Pods(in.Namespace).List(ctx, metav1.ListOptions{LabelSelector: sel.String()})
	if err != nil {
		c.log.Debug("list backup pods", "instance", in.NamespacedName().String(), "err", err)
		return
	}
	m, ok := latestBackup(l.Items, in.Name)
	if !ok || !m.FinishedAt.After(mem.lastBackup.FinishedAt) {
		return
	}
	mem.lastBackup = m
	c.metrics.ObserveBackup(in.NamespacedName().String(), m.Size, m.DurationSeconds, m.UploadSeconds, m.FinishedAt)
}

// backupStatus is the status document's view of the newest backup seen: nil before the first.
func backupStatus(m backup.Meta) *status.Backup {
	if m.FinishedAt.IsZero() {
		return nil
	}
	return &status.Backup{File: m.File, FinishedAt: m.FinishedAt, SizeBytes: m.Size, DurationSeconds: m.DurationSeconds, UploadSeconds: m.UploadSeconds}
}

// latestBackup returns the metadata of the newest successful backup of instance among pods: a Succeeded pod
// whose backup container terminated with exit code 0 and a termination message that parses as backup.Meta of
// this instance (MetaVersion). Anything else (failed, running, garbage) is skipped.
func latestBackup(pods []corev1.Pod, instance string) (backup.Meta, bool) {
	var best backup.Meta
	found := false
	for i := range pods {
		p := &pods[i]
		if p.Status.Phase != corev1.PodSucceeded {
			continue
		}
		for _, s := range p.Status.ContainerStatuses {
			t := s.State.Terminated
			if s.Name != "backup" || t == nil || t.ExitCode != 0 {
				continue
			}
			var m backup.Meta
			if json.Unmarshal([]byte(t.Message), &m) != nil || m.Version != backup.MetaVersion || m.Instance != instance || m.FinishedAt.IsZero() {
				continue
			}
			if !found || m.FinishedAt.After(best.FinishedAt) {
				best, found = m, true
			}
		}
	}
	return best, found
}
