package nscache

import (
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	appslisters "k8s.io/client-go/listers/apps/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
)

// ConfigMaps returns a lister over every served namespace's ConfigMaps. ConfigMaps(ns).Get answers NotFound
// for a namespace that is not served and an *UnreadableError for one whose cache has not synced; List over
// all namespaces skips unsynced ones (see Namespaces).
func (c *Cache) ConfigMaps() corelisters.ConfigMapLister { return cmLister{c} }

// Pods returns a lister over every served namespace's pods (as ConfigMaps).
func (c *Cache) Pods() corelisters.PodLister { return podLister{c} }

// StatefulSets returns a lister over every served namespace's StatefulSets (as ConfigMaps).
func (c *Cache) StatefulSets() appslisters.StatefulSetLister { return stsLister{c} }

type cmLister struct{ c *Cache }

func (l cmLister) List(sel labels.Selector) ([]*corev1.ConfigMap, error) {
	return listAll(l.c, ConfigMaps, sel, func(idx cache.Indexer) ([]*corev1.ConfigMap, error) {
		return corelisters.NewConfigMapLister(idx).List(sel)
	})
}

func (l cmLister) ConfigMaps(ns string) corelisters.ConfigMapNamespaceLister {
	idx, err := l.c.indexer(ConfigMaps, ns)
	if err != nil {
		return errCMs{err}
	}
	return corelisters.NewConfigMapLister(idx).ConfigMaps(ns)
}

// errCMs answers for a namespace that is not served (List: nothing) or not readable (every call: the error).
type errCMs struct{ err error }

func (e errCMs) List(labels.Selector) ([]*corev1.ConfigMap, error) { return nil, listErr(e.err) }
func (e errCMs) Get(string) (*corev1.ConfigMap, error)             { return nil, e.err }

type podLister struct{ c *Cache }

func (l podLister) List(sel labels.Selector) ([]*corev1.Pod, error) {
	return listAll(l.c, Pods, sel, func(idx cache.Indexer) ([]*corev1.Pod, error) {
		return corelisters.NewPodLister(idx).List(sel)
	})
}

func (l podLister) Pods(ns string) corelisters.PodNamespaceLister {
	idx, err := l.c.indexer(Pods, ns)
	if err != nil {
		return errPods{err}
	}
	return corelisters.NewPodLister(idx).Pods(ns)
}

type errPods struct{ err error }

func (e errPods) List(labels.Selector) ([]*corev1.Pod, error) { return nil, listErr(e.err) }
func (e errPods) Get(string) (*corev1.Pod, error)             { return nil, e.err }

type stsLister struct{ c *Cache }

func (l stsLister) List(sel labels.Selector) ([]*appsv1.StatefulSet, error) {
	return listAll(l.c, StatefulSets, sel, func(idx cache.Indexer) ([]*appsv1.StatefulSet, error) {
		return appslisters.NewStatefulSetLister(idx).List(sel)
	})
}

func (l stsLister) StatefulSets(ns string) appslisters.StatefulSetNamespaceLister {
	idx, err := l.c.indexer(StatefulSets, ns)
	if err != nil {
		return errSTSs{err}
	}
	return appslisters.NewStatefulSetLister(idx).StatefulSets(ns)
}

func (l stsLister) GetPodStatefulSets(pod *corev1.Pod) ([]*appsv1.StatefulSet, error) {
	idx, err := l.c.indexer(StatefulSets, pod.Namespace)
	if err != nil {
		return nil, err
	}
	return appslisters.NewStatefulSetLister(idx).GetPodStatefulSets(pod)
}

type errSTSs struct{ err error }

func (e errSTSs) List(labels.Selector) ([]*appsv1.StatefulSet, error) { return nil, listErr(e.err) }
func (e errSTSs) Get(string) (*appsv1.StatefulSet, error)             { return nil, e.err }

// listErr is what List answers for a namespace that cannot be listed: nothing for one that is not served,
// the error for one that is not readable.
func listErr(err error) error {
	if _, ok := err.(*UnreadableError); ok {
		return err
	}
	return nil
}
