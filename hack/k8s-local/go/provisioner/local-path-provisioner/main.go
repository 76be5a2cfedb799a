// local-path-provisioner: dynamic PersistentVolumes for the k8s-local cluster (StorageClass local-path, the
// default). It runs as a host daemon next to the control plane: every node of the cluster shares this machine's
// filesystem, so a volume is a directory <root>/<pv-name>, created mode 0777 (non-root pods can write it
// whatever their uid) and handed out as a `local` PersistentVolume bound to the node the scheduler chose
// (volumeBindingMode WaitForFirstConsumer), so the kubelet applies the pod's fsGroup like on any real local
// disk and the volume stays with its node, as local storage does. Deleting the PV (reclaim policy Delete)
// removes the directory. Built on sigs.k8s.io/sig-storage-lib-external-provisioner.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
	"sigs.k8s.io/sig-storage-lib-external-provisioner/v13/controller"
)

// provisioner implements controller.Provisioner with directories under root.
type provisioner struct {
	root string
}

// dir is the directory of PV name; names are DNS subdomains, so they never contain "/" or "..".
func (p *provisioner) dir(name string) (string, error) {
	if name == "" || strings.ContainsAny(name, "/\\") || strings.HasPrefix(name, ".") {
		return "", fmt.Errorf("refusing volume name %q", name)
	}
	return filepath.Join(p.root, name), nil
}

// Provision creates <root>/<pv> (mode 0777) and returns a local PV pinned to the selected node.
func (p *provisioner) Provision(_ context.Context, o controller.ProvisionOptions) (*v1.PersistentVolume, controller.ProvisioningState, error) {
	if o.SelectedNodeName == "" {
		return nil, controller.ProvisioningFinished, errors.New("no selected node: StorageClass local-path needs volumeBindingMode WaitForFirstConsumer")
	}
	if o.PVC.Spec.VolumeMode != nil && *o.PVC.Spec.VolumeMode == v1.PersistentVolumeBlock {
		return nil, controller.ProvisioningFinished, errors.New("volumeMode Block is not supported by local-path (directories only)")
	}
	dir, err := p.dir(o.PVName)
	if err != nil {
		return nil, controller.ProvisioningFinished, err
	}
	if err := os.MkdirAll(dir, 0o777); err != nil {
		return nil, controller.ProvisioningInBackground, fmt.Errorf("mkdir %s: %w", dir, err)
	}
	if err := os.Chmod(dir, 0o777); err != nil { // past the umask
		return nil, controller.ProvisioningInBackground, fmt.Errorf("chmod %s: %w", dir, err)
	}
	reclaim := v1.PersistentVolumeReclaimDelete
	if o.StorageClass.ReclaimPolicy != nil {
		reclaim = *o.StorageClass.ReclaimPolicy
	}
	fs := v1.PersistentVolumeFilesystem
	pv := &v1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: o.PVName},
		Spec: v1.PersistentVolumeSpec{
			PersistentVolumeReclaimPolicy: reclaim,
			AccessModes:                   o.PVC.Spec.AccessModes,
			VolumeMode:                    &fs,
			MountOptions:                  o.StorageClass.MountOptions,
			Capacity:                      v1.ResourceList{v1.ResourceStorage: o.PVC.Spec.Resources.Requests[v1.ResourceStorage]},
			PersistentVolumeSource: v1.PersistentVolumeSource{
				Local: &v1.LocalVolumeSource{Path: dir},
			},
			NodeAffinity: &v1.VolumeNodeAffinity{Required: &v1.NodeSelector{NodeSelectorTerms: []v1.NodeSelectorTerm{{
				MatchExpressions: []v1.NodeSelectorRequirement{{
					Key: v1.LabelHostname, Operator: v1.NodeSelectorOpIn, Values: []string{o.SelectedNodeName},
				}},
			}}}},
		},
	}
	klog.InfoS("provisioned", "pv", o.PVName, "pvc", klog.KObj(o.PVC), "node", o.SelectedNodeName, "dir", dir)
	return pv, controller.ProvisioningFinished, nil
}

// Delete removes the PV's directory (only one under root).
func (p *provisioner) Delete(_ context.Context, pv *v1.PersistentVolume) error {
	if pv.Spec.Local == nil {
		return fmt.Errorf("PV %s is not a local volume", pv.Name)
	}
	dir, err := p.dir(pv.Name)
	if err != nil {
		return err
	}
	if filepath.Clean(pv.Spec.Local.Path) != dir {
		return fmt.Errorf("PV %s points at %s, not at %s: not deleting it", pv.Name, pv.Spec.Local.Path, dir)
	}
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("remove %s: %w", dir, err)
	}
	klog.InfoS("deleted", "pv", pv.Name, "dir", dir)
	return nil
}

func main() {
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig of the cluster")
	root := flag.String("root", "", "directory that holds the volumes")
	name := flag.String("name", "k8s-local.io/local-path", "provisioner name (the StorageClass's provisioner field)")
	klog.InitFlags(nil)
	flag.Parse()
	if *kubeconfig == "" || *root == "" {
		fmt.Fprintln(os.Stderr, "usage: local-path-provisioner -kubeconfig FILE -root DIR")
		os.Exit(2)
	}
	if err := os.MkdirAll(*root, 0o755); err != nil {
		klog.Fatalf("mkdir %s: %v", *root, err)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		klog.Fatalf("kubeconfig %s: %v", *kubeconfig, err)
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		klog.Fatalf("client: %v", err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	pc := controller.NewProvisionController(ctx, client, *name, &provisioner{root: filepath.Clean(*root)},
		controller.LeaderElection(false))
	klog.InfoS("local-path provisioner running", "name", *name, "root", *root)
	pc.Run(ctx)
}
