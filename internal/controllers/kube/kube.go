// Package kube is the Kubernetes glue of the controllers: clients, label-filtered informers, pod label patches,
// ConfigMap upserts, Secret reads and events. It decides nothing.
package kube

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"strings"
	"time"

	"github.com/valkey-ha/valkey-ha/internal/chartapi/contract"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/record"
)

// Config returns the in-cluster config, or the one named by kubeconfig / $KUBECONFIG.
func Config(kubeconfig string) (*rest.Config, error) {
	if kubeconfig == "" {
		kubeconfig = os.Getenv("KUBECONFIG")
	}
	if kubeconfig == "" {
		if c, err := rest.InClusterConfig(); err == nil {
			return c, nil
		}
	}
	c, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("kubeconfig %q: %w", kubeconfig, err)
	}
	return c, nil
}

// NewClient builds a clientset from Config.
func NewClient(kubeconfig string) (kubernetes.Interface, error) {
	c, err := Config(kubeconfig)
	if err != nil {
		return nil, err
	}
	c.UserAgent = "valkey-sentinel-ctl"
	cs, err := kubernetes.NewForConfig(c)
	if err != nil {
		return nil, fmt.Errorf("clientset: %w", err)
	}
	return cs, nil
}

// NewInformerFactory returns a namespaced informer factory that lists and watches only objects labelled
// app.kubernetes.io/part-of=valkey-ha (plus extra, a label selector ANDed to it), so the cache holds only this
// project's objects.
func NewInformerFactory(cs kubernetes.Interface, namespace, extra string, resync time.Duration) informers.SharedInformerFactory {
	sel := contract.LabelPartOf + "=" + contract.PartOf
	if extra != "" {
		sel += "," + extra
	}
	return informers.NewSharedInformerFactoryWithOptions(cs, resync, informers.WithNamespace(namespace),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = sel }))
}

// PatchPodRole sets the pod's valkey.io/role label to role, or removes it when role is "" (JSON merge patch).
// resourceVersion, when not empty, is the version of the pod the decision was made from: the patch carries
// it, so the API server refuses it with a Conflict when the pod changed or was replaced since (a stale
// informer cache), instead of labelling another pod of the same name.
func PatchPodRole(ctx context.Context, cs kubernetes.Interface, namespace, pod, resourceVersion, role string) error {
	var val any
	if role != "" {
		val = role
	}
	md := map[string]any{"labels": map[string]any{contract.LabelRole: val}}
	if resourceVersion != "" {
		md["resourceVersion"] = resourceVersion
	}
	body, _ := json.Marshal(map[string]any{"metadata": md})
	_, err := cs.CoreV1().Pods(namespace).Patch(ctx, pod, types.MergePatchType, body, metav1.PatchOptions{})
	if err != nil {
		return fmt.Errorf("patch pod %s/%s label %s=%q: %w", namespace, pod, contract.LabelRole, role, err)
	}
	return nil
}

// DeletePod deletes the pod the caller observed: uid and resourceVersion (each when not empty) are sent as
// preconditions, so a pod replaced or changed since it was observed is not deleted (409 Conflict).
func DeletePod(ctx context.Context, cs kubernetes.Interface, namespace, pod string, uid types.UID, resourceVersion string) error {
	var pre metav1.Preconditions
	if uid != "" {
		pre.UID = &uid
	}
	if resourceVersion != "" {
		pre.ResourceVersion = &resourceVersion
	}
	if err := cs.CoreV1().Pods(namespace).Delete(ctx, pod, metav1.DeleteOptions{Preconditions: &pre}); err != nil {
		return fmt.Errorf("delete pod %s/%s (uid %s, resourceVersion %s): %w", namespace, pod, uid, resourceVersion, err)
	}
	return nil
}

// ApplyConfigMap creates the ConfigMap, or updates its data, labels and annotations when they differ. It
// returns whether anything was written.
func ApplyConfigMap(ctx context.Context, cs kubernetes.Interface, want *corev1.ConfigMap) (bool, error) {
	return writeConfigMap(ctx, cs, want, true)
}

// UpdateConfigMap updates an existing ConfigMap's data, labels and annotations when they differ, and never
// creates one: a ConfigMap that does not exist, or is deleted before the update lands (garbage collection of
// an uninstalled release), is left absent with (false, nil). It returns whether anything was written.
func UpdateConfigMap(ctx context.Context, cs kubernetes.Interface, want *corev1.ConfigMap) (bool, error) {
	wrote, err := writeConfigMap(ctx, cs, want, false)
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	return wrote, err
}

func writeConfigMap(ctx context.Context, cs kubernetes.Interface, want *corev1.ConfigMap, create bool) (bool, error) {
	api := cs.CoreV1().ConfigMaps(want.Namespace)
	cur, err := api.Get(ctx, want.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) && create {
		if _, err := api.Create(ctx, want, metav1.CreateOptions{}); err != nil {
			return false, fmt.Errorf("create configmap %s/%s: %w", want.Namespace, want.Name, err)
		}
		return true, nil
	}
	if err != nil {
		return false, fmt.Errorf("get configmap %s/%s: %w", want.Namespace, want.Name, err)
	}
	if maps.Equal(cur.Data, want.Data) && subset(want.Labels, cur.Labels) && subset(want.Annotations, cur.Annotations) {
		return false, nil
	}
	next := cur.DeepCopy()
	next.Data = want.Data
	if next.Labels == nil {
		next.Labels = map[string]string{}
	}
	maps.Copy(next.Labels, want.Labels)
	if len(want.Annotations) > 0 {
		if next.Annotations == nil {
			next.Annotations = map[string]string{}
		}
		maps.Copy(next.Annotations, want.Annotations)
	}
	if len(want.OwnerReferences) > 0 {
		next.OwnerReferences = want.OwnerReferences
	}
	if _, err := api.Update(ctx, next, metav1.UpdateOptions{}); err != nil {
		return false, fmt.Errorf("update configmap %s/%s: %w", want.Namespace, want.Name, err)
	}
	return true, nil
}

func subset(want, have map[string]string) bool {
	for k, v := range want {
		if have[k] != v {
			return false
		}
	}
	return true
}

// DeleteConfigMap deletes a ConfigMap; a missing one is not an error.
func DeleteConfigMap(ctx context.Context, cs kubernetes.Interface, namespace, name string) error {
	err := cs.CoreV1().ConfigMaps(namespace).Delete(ctx, name, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete configmap %s/%s: %w", namespace, name, err)
	}
	return nil
}

// ReadSecretKey returns one key of a Secret, trimmed of surrounding whitespace.
func ReadSecretKey(ctx context.Context, cs kubernetes.Interface, namespace, name, key string) (string, error) {
	s, err := cs.CoreV1().Secrets(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return "", fmt.Errorf("get secret %s/%s: %w", namespace, name, err)
	}
	v, ok := s.Data[key]
	if !ok {
		return "", fmt.Errorf("secret %s/%s has no key %q", namespace, name, key)
	}
	return strings.TrimSpace(string(v)), nil
}

// ReadSecret returns every key of a Secret, each trimmed of surrounding whitespace.
func ReadSecret(ctx context.Context, cs kubernetes.Interface, namespace, name string) (map[string]string, error) {
	s, err := cs.CoreV1().Secrets(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("get secret %s/%s: %w", namespace, name, err)
	}
	out := make(map[string]string, len(s.Data))
	for k, v := range s.Data {
		out[k] = strings.TrimSpace(string(v))
	}
	return out, nil
}

// EnsureSecret returns Secret want.Name of want.Namespace, creating want first when it does not exist. An
// existing Secret is returned as it is, never changed: one the platform team created beforehand (with the same
// keys) wins, and so does one an earlier run generated. Two callers racing to create it read the same one
// (the loser's AlreadyExists reads it again). created reports whether this call created it.
func EnsureSecret(ctx context.Context, cs kubernetes.Interface, want *corev1.Secret) (s *corev1.Secret, created bool, err error) {
	api := cs.CoreV1().Secrets(want.Namespace)
	s, err = api.Get(ctx, want.Name, metav1.GetOptions{})
	if err == nil {
		return s, false, nil
	}
	if !apierrors.IsNotFound(err) {
		return nil, false, fmt.Errorf("get secret %s/%s: %w", want.Namespace, want.Name, err)
	}
	s, err = api.Create(ctx, want, metav1.CreateOptions{})
	if err == nil {
		return s, true, nil
	}
	if !apierrors.IsAlreadyExists(err) {
		return nil, false, fmt.Errorf("create secret %s/%s: %w", want.Namespace, want.Name, err)
	}
	s, err = api.Get(ctx, want.Name, metav1.GetOptions{})
	if err != nil {
		return nil, false, fmt.Errorf("get secret %s/%s: %w", want.Namespace, want.Name, err)
	}
	return s, false, nil
}

// OwnerRef returns a controller-less owner reference to a ConfigMap, so the owned object is garbage
// collected with it (status and Sentinel info go away on helm uninstall).
func OwnerRef(cm *corev1.ConfigMap) metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: "v1", Kind: "ConfigMap", Name: cm.Name, UID: cm.UID}
}

// NewRecorder returns an event recorder that writes Events as component, each in the namespace of the object
// it is about (a controller serving several namespaces reports on their objects there; docs/fleet.md).
func NewRecorder(cs kubernetes.Interface, component string) (record.EventRecorder, func()) {
	b := record.NewBroadcaster()
	b.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: cs.CoreV1().Events("")})
	return b.NewRecorder(scheme.Scheme, corev1.EventSource{Component: component}), b.Shutdown
}

// PodReady reports the pod's Ready condition.
func PodReady(p *corev1.Pod) bool {
	if p == nil || p.DeletionTimestamp != nil {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// PodUnschedulable reports whether the scheduler found no node for p (condition PodScheduled False, reason
// Unschedulable): the pod never ran, so it holds no data and serves nothing.
func PodUnschedulable(p *corev1.Pod) bool {
	if p == nil {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled {
			return c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable
		}
	}
	return false
}

// PodNotRunning says why a pod that is not Running is not, for the status and the logs: "pod not running: "
// then its phase and, when the pod says why, the first of: the scheduler's PodScheduled=False condition (reason:
// message, e.g. "Unschedulable: 0/1 nodes are available: 1 Insufficient cpu."), a waiting or terminated init
// container, a waiting container (reason: message, e.g. "ImagePullBackOff", "CrashLoopBackOff"). terminating
// marks a pod past its deletion deadline ("deleted, past its grace period"). Never empty.
func PodNotRunning(p *corev1.Pod, terminating bool) string {
	if terminating {
		return "pod not running: deleted, past its grace period"
	}
	msg := "pod not running: " + string(p.Status.Phase)
	if p.Status.Phase == "" {
		msg = "pod not running"
	}
	reason := func(r, m string) string {
		if m == "" {
			return r
		}
		return r + ": " + strings.TrimSpace(m)
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse {
			return msg + ", " + reason(c.Reason, c.Message)
		}
	}
	for _, s := range p.Status.InitContainerStatuses {
		switch {
		case s.State.Waiting != nil && s.State.Waiting.Reason != "" && s.State.Waiting.Reason != "PodInitializing":
			return msg + ", init container " + s.Name + " " + reason(s.State.Waiting.Reason, s.State.Waiting.Message)
		case s.State.Terminated != nil && s.State.Terminated.ExitCode != 0:
			return msg + ", init container " + s.Name + " " + reason(s.State.Terminated.Reason, s.State.Terminated.Message)
		}
	}
	for _, s := range p.Status.ContainerStatuses {
		if s.State.Waiting != nil && s.State.Waiting.Reason != "" && s.State.Waiting.Reason != "ContainerCreating" {
			return msg + ", container " + s.Name + " " + reason(s.State.Waiting.Reason, s.State.Waiting.Message)
		}
	}
	return msg
}
