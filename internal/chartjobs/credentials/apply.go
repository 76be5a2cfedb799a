package credentials

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/valkey-ha/valkey-ha/internal/controllers/kube"
)

// passwordAlphabet and passwordLength give 40 letters and digits: about 238 bits.
const (
	passwordAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
	passwordLength   = 40
)

// GeneratePassword returns passwordLength random letters and digits from crypto/rand (rejection sampling, so
// every character is equally likely). It panics only if the system's random source fails.
func GeneratePassword() string {
	out := make([]byte, 0, passwordLength)
	buf := make([]byte, 64)
	for len(out) < passwordLength {
		if _, err := rand.Read(buf); err != nil {
			panic(fmt.Sprintf("crypto/rand: %v", err))
		}
		for _, c := range buf {
			// 248 = 4 * 62: bytes at or above it would favour the first characters
			if c < 248 && len(out) < passwordLength {
				out = append(out, passwordAlphabet[int(c)%len(passwordAlphabet)])
			}
		}
	}
	return string(out)
}

// ErrRace means a concurrent writer created or changed a Secret between Observe and Apply; observe again.
var ErrRace = errors.New("a Secret changed since it was read")

// Observe reads the owner ConfigMap and every Secret the spec names. Not found is recorded as nil; any other
// error (Forbidden, a timeout) is returned: a planner must never mistake an unreadable Secret for a missing
// one and generate a password over it.
func Observe(ctx context.Context, cs kubernetes.Interface, namespace string, s Spec) (Observation, metav1.OwnerReference, error) {
	cm, err := cs.CoreV1().ConfigMaps(namespace).Get(ctx, s.Owner, metav1.GetOptions{})
	if err != nil {
		return Observation{}, metav1.OwnerReference{}, fmt.Errorf("get configmap %s/%s (owner of the Secrets): %w", namespace, s.Owner, err)
	}
	obs := Observation{Secrets: map[string]*corev1.Secret{}}
	for _, name := range s.SecretNames() {
		sec, err := cs.CoreV1().Secrets(namespace).Get(ctx, name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			obs.Secrets[name] = nil
		case err != nil:
			return Observation{}, metav1.OwnerReference{}, fmt.Errorf("get secret %s/%s: %w", namespace, name, err)
		default:
			obs.Secrets[name] = sec
		}
	}
	return obs, kube.OwnerRef(cm), nil
}

// Apply writes a plan: every Create (create only: an existing Secret is never replaced), every Update (with
// the observed resourceVersion), then F-acl. It stops at the first error; AlreadyExists and Conflict are
// returned as ErrRace, after which a new Observe sees what the other writer wrote.
func Apply(ctx context.Context, cs kubernetes.Interface, namespace string, p Plan) error {
	api := cs.CoreV1().Secrets(namespace)
	write := func(s *corev1.Secret, create bool) error {
		var err error
		verb := "create"
		if create {
			_, err = api.Create(ctx, s, metav1.CreateOptions{})
		} else {
			verb = "update"
			_, err = api.Update(ctx, s, metav1.UpdateOptions{})
		}
		if apierrors.IsAlreadyExists(err) || apierrors.IsConflict(err) {
			return fmt.Errorf("%s secret %s/%s: %w", verb, namespace, s.Name, ErrRace)
		}
		if err != nil {
			return fmt.Errorf("%s secret %s/%s: %w", verb, namespace, s.Name, err)
		}
		return nil
	}
	for _, s := range p.Create {
		if err := write(s, true); err != nil {
			return err
		}
	}
	for _, s := range p.Update {
		if err := write(s, false); err != nil {
			return err
		}
	}
	if p.ACL != nil {
		return write(p.ACL, p.CreateACL)
	}
	return nil
}

// Result is the outcome of one Ensure pass.
type Result struct {
	// Created and Updated name the Secrets written, Rotated the users whose password was rotated.
	Created, Updated, Rotated []string
	// ACLWritten is true when F-acl was created or changed.
	ACLWritten bool
	// Refused is the plan's refusals: F-acl was not written.
	Refused []string
}

// Ensure runs one observe -> plan -> apply pass at now.
func Ensure(ctx context.Context, cs kubernetes.Interface, namespace string, s Spec, now time.Time, newPassword func() string) (Result, error) {
	obs, owner, err := Observe(ctx, cs, namespace, s)
	if err != nil {
		return Result{}, err
	}
	p := BuildPlan(s, namespace, owner, obs, now, newPassword)
	r := Result{Rotated: p.Rotated, Refused: p.Refused, ACLWritten: p.ACL != nil}
	for _, c := range p.Create {
		r.Created = append(r.Created, c.Name)
	}
	for _, u := range p.Update {
		r.Updated = append(r.Updated, u.Name)
	}
	if err := Apply(ctx, cs, namespace, p); err != nil {
		return Result{}, err
	}
	return r, nil
}

// RunOptions tune Run.
type RunOptions struct {
	Namespace string
	Spec      Spec
	// Timeout bounds the whole run; Interval is the pause between passes that did not converge.
	Timeout, Interval time.Duration
	Log               *slog.Logger
	// Now and NewPassword default to time.Now and GeneratePassword.
	Now         func() time.Time
	NewPassword func() string
}

// Run repeats Ensure until a pass writes nothing and refuses nothing (every Secret exists and F-acl is
// current), or Timeout passes. Read errors and races are retried; refusals are logged once each time they
// change and returned on timeout, so a Secret created a little after the release (an external secrets
// operator) is picked up, and one never created fails the run with the message naming the value.
func Run(ctx context.Context, cs kubernetes.Interface, o RunOptions) error {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.NewPassword == nil {
		o.NewPassword = GeneratePassword
	}
	if o.Interval <= 0 {
		o.Interval = 2 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	var last string
	for {
		r, err := Ensure(ctx, cs, o.Namespace, o.Spec, o.Now(), o.NewPassword)
		var msg string
		switch {
		case err != nil:
			msg = err.Error()
		case len(r.Refused) > 0:
			msg = strings.Join(r.Refused, "; ")
		}
		wrote := err == nil && (len(r.Created)+len(r.Updated) > 0 || r.ACLWritten)
		if wrote {
			o.Log.Info("credentials written", "instance", o.Spec.Instance, "created", r.Created, "updated", r.Updated,
				"rotated", r.Rotated, "acl", r.ACLWritten)
		}
		if err == nil && len(r.Refused) == 0 {
			if !wrote {
				o.Log.Info("credentials current", "instance", o.Spec.Instance, "acl", o.Spec.ACLSecret)
				return nil
			}
			continue // confirm at once: the next pass must find nothing to write
		}
		if msg != "" && msg != last {
			o.Log.Warn("credentials not complete, retrying", "instance", o.Spec.Instance, "reason", msg)
			last = msg
		}
		select {
		case <-ctx.Done():
			if msg == "" {
				msg = "still writing"
			}
			return fmt.Errorf("credentials of %s not complete after %s: %s", o.Spec.Instance, o.Timeout, msg)
		case <-time.After(o.Interval):
		}
	}
}
