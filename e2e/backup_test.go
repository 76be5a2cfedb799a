//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// TestBackupRestoreIntoNewInstance (issue 28, README "Backups and restore"): an instance with backup.enabled
// and keys; a Job created from its CronJob (as `kubectl create job --from=cronjob/...` does) takes the snapshot
// from the replica onto a PVC and uploads it to an S3-compatible server in the namespace (versitygw, plain http,
// through backup.s3 and a credentials Secret); the bucket then holds `<prefix>/<file>` and its metadata object.
// Two releases installed side by side, one with restoreFrom the volume's file and one with restoreFrom.s3 that
// object, each start with every key on every node: node 0 loaded it, node 1 replicated it. No Sentinel release
// (the cold-start path; the monitored path is the same boot step once the data is on disk). NetworkPolicy: the
// backup Job's pods are selected by no policy, and the data pods' egress to restoreFrom.s3's port is a render
// test (templates-tests TestRestoreFromS3); the local cluster's bridge CNI enforces none.
func TestBackupRestoreIntoNewInstance(t *testing.T) {
	maybeParallel(t)
	const keys = 3000
	start := time.Now()
	d := Deploy(t, "bkp", DeployOpts{NoSentinel: true, Replicas: 1, Releases: []string{"src"},
		DataExtra: `persistence: {enabled: true, size: 1Gi}
users: [{name: app, access: readwrite, keys: ["*"]}]
backup:
  enabled: true
  persistentVolumeClaim: backups
  schedule: "0 0 1 1 *"
  retention: 2
  s3: {endpoint: "` + s3Endpoint + `", bucket: ` + s3Bucket + `, prefix: src, forcePathStyle: true, existingSecret: ` + s3Secret + `}`})
	src := d.I()
	ctx := t.Context()
	WaitForCPU(t, s3CPU, 5*time.Minute)
	s3Ready := startS3(t, d.NS)
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

	s3Ready()
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
	uploaded := false
	for _, p := range pods {
		raw, err := kube.CoreV1().Pods(d.NS).GetLogs(p.Name, &corev1.PodLogOptions{Container: "backup"}).DoRaw(ctx)
		if err != nil {
			continue
		}
		t.Logf("backup log of %s: %s", p.Name, raw)
		if m := regexp.MustCompile(`"file":"/backup/(` + regexp.QuoteMeta(src.F) + `-\d{8}T\d{6}Z\.rdb)"`).FindSubmatch(raw); m != nil {
			file = string(m[1])
		}
		if regexp.MustCompile(`"msg":"backup uploaded".*"bucket":"` + s3Bucket + `","key":"src/` + regexp.QuoteMeta(src.F) + `-\d{8}T\d{6}Z\.rdb"`).Match(raw) {
			uploaded = true
		}
		if !regexp.MustCompile(`"node":"` + regexp.QuoteMeta(src.FQDN(1))).Match(raw) {
			t.Errorf("the snapshot was not taken from the replica %s: %s", src.FQDN(1), raw)
		}
	}
	if file == "" {
		t.Fatalf("no backup file named in the Job's log")
	}
	if !uploaded {
		t.Errorf("the Job's log does not say the backup was uploaded to %s/src/", s3Bucket)
	}
	// the objects as the S3 server stores them (versitygw's posix backend: one file per object)
	want := []string{"src/" + file, "src/" + file + ".json"}
	if got := s3Objects(t, d.NS); strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("bucket %s holds %q, want %q", s3Bucket, got, want)
	}

	// two new releases from that backup, installed side by side: one from the volume, one from the bucket
	dst := &Instance{d: d, Release: "dst", F: valkeyFullname("dst"), Replicas: 1,
		Extra: fmt.Sprintf("persistence: {enabled: true, size: 1Gi}\nrestoreFrom: {persistentVolumeClaim: backups, file: %s}\n", file)}
	fromS3 := &Instance{d: d, Release: "dst-s3", F: valkeyFullname("dst-s3"), Replicas: 1,
		Extra: fmt.Sprintf("persistence: {enabled: true, size: 1Gi}\nrestoreFrom: {file: %s, s3: {endpoint: %q, bucket: %s, prefix: src, forcePathStyle: true, existingSecret: %s}}\n",
			file, s3Endpoint, s3Bucket, s3Secret)}
	d.Instances = append(d.Instances, dst, fromS3)
	// Deploy waited for room for src only (requests = limits). Per restored release: node 0 250m (its restore
	// init container's 250m outweighs its containers), node 1, the controller 100m, the credentials Job 50m.
	WaitForCPU(t, 2*(250+(50+dnsCacheCPU())+100+50), 5*time.Minute)
	t1 := time.Now()
	d.Helm.Install(fromS3.Release, ChartPath("valkey"), fromS3.Values(), HelmOpts{Timeout: installTimeout, NoWait: true})
	d.Helm.Install(dst.Release, ChartPath("valkey"), dst.Values(), HelmOpts{Timeout: installTimeout})
	for _, in := range []*Instance{dst, fromS3} {
		WaitPodsReady(t, d.NS, in.DataSelector(), in.Nodes(), 5*time.Minute)
		in.WaitDBSize(t, keys, 2*time.Minute)
		t.Logf("%s (restored from %s) holds %d keys on every node %s after its install", in.F,
			map[bool]string{true: "S3", false: "the volume"}[in == fromS3], keys, time.Since(t1).Round(time.Second))
		r0, err := in.ReplRole(ctx, 0)
		if err != nil || r0.Role != "master" {
			t.Fatalf("%s is not the primary: %+v %v", in.Pod(0), r0, err)
		}
		r1, err := in.ReplRole(ctx, 1)
		if err != nil || r1.Role == "master" || !r1.LinkUp {
			t.Fatalf("%s is not a linked replica: %+v %v", in.Pod(1), r1, err)
		}
	}
	t.Logf("whole test %s", time.Since(start).Round(time.Second))
}

// The S3-compatible server of TestBackupRestoreIntoNewInstance: versitygw (the image hack/images.sh builds from
// the binary hack/install-s3.sh installs; E2E_S3_IMAGE overrides it) in pod and Service s3, port s3Port, plain
// http inside the namespace, its root credentials in Secret s3Secret (the keys the chart's backup.s3 reads).
const (
	s3Port     = 7070
	s3Bucket   = "valkey-backups"
	s3Secret   = "s3-credentials"
	s3Endpoint = "http://s3:7070" // the namespace's own Service, through the pods' DNS search list
	s3DataDir  = "/data"          // the posix backend's root: one directory per bucket
	s3CPU      = 100              // millicores, the pod's limit = request
)

// startS3 creates the credentials Secret, the versitygw pod (its bucket directory made before the server
// starts, as internal/testsupport/s3test does) and its Service in ns, and returns a function that waits until the pod is Ready.
func startS3(t testing.TB, ns string) (waitReady func()) {
	t.Helper()
	ctx := t.Context()
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: s3Secret},
		StringData: map[string]string{"accessKeyId": "valkeyha-e2e", "secretAccessKey": "valkeyha-e2e-secret-" + ns}}
	if _, err := kube.CoreV1().Secrets(ns).Create(ctx, sec, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create Secret %s: %v", s3Secret, err)
	}
	no, yes, uid := false, true, int64(65532)
	env := func(name, key string) corev1.EnvVar {
		return corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: s3Secret}, Key: key}}}
	}
	labels := map[string]string{"app": "e2e-s3"}
	// the local build is never pulled (its name is in no registry); an E2E_S3_IMAGE of your own may be
	image, pull := "valkey-ha-e2e/versitygw:local", corev1.PullNever
	if v := os.Getenv("E2E_S3_IMAGE"); v != "" {
		image, pull = v, corev1.PullIfNotPresent
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "s3", Labels: labels},
		Spec: corev1.PodSpec{
			TerminationGracePeriodSeconds: new(int64),
			AutomountServiceAccountToken:  &no,
			EnableServiceLinks:            &no,
			SecurityContext: &corev1.PodSecurityContext{
				RunAsNonRoot: &yes, RunAsUser: &uid, RunAsGroup: &uid, FSGroup: &uid,
				SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
			},
			Containers: []corev1.Container{{
				Name: "versitygw", Image: image, ImagePullPolicy: pull,
				Command: []string{"/bin/sh", "-c", fmt.Sprintf("mkdir -p %s/%s && exec /versitygw --port :%d posix %s",
					s3DataDir, s3Bucket, s3Port, s3DataDir)},
				Env:   []corev1.EnvVar{env("ROOT_ACCESS_KEY_ID", "accessKeyId"), env("ROOT_SECRET_ACCESS_KEY", "secretAccessKey")},
				Ports: []corev1.ContainerPort{{Name: "s3", ContainerPort: s3Port}},
				SecurityContext: &corev1.SecurityContext{
					AllowPrivilegeEscalation: &no, ReadOnlyRootFilesystem: &yes,
					Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
				},
				Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{
					corev1.ResourceCPU: *resource.NewMilliQuantity(s3CPU, resource.DecimalSI), corev1.ResourceMemory: resource.MustParse("256Mi")}},
				ReadinessProbe: &corev1.Probe{
					ProbeHandler:  corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(s3Port)}},
					PeriodSeconds: 1,
				},
				VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: s3DataDir}, {Name: "tmp", MountPath: "/tmp"}},
			}},
			Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
				{Name: "tmp", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
		},
	}
	if _, err := kube.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create pod s3: %v", err)
	}
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "s3"}, Spec: corev1.ServiceSpec{Selector: labels,
		Ports: []corev1.ServicePort{{Name: "s3", Port: s3Port, TargetPort: intstr.FromString("s3")}}}}
	if _, err := kube.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create Service s3: %v", err)
	}
	return func() { WaitPodsReady(t, ns, "app=e2e-s3", 1, 2*time.Minute) }
}

// s3Objects lists the objects of s3Bucket as versitygw's posix backend stores them (files under the bucket's
// directory, its .sgwtmp staging directory left out), sorted.
func s3Objects(t testing.TB, ns string) []string {
	t.Helper()
	dir := s3DataDir + "/" + s3Bucket
	out, stderr, err := Exec(t.Context(), ns, "s3", "versitygw", nil, "find", dir, "-path", dir+"/.sgwtmp", "-prune", "-o", "-type", "f", "-print")
	if err != nil {
		t.Fatalf("find %s in pod s3: %v %s", dir, err, stderr)
	}
	var objs []string
	for _, l := range strings.Fields(out) {
		objs = append(objs, strings.TrimPrefix(l, dir+"/"))
	}
	sort.Strings(objs)
	return objs
}
