package handoff

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/valkey-ha/valkey-ha/internal/chartapi/spec"
	"github.com/valkey-ha/valkey-ha/internal/valkeyapi/valkey"
)

// pollTimeout bounds one poll of a Sentinel or a replica, so a stopped process cannot hold a wait past its
// bound.
const pollTimeout = 300 * time.Millisecond

// tiltTrigger is Sentinel's tilt-trigger (sentinel.c sentinel_tilt_trigger, 2000 ms by default; the charts
// keep the default): when its timer runs more than this late (the process was stopped, or its only thread
// blocked), Sentinel enters TILT mode and acts on nothing for tilt-period (30 s), while it still reads
// hellos, which switch its primary and clear any failover it holds.
const tiltTrigger = 2 * time.Second

// stallWait is how long the asked Sentinel may leave SENTINEL FAILOVER unanswered on a live connection before
// another Sentinel is asked: a Sentinel that has not read a request this long has not run its
// event loop since (stopped, blocked), so it resumes in TILT mode and the request waits there, held, until
// the other Sentinel's announcement of its promotion resets it; or the request is still in the network and
// the reset closing our connection discards it. The margin covers the request's own way to the Sentinel.
const stallWait = tiltTrigger + 300*time.Millisecond

// sentinelAnswerTimeout bounds how long one Sentinel may take to answer before the next one is tried (only
// before anything was asked of it).
const sentinelAnswerTimeout = 2 * time.Second

// monitored is the Sentinel procedure of the package doc.
func (h *handoff) monitored(ctx context.Context) (Result, error) {
	cfg := h.cfg
	sc, saddr, m, err := h.pickSentinel(ctx)
	if err != nil {
		return Result{}, err
	}
	log := h.log.With("sentinel", saddr)
	if r, why := Obstacle(cfg.Primary, m, nil); r != "" && r != ReasonNoGoodReplica {
		return Result{}, fail(r, nil, "%s: %s", saddr, why)
	}
	reps, err := sc.SentinelReplicas(ctx, cfg.MonitorName)
	if err != nil {
		return Result{}, fail(ReasonCommandFailed, err, "Sentinel %s", saddr)
	}
	if r, why := Obstacle(cfg.Primary, m, reps); r != "" {
		return Result{}, fail(r, nil, "%s", why)
	}
	cands := planCandidates(reps)
	budget, catchUp, failoverWait := h.timings(m)

	// 2. pause (and hold the replication PINGs: Config.HoldPings)
	if cfg.HoldPings > 0 {
		if h.holdPings(ctx) {
			defer h.releasePings(ctx)
		}
	}
	if err := h.pc.ClientPauseWrite(ctx, budget+serverPauseMargin); err != nil {
		return Result{}, fail(ReasonCommandFailed, err, "pause writes on %s", cfg.Primary)
	}
	pausedAt := time.Now()
	h.paused()
	// Until the old primary is demoted or the pause is lifted with nothing promoted, the caller's cancel
	// (a preStop hook's deadline, a controller losing its lease) must not cut the handoff short: lifting the
	// pause while a failover may still promote someone hands writes to a primary that is about to be
	// demoted (F2). This part is bounded by the pause budget itself.
	pctx, pcancel := context.WithDeadline(context.WithoutCancel(ctx), pausedAt.Add(budget+serverPauseMargin+pollTimeout))
	defer pcancel()
	res := Result{Sentinel: saddr}
	paused := true
	unpause := func() {
		if !paused {
			return
		}
		paused = false
		res.Paused = time.Since(pausedAt)
		uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 3*time.Second)
		defer cancel()
		if err := h.pc.ClientUnpause(uctx); err != nil {
			log.Warn("handoff: CLIENT UNPAUSE failed; the pause ends by itself", "err", err)
		}
	}
	defer unpause()
	pr, err := h.pc.InfoReplication(pctx)
	switch {
	case err != nil:
		return res, fail(ReasonCommandFailed, err, "read the paused primary's offset")
	case pr.Role != valkey.RolePrimary:
		return res, fail(ReasonNotPrimary, nil, "%s turned %s", cfg.Primary, pr.Role)
	}
	res.Offset = pr.MasterReplOffset

	// 3. catch-up
	var ferr error
	accepted, foreign := true, false
	asked := map[string]bool{saddr: true}
	// handle classifies the reply of saddr to SENTINEL FAILOVER (ferr); takeOver asks another Sentinel
	// once the one asked is known to run nothing or to do no harm (see another and stalled). Both return an
	// error that ends the handoff.
	var handle, stalled func(ctx context.Context, until time.Time) error
	var sentAt time.Time // when the Sentinel asked last got the request (zero once it answered or was given up)
	orphan := ""         // a candidate that reports itself primary while no Sentinel that answers runs a failover
	takeOver := func(ctx context.Context, until time.Time) error {
		if orphan != "" {
			return nil // a promotion is under way: never start a second one; the budget's end demotes to it
		}
		if p := h.promotedReplica(ctx, cands); p != "" {
			// the gone Sentinel got as far as promoting p (or is alive behind a refusing link and promoting it):
			// asking another Sentinel could promote a second replica
			orphan, accepted = p, true
			log.Warn("handoff: the gone Sentinel's failover already promoted a replica; asking no other Sentinel", "promoted", p)
			return nil
		}
		if !time.Now().Before(until) {
			return fail(ReasonUnreachable, nil, "Sentinel %s is gone and the pause budget left no time to ask another; nothing was promoted", saddr)
		}
		next, nerr, err := h.another(ctx, asked, until)
		if err != nil {
			return err
		}
		sentAt = time.Now() // later than the request was sent: the silence it measures is shorter than the real one
		asked[next] = true
		saddr, ferr, res.Sentinel = next, nerr, next
		log = h.log.With("sentinel", saddr)
		return handle(ctx, until)
	}
	handle = func(ctx context.Context, until time.Time) error {
		switch {
		case ferr == nil:
			accepted, sentAt = true, time.Time{}
			if h.inTilt(ctx, saddr) {
				// it read the request only after its timer jumped (stopped as it came): it runs none of the
				// failover for tilt-period, and the others' announcement of their promotion resets it
				log.Warn("handoff: SENTINEL FAILOVER accepted by a Sentinel now in TILT mode; asking another")
				if time.Until(until) < takeOverSpan {
					sentAt = time.Now().Add(-stallWait) // given up by the next wait that has the time for it
					return nil
				}
				return takeOver(ctx, until)
			}
			log.Info("handoff: SENTINEL FAILOVER accepted")
		case errors.Is(ferr, valkey.ErrNoGoodReplica):
			return fail(ReasonNoGoodReplica, ferr, "Sentinel %s refused the failover", saddr)
		case errors.Is(ferr, valkey.ErrFailoverInProgress):
			accepted, foreign = true, true
			log.Warn("handoff: a failover runs already; watching it with writes paused, asking no other Sentinel", "err", ferr)
		case valkey.IsServerError(ferr):
			return fail(ReasonCommandFailed, ferr, "Sentinel %s refused the failover", saddr)
		case connGone(ferr) && h.quiet(ctx, saddr):
			// the connection died before a reply and the Sentinel now refuses connections or runs no
			// failover: the request runs nowhere (a killed Sentinel's failover dies with it)
			log.Warn("handoff: the asked Sentinel's connection died before its reply and no failover runs there; asking another", "err", ferr)
			return takeOver(ctx, until)
		default:
			// no reply from a Sentinel that may still hold the request (stopped, cut off). Before stallWait the
			// failover may still start there at once: asking another could start a second one; watch it.
			accepted = false
			h.drop(saddr) // a reset: the request, if still unacknowledged, is discarded
			log.Warn("handoff: SENTINEL FAILOVER got no reply; watching that Sentinel", "err", ferr)
			return stalled(ctx, until)
		}
		return nil
	}
	// stalled asks another Sentinel once the one asked left the request unanswered for stallWait (see
	// stallWait), unless it now answers, outside TILT mode, running a failover or naming another primary
	// (it runs the request: watch it). No other Sentinel may be asked (another fails): keep watching.
	stalled = func(ctx context.Context, until time.Time) error {
		if sentAt.IsZero() || orphan != "" || time.Since(sentAt) < stallWait || time.Until(until) < takeOverSpan {
			return nil
		}
		h.drop(saddr)
		if h.acting(ctx, saddr, until) {
			sentAt, accepted = time.Time{}, true
			log.Warn("handoff: the asked Sentinel answers again and runs the failover; watching it")
			return nil
		}
		if !time.Now().Before(until) {
			return nil // the next wait asks another
		}
		silent := time.Since(sentAt)
		sentAt = time.Time{}
		log.Warn("handoff: the asked Sentinel left SENTINEL FAILOVER unanswered; it resumes in TILT mode or never gets it: asking another",
			"silent", silent.Round(time.Millisecond))
		prev := saddr
		if err := takeOver(ctx, until); err != nil {
			if saddr != prev {
				return err
			}
			log.Warn("handoff: no other Sentinel may be asked; watching the silent one", "err", err)
		}
		return nil
	}
	if err := h.catchUp(pctx, cands, pr.ReplID, pr.MasterReplOffset, pausedAt.Add(catchUp)); err != nil {
		// never unpause while a failover that started meanwhile may still promote someone
		if st := h.observeSentinel(pctx, saddr, time.Now().Add(pollTimeout)); !st.inProgress && !st.moved {
			return res, err
		}
		foreign, ferr = true, err
		log.Warn("handoff: a failover started while writes were paused; watching it, asking for none", "err", err)
	} else {
		log.Info("handoff: every candidate has the paused primary's offset", "offset", pr.MasterReplOffset,
			"candidates", len(cands), "after", time.Since(pausedAt).Round(time.Millisecond))
		if beforeFailover != nil {
			beforeFailover()
		}
		// 4. SENTINEL FAILOVER on this Sentinel, its reply awaited no longer than the budget: a Sentinel
		// that stalls with the request (a stopped process) must not hold the handoff past the server-side
		// pause, which would hand writes to a primary that the request may still demote; and no longer than
		// stallWait, after which another may be asked (stalled)
		sentAt = time.Now()
		replyBy := pausedAt.Add(budget)
		if s := sentAt.Add(stallWait); s.Before(replyBy) {
			replyBy = s
		}
		fctx, cancel := context.WithDeadline(pctx, replyBy)
		ferr = sc.SentinelFailover(fctx, cfg.MonitorName)
		cancel()
		if afterFailover != nil {
			afterFailover()
		}
		if err := handle(pctx, pausedAt.Add(budget)); err != nil {
			return res, err
		}
	}
	failoverAt := time.Now()

	// 5. watch within the budget
	deadline := pausedAt.Add(budget)
	for {
		if err := stalled(pctx, deadline); err != nil {
			return res, err
		}
		st := h.observeSentinel(pctx, saddr, deadline)
		if st.gone {
			// the Sentinel that runs (or may hold) the failover refuses connections: killed, its failover
			// died with it. Nothing is demoted yet; another Sentinel takes over once none runs a failover.
			if orphan == "" {
				log.Warn("handoff: the asked Sentinel refuses connections; its failover died with it")
			}
			if err := takeOver(pctx, deadline); err != nil {
				return res, err
			}
			if !time.Now().Before(deadline) {
				break
			}
			if !sleep(pctx, cfg.Poll) {
				return res, fail(ReasonCommandFailed, pctx.Err(), "waiting for the promotion")
			}
			continue
		}
		accepted = accepted || st.inProgress
		if st.moved {
			if !isCandidate(cands, st.primary) {
				log.Warn("handoff: Sentinel promoted a replica that was not a candidate when the catch-up was checked", "newPrimary", st.primary)
			}
			if err := h.demote(pctx, st.primary, pausedAt.Add(budget+serverPauseMargin)); err != nil {
				paused = false // the connection is gone: the pause ends by itself
				return res, err
			}
			h.closePubSub(pctx, saddr)
			unpause()
			res.NewPrimary = st.primary
			log.Info("handoff: done", "newPrimary", st.primary, "paused", res.Paused.Round(time.Millisecond))
			return res, foreignMove(foreign, ferr, st.primary)
		}
		if st.ended && accepted {
			unpause()
			if foreign {
				return res, fail(ReasonFailoverInFlight, ferr, "a failover that was not ours ended without a promotion")
			}
			return res, fail(ReasonFailoverAborted, nil, "Sentinel %s ended the failover without a promotion; %s is still primary", saddr, cfg.Primary)
		}
		if !time.Now().Before(deadline) {
			break
		}
		if !sleep(pctx, cfg.Poll) {
			return res, fail(ReasonCommandFailed, pctx.Err(), "waiting for the promotion")
		}
	}

	// 6. budget spent: demote first, then unpause, then wait for the failover's end
	target := cands[0].addr
	if sentAt.IsZero() { // a Sentinel silent since the request would only use up the poll
		target = h.selected(pctx, saddr, cands)
	}
	if orphan != "" {
		target = orphan
	}
	if err := h.demote(pctx, target, pausedAt.Add(budget+serverPauseMargin)); err != nil {
		paused = false
		return res, err
	}
	unpause()
	res.DemotedEarly = true
	log.Warn("handoff: pause budget spent before the promotion; demoted the old primary to the selected replica", "budget", budget, "selected", target)
	end := failoverAt.Add(failoverWait)
	for time.Now().Before(end) {
		if err := stalled(ctx, end); err != nil {
			return res, fail(ReasonFailoverAborted, err, "the asked Sentinel went silent after %s had been demoted to %s; %s",
				cfg.Primary, target, h.restore(ctx))
		}
		st := h.observeSentinel(ctx, saddr, end)
		if st.gone {
			if orphan == "" {
				log.Warn("handoff: the Sentinel that ran the failover refuses connections; its failover died with it")
			}
			if err := takeOver(ctx, end); err != nil {
				return res, fail(ReasonFailoverAborted, err, "the failover died with Sentinel %s after %s had been demoted to %s; %s",
					saddr, cfg.Primary, target, h.restore(ctx))
			}
			if !sleep(ctx, cfg.Poll) {
				return res, fail(ReasonCommandFailed, ctx.Err(), "waiting for the failover's end")
			}
			continue
		}
		accepted = accepted || st.inProgress
		if st.moved {
			if st.primary != target {
				if err := h.demote(ctx, st.primary, end); err != nil {
					return res, err
				}
			} else {
				h.afterDemote(ctx) // again: the clients closed at the early demotion came back before the switch
			}
			h.closePubSub(ctx, saddr)
			res.NewPrimary = st.primary
			log.Info("handoff: done after demoting first", "newPrimary", st.primary)
			return res, foreignMove(foreign, ferr, st.primary)
		}
		if st.ended && accepted {
			return res, fail(ReasonFailoverAborted, nil, "Sentinel %s ended the failover without a promotion after %s had been demoted to %s; %s",
				saddr, cfg.Primary, target, h.restore(ctx))
		}
		if !sleep(ctx, cfg.Poll) {
			return res, fail(ReasonCommandFailed, ctx.Err(), "waiting for the failover's end")
		}
	}
	if !accepted {
		return res, fail(ReasonUnreachable, ferr, "Sentinel %s never showed the failover running; %s", saddr, h.restore(ctx))
	}
	return res, fail(ReasonFailoverTimeout, nil, "Sentinel %s still runs the failover after %s; %s is a replica of %s until Sentinel ends it",
		saddr, failoverWait, cfg.Primary, target)
}

// beforeFailover, when set (tests only), runs right before SENTINEL FAILOVER is sent: the moment a failover
// of someone else can make the reply INPROG.
var beforeFailover func()

// afterFailover, when set (tests only), runs right after the reply to SENTINEL FAILOVER arrived.
var afterFailover func()

// holdPings sets the primary's repl-ping-replica-period to pingPeriodOff (Config.HoldPings) and reports
// whether it did; a refusal is logged, never fatal: the handoff works without it.
func (h *handoff) holdPings(ctx context.Context) bool {
	if err := h.pc.ConfigSet(ctx, "repl-ping-replica-period", pingPeriodOff); err != nil {
		h.log.Warn("handoff: could not hold the primary's replication PINGs; one sent during the handoff makes the other replicas resync in full",
			"err", err)
		return false
	}
	return true
}

// releasePings sets the old primary's repl-ping-replica-period back to Config.HoldPings, also when the
// caller's context ended. A failure is logged: the node keeps no PINGs to its replicas until it restarts
// (replicas of it then drop the link after repl-timeout and reconnect).
func (h *handoff) releasePings(ctx context.Context) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 3*time.Second)
	defer cancel()
	if err := h.pc.ConfigSet(rctx, "repl-ping-replica-period", strconv.Itoa(h.cfg.HoldPings)); err != nil {
		h.log.Warn("handoff: could not set repl-ping-replica-period back", "period", h.cfg.HoldPings, "err", err)
	}
}

// foreignMove is the error of a handoff whose primary was moved by a failover that was not ours (nil when
// it was ours): the old primary follows the new one, but the caller should look again before going on.
func foreignMove(foreign bool, cause error, newPrimary string) error {
	if !foreign {
		return nil
	}
	return fail(ReasonFailoverInFlight, cause, "a failover that was not ours moved the primary to %s; the old primary follows it", newPrimary)
}

// timings returns the pause budget, the catch-up bound and the wait for a failover's end.
func (h *handoff) timings(m valkey.Monitor) (budget, catchUp, failoverWait time.Duration) {
	budget = h.cfg.PauseBudget
	if budget <= 0 {
		budget = time.Duration(m.DownAfterMs) * time.Millisecond / 2
	}
	if budget <= 0 {
		budget = time.Second
	}
	catchUp = h.cfg.CatchUpTimeout
	if catchUp <= 0 || catchUp > budget {
		catchUp = budget / 2
	}
	failoverWait = h.cfg.FailoverWait
	if failoverWait <= 0 {
		failoverWait = time.Duration(m.FailoverTimeoutMs)*time.Millisecond + 5*time.Second
	}
	return budget, catchUp, failoverWait
}

// monitorOf dials Sentinel addr (within ctx, through the handoff's client cache) and reads SENTINEL MASTER of
// the monitor. It returns the client and the monitor, or why not ("" when both were read): the dial's error,
// the command's error (the cached client is dropped then), or that addr does not know the monitor.
func (h *handoff) monitorOf(ctx context.Context, addr string) (*valkey.Client, valkey.Monitor, string) {
	c, err := h.dial(ctx, addr, h.cfg.SentinelOptions)
	if err != nil {
		return nil, valkey.Monitor{}, err.Error()
	}
	m, found, err := c.SentinelMaster(ctx, h.cfg.MonitorName)
	if err != nil {
		h.drop(addr)
		return nil, valkey.Monitor{}, err.Error()
	}
	if !found {
		return nil, valkey.Monitor{}, addr + " does not know monitor " + h.cfg.MonitorName
	}
	return c, m, ""
}

// pickSentinel returns the first Sentinel in order that answers SENTINEL MASTER, knows the monitor and may
// be asked (usable: not in TILT mode, its CKQUORUM passes).
func (h *handoff) pickSentinel(ctx context.Context) (*valkey.Client, string, valkey.Monitor, error) {
	var why []string
	for _, addr := range h.cfg.Sentinels {
		actx, cancel := context.WithTimeout(ctx, sentinelAnswerTimeout)
		c, m, w := h.monitorOf(actx, addr)
		cancel()
		if w != "" {
			why = append(why, w)
			continue
		}
		if w := h.usable(ctx, c, addr, time.Now().Add(sentinelAnswerTimeout)); w != "" {
			why = append(why, w)
			continue
		}
		return c, addr, m, nil
	}
	return nil, "", valkey.Monitor{}, fail(ReasonUnreachable, nil, "no Sentinel answered for %s: %s", h.cfg.MonitorName, strings.Join(why, "; "))
}

// usable returns why the Sentinel at addr (connected as c) must not be asked for a failover, or "".
//   - TILT mode (INFO sentinel, sentinel_tilt:1): it answers and accepts SENTINEL FAILOVER, but runs none
//     of the failover until TILT ends (30 s after its timer last jumped, e.g. after the process was
//     stopped): asked, it would leave the primary paused or demoted with nothing promoted.
//   - SENTINEL CKQUORUM fails (NOQUORUM): it is cut off from its peers or was replaced a moment ago and
//     knows none yet. Its failover would be announced to nobody; the others, a quorum, are asked instead.
func (h *handoff) usable(ctx context.Context, c *valkey.Client, addr string, until time.Time) string {
	actx, cancel := context.WithDeadline(ctx, until)
	defer cancel()
	si, err := c.InfoSentinel(actx)
	if err != nil {
		h.drop(addr)
		return err.Error()
	}
	if si.Tilt {
		h.log.Warn("handoff: skipping a Sentinel in TILT mode", "sentinel", addr)
		return addr + " is in TILT mode"
	}
	q, err := c.SentinelCKQuorum(actx, h.cfg.MonitorName)
	if err != nil {
		h.drop(addr)
		return err.Error()
	}
	if !q.OK {
		h.log.Warn("handoff: skipping a Sentinel without quorum", "sentinel", addr, "ckquorum", q.Message)
		return addr + " has no quorum: " + q.Message
	}
	return ""
}

// connGone reports whether err says the connection was refused, reset or closed by the peer: the process
// at the other end is gone (or restarted), not merely slow.
func connGone(err error) bool {
	return errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, net.ErrClosed)
}

// quiet reports whether the Sentinel at addr, whose connection just died, provably runs no failover: it
// refuses connections (killed: a Sentinel's failover lives in its memory only and dies with it), or it
// answers again (restarted) and runs none of the monitor while still naming the handed-off primary, or
// does not know the monitor. Anything else (no answer within pollTimeout, a failover running, another
// primary named) is not proof.
func (h *handoff) quiet(ctx context.Context, addr string) bool {
	h.drop(addr)
	pctx, cancel := pollContext(ctx, time.Now().Add(pollTimeout))
	defer cancel()
	c, err := h.dial(pctx, addr, h.cfg.SentinelOptions)
	if err != nil {
		return errors.Is(err, syscall.ECONNREFUSED)
	}
	m, found, err := c.SentinelMaster(pctx, h.cfg.MonitorName)
	if err != nil {
		h.drop(addr)
		return errors.Is(err, syscall.ECONNREFUSED)
	}
	return !found || (!m.FailoverInProgress() && sameAddr(h.cfg.Primary, m.Host, m.Port))
}

// inTilt reports whether the Sentinel at addr answers INFO sentinel with TILT mode on.
func (h *handoff) inTilt(ctx context.Context, addr string) bool {
	pctx, cancel := pollContext(ctx, time.Now().Add(pollTimeout))
	defer cancel()
	c, err := h.dial(pctx, addr, h.cfg.SentinelOptions)
	if err != nil {
		return false
	}
	si, err := c.InfoSentinel(pctx)
	if err != nil {
		h.drop(addr)
		return false
	}
	return si.Tilt
}

// takeOverSpan is the least time a wait must have left for a silent Sentinel to be given up in it (stalled):
// the look at it and asking another take a few polls, and while writes are paused the old primary must be
// demoted before the server-side pause ends (serverPauseMargin after the budget). Given less, the next wait
// (after the demotion) gives it up.
const takeOverSpan = time.Second

// actingTimeout bounds the look at a Sentinel that left the request unanswered (acting): one that runs again
// answers at once; a stopped one must not use up the pause budget left for asking another.
const actingTimeout = 150 * time.Millisecond

// acting reports whether the Sentinel at addr answers on a fresh connection within actingTimeout (and
// until), is not in TILT mode, and runs a failover of the monitor or names another primary than the
// handed-off one: it acts on a request. Silence, a refused connection, TILT mode, or an answer naming the
// primary with no failover running are all false.
func (h *handoff) acting(ctx context.Context, addr string, until time.Time) bool {
	if d := time.Now().Add(actingTimeout); d.Before(until) {
		until = d
	}
	pctx, cancel := context.WithDeadline(ctx, until)
	defer cancel()
	c, err := h.dial(pctx, addr, h.cfg.SentinelOptions)
	if err != nil {
		return false
	}
	si, err := c.InfoSentinel(pctx)
	if err != nil || si.Tilt {
		h.drop(addr)
		return false
	}
	m, found, err := c.SentinelMaster(pctx, h.cfg.MonitorName)
	if err != nil {
		h.drop(addr)
		return false
	}
	return found && (m.FailoverInProgress() || !sameAddr(h.cfg.Primary, m.Host, m.Port))
}

// promotedReplica returns the first candidate that reports role master (read directly, as for the
// catch-up), or "".
func (h *handoff) promotedReplica(ctx context.Context, cands []candidate) string {
	for _, c := range cands {
		pctx, cancel := pollContext(ctx, time.Now().Add(pollTimeout))
		rc, err := h.dial(pctx, c.addr, h.replicaOptions())
		if err == nil {
			var r valkey.Replication
			if r, err = rc.InfoReplication(pctx); err != nil {
				h.drop(c.addr)
			} else if r.Role == valkey.RolePrimary {
				cancel()
				return c.addr
			}
		}
		cancel()
	}
	return ""
}

// another finds the Sentinel to take over from asked ones that are known to run nothing (quiet). It asks
// every other Sentinel for the monitor:
//   - one names another primary or runs a failover: that one is returned with an error wrapping
//     valkey.ErrFailoverInProgress as its reply (watched like INPROG, never asked: no second failover);
//   - otherwise at least a majority of all Sentinels must answer, each naming the handed-off primary with
//     no failover running: then nothing runs anywhere, and the first usable one (see usable) is asked
//     SENTINEL FAILOVER, its reply awaited until until at most; its address and reply are returned.
//
// The error (ReasonUnreachable) says no Sentinel may be asked: nothing runs anywhere, so the caller may
// resume writes on the primary.
func (h *handoff) another(ctx context.Context, asked map[string]bool, until time.Time) (string, error, error) {
	idle, need := 0, len(h.cfg.Sentinels)/2+1
	var why []string
	pick := ""
	var pc *valkey.Client
	for _, addr := range h.cfg.Sentinels {
		if asked[addr] {
			continue
		}
		pctx, cancel := pollContext(ctx, time.Now().Add(pollTimeout))
		c, m, w := h.monitorOf(pctx, addr)
		cancel()
		if w != "" {
			why = append(why, w)
			continue
		}
		if !sameAddr(h.cfg.Primary, m.Host, m.Port) || m.FailoverInProgress() {
			return addr, fmt.Errorf("%w: Sentinel %s names %s (failover state %s)", valkey.ErrFailoverInProgress, addr,
				joinAddr(m.Host, m.Port), m.FailoverState), nil
		}
		idle++
		if pick == "" {
			if w := h.usable(ctx, c, addr, time.Now().Add(pollTimeout)); w != "" {
				why = append(why, w)
			} else {
				pick, pc = addr, c
			}
		}
	}
	if idle < need || pick == "" {
		return "", nil, fail(ReasonUnreachable, nil, "no other Sentinel may be asked (%d of %d answer with no failover running, %d needed; %s); nothing was promoted",
			idle, len(h.cfg.Sentinels), need, strings.Join(why, "; "))
	}
	h.log.Info("handoff: asking another Sentinel", "sentinel", pick, "idle", idle)
	fctx, cancel := context.WithDeadline(ctx, until)
	defer cancel()
	return pick, pc.SentinelFailover(fctx, h.cfg.MonitorName), nil
}

// catchUp polls every candidate until it follows history replID at offset or more; after until it gives up
// with ReasonReplicasLag naming the laggards.
func (h *handoff) catchUp(ctx context.Context, cands []candidate, replID string, offset int64, until time.Time) error {
	done := map[string]bool{}
	for {
		behind := map[string]string{}
		for _, c := range cands {
			if done[c.addr] {
				continue
			}
			why := h.checkReplica(ctx, c.addr, replID, offset, until)
			if why == "" {
				done[c.addr] = true
				continue
			}
			behind[c.addr] = why
		}
		if len(behind) == 0 {
			return nil
		}
		promoted := false
		for _, w := range behind {
			promoted = promoted || w == "is a "+string(valkey.RolePrimary)
		}
		if promoted || !time.Now().Before(until) {
			var l []string
			for a, w := range behind {
				l = append(l, a+" "+w)
			}
			sort.Strings(l)
			return fail(ReasonReplicasLag, nil, "not every replica that may be promoted reached offset %d within the catch-up bound: %s",
				offset, strings.Join(l, "; "))
		}
		if !sleep(ctx, h.cfg.Poll) {
			return fail(ReasonCommandFailed, ctx.Err(), "waiting for the replicas")
		}
	}
}

// checkReplica returns why addr has not caught up yet, or "".
func (h *handoff) checkReplica(ctx context.Context, addr, replID string, offset int64, until time.Time) string {
	pctx, cancel := pollContext(ctx, until)
	defer cancel()
	c, err := h.dial(pctx, addr, h.replicaOptions())
	if err != nil {
		return "unreachable: " + err.Error()
	}
	r, err := c.InfoReplication(pctx)
	switch {
	case err != nil:
		h.drop(addr)
		return "unreachable: " + err.Error()
	case r.Role != valkey.RoleReplica:
		return "is a " + string(r.Role)
	case r.ReplID != replID:
		return fmt.Sprintf("follows another history (replid %s)", r.ReplID)
	case r.ReplicaReplOffset < offset:
		return fmt.Sprintf("at offset %d", r.ReplicaReplOffset)
	}
	return ""
}

func (h *handoff) replicaOptions() valkey.Options {
	if h.cfg.ReplicaOptions.Username != "" {
		return h.cfg.ReplicaOptions
	}
	return h.cfg.NodeOptions
}

// sentinelState is one look at the asked Sentinel.
type sentinelState struct {
	// moved: GET-MASTER-ADDR-BY-NAME names primary, another node than the one handed off.
	moved   bool
	primary string
	// inProgress: SENTINEL MASTER flags the failover running; ended: it answered, runs none, and still names
	// the handed-off node.
	inProgress bool
	ended      bool
	// gone: the Sentinel refuses connections (its process is gone, and with it any failover it ran).
	gone bool
}

func (h *handoff) observeSentinel(ctx context.Context, addr string, until time.Time) sentinelState {
	var st sentinelState
	pctx, cancel := pollContext(ctx, until)
	defer cancel()
	c, err := h.dial(pctx, addr, h.cfg.SentinelOptions)
	if err != nil {
		st.gone = errors.Is(err, syscall.ECONNREFUSED)
		return st
	}
	host, port, found, err := c.SentinelPrimaryAddr(pctx, h.cfg.MonitorName)
	if err != nil {
		h.drop(addr)
		return st
	}
	if found && h.foreign(host, port) {
		return st // not ours: neither a move nor the end of the failover
	}
	if found && !sameAddr(h.cfg.Primary, host, port) {
		st.moved, st.primary = true, joinAddr(host, port)
		return st
	}
	m, found, err := c.SentinelMaster(pctx, h.cfg.MonitorName)
	if err != nil {
		h.drop(addr)
		return st
	}
	if !found {
		return st
	}
	st.inProgress = m.FailoverInProgress()
	if h.foreign(m.Host, m.Port) {
		return sentinelState{inProgress: st.inProgress}
	}
	if !st.inProgress {
		if sameAddr(h.cfg.Primary, m.Host, m.Port) {
			st.ended = true
		} else {
			st.moved, st.primary = true, joinAddr(m.Host, m.Port)
		}
	}
	return st
}

// foreign reports whether a Sentinel's primary is not a node of the instance (Config.Nodes set): the handoff
// never follows nor demotes to it (a forged hello on a shared quorum can make Sentinel
// name any address).
func (h *handoff) foreign(host string, port int) bool {
	if len(h.cfg.Nodes) == 0 || spec.OwnNode(h.cfg.Nodes, host, port) {
		return false
	}
	h.log.Warn("handoff: a Sentinel names a primary that is not a node of this instance; ignored", "sentinelPrimary", joinAddr(host, port))
	return true
}

func isCandidate(cands []candidate, addr string) bool {
	for _, c := range cands {
		if h, p, err := splitAddr(addr); err == nil && sameAddr(c.addr, h, p) {
			return true
		}
	}
	return false
}

// selected returns the replica the running failover promotes (flag "promoted" on the asked Sentinel), or
// the first candidate when that cannot be read.
func (h *handoff) selected(ctx context.Context, saddr string, cands []candidate) string {
	pctx, cancel := pollContext(ctx, time.Now().Add(pollTimeout))
	defer cancel()
	if c, err := h.dial(pctx, saddr, h.cfg.SentinelOptions); err == nil {
		reps, err := c.SentinelReplicas(pctx, h.cfg.MonitorName)
		if err != nil {
			h.drop(saddr)
		}
		for _, r := range reps {
			if r.HasFlag("promoted") {
				return joinAddr(r.Host, r.Port)
			}
		}
	}
	return cands[0].addr
}

// demote makes the old primary a replica of addr, retrying on a fresh connection until the deadline (a
// REPLICAOF that never arrives would let the end of the pause hand writes to a primary about to be demoted).
func (h *handoff) demote(ctx context.Context, addr string, until time.Time) error {
	host, port, err := splitAddr(addr)
	if err != nil {
		return fail(ReasonCommandFailed, err, "demote %s", h.cfg.Primary)
	}
	for {
		err = h.pc.ReplicaOf(ctx, host, port)
		if err == nil {
			h.afterDemote(ctx)
			return nil
		}
		if valkey.IsServerError(err) || !time.Now().Before(until) {
			return fail(ReasonCommandFailed, err, "demote %s to a replica of %s", h.cfg.Primary, addr)
		}
		h.drop(h.cfg.Primary)
		if pc, derr := h.dial(ctx, h.cfg.Primary, h.cfg.NodeOptions); derr == nil {
			h.pc = pc
		}
		if !sleep(ctx, h.cfg.Poll) {
			return fail(ReasonCommandFailed, ctx.Err(), "demote %s", h.cfg.Primary)
		}
	}
}

// closePubSub closes the asked Sentinel's Pub/Sub clients. The leader of a failover publishes
// +switch-master only at +failover-end, about 1 s after the other Sentinels (it waits for the remaining
// replicas' next INFO); its subscribers then reconnect and ask GET-MASTER-ADDR-BY-NAME, which it already
// answers with the new primary: the nudge Sentinel itself gives clients of a reconfigured server. Best
// effort: a client that misses it still hears +switch-master.
func (h *handoff) closePubSub(ctx context.Context, saddr string) {
	pctx, cancel := pollContext(ctx, time.Now().Add(pollTimeout))
	defer cancel()
	c, err := h.dial(pctx, saddr, h.cfg.SentinelOptions)
	if err == nil {
		_, err = c.ClientKillPubSub(pctx)
	}
	if err != nil {
		h.log.Info("handoff: could not close the Sentinel's Pub/Sub clients", "sentinel", saddr, "err", err)
	}
}

// restore makes the demoted old primary primary again after a failover that promoted nobody, but only when
// a majority of the Sentinels answers and every one that answers names it and runs no failover. It
// returns what it did, for the error's detail.
func (h *handoff) restore(ctx context.Context) string {
	agree := 0
	for _, addr := range h.cfg.Sentinels {
		pctx, cancel := pollContext(ctx, time.Now().Add(pollTimeout))
		c, err := h.dial(pctx, addr, h.cfg.SentinelOptions)
		if err != nil {
			cancel()
			continue
		}
		m, found, err := c.SentinelMaster(pctx, h.cfg.MonitorName)
		cancel()
		if err != nil {
			h.drop(addr)
			continue
		}
		if !found {
			continue
		}
		if !sameAddr(h.cfg.Primary, m.Host, m.Port) || m.FailoverInProgress() {
			return fmt.Sprintf("left as a replica: Sentinel %s names %s (failover running: %v)", addr, joinAddr(m.Host, m.Port), m.FailoverInProgress())
		}
		agree++
	}
	if agree < len(h.cfg.Sentinels)/2+1 {
		return fmt.Sprintf("left as a replica: only %d of %d Sentinels answered", agree, len(h.cfg.Sentinels))
	}
	if err := h.pc.PromoteToPrimary(ctx); err != nil {
		return "left as a replica: " + err.Error()
	}
	return "made primary again (every Sentinel names it)"
}

// direct hands off an unmonitored primary with FAILOVER TO.
func (h *handoff) direct(ctx context.Context) (Result, error) {
	host, port, _ := splitAddr(h.cfg.Target)
	timeout := h.cfg.PauseBudget
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	if err := h.pc.FailoverTo(ctx, host, port, timeout); err != nil {
		return Result{}, fail(ReasonCommandFailed, err, "FAILOVER TO %s", h.cfg.Target)
	}
	start := time.Now()
	h.paused()
	deadline := start.Add(timeout + 2*time.Second)
	for {
		r, err := h.pc.InfoReplication(ctx)
		if err == nil && r.Role == valkey.RoleReplica {
			h.afterDemote(ctx)
			return Result{NewPrimary: h.cfg.Target, Paused: time.Since(start)}, nil
		}
		if err == nil && r.Role == valkey.RolePrimary && r.FailoverState == "no-failover" {
			return Result{}, fail(ReasonFailoverAborted, nil, "the server aborted FAILOVER TO %s (the target did not catch up within %s); %s is still primary",
				h.cfg.Target, timeout, h.cfg.Primary)
		}
		if !time.Now().Before(deadline) {
			return Result{}, fail(ReasonFailoverTimeout, err, "FAILOVER TO %s did not complete within %s", h.cfg.Target, timeout)
		}
		if !sleep(ctx, h.cfg.Poll) {
			return Result{}, fail(ReasonCommandFailed, ctx.Err(), "waiting for FAILOVER TO %s", h.cfg.Target)
		}
	}
}

// pollContext bounds one poll by pollTimeout and by until.
func pollContext(ctx context.Context, until time.Time) (context.Context, context.CancelFunc) {
	d := time.Now().Add(pollTimeout)
	if until.Before(d) && until.After(time.Now()) {
		d = until
	}
	return context.WithDeadline(ctx, d)
}

// sleep waits d or until ctx ends; it returns false when ctx ended.
func sleep(ctx context.Context, d time.Duration) bool {
	select {
	case <-ctx.Done():
		return false
	case <-time.After(d):
		return true
	}
}
