package rollout

import (
	"errors"
	"fmt"

	"github.com/deployflow/deployflow/internal/manifest"
)

// guard is what is wrong with a RolloutInput that the workflow itself
// would never have written. byLease: a lease's workflow started it, from
// a manifest it validated by the rules of its day; a rollout started by
// hand has its steps and analyses validated by today's (issue 35: they
// were never validated), one continuing a run by the rules that run took.
func (in rolloutInput) guard(continued, byLease bool) error {
	var errs []error
	if in.Carry != nil && !continued {
		errs = append(errs, errors.New("carry: is set by the workflow itself when it continues as new; leave it out when starting a rollout"))
	}
	if r := in.Deployment.Spec.Replicas; r != nil && *r > manifest.MaxReplicas {
		errs = append(errs, fmt.Errorf("deployment.spec.replicas: %d is too many: use at most %d (as a lease's service)", *r, manifest.MaxReplicas))
	}
	replicas := int32(1)
	if r := in.Deployment.Spec.Replicas; r != nil {
		replicas = *r
	}
	if err := manifest.ValidateRolloutAnalyses(in.Steps, in.Background, in.BlueGreen, replicas, continued || byLease); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}
