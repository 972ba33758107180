package activities

import (
	"context"
	"fmt"
	"strings"

	"go.temporal.io/sdk/temporal"
	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ErrDeploymentConflict: a real Deployment object with the service's name
// exists; its controller would fight deployflow over the same pods.
const ErrDeploymentConflict = "DeploymentConflict"

// DefaultDeploymentInput is the desired Deployment to default.
type DefaultDeploymentInput struct {
	Deployment *appsv1.Deployment `json:"deployment"`
}

// DefaultDeployment has the API server default and validate the desired
// Deployment with a dry-run create (nothing is stored). The rollout engine
// works on the result: the pod template then carries exactly the defaults
// the ReplicaSets it creates will carry, so its pod-template-hash is the one
// the Deployment controller would compute in this cluster. A rejected
// Deployment is a non-retryable InvalidInput with the server's field errors.
func (a *Activities) DefaultDeployment(ctx context.Context, in DefaultDeploymentInput) (*appsv1.Deployment, error) {
	if in.Deployment == nil {
		return nil, invalidInput("defaultDeployment: deployment is required")
	}
	// The pod policy first (issue 20.5): whoever typed the template.
	if problems := podPolicyProblems("deployment.spec.template.spec", &in.Deployment.Spec.Template.Spec, a.allowedCapabilities()); len(problems) > 0 {
		return nil, temporal.NewNonRetryableApplicationError(strings.Join(problems, "\n"), ErrPodPolicy, nil)
	}
	d := in.Deployment.DeepCopy()
	d.Status = appsv1.DeploymentStatus{}
	d.ResourceVersion, d.UID = "", ""
	got, err := a.Kube.AppsV1().Deployments(d.Namespace).Create(ctx, d, metav1.CreateOptions{
		DryRun:       []string{metav1.DryRunAll},
		FieldManager: FieldManager,
	})
	switch {
	case err == nil:
	case apierrors.IsInvalid(err) || apierrors.IsBadRequest(err):
		return nil, invalidInput("the API server rejects deployment %s/%s: %v", d.Namespace, d.Name, err)
	case apierrors.IsAlreadyExists(err):
		return nil, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("a Deployment %s/%s exists in the cluster: its controller would fight deployflow over the same pods; delete it (deployflow rolls the service out itself) or rename the service", d.Namespace, d.Name),
			ErrDeploymentConflict, nil)
	default:
		return nil, fmt.Errorf("dry-run create deployment %s/%s: %w", d.Namespace, d.Name, err)
	}
	out := in.Deployment.DeepCopy()
	out.Spec = got.Spec
	return out, nil
}

// classifyNew classifies a service of which nothing runs (its namespace
// does not exist yet), without the API server: the template passes the
// pod policy, as DefaultDeployment would judge it first.
func classifyNew(service string, d *appsv1.Deployment, allowedCaps []string) (*Classification, error) {
	if problems := podPolicyProblems("deployment.spec.template.spec", &d.Spec.Template.Spec, allowedCaps); len(problems) > 0 {
		return nil, temporal.NewNonRetryableApplicationError(strings.Join(problems, "\n"), ErrPodPolicy, nil)
	}
	c := classify(d, nil)
	c.Service = service
	return c, nil
}
