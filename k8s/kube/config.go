// Package kube builds Kubernetes clients the way deployflow's binaries share:
// from a kubeconfig when one is given, else from the in-cluster service
// account.
package kube

import (
	"fmt"
	"path/filepath"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// RESTConfig loads kubeconfig (a path, or a list like $KUBECONFIG), or the
// in-cluster configuration when kubeconfig is empty.
func RESTConfig(kubeconfig, userAgent string) (*rest.Config, error) {
	var cfg *rest.Config
	if kubeconfig == "" {
		c, err := rest.InClusterConfig()
		if err != nil {
			return nil, fmt.Errorf("no kubeconfig given and not running in a cluster (%v): set --kubeconfig or KUBECONFIG", err)
		}
		cfg = c
	} else {
		rules := &clientcmd.ClientConfigLoadingRules{Precedence: filepath.SplitList(kubeconfig)}
		c, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
		if err != nil {
			return nil, fmt.Errorf("kubeconfig %s: %w", kubeconfig, err)
		}
		cfg = c
	}
	cfg.UserAgent = userAgent
	// A rollout lists and scales in bursts; client-go's 5 qps default would
	// make us slower than the Deployment controller.
	cfg.QPS, cfg.Burst = 50, 100
	return cfg, nil
}

// NewClientset is RESTConfig followed by kubernetes.NewForConfig.
func NewClientset(kubeconfig, userAgent string) (kubernetes.Interface, error) {
	cfg, err := RESTConfig(kubeconfig, userAgent)
	if err != nil {
		return nil, err
	}
	return kubernetes.NewForConfig(cfg)
}
