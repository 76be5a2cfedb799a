// Package handoff moves the primary role off one data node on purpose without losing an acknowledged write:
// the planned handoff of a data roll (internal/controllers/controller) and of a data pod's preStop hook,
// which has no Kubernetes API. It takes addresses, credentials and timeouts, returns a Result or an *Error
// with a Reason, and imports nothing from Kubernetes.
//
// Monitored (Sentinel owns failover), Run does:
//
//  1. Observe. The primary answers as primary. The first Sentinel in Config.Sentinels that answers, is not
//     in TILT mode and passes SENTINEL CKQUORUM names it, runs no failover and does not see it down; only
//     connection failures, TILT and NOQUORUM move on to the next Sentinel. A Sentinel in TILT mode (its
//     timer jumped by more than 2 s, e.g. the process was stopped) accepts SENTINEL FAILOVER but runs none
//     of it for 30 s (Sentinel docs, "TILT mode"); one without quorum is cut off from its peers or was
//     replaced a moment ago, so it could not win the vote a failover needs.
//     Its replicas that a failover may pick are the candidates: replica-priority > 0 and not s_down, o_down or
//     disconnected. The replica link is deliberately not a filter: Sentinel also promotes a replica whose
//     link has been down for less than ten times down-after-milliseconds (Sentinel docs, "Replica
//     selection and priority"). No candidate: NoGoodReplica, nothing paused.
//  2. CLIENT PAUSE WRITE on the primary, then read its master_repl_offset O. While paused the primary sends
//     its replicas nothing but a replication PING every repl-ping-replica-period (14 bytes); with
//     Config.HoldPings not even that, so O stays put (a PING after the promoted replica left would make the
//     other replicas resync in full).
//  3. Catch-up. Poll every candidate's INFO replication until it follows the primary's history
//     (master_replid) at an offset of at least O. When that does not happen within CatchUpTimeout: unpause,
//     ReplicasLag. WAIT cannot do this: it counts only acknowledgements of the caller's own writes, and this
//     connection never writes (F1).
//  4. SENTINEL FAILOVER, on that one Sentinel, its reply awaited no longer than the pause budget or stallWait (a
//     Sentinel stopped with the request would otherwise hold the handoff past the server-side pause; no
//     reply is handled as in step 6). NOGOODSLAVE: unpause, NoGoodReplica. INPROG: a failover of someone
//     else runs. It is watched like ours, because the pause protects it too. While that Sentinel may still
//     run the request (a reply, INPROG, or no reply on a live connection within stallWait), no other Sentinel is asked: it
//     would start a second failover in a new epoch (F2). A Sentinel's failover lives in its memory only, so
//     when its connection dies before the reply (refused, reset, closed) and it then refuses connections
//     (or answers again running none), or it refuses connections later while we watch (killed after
//     accepting), nothing runs there: another Sentinel is asked, but only when a majority of all Sentinels
//     answers naming the primary with no failover running; one that names another primary or runs a
//     failover is watched instead, never asked.
//     A Sentinel that leaves the request unanswered on a live connection for stallWait (its tilt-trigger,
//     2 s by default, plus 300 ms), or accepts it while in TILT mode, is given up the same way (another
//     Sentinel asked under the same conditions), unless it answers again outside TILT mode running a
//     failover. Why that is safe (valkey src/sentinel.c): Sentinel has one thread, so one that has not read
//     a request for longer than tilt-trigger has not run its timer either (stopped, blocked); its next timer
//     tick enters TILT mode, which acts on nothing for tilt-period (30 s) but still reads hellos, and it
//     reads everything buffered in its sockets before that tick. The request then finds replica links older
//     than 5 s (NOGOODSLAVE), or starts a forced failover that TILT holds and that the other Sentinel's hello
//     announcing its promotion at a higher config epoch clears (sentinelResetPrimaryAndChangeAddress); a
//     hello read first switches the primary and recreates its replicas without INFO, so the request finds
//     none to select (NOGOODSLAVE). A request still in the network is discarded: the handoff's Sentinel
//     connections close with a TCP reset (SO_LINGER 0); a reset does not remove a request the Sentinel's
//     kernel already acknowledged (measured on Linux), which is why the wait is tilt-trigger long. Not
//     covered: a proxy between the handoff and the Sentinel that acknowledges and holds bytes (a mesh
//     sidecar) and delivers the request after the switch, a request delayed in the network longer than
//     stallWait reaching a running Sentinel, and the other Sentinel's failover ending without a promotion
//     (the held request then runs when TILT ends, as it did before this case was handled).
//  5. Watch while the pause budget lasts. Once the Sentinel names the promoted replica (its
//     GET-MASTER-ADDR-BY-NAME does so from the promotion on), demote the old primary to it with REPLICAOF,
//     close the Sentinel's Pub/Sub clients so that subscribed clients ask it again at once, and unpause.
//     If the Sentinel ends the failover without a promotion, unpause: FailoverAborted. The old primary is
//     still the primary and nothing was promoted, so writes to it are safe.
//  6. Budget spent while the failover still runs. Demote the old primary to the replica the failover
//     selected, then unpause. The selected replica is the one Sentinel flags "promoted"; when the Sentinel
//     does not answer, the first candidate, because every candidate holds offset O and nothing was written
//     since. Clients now get READONLY, never an acknowledgement that a later promotion would throw away
//     (F2). Keep watching until the failover ends (its failover-timeout plus a margin). Promoted: done
//     (Result.DemotedEarly). Ended without promotion: make the old primary primary again, but only when
//     every Sentinel that answers (a majority at least) names it and runs no failover. Nothing was written
//     anywhere meanwhile. FailoverAborted either way.
//
// Why a budget: CLIENT PAUSE WRITE also holds Sentinel's hello PUBLISH to the primary, and so every PING
// that Sentinel sends on that connection after it. A pause as long as down-after-milliseconds therefore
// makes every Sentinel declare the primary down and start failovers of its own. The budget defaults to
// half of down-after-milliseconds. The server-side pause ends by itself one second after the budget, in
// case this process dies; a death between steps 4 and 6 can still lose writes, as any failover can.
//
// Unmonitored, Run uses FAILOVER TO Config.Target: the server pauses writes, waits until the target has its
// offset and swaps roles itself; when the target does not catch up in time the server aborts and resumes.
package handoff

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/valkey-ha/valkey-ha/internal/chartapi/spec"
	"github.com/valkey-ha/valkey-ha/internal/valkeyapi/acl"
	"github.com/valkey-ha/valkey-ha/internal/valkeyapi/valkey"
)

// Config says which node to hand off and how to reach everything involved.
type Config struct {
	// Primary is the node to hand off, "host:port" as Sentinel and its replicas name it.
	Primary string
	// NodeOptions connect to data nodes (the _operator user).
	NodeOptions valkey.Options
	// ReplicaOptions, when its Username is set, connect to the replicas instead of NodeOptions (the preStop
	// hook reads them as _probe: its own user exists on its own node only).
	ReplicaOptions valkey.Options
	// MonitorName is the Sentinel monitor; empty means unmonitored (FAILOVER TO Target).
	MonitorName string
	// Sentinels are the Sentinel addresses ("host:port") in the order to ask them; the first that answers
	// and is not in TILT mode is the only one asked to fail over.
	Sentinels       []string
	SentinelOptions valkey.Options
	// Target is the replica to promote when unmonitored ("host:port").
	Target string
	// Nodes are "host:port" of every node of the instance (spec.Instance.NodeAddrs). When set, a primary a
	// Sentinel names that is not one of them is never taken for the handoff's result nor demoted to (a
	// forged hello on a shared quorum can make it name any address; spec.OwnNode).
	Nodes []string

	// PauseBudget bounds how long the primary stays write-paused while still primary. 0 means half of the
	// monitor's down-after-milliseconds; unmonitored, it is the FAILOVER TIMEOUT (default 10 s).
	PauseBudget time.Duration
	// CatchUpTimeout bounds step 3 (default half the budget).
	CatchUpTimeout time.Duration
	// FailoverWait bounds the wait for the failover to end after the budget was spent (default the
	// monitor's failover-timeout plus 5 s).
	FailoverWait time.Duration
	// Poll is the interval of every wait (default 20 ms).
	Poll time.Duration
	// HoldPings, when above 0 (monitored handoffs only), stops the primary's replication PINGs while its writes
	// are paused: CONFIG SET repl-ping-replica-period to its maximum before the pause, and back to HoldPings
	// (seconds: the node's configured period) when Run returns. CLIENT PAUSE WRITE does not stop those PINGs
	// (valkey src/replication.c, replicationCron: only a FAILOVER command or a cluster manual failover
	// does), and one sent after the promoted replica left but before the old primary was demoted (up to
	// about 1 s: Sentinel sees the promotion at its next INFO) puts the other replicas 14 bytes past the
	// promoted replica's history: it refuses their PSYNC ("Requested offset for second ID was O+14, but I
	// can reply up to O"), they resync in full (repl-diskless-sync-delay, 5 s by default, plus the
	// transfer), and with min-replicas-to-write the new primary refuses writes (NOREPLICAS) until one has.
	// Measured on the local cluster: 2 s more of refused writes in about a third of the preStop handoffs.
	// It needs CONFIG SET on the primary (the preStop hook's node-local _prestop user); a refused CONFIG SET
	// is logged and the handoff goes on without it. 0: the PINGs are left alone (the controller's
	// _operator user may not CONFIG SET).
	HoldPings int
	// OnPaused, when set, is called once, on its own goroutine, as soon as the primary's writes wait: right
	// after CLIENT PAUSE WRITE succeeded (monitored), or once FAILOVER TO was accepted (it pauses them itself).
	// Run returns only after it has. The instance controller takes the primary Service off the old primary
	// there (its role label removed): the Service's data plane then applies that change during the failover,
	// and the new primary's endpoint is its only change after the switch (kube-proxy applies changes at most
	// once per minSyncPeriod, 1 s by default, so a second change right after the first waited that long;
	// issue 30, BENCHMARKS.md "Clients without Sentinel" run 11). Its failures are its own to report.
	OnPaused func()
	// Log receives the steps (default: discarded).
	Log *slog.Logger
}

// Result describes a completed handoff.
type Result struct {
	// NewPrimary is the promoted node, "host:port".
	NewPrimary string
	// Sentinel is the Sentinel that was asked (empty when unmonitored).
	Sentinel string
	// Offset is the primary's master_repl_offset while paused, which every candidate reached.
	Offset int64
	// Paused is how long writes were paused on the old primary while it was still primary.
	Paused time.Duration
	// DemotedEarly is true when the pause budget ran out before the promotion and the old primary was made
	// a replica first (clients saw errors instead of waiting).
	DemotedEarly bool
	// Clients tells which application connections of the demoted old primary were closed (CloseClients);
	// Clients.Err set means some may still be open. Filled in on failures too, when a demotion happened.
	Clients Closed
}

// Reason classifies why a handoff did not complete.
type Reason string

// The reasons.
const (
	// ReasonNotPrimary: the node does not answer as primary, or Sentinel names another primary.
	ReasonNotPrimary Reason = "NotPrimary"
	// ReasonUnreachable: the primary, or every Sentinel, did not answer.
	ReasonUnreachable Reason = "Unreachable"
	// ReasonPrimaryDown: the Sentinel sees the primary down; Sentinel is about to act on its own.
	ReasonPrimaryDown Reason = "PrimaryDown"
	// ReasonNoGoodReplica: no replica may be promoted (replica-priority 0, down, NOGOODSLAVE). Retrying
	// helps only once that changes.
	ReasonNoGoodReplica Reason = "NoGoodReplica"
	// ReasonFailoverInFlight: a failover that is not ours runs or ran (INPROG): stop and look again.
	ReasonFailoverInFlight Reason = "FailoverInFlight"
	// ReasonReplicasLag: a candidate did not reach the paused primary's offset in time; writes resumed on
	// the primary, nothing was promoted.
	ReasonReplicasLag Reason = "ReplicasLag"
	// ReasonFailoverAborted: the failover ended without a promotion (or never started).
	ReasonFailoverAborted Reason = "FailoverAborted"
	// ReasonFailoverTimeout: the failover was still running when the wait ended; the old primary is a
	// replica of the selected one and Sentinel finishes or aborts on its own.
	ReasonFailoverTimeout Reason = "FailoverTimeout"
	// ReasonCommandFailed: a command was refused or failed (see the wrapped error).
	ReasonCommandFailed Reason = "CommandFailed"
)

// Error is a handoff that did not complete, with what was observed.
type Error struct {
	Reason Reason
	// Detail says what was observed, for status and Events.
	Detail string
	// Err is the underlying error, if any.
	Err error
}

func (e *Error) Error() string {
	s := string(e.Reason) + ": " + e.Detail
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

func (e *Error) Unwrap() error { return e.Err }

// ReasonOf returns the Reason of an *Error in err's chain, or "" for any other error.
func ReasonOf(err error) Reason {
	var he *Error
	if errors.As(err, &he) {
		return he.Reason
	}
	return ""
}

func fail(r Reason, err error, format string, args ...any) *Error {
	return &Error{Reason: r, Detail: fmt.Sprintf(format, args...), Err: err}
}

// serverPauseMargin is how much longer than the budget the server-side pause lasts, so that it only ends
// by itself when this process is gone.
const serverPauseMargin = time.Second

// pingPeriodOff is the repl-ping-replica-period that Config.HoldPings sets while writes are paused: its
// maximum. replicationCron PINGs when its loop count (one per second since the start) is a multiple of the
// period, so none comes for 68 years.
const pingPeriodOff = "2147483647"

func (c Config) withDefaults() Config {
	if c.Poll <= 0 {
		c.Poll = 20 * time.Millisecond
	}
	if c.Log == nil {
		c.Log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	// a request given up on must not reach its Sentinel later (step 4): closes reset the connection
	c.SentinelOptions.ResetOnClose = true
	return c
}

func (c Config) validate() error {
	if _, _, err := splitAddr(c.Primary); err != nil {
		return fmt.Errorf("handoff: Primary: %w", err)
	}
	if c.MonitorName != "" && len(c.Sentinels) == 0 {
		return errors.New("handoff: MonitorName is set but Sentinels is empty")
	}
	if c.MonitorName == "" {
		if _, _, err := splitAddr(c.Target); err != nil {
			return fmt.Errorf("handoff: Target (needed without a monitor): %w", err)
		}
	}
	return nil
}

// Run hands the primary role off Config.Primary (see the package doc).
func Run(ctx context.Context, cfg Config) (Result, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return Result{}, err
	}
	h := &handoff{cfg: cfg, log: cfg.Log.With("primary", cfg.Primary), clients: map[string]*valkey.Client{}}
	defer h.closeAll()
	pc, err := h.dial(ctx, cfg.Primary, cfg.NodeOptions)
	if err != nil {
		return Result{}, fail(ReasonUnreachable, err, "primary %s", cfg.Primary)
	}
	h.pc = pc
	r, err := pc.InfoReplication(ctx)
	if err != nil {
		return Result{}, fail(ReasonUnreachable, err, "primary %s", cfg.Primary)
	}
	if r.Role != valkey.RolePrimary {
		return Result{}, fail(ReasonNotPrimary, nil, "%s is a %s", cfg.Primary, r.Role)
	}
	lock, err := h.lock(ctx)
	if lock != nil {
		defer lock.Close()
	}
	if err != nil {
		return Result{}, err
	}
	defer h.pausedHook.Wait()
	var res Result
	if cfg.MonitorName == "" {
		res, err = h.direct(ctx)
	} else {
		res, err = h.monitored(ctx)
	}
	res.Clients = h.closed
	return res, err
}

type handoff struct {
	cfg     Config
	log     *slog.Logger
	clients map[string]*valkey.Client
	pc      *valkey.Client
	closed  Closed // what afterDemote closed
	// pausedHook runs Config.OnPaused (paused); Run waits for it
	pausedHook sync.WaitGroup
}

// paused starts Config.OnPaused, if set, on its own goroutine (the pause budget does not wait for it).
func (h *handoff) paused() {
	if h.cfg.OnPaused != nil {
		h.pausedHook.Go(h.cfg.OnPaused)
	}
}

// LockName prefixes the client name of the connection a handoff holds on the primary while it runs: the
// lock that keeps the controller's planned roll and the preStop hook from handing off the same primary at
// once. It lives on the primary itself because the hook has no Kubernetes API and must work with every
// controller down; it ends with the connection, so a handoff that dies holds nothing.
const LockName = "valkey-ha-handoff-"

// LockUsers are the users whose connections may hold the handoff lock: the ones the handoffs themselves
// connect as (acl.Operator for the instance controller's planned roll, acl.PreStop for the preStop hook).
// Any user may name a connection (CLIENT SETNAME is in @connection, which every customer preset grants),
// so a name alone would let a customer's connection defer planned rolls forever and make the hook skip
// its handoff; CLIENT LIST reports each connection's user, which a client cannot choose.
var LockUsers = []string{acl.Operator, acl.PreStop}

// lock names a fresh connection to the primary LockName+<random> and then lists the primary's clients: the lock
// is held when no other connection with that prefix, of one of LockUsers, has a lower client id. Both sides
// name their connection before they look, and the server runs one command at a time, so of two handoffs that
// race, the later one to list sees the other, and only the one with the lower id goes on.
func (h *handoff) lock(ctx context.Context) (*valkey.Client, error) {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	name := LockName + hex.EncodeToString(b)
	o := h.cfg.NodeOptions
	o.ClientName = name
	c, err := valkey.Dial(ctx, h.cfg.Primary, o)
	if err != nil {
		return nil, fail(ReasonUnreachable, err, "primary %s (handoff lock)", h.cfg.Primary)
	}
	list, err := c.ClientList(ctx, "normal")
	if err != nil {
		return c, fail(ReasonCommandFailed, err, "CLIENT LIST on %s (handoff lock)", h.cfg.Primary)
	}
	mine, holders := lockHolders(list, name)
	for _, o := range holders {
		if mine < 0 || o.id < mine {
			return c, fail(ReasonFailoverInFlight, nil, "another handoff runs on %s (connection %s, id %d)", h.cfg.Primary, o.name, o.id)
		}
	}
	return c, nil
}

type lockHolder struct {
	id   int64
	name string
}

// lockHolders reads CLIENT LIST: the id of the connection called mine (-1 if absent) and every other
// connection whose name starts with LockName and whose user is one of LockUsers (any other user's
// connection named so is ignored).
func lockHolders(list []valkey.ClientEntry, mine string) (int64, []lockHolder) {
	own := int64(-1)
	var out []lockHolder
	for _, e := range list {
		switch {
		case e.Name == mine:
			own = e.ID
		case strings.HasPrefix(e.Name, LockName) && slices.Contains(LockUsers, e.User):
			out = append(out, lockHolder{id: e.ID, name: e.Name})
		}
	}
	return own, out
}

func (h *handoff) dial(ctx context.Context, addr string, o valkey.Options) (*valkey.Client, error) {
	if c, ok := h.clients[addr]; ok {
		return c, nil
	}
	c, err := valkey.Dial(ctx, addr, o)
	if err != nil {
		return nil, err
	}
	h.clients[addr] = c
	return c, nil
}

// drop forgets a client whose connection may be stuck behind an unanswered command.
func (h *handoff) drop(addr string) {
	if c, ok := h.clients[addr]; ok {
		c.Close()
		delete(h.clients, addr)
	}
}

func (h *handoff) closeAll() {
	for _, c := range h.clients {
		c.Close()
	}
}

func splitAddr(addr string) (string, int, error) {
	host, p, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, fmt.Errorf("address %q: %w", addr, err)
	}
	port, err := strconv.Atoi(p)
	if err != nil || port <= 0 || port > 65535 || host == "" {
		return "", 0, fmt.Errorf("address %q: want host:port", addr)
	}
	return host, port, nil
}

// sameAddr compares "host:port" with a host and port as Sentinel names them (host names case-insensitive,
// without a trailing dot).
func sameAddr(addr, host string, port int) bool {
	h, p, err := splitAddr(addr)
	return err == nil && p == port && spec.NormalizeHost(h) == spec.NormalizeHost(host)
}

func joinAddr(host string, port int) string { return net.JoinHostPort(host, strconv.Itoa(port)) }

// candidate is a replica a failover may promote.
type candidate struct {
	addr     string
	priority int64
	offset   int64
	promoted bool
}

// planCandidates returns the replicas Sentinel may promote, in Sentinel's order of preference (lowest
// replica-priority first, then the highest offset it knows, then the address for a stable order).
func planCandidates(reps []valkey.SentinelReplica) []candidate {
	var out []candidate
	for _, r := range reps {
		if r.Priority <= 0 || r.HasFlag("s_down") || r.HasFlag("o_down") || r.HasFlag("disconnected") {
			continue
		}
		out = append(out, candidate{addr: joinAddr(r.Host, r.Port), priority: r.Priority, offset: r.ReplOffset, promoted: r.HasFlag("promoted")})
	}
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.priority != b.priority {
			return a.priority < b.priority
		}
		if a.offset != b.offset {
			return a.offset > b.offset
		}
		return a.addr < b.addr
	})
	return out
}

// Obstacle returns why a Sentinel-led handoff of the primary at primary ("host:port") cannot start from
// what one Sentinel reports (its SENTINEL MASTER view m and SENTINEL REPLICAS list reps), with its Reason,
// or "" when nothing in that view stops it: the Sentinel names another primary, runs a failover, sees the
// primary down, or lists no replica it may promote (step 1 of the package doc). The preStop hook's handoff
// and the instance controller's report of a terminating primary use it.
func Obstacle(primary string, m valkey.Monitor, reps []valkey.SentinelReplica) (Reason, string) {
	switch {
	case !sameAddr(primary, m.Host, m.Port):
		return ReasonNotPrimary, fmt.Sprintf("Sentinel names %s as primary", joinAddr(m.Host, m.Port))
	case m.FailoverInProgress():
		return ReasonFailoverInFlight, fmt.Sprintf("Sentinel runs a failover (%s)", m.FailoverState)
	case m.SubjectivelyDown() || m.ObjectivelyDown():
		return ReasonPrimaryDown, "Sentinel flags the primary " + strings.Join(m.Flags, ",")
	case len(planCandidates(reps)) == 0:
		return ReasonNoGoodReplica, describeReplicas(reps)
	}
	return "", ""
}

func describeReplicas(reps []valkey.SentinelReplica) string {
	if len(reps) == 0 {
		return "Sentinel lists no replica"
	}
	var l []string
	for _, r := range reps {
		l = append(l, fmt.Sprintf("%s priority %d flags %s", joinAddr(r.Host, r.Port), r.Priority, strings.Join(r.Flags, ",")))
	}
	return "no replica may be promoted: " + strings.Join(l, "; ")
}
