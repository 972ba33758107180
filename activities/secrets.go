package activities

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"

	"github.com/deployflow/deployflow/internal/manifest"
)

// Where a lease's secrets touch the cluster (issue 37.3): each service's
// registry login and secret env values, as immutable Secrets named by
// their content (internal/manifest/secrets.go). The worker creates them
// and deletes those no ReplicaSet refers to any more, by label; it never
// reads a Secret (RBAC: create and deletecollection only).

// applySecrets creates m's Secrets in its namespace (one that exists has
// the same content: its name is its digest), then deletes the lease's
// Secrets that neither m nor any ReplicaSet of the namespace refers to:
// a ReplicaSet kept for an undo keeps the Secrets it was made with. A
// manifest without secrets writes and deletes nothing.
func (a *Activities) applySecrets(ctx context.Context, m *manifest.Manifest) error {
	if !m.HasSecrets() {
		return nil
	}
	ns := manifest.Namespace(m.Lease)
	keep := map[string]bool{}
	for _, s := range m.Secrets() {
		keep[s.Labels[manifest.SecretDigestLabel]] = true
		_, err := a.Kube.CoreV1().Secrets(ns).Create(ctx, s, metav1.CreateOptions{FieldManager: FieldManager})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create secret %s/%s: %s", ns, s.Name, m.RedactString(err.Error()))
		}
	}
	// What the ReplicaSets refer to, read from the API server (not a
	// cache: a Secret is deleted only on what is known).
	rsList, err := a.Kube.AppsV1().ReplicaSets(ns).List(ctx, metav1.ListOptions{LabelSelector: manifest.LeaseLabel + "=" + m.Lease})
	if err != nil {
		return fmt.Errorf("list replicasets of %s (which secrets they use): %w", ns, err)
	}
	for i := range rsList.Items {
		for _, name := range referencedSecrets(&rsList.Items[i]) {
			if i := strings.LastIndexByte(name, '-'); i > 0 {
				keep[name[i+1:]] = true
			}
		}
	}
	req, err := labels.NewRequirement(manifest.SecretLabel, selection.Exists, nil)
	if err != nil {
		return err
	}
	sel := labels.NewSelector().Add(*req)
	notIn, err := labels.NewRequirement(manifest.SecretDigestLabel, selection.NotIn, slices.Sorted(maps.Keys(keep)))
	if err != nil {
		return err
	}
	sel = sel.Add(*notIn)
	if err := a.Kube.CoreV1().Secrets(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: sel.String()}); err != nil {
		return fmt.Errorf("delete unused secrets of %s: %w", ns, err)
	}
	return nil
}

// referencedSecrets are the Secrets rs's pods refer to: image pull
// secrets and env values.
func referencedSecrets(rs *appsv1.ReplicaSet) []string {
	spec := rs.Spec.Template.Spec
	var out []string
	for _, r := range spec.ImagePullSecrets {
		out = append(out, r.Name)
	}
	for _, c := range spec.Containers {
		for _, e := range c.Env {
			if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
				out = append(out, e.ValueFrom.SecretKeyRef.Name)
			}
		}
	}
	return out
}
