//go:build e2e

package e2e

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestCaseS17RotatePasswordNoRestart: a customer user with a generated password; `helm upgrade` raising
// rotation.generation with previousValidUntil ~90 s ahead (the upgrade's credentials Job rotates) restarts no pod (UIDs and restart counts of every
// pod unchanged), the new password works on every node within a deadline, the old one keeps working until
// previousValidUntil and is refused on every node after it.
func TestCaseS17RotatePasswordNoRestart(t *testing.T) {
	maybeParallel(t)
	const grace = 45 * time.Second // the rotation is live on every node 5-7 s after the upgrade (measured at load 15: 6.7 s)
	user := `{name: app, access: readwrite, keys: ["*"]}`
	d := Deploy(t, "s17", DeployOpts{DataExtra: "users: [" + user + "]"})
	in := d.I()
	ctx := t.Context()
	secret := in.F + "-user-app"
	p1 := waitSecretKey(t, d, secret, "password")
	Eventually(t, time.Minute, time.Second, "the generated password works on every node", func(ctx context.Context) (bool, error) {
		return in.passwordWorksEverywhere(ctx, "app", p1, true)
	})
	before, err := Snapshot(ctx, d.NS, "app.kubernetes.io/part-of=valkey-ha")
	if err != nil {
		t.Fatal(err)
	}

	validUntil := time.Now().Add(grace).UTC().Truncate(time.Second)
	in.Extra = fmt.Sprintf(`users: [{name: app, access: readwrite, keys: ["*"], rotation: {generation: 1, previousValidUntil: %q}}]`, validUntil.Format(time.RFC3339))
	d.Helm.Upgrade(in.Release, ChartPath("valkey"), in.Values())
	t0 := time.Now()
	// the upgrade's credentials Job rotates the Secret (Helm does not wait for Jobs)
	var p2 string
	Eventually(t, 2*time.Minute, time.Second, "the credentials Job rotated "+secret, func(ctx context.Context) (bool, error) {
		g, err := d.SecretKey(ctx, secret, "generation")
		if err != nil || g != "1" {
			return false, fmt.Errorf("generation %q: %v", g, err)
		}
		p2, err = d.SecretKey(ctx, secret, "password")
		return err == nil && p2 != "" && p2 != p1, err
	})
	t.Logf("%s rotated %s after the upgrade", secret, time.Since(t0).Round(time.Millisecond))
	// issue 19: the old password is kept only as its SHA-256, with the deadline fixed at this rotation
	if prev, _ := d.SecretKey(ctx, secret, "previous"); prev != "" {
		t.Errorf("%s keeps the old plaintext in key previous", secret)
	}
	sum := sha256.Sum256([]byte(p1))
	if h, err := d.SecretKey(ctx, secret, "previousHash"); err != nil || h != hex.EncodeToString(sum[:]) {
		t.Errorf("%s previousHash: %q, %v (want the old password's SHA-256)", secret, h, err)
	}
	if u, err := d.SecretKey(ctx, secret, "previousValidUntil"); err != nil || u != validUntil.Format(time.RFC3339) {
		t.Errorf("%s previousValidUntil: %q, %v (want %s)", secret, u, err, validUntil.Format(time.RFC3339))
	}
	Eventually(t, 30*time.Second, time.Second, "the new password works on every node", func(ctx context.Context) (bool, error) {
		return in.passwordWorksEverywhere(ctx, "app", p2, true)
	})
	t.Logf("new password live on every node %s after the upgrade", time.Since(t0).Round(time.Millisecond))

	// the old password keeps working until previousValidUntil (checked every 5 s up to 3 s before it)
	checks := 0
	for time.Until(validUntil) > 3*time.Second {
		ok, err := in.passwordWorksEverywhere(ctx, "app", p1, true)
		// the check execs into every pod in turn (seconds under load): a refusal seen only after
		// previousValidUntil passed is what should happen, not a failure; one seen before it is
		if !ok && time.Now().Before(validUntil) {
			t.Fatalf("the old password stopped working %s before previousValidUntil: %v", time.Until(validUntil).Round(time.Second), err)
		}
		if !ok {
			t.Logf("the check that began before previousValidUntil ended %s after it and saw the old password refused: %v", time.Since(validUntil).Round(time.Millisecond), err)
			break
		}
		checks++
		wait := 5 * time.Second
		if left := time.Until(validUntil) - 3*time.Second; left < wait {
			wait = left
		}
		if wait > 0 {
			time.Sleep(wait)
		}
	}
	t.Logf("old password accepted on every node in %d checks up to %s before previousValidUntil", checks, time.Until(validUntil).Round(time.Second))

	Eventually(t, time.Until(validUntil)+30*time.Second, time.Second, "the old password refused on every node after previousValidUntil", func(ctx context.Context) (bool, error) {
		return in.passwordWorksEverywhere(ctx, "app", p1, false)
	})
	if late := time.Since(validUntil); late > 0 {
		t.Logf("old password refused everywhere %s after previousValidUntil", late.Round(time.Millisecond))
	}
	if ok, err := in.passwordWorksEverywhere(ctx, "app", p2, true); !ok {
		t.Fatalf("the new password after the grace period: %v", err)
	}

	after, err := Snapshot(ctx, d.NS, "app.kubernetes.io/part-of=valkey-ha")
	if err != nil {
		t.Fatal(err)
	}
	if diff := SnapshotDiff(before, after); diff != "" {
		t.Errorf("S17: the rotation restarted pods: %s", diff)
	}
	Eventually(t, 30*time.Second, time.Second, "status AccessConverged", func(ctx context.Context) (bool, error) {
		st, err := in.Status(ctx)
		if err != nil {
			return false, err
		}
		for _, c := range st.Conditions {
			if c.Type == "AccessConverged" {
				if c.Status == "True" {
					return true, nil
				}
				return false, fmt.Errorf("AccessConverged %s: %s", c.Status, c.Message)
			}
		}
		return false, fmt.Errorf("no AccessConverged condition")
	})
	d.WaitConverged(t, time.Minute, true)
}

// passwordWorksEverywhere checks PING as user/password on every data node: with want true, every node must
// answer PONG; with want false, every node must refuse. The error names the nodes that disagree.
func (in *Instance) passwordWorksEverywhere(ctx context.Context, user, password string, want bool) (bool, error) {
	var bad []string
	for i := 0; i < in.Nodes(); i++ {
		out, err := in.As(ctx, in.Pod(i), user, password, "ping")
		if err != nil {
			return false, err
		}
		if works := out == "PONG"; works != want {
			bad = append(bad, fmt.Sprintf("%s: %q", in.Pod(i), out))
		}
	}
	if len(bad) > 0 {
		verb := "refused"
		if !want {
			verb = "still accepted"
		}
		return false, fmt.Errorf("password %s on %s", verb, strings.Join(bad, ", "))
	}
	return true, nil
}
