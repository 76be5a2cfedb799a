package plan

import (
	"fmt"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/labels"

	"github.com/valkey-ha/valkey-ha/internal/chartapi/contract"
	"github.com/valkey-ha/valkey-ha/internal/chartapi/spec"
)

// Cross-release mismatches: an instance names the quorum that should monitor it
// (its descriptor's sentinelRelease, the charts/valkey value sentinel.release, in sentinel.namespace), and
// some pairs of values across the two releases make failover impossible while both install cleanly. The
// instance controller observes the named quorum's document (QuorumSide, in gather), this file decides (pure,
// table-tested in TestQuorumMismatches), and the controllers only report: a Warning Event on the descriptor
// F-instance and the Monitored / SentinelQuorumHealthy condition of F-status. The sentinel controller uses the
// same messages for what it sees from its side (TLSMismatchMessage, QuorumAboveMessage).

// Reasons of the Mismatch values (Event reasons and condition reasons).
const (
	// ReasonQuorumMissing: the quorum document S-quorum of the named Sentinel release does not exist.
	ReasonQuorumMissing = "QuorumMissing"
	// ReasonQuorumDocumentInvalid: S-quorum exists but does not parse.
	ReasonQuorumDocumentInvalid = "QuorumDocumentInvalid"
	// ReasonQuorumNotSelecting: the named quorum's valkeySelector does not match the descriptor's labels.
	ReasonQuorumNotSelecting = "QuorumNotSelecting"
	// ReasonGrantMismatch: the instance grants monitoring to another ServiceAccount than the quorum's controller.
	ReasonGrantMismatch = "GrantMismatch"
	// ReasonTLSMismatch: tls.enabled differs between the instance and the quorum.
	ReasonTLSMismatch = "TLSMismatch"
	// ReasonQuorumAboveSentinels: sentinel.quorum is larger than the quorum's Sentinel count.
	ReasonQuorumAboveSentinels = "QuorumAboveSentinels"
)

// QuorumSide is what the instance controller observed of the quorum its descriptor names: the quorum
// document S-quorum (charts/valkey-sentinel) from the informer cache, and the descriptor's own labels.
type QuorumSide struct {
	// Release is the quorum's fullname S (the descriptor's sentinelRelease); Namespace the quorum's namespace.
	Release, Namespace string
	// Observable is false when this controller does not watch Namespace (a quorum in another namespace):
	// nothing is concluded about the quorum then.
	Observable bool
	// Found reports that S-quorum exists; Doc is its document, Err why it does not parse ("" = it does).
	Found bool
	Doc   spec.Quorum
	Err   string
	// Labels are the labels of the descriptor F-instance (what the quorum's valkeySelector selects on).
	Labels map[string]string
}

// Mismatch is one cross-release setting that keeps the instance from being failed over: Reason is one of the
// Reason* constants, Message names both releases, the fields and the fix.
type Mismatch struct {
	Reason  string
	Message string
}

// QuorumMismatches returns what makes failover of instance in impossible given the quorum it names, as
// observed in q: the quorum missing (or its document unreadable), its valkeySelector not selecting the
// descriptor, monitoring granted to another ServiceAccount than the quorum's controller, TLS on one side only, or sentinel.quorum above the quorum's Sentinel count. None for an
// instance in failover mode None, one that names no quorum (descriptor 1.0), or a quorum this controller
// cannot observe.
func QuorumMismatches(in spec.Instance, q QuorumSide) []Mismatch {
	if !in.Monitored() || in.SentinelRelease == "" || !q.Observable {
		return nil
	}
	inst := instanceSide(in)
	doc := contract.Quorum(q.Release)
	switch {
	case !q.Found:
		return []Mismatch{{ReasonQuorumMissing, fmt.Sprintf(
			"%s names Sentinel release %q (sentinel.release) in namespace %s (sentinel.namespace), but its quorum document %s does not exist there: "+
				"no Sentinel monitors this instance and nothing fails it over; install the valkey-sentinel chart so that its full name is %s in namespace %s, "+
				"or set sentinel.release and sentinel.namespace to an installed one",
			inst, q.Release, q.Namespace, doc, q.Release, q.Namespace)}}
	case q.Err != "":
		return []Mismatch{{ReasonQuorumDocumentInvalid, fmt.Sprintf(
			"%s names Sentinel release %q in namespace %s, whose quorum document %s cannot be read: %s", inst, q.Release, q.Namespace, doc, q.Err)}}
	}
	var out []Mismatch
	quorumSide := fmt.Sprintf("Sentinel release %s (namespace %s)", q.Release, q.Namespace)
	if q.Doc.Selector != nil {
		sel := *q.Doc.Selector
		parsed, err := labels.Parse(sel)
		switch {
		case strings.TrimSpace(sel) == "":
			out = append(out, Mismatch{ReasonQuorumNotSelecting, fmt.Sprintf(
				"%s names %s, whose valkeySelector is empty and selects no instance: set its valkeySelector.matchLabels to labels of this instance's instanceLabels (%s)",
				inst, quorumSide, labelString(q.Labels))})
		case err == nil && !parsed.Matches(labels.Set(q.Labels)):
			out = append(out, Mismatch{ReasonQuorumNotSelecting, fmt.Sprintf(
				"%s names %s, whose valkeySelector %q does not match the labels of %s (%s): add the selected labels to this release's instanceLabels, or widen that release's valkeySelector",
				inst, quorumSide, sel, contract.Descriptor(in.Name), labelString(q.Labels))})
		}
	}
	if g, sa := in.SentinelGrant, q.Doc.ControllerServiceAccount; g != nil && sa != "" && (g.Name != sa || g.Namespace != q.Namespace) {
		out = append(out, Mismatch{ReasonGrantMismatch, fmt.Sprintf(
			"%s grants monitoring to ServiceAccount %s (sentinel.controllerServiceAccount, sentinel.namespace), but the controller of %s runs as %s/%s: "+
				"it may not read this instance's _sentinel Secret and never registers it; set sentinel.controllerServiceAccount: %s",
			inst, g, quorumSide, q.Namespace, sa, sa)})
	}
	if in.TLS.Enabled != q.Doc.TLS {
		out = append(out, Mismatch{ReasonTLSMismatch, TLSMismatchMessage(in, q.Release, q.Namespace, q.Doc.TLS)})
	}
	if n := len(q.Doc.Hosts); in.Quorum > n {
		out = append(out, Mismatch{ReasonQuorumAboveSentinels, QuorumAboveMessage(in, q.Release, n)})
	}
	return out
}

// TLSMismatchMessage says that the instance in and the quorum (release, namespace) disagree on TLS, naming
// both releases, the field on each side and the fix.
func TLSMismatchMessage(in spec.Instance, quorumRelease, quorumNamespace string, quorumTLS bool) string {
	return fmt.Sprintf("%s has tls.enabled=%v but Sentinel release %s (namespace %s) has tls.enabled=%v: one Sentinel process cannot speak both, "+
		"so that quorum does not monitor this instance and nothing fails it over; set tls.enabled to the same value in both releases "+
		"(with certificates from the same CA)", instanceSide(in), in.TLS.Enabled, quorumRelease, quorumNamespace, quorumTLS)
}

// QuorumAboveMessage says that the instance's sentinel.quorum exceeds the sentinels Sentinels of the quorum
// release, naming both releases, both fields and the fix.
func QuorumAboveMessage(in spec.Instance, quorumRelease string, sentinels int) string {
	return fmt.Sprintf("%s sets sentinel.quorum %d but Sentinel release %s runs %d Sentinels (replicas): "+
		"the Sentinels can never agree that the primary is down, so no failover ever starts; set sentinel.quorum to at most %d "+
		"(null: a majority, %d) or raise %s's replicas to at least %d",
		instanceSide(in), in.Quorum, quorumRelease, sentinels, sentinels, sentinels/2+1, quorumRelease, in.Quorum)
}

// MismatchMessages joins the messages of ms with "; ".
func MismatchMessages(ms []Mismatch) string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m.Message
	}
	return strings.Join(out, "; ")
}

func instanceSide(in spec.Instance) string {
	rel := in.Release
	if rel == "" {
		rel = in.Name
	}
	return fmt.Sprintf("instance release %s (%s, namespace %s)", rel, in.Name, in.Namespace)
}

func labelString(m map[string]string) string {
	if len(m) == 0 {
		return "no labels"
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + "=" + m[k]
	}
	return strings.Join(parts, ",")
}
