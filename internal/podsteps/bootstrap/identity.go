package bootstrap

import (
	"fmt"

	"github.com/valkey-ha/valkey-ha/internal/chartapi/contract"
	"github.com/valkey-ha/valkey-ha/internal/chartapi/spec"
)

// CheckIdentity refuses a descriptor that does not describe this pod before anything is sent: the node at
// nodeIndex must be this pod (hostname: a StatefulSet pod's host name is its pod name), and every name and
// host must be the chart's canonical one for that instance (spec.Instance.CheckCanonical). The descriptor
// decides where the boot step sends the _probe password (peers) and the _replication password (masterauth
// towards the primary); a ConfigMap rewritten by anyone who may write ConfigMaps must not redirect them.
func CheckIdentity(in spec.Instance, nodeIndex int, hostname, clusterDomain string) error {
	if nodeIndex < 0 || nodeIndex >= len(in.Nodes) {
		return fmt.Errorf("node index %d: the descriptor has %d nodes", nodeIndex, len(in.Nodes))
	}
	if pod := in.Nodes[nodeIndex].Pod; pod != hostname {
		return fmt.Errorf("instance.json: nodes[%d].pod is %q but this pod is %q: the descriptor does not describe this pod", nodeIndex, pod, hostname)
	}
	return in.CheckCanonical(contract.Descriptor(in.Name), in.Namespace, clusterDomain)
}
