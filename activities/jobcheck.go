package activities

import (
	"context"
	"fmt"
	"time"

	"go.temporal.io/sdk/activity"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"k8s.io/utils/ptr"

	"github.com/deployflow/deployflow/internal/analysis"
	"github.com/deployflow/deployflow/internal/manifest"
)

// JobCheckInput is one measurement of a Job check analysis: the Job Name
// (deterministic, so a retried attempt finds the Job it created) in the
// lease's Namespace, for Service.
type JobCheckInput struct {
	Namespace string            `json:"namespace"`
	Service   string            `json:"service"`
	Name      string            `json:"name"`
	Job       manifest.JobCheck `json:"job"`
	// Judge: judge the measurement by these conditions (Measurement.Phase).
	Judge *analysis.Conditions `json:"judge,omitempty"`
}

// jobTTL is how long a finished analysis Job stays for inspection.
const jobTTL = int32(3600)

// analysisJob is the Job of an analysis's smoke test: a tenant's image,
// hardened (issue 35.4) so that it runs under every Pod Security level,
// restricted included: as nobody (65534), never root, without privilege
// escalation or any capability, with the runtime's default seccomp
// profile; no API credentials, no other Services' addresses in its
// environment (issue 20.6). Its resources come from the lease namespace's
// LimitRange.
func analysisJob(in JobCheckInput) *batchv1.Job {
	backoff, deadline, ttl, nobody := int32(0), in.Job.Deadline(), jobTTL, int64(65534)
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: in.Name, Namespace: in.Namespace,
			Labels: map[string]string{ServiceLabel: in.Service, manifest.ManagedByLabel: manifest.ManagedBy}},
		Spec: batchv1.JobSpec{
			BackoffLimit: &backoff, ActiveDeadlineSeconds: &deadline, TTLSecondsAfterFinished: &ttl,
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Annotations: in.Job.PodAnnotations},
				Spec: corev1.PodSpec{
					AutomountServiceAccountToken: ptr.To(false),
					EnableServiceLinks:           ptr.To(false),
					RestartPolicy:                corev1.RestartPolicyNever,
					SecurityContext: &corev1.PodSecurityContext{
						RunAsNonRoot: ptr.To(true), RunAsUser: &nobody, RunAsGroup: &nobody,
						SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
					},
					Containers: []corev1.Container{{Name: "check", Image: in.Job.Image, Command: in.Job.Command, Args: in.Job.Args,
						SecurityContext: &corev1.SecurityContext{
							AllowPrivilegeEscalation: ptr.To(false),
							Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
						}}},
				},
			},
		},
	}
}

// RunJob runs an analysis's smoke-test Job and waits for its end: the
// result is 1 when it succeeded, 0 when it failed (or passed its
// activeDeadlineSeconds). It heartbeats while it waits; a retry finds the
// Job it created and waits on it.
func (a *Activities) RunJob(ctx context.Context, in JobCheckInput) (*Measurement, error) {
	m, err := a.runJob(ctx, in)
	return judged(in.Judge, m, err)
}

func (a *Activities) runJob(ctx context.Context, in JobCheckInput) (*Measurement, error) {
	// The operator's bounds where the Job is written: a lease's plan
	// checked them, a rollout started by hand never was (issue 35).
	if err := manifest.CheckAnalysisJob("job", &in.Job, a.Limits, a.ReservedPrefixes, a.AllowedPodKeys); err != nil {
		return nil, invalidInput("analysis Job %s: %v", in.Name, err)
	}
	jobs := a.Kube.BatchV1().Jobs(in.Namespace)
	job := analysisJob(in)
	if _, err := jobs.Create(ctx, job, metav1.CreateOptions{FieldManager: FieldManager}); err != nil && !apierrors.IsAlreadyExists(err) {
		if apierrors.IsInvalid(err) {
			return nil, invalidInput("the API server rejects the analysis Job %s: %v", in.Name, err)
		}
		return nil, fmt.Errorf("create job %s/%s: %w", in.Namespace, in.Name, err)
	}
	var out *Measurement
	err := wait.PollUntilContextCancel(ctx, time.Second, true, func(ctx context.Context) (bool, error) {
		activity.RecordHeartbeat(ctx, in.Name)
		j, err := jobs.Get(ctx, in.Name, metav1.GetOptions{})
		if err != nil {
			return false, nil // read again on the next tick; the heartbeat timeout bounds a lost API server
		}
		for _, c := range j.Status.Conditions {
			if c.Status != corev1.ConditionTrue {
				continue
			}
			switch c.Type {
			case batchv1.JobComplete:
				one := 1.0
				out = &Measurement{Value: &one, Message: "job " + in.Name + " succeeded"}
				return true, nil
			case batchv1.JobFailed:
				zero := 0.0
				out = &Measurement{Value: &zero, Message: fmt.Sprintf("job %s failed: %s %s", in.Name, c.Reason, c.Message)}
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		if ctx.Err() != nil {
			// Cancelled: the rollout aborted or ended (a heartbeat to a closed
			// workflow cancels the activity). The Job goes with it rather
			// than running on to its deadline (issue 20.6).
			dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
			defer cancel()
			bg := metav1.DeletePropagationBackground
			if derr := jobs.Delete(dctx, in.Name, metav1.DeleteOptions{PropagationPolicy: &bg}); derr != nil && !apierrors.IsNotFound(derr) {
				return nil, fmt.Errorf("wait for job %s/%s: %w (and delete it: %v)", in.Namespace, in.Name, err, derr)
			}
		}
		return nil, fmt.Errorf("wait for job %s/%s: %w", in.Namespace, in.Name, err)
	}
	return out, nil
}
