package registration

import (
	"crypto/sha256"
	"encoding/hex"
	"net"
	"strconv"

	"github.com/valkey-ha/valkey-ha/internal/chartapi/spec"
	"github.com/valkey-ha/valkey-ha/internal/valkeyapi/valkey"
)

// The registration target of one instance (docs/design.md, "The sentinel controller's pass"): the address most
// of the quorum's Sentinels name, else the data node that reports role primary with the most connected
// replicas and is not loading its data set. The gather reads (the _sentinel Secret, SENTINEL MASTERS, INFO of
// the nodes); these functions decide.

// NodeReply is one data node as the sentinel controller's gather asked it while resolving an instance.
type NodeReply struct {
	// Host and Port are the node's (spec.Node.Host, spec.Instance.PortOf); Addr is "host:port"
	// (spec.Instance.Addr).
	Host string
	Port int
	Addr string
	// Answered is false when the node was not asked (its pod is being deleted) or did not answer INFO
	// replication.
	Answered bool
	// Role is INFO replication's role (valkey.RolePrimary, ...); Replicas how many connected replicas it
	// lists; Loading is INFO persistence loading:1, asked of a primary only.
	Role     valkey.Role
	Replicas int
	Loading  bool
}

// NewWanted is the registration of instance in before its credentials and primary are known: the
// _sentinel user and the quorum to register, the instance's pin or, without one, DefaultQuorum of
// sentinels (the number of Sentinel pods).
func NewWanted(in spec.Instance, sentinels int) Wanted {
	w := Wanted{Instance: in, AuthUser: in.SentinelAuth.User, Quorum: in.Quorum}
	if w.Quorum == 0 {
		w.Quorum = DefaultQuorum(sentinels)
	}
	return w
}

// SetPassword sets the _sentinel password read from the instance's Secret and AuthHash, the fingerprint
// of user and password (hex of the first 8 bytes of SHA-256) that tells whether a Sentinel holds them.
func (w *Wanted) SetPassword(pw string) {
	w.AuthPass = pw
	sum := sha256.Sum256([]byte(w.AuthUser + "\x00" + pw))
	w.AuthHash = hex.EncodeToString(sum[:8])
}

// AgreedTarget sets w's primary to the address most of sentinels name (AgreedPrimary) when that is a node
// of the instance, and reports whether it did (agreed) and whether the data nodes must still be asked
// (ChoosePrimary): when there is no agreement, or when a reachable Sentinel names another address, so that a
// Sentinel stuck on a stale primary (Stuck) is realigned only to a primary seen as such.
func AgreedTarget(w *Wanted, sentinels []SentinelState) (agreed, askNodes bool) {
	in := w.Instance
	h, p, ok := AgreedPrimary(sentinels, in.MonitorName, in.NodeAddrs())
	if !ok || !spec.OwnNode(in.NodeAddrs(), h, p) {
		return false, true
	}
	w.PrimaryHost, w.PrimaryPort = h, p
	return true, someNamesOther(sentinels, in.MonitorName, h, p)
}

// someNamesOther reports whether a reachable Sentinel names another address than host:port for monitor.
func someNamesOther(sentinels []SentinelState, monitor, host string, port int) bool {
	agreed := []string{net.JoinHostPort(host, strconv.Itoa(port))}
	for _, s := range sentinels {
		if m, ok := s.Monitors[monitor]; s.Reachable && ok && !spec.OwnNode(agreed, m.Host, m.Port) {
			return true
		}
	}
	return false
}

// ChoosePrimary decides w's primary from the nodes' replies (in the descriptor's order). A loading primary
// is never a target (PrimaryLoading names the last one seen). Without agreement (AgreedTarget) the target
// is the answering primary with the most connected replicas (the first of equals); with agreement the
// Sentinels' primary stays the target and is only confirmed by its own reply. PrimaryObserved is set when the
// target was seen as primary with connected replicas, or is the only node of a one-node instance.
func ChoosePrimary(w *Wanted, agreed bool, nodes []NodeReply) {
	bestReplicas := -1
	for _, n := range nodes {
		if !n.Answered {
			continue
		}
		if n.Loading {
			w.PrimaryLoading = n.Addr
			continue
		}
		if n.Role != valkey.RolePrimary || n.Replicas <= bestReplicas {
			continue
		}
		if agreed {
			if spec.OwnNode([]string{net.JoinHostPort(w.PrimaryHost, strconv.Itoa(w.PrimaryPort))}, n.Host, n.Port) {
				bestReplicas = n.Replicas
			}
			continue
		}
		w.PrimaryHost, w.PrimaryPort, bestReplicas = n.Host, n.Port, n.Replicas
	}
	w.PrimaryObserved = w.PrimaryHost != "" && (bestReplicas > 0 || len(w.Instance.Nodes) == 1)
}
