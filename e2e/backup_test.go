//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"regexp"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestBackupRestoreIntoNewInstance (issue 28, README "Backups and restore"): an instance with backup.enabled
// and keys; a Job created from its CronJob (as `kubectl create job --from=cronjob/...` does) takes the snapshot
// from the replica onto a PVC; a second release installed with restoreFrom that file starts with every key on
// every node: node 0 loaded it, node 1 replicated it. No Sentinel release (the cold-start path; the monitored
// path is the same boot step once the data is on disk).
func TestBackupRestoreIntoNewInstance(t *testing.T) {
	maybeParallel(t)
	const keys = 3000
	start := time.Now()
	d := Deploy(t, "bkp", DeployOpts{NoSentinel: true, Replicas: 1, Releases: []string{"src"},
		DataExtra: `persistence: {enabled: true, size: 1Gi}
users: [{name: app, access: readwrite, keys: ["*"]}]
backup: {enabled: true, persistentVolumeClaim: backups, schedule: "0 0 1 1 *", retention: 2}`})
	src := d.I()
	ctx := t.Context()
	pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "backups"},
		Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("256Mi")}}}}
	if _, err := kube.CoreV1().PersistentVolumeClaims(d.NS).Create(ctx, pvc, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create PVC backups: %v", err)
	}
	WaitPodsReady(t, d.NS, src.DataSelector(), src.Nodes(), 5*time.Minute)
	appPW := waitSecretKey(t, d, src.F+"-user-app", "password")
	Eventually(t, 2*time.Minute, time.Second, "node 0 is primary, node 1's link is up", func(ctx context.Context) (bool, error) {
		r, err := src.ReplRole(ctx, 1)
		if err != nil || !r.LinkUp {
			return false, fmt.Errorf("%s: %+v %v", src.Pod(1), r, err)
		}
		return true, nil
	})
	src.LoadKeys(t, src.Pod(0), "app", appPW, keys)
	src.WaitDBSize(t, keys, time.Minute)

	// kubectl create job --from=cronjob/src-valkey-backup
	cj, err := kube.BatchV1().CronJobs(d.NS).Get(ctx, src.F+"-backup", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get CronJob: %v", err)
	}
	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: src.F + "-backup-manual", Labels: cj.Spec.JobTemplate.Labels},
		Spec: cj.Spec.JobTemplate.Spec}
	if _, err := kube.BatchV1().Jobs(d.NS).Create(ctx, job, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create Job from CronJob: %v", err)
	}
	t0 := time.Now()
	Eventually(t, 3*time.Minute, 2*time.Second, "the backup Job succeeds", func(ctx context.Context) (bool, error) {
		j, err := kube.BatchV1().Jobs(d.NS).Get(ctx, job.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if j.Status.Failed > 0 {
			DumpNamespace(t, d.NS)
			t.Fatalf("backup Job failed: %+v", j.Status)
		}
		if j.Status.Succeeded == 0 {
			return false, fmt.Errorf("Job status %+v", j.Status)
		}
		return true, nil
	})
	t.Logf("backup Job done in %s", time.Since(t0).Round(time.Second))
	pods, err := ListPods(ctx, d.NS, "job-name="+job.Name)
	if err != nil || len(pods) == 0 {
		t.Fatalf("backup Job pods: %v (%d)", err, len(pods))
	}
	var file string
	for _, p := range pods {
		raw, err := kube.CoreV1().Pods(d.NS).GetLogs(p.Name, &corev1.PodLogOptions{Container: "backup"}).DoRaw(ctx)
		if err != nil {
			continue
		}
		t.Logf("backup log of %s: %s", p.Name, raw)
		if m := regexp.MustCompile(`"file":"/backup/(` + regexp.QuoteMeta(src.F) + `-\d{8}T\d{6}Z\.rdb)"`).FindSubmatch(raw); m != nil {
			file = string(m[1])
		}
		if !regexp.MustCompile(`"node":"` + regexp.QuoteMeta(src.FQDN(1))).Match(raw) {
			t.Errorf("the snapshot was not taken from the replica %s: %s", src.FQDN(1), raw)
		}
	}
	if file == "" {
		t.Fatalf("no backup file named in the Job's log")
	}

	// a new release from that backup
	dst := &Instance{d: d, Release: "dst", F: valkeyFullname("dst"), Replicas: 1,
		Extra: fmt.Sprintf("persistence: {enabled: true, size: 1Gi}\nrestoreFrom: {persistentVolumeClaim: backups, file: %s}\n", file)}
	d.Instances = append(d.Instances, dst)
	t1 := time.Now()
	d.Helm.Install(dst.Release, ChartPath("valkey"), dst.Values(), HelmOpts{Timeout: installTimeout})
	WaitPodsReady(t, d.NS, dst.DataSelector(), dst.Nodes(), 5*time.Minute)
	dst.WaitDBSize(t, keys, 2*time.Minute)
	t.Logf("restored instance holds %d keys on every node %s after its install", keys, time.Since(t1).Round(time.Second))
	r0, err := dst.ReplRole(ctx, 0)
	if err != nil || r0.Role != "master" {
		t.Fatalf("%s is not the primary: %+v %v", dst.Pod(0), r0, err)
	}
	r1, err := dst.ReplRole(ctx, 1)
	if err != nil || r1.Role == "master" || !r1.LinkUp {
		t.Fatalf("%s is not a linked replica: %+v %v", dst.Pod(1), r1, err)
	}
	t.Logf("whole test %s", time.Since(start).Round(time.Second))
}
