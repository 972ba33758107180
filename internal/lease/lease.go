// Package lease is deployflow's record of tenants' leases: who owns a lease
// and whether it is still active. The deploy workflow's activities use the
// small Store interface; KubeStore implements it with the Lease custom
// resource (k8s/crds), and other backends (a billing API) can implement it
// too.
package lease

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"
)

// State is a lease's state.
type State string

// The states of a lease. Closed is final.
const (
	StateActive State = "active"
	StateClosed State = "closed"
)

// Lease is a tenant's lease.
type Lease struct {
	ID       string
	Owner    string
	State    State
	ClosedAt *time.Time // set once closed
	// UID is the lease record's object UID, when the store has one: the
	// owner of the lease's namespace and the objects in it.
	UID string
}

// Active reports whether the lease is active.
func (l *Lease) Active() bool { return l.State == StateActive }

// Store keeps leases.
type Store interface {
	// Get returns the lease, or an error wrapping ErrNotFound.
	Get(ctx context.Context, id string) (*Lease, error)
	// Create creates an active lease. Creating a lease that already
	// exists for the same owner returns it as it is (idempotent; a
	// closed lease stays closed); for another owner it fails with an
	// error wrapping ErrOwnerMismatch.
	Create(ctx context.Context, id, owner string) (*Lease, error)
	// Close closes the lease; closing a closed lease returns it as it is.
	// An unknown lease is an error wrapping ErrNotFound.
	Close(ctx context.Context, id string) (*Lease, error)
	// List returns every lease, sorted by ID.
	List(ctx context.Context) ([]Lease, error)
}

// ErrNotFound is wrapped by the errors of a Store for an unknown lease.
var ErrNotFound = errors.New("lease not found")

// ErrMalformed is wrapped by the errors of a Store for a lease record it
// cannot read (an unknown state, a closedAt that is not a time): such a
// lease is Unknown, never closed.
var ErrMalformed = errors.New("lease record is malformed")

// ErrOwnerMismatch is wrapped by Create's error when the lease exists and
// belongs to another owner.
var ErrOwnerMismatch = errors.New("lease belongs to another owner")

// MaxIDLength is the longest lease id: ids end up in names and labels of
// other objects, which must leave room for their own parts.
const MaxIDLength = 40

var idPattern = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)

// ValidateID checks that id is a DNS-1123 label of at most MaxIDLength
// characters; the error says how to fix it.
func ValidateID(id string) error {
	switch {
	case id == "":
		return errors.New(`invalid lease id "": it must not be empty; use lowercase letters, digits and '-', e.g. "web-prod-1"`)
	case len(id) > MaxIDLength:
		return fmt.Errorf("invalid lease id %q: it is %d characters long; shorten it to at most %d (lowercase letters, digits and '-')", id, len(id), MaxIDLength)
	case !idPattern.MatchString(id):
		return fmt.Errorf("invalid lease id %q: use only lowercase letters, digits and '-', starting and ending with a letter or digit (a DNS-1123 label), e.g. %q", id, suggestID(id))
	}
	return nil
}

// suggestID is a DNS-1123 label close to id, for error messages.
func suggestID(id string) string {
	b := make([]byte, 0, len(id))
	for _, r := range id {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			b = append(b, byte(r))
		case r >= 'A' && r <= 'Z':
			b = append(b, byte(r-'A'+'a'))
		default:
			if len(b) > 0 && b[len(b)-1] != '-' {
				b = append(b, '-')
			}
		}
	}
	if len(b) > MaxIDLength {
		b = b[:MaxIDLength]
	}
	s := string(b)
	for len(s) > 0 && s[len(s)-1] == '-' {
		s = s[:len(s)-1]
	}
	if s == "" {
		return "lease-1"
	}
	return s
}

// ValidateOwner checks that owner can be stored in a label value (reservations
// are labelled with their owner): 1 to 63 letters, digits, '-', '_' or '.',
// starting and ending with a letter or digit.
func ValidateOwner(owner string) error {
	if owner == "" {
		return errors.New("invalid owner \"\": it must not be empty")
	}
	if errs := validation.IsValidLabelValue(owner); len(errs) > 0 {
		return fmt.Errorf("invalid owner %q: %s", owner, errs[0])
	}
	return nil
}
