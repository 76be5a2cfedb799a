package migrate

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"time"

	"github.com/valkey-ha/valkey-ha/internal/valkeyapi/valkey"
)

// Config says where the source and node 0 are and how to reach them.
type Config struct {
	// SourceHost and SourcePort are migrateFrom.host and migrateFrom.port; Source the credentials
	// (migrateFrom.username and the password from migrateFrom.existingSecret). RESP2 is forced: AUTH needs no
	// ACL right, HELLO does.
	SourceHost string
	SourcePort int
	Source     valkey.Options
	// Node0Addr is node 0's "host:port"; Node0 the credentials of a user that may run INFO, REPLICAOF and
	// CONFIG SET there (the controller's _operator).
	Node0Addr string
	Node0     valkey.Options
	// Node0MasterAuth, when it has a Password, is set on node 0 as masteruser/masterauth once it is promoted:
	// during the migration its masterauth is the source's password, after it the instance's own replication
	// user's, so that it can follow a peer after a later failover.
	Node0MasterAuth struct{ Username, Password string }
	// MaxLag: see Observation.MaxLag.
	MaxLag int64
	// PauseBudget bounds how long the source's writes stay paused waiting for node 0 (default 5 s); the
	// server-side pause is one second longer, so it ends by itself if this process dies.
	PauseBudget time.Duration
	// Poll is the pause between node 0's INFO replication reads during the catch-up (default 10 ms).
	Poll time.Duration

	// step, when set (tests only), is called as Switch reaches each step ("paused": the source's writes are
	// paused; "caught-up": node 0 reached the paused offset, before the fence), so a test can inject a fault
	// at that exact moment.
	step func(name string)
}

func (cfg Config) at(name string) {
	if cfg.step != nil {
		cfg.step(name)
	}
}

// Reason says why a switch did not happen.
type Reason string

// The reasons.
const (
	// NotReady: the plan did not say Ready (Error.Message says what it said); nothing was touched.
	NotReady Reason = "NotReady"
	// NotCaughtUp: node 0 did not reach the paused source's offset within the budget; the source was unpaused
	// and is still the primary.
	NotCaughtUp Reason = "NotCaughtUp"
	// SourceRefused: the source refused CLIENT PAUSE or CONFIG SET (its user lacks the right: Error.Err says
	// which); it was unpaused when it had been paused, and is still the primary.
	SourceRefused Reason = "SourceRefused"
	// PromoteFailed: the source is fenced (refuses writes) but node 0 was not promoted: run the switch again.
	PromoteFailed Reason = "PromoteFailed"
)

// Error is a switch that did not happen, and why.
type Error struct {
	Reason  Reason
	Message string
	Err     error
}

func (e *Error) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("migrate switch: %s: %s: %v", e.Reason, e.Message, e.Err)
	}
	return fmt.Sprintf("migrate switch: %s: %s", e.Reason, e.Message)
}

func (e *Error) Unwrap() error { return e.Err }

// Result is a switch that happened.
type Result struct {
	// Offset is the source's master_repl_offset while paused, which node 0 had when promoted.
	Offset int64
	// Paused is how long the source's writes were paused (pause to unpause).
	Paused time.Duration
}

// sourceOptions are the options towards the source: RESP2 (AUTH, no +hello needed), no client name.
func (cfg Config) sourceOptions() valkey.Options {
	o := cfg.Source
	o.RESP2 = true
	o.ClientName = "" // CLIENT SETNAME would need +client|setname
	return o
}

// Observe asks the source and node 0 (INFO replication and INFO server of each, in parallel) and returns the
// Observation Plan needs, with switchAsked as given. A part that could not be read carries its error.
func Observe(ctx context.Context, cfg Config, switchAsked bool) Observation {
	o := Observation{SourceHost: cfg.SourceHost, SourcePort: cfg.SourcePort, SwitchAsked: switchAsked, MaxLag: cfg.MaxLag}
	done := make(chan struct{})
	go func() {
		defer close(done)
		o.Source = observeSource(ctx, cfg)
	}()
	o.Node0 = observeNode(ctx, cfg.Node0Addr, cfg.Node0)
	<-done
	return o
}

func observeSource(ctx context.Context, cfg Config) SourceView {
	c, err := valkey.Dial(ctx, net.JoinHostPort(cfg.SourceHost, strconv.Itoa(cfg.SourcePort)), cfg.sourceOptions())
	if err != nil {
		return SourceView{Err: err, WrongPass: valkey.IsWrongPass(err), Refused: valkey.IsServerError(err)}
	}
	defer c.Close()
	var v SourceView
	v.Repl, v.Engine, v.Version, v.Err = readNode(ctx, c)
	return v
}

func observeNode(ctx context.Context, addr string, o valkey.Options) NodeView {
	c, err := valkey.Dial(ctx, addr, o)
	if err != nil {
		return NodeView{Err: err}
	}
	defer c.Close()
	var v NodeView
	v.Repl, v.Engine, v.Version, v.Err = readNode(ctx, c)
	return v
}

func readNode(ctx context.Context, c *valkey.Client) (valkey.Replication, string, string, error) {
	info, err := c.Info(ctx, "server")
	if err != nil {
		return valkey.Replication{}, "", "", err
	}
	engine, version := EngineOf(info)
	r, err := c.InfoReplication(ctx)
	return r, engine, version, err
}

// Switch moves the writes from the source to node 0 (see the package comment for the steps). It observes
// and plans first and touches nothing unless the plan says Ready; node 0 already primary is success with
// a zero Result. Errors are *Error.
func Switch(ctx context.Context, cfg Config, log *slog.Logger) (Result, error) {
	if cfg.PauseBudget <= 0 {
		cfg.PauseBudget = 5 * time.Second
	}
	if cfg.Poll <= 0 {
		cfg.Poll = 10 * time.Millisecond
	}
	d := Plan(Observe(ctx, cfg, true))
	log.Info("migrate switch: plan", "state", d.State, "behind", d.Behind, "message", d.Message)
	switch d.State {
	case Switched:
		return Result{}, nil
	case Ready:
	default:
		return Result{}, &Error{Reason: NotReady, Message: d.Message}
	}
	src, err := valkey.Dial(ctx, net.JoinHostPort(cfg.SourceHost, strconv.Itoa(cfg.SourcePort)), cfg.sourceOptions())
	if err != nil {
		return Result{}, &Error{Reason: NotReady, Message: "connect to the source", Err: err}
	}
	defer src.Close()
	node, err := valkey.Dial(ctx, cfg.Node0Addr, cfg.Node0)
	if err != nil {
		return Result{}, &Error{Reason: NotReady, Message: "connect to node 0", Err: err}
	}
	defer node.Close()

	// 2. pause the source's writes; the server ends the pause by itself a second after the budget
	if err := src.ClientPauseWrite(ctx, cfg.PauseBudget+time.Second); err != nil {
		return Result{}, &Error{Reason: SourceRefused, Message: "the source's user needs +client|pause", Err: err}
	}
	paused := time.Now()
	cfg.at("paused")
	unpause := func() {
		uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
		defer cancel()
		if err := src.ClientUnpause(uctx); err != nil {
			log.Warn("migrate switch: CLIENT UNPAUSE on the source failed; its pause ends by itself",
				"budget", cfg.PauseBudget+time.Second, "err", err)
		}
	}
	sr, err := src.InfoReplication(ctx)
	if err != nil {
		unpause()
		return Result{}, &Error{Reason: SourceRefused, Message: "read the paused source's offset", Err: err}
	}

	// 3. catch-up
	if nr, err := catchUp(ctx, node, sr, paused.Add(cfg.PauseBudget), cfg.Poll); err != nil {
		unpause()
		msg := fmt.Sprintf("node 0 did not reach the source's offset %d within %s (last: offset %d, link up %t)",
			sr.MasterReplOffset, cfg.PauseBudget, nr.ReplicaReplOffset, nr.LinkUp)
		return Result{}, &Error{Reason: NotCaughtUp, Message: msg, Err: err}
	}

	cfg.at("caught-up")

	// 4. fence the source: every write from now on (the held ones too) gets NOREPLICAS. Its own settings are
	// read first, to be put back if the switch stops after the fence.
	orig, err := src.ConfigGet(ctx, "min-replicas-*")
	if err != nil {
		unpause()
		return Result{}, &Error{Reason: SourceRefused, Message: "read the source's min-replicas settings (the source's user needs +config|get)", Err: err}
	}
	if err := src.ConfigSet(ctx, "min-replicas-to-write", fenceMinReplicas, "min-replicas-max-lag", "10"); err != nil {
		unpause()
		return Result{}, &Error{Reason: SourceRefused, Message: "fence the source (the source's user needs +config|set)", Err: err}
	}
	unfence := func() string {
		kv := []string{}
		for _, k := range []string{"min-replicas-to-write", "min-replicas-max-lag"} {
			if v, ok := orig[k]; ok {
				kv = append(kv, k, v)
			}
		}
		uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
		defer cancel()
		if err := src.ConfigSet(uctx, kv...); err != nil {
			log.Warn("migrate switch: lifting the fence on the source failed; it refuses writes until the switch "+
				"is run again", "err", err)
			return fmt.Sprintf("; lifting the fence failed (%v): the source refuses writes until the switch is run again", err)
		}
		return "; the fence was lifted: the source is still the primary"
	}

	// 4b. the source's offset now, fenced: nothing can be written after it. It is the paused offset unless the
	// pause ended before the fence (this process or its connection stalled past the server-side pause, or the
	// source was stopped past it): then the source acknowledged writes meanwhile, and node 0 must have them too
	// before it is promoted.
	fr, err := src.InfoReplication(ctx)
	if err == nil && fr.ReplID != sr.ReplID {
		err = fmt.Errorf("the source's replication id changed from %s to %s during the switch", sr.ReplID, fr.ReplID)
	}
	if err != nil {
		msg := "read the fenced source's offset" + unfence()
		unpause()
		return Result{}, &Error{Reason: NotCaughtUp, Message: msg, Err: err}
	}
	if fr.MasterReplOffset != sr.MasterReplOffset {
		log.Warn("migrate switch: the source took writes after its pause ended; waiting for node 0 to have them",
			"pausedOffset", sr.MasterReplOffset, "fencedOffset", fr.MasterReplOffset)
		if nr, err := catchUp(ctx, node, fr, time.Now().Add(cfg.PauseBudget), cfg.Poll); err != nil {
			msg := fmt.Sprintf("node 0 did not reach the fenced source's offset %d within %s (last: offset %d, link up %t)",
				fr.MasterReplOffset, cfg.PauseBudget, nr.ReplicaReplOffset, nr.LinkUp) + unfence()
			unpause()
			return Result{}, &Error{Reason: NotCaughtUp, Message: msg, Err: err}
		}
		sr = fr
	}

	// 5. promote node 0, then give it back its own replication credentials
	if err := node.PromoteToPrimary(ctx); err != nil {
		unpause() // fenced: writes are refused, none is lost
		return Result{}, &Error{Reason: PromoteFailed, Message: "REPLICAOF NO ONE on node 0 (the source is fenced and refuses writes)", Err: err}
	}
	if a := cfg.Node0MasterAuth; a.Password != "" {
		if err := node.ConfigSet(ctx, "masteruser", a.Username, "masterauth", a.Password); err != nil {
			log.Warn("migrate switch: node 0 promoted, but setting its own masteruser/masterauth failed; its next "+
				"boot writes them", "err", err)
		}
	}

	// 6. unpause: the held writes are refused by the fence
	unpause()
	res := Result{Offset: sr.MasterReplOffset, Paused: time.Since(paused)}
	log.Info("migrate switch: done", "offset", res.Offset, "paused", res.Paused.String())
	return res, nil
}

// catchUp polls node 0 until it follows the source's history (src.ReplID) at an offset of at least
// src.MasterReplOffset, or deadline passes (error). It returns node 0's last answer.
func catchUp(ctx context.Context, node *valkey.Client, src valkey.Replication, deadline time.Time, poll time.Duration) (valkey.Replication, error) {
	for {
		nr, err := node.InfoReplication(ctx)
		if err == nil && nr.Role == valkey.RoleReplica && nr.ReplID == src.ReplID && nr.ReplicaReplOffset >= src.MasterReplOffset {
			return nr, nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return nr, errors.Join(err, ctx.Err(), errors.New("not caught up"))
		}
		time.Sleep(poll)
	}
}

// fenceMinReplicas is the min-replicas-to-write that fences the source: more replicas than any server has, so
// every write is refused with NOREPLICAS (internal/podsteps/bootstrap recognises it).
const fenceMinReplicas = "2147483647"
