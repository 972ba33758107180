// Package kube builds Kubernetes clients the way deployflow's binaries share:
// with kubectl's loading rules.
package kube

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/homedir"
)

// RESTConfig loads the client configuration as kubectl does: the file
// kubeconfig if given (--kubeconfig), else $KUBECONFIG (a list of files,
// merged), else ~/.kube/config, else the in-cluster service account when
// running in a pod; context, if not empty, replaces the current context.
func RESTConfig(kubeconfig, context, userAgent string) (*rest.Config, error) {
	loader, rules := load(kubeconfig, context)
	cfg, err := loader.ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("kubernetes config (%s): %w", describe(rules, context), err)
	}
	cfg.UserAgent = userAgent
	// A rollout lists and scales in bursts; client-go's 5 qps default would
	// make us slower than the Deployment controller.
	cfg.QPS, cfg.Burst = 50, 100
	return cfg, nil
}

func load(kubeconfig, context string) (clientcmd.ClientConfig, *clientcmd.ClientConfigLoadingRules) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = kubeconfig
	if os.Getenv(clientcmd.RecommendedConfigPathEnvVar) == "" {
		// ~/.kube/config of the HOME of now (client-go fixes it at init).
		rules.Precedence = []string{filepath.Join(homedir.HomeDir(), clientcmd.RecommendedHomeDir, clientcmd.RecommendedFileName)}
	}
	return clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: context}), rules
}

// Namespace is the namespace of the configuration RESTConfig loads, as
// kubectl's default: its context's, in a pod the pod's own, else
// "default".
func Namespace(kubeconfig, context string) string {
	loader, _ := load(kubeconfig, context)
	ns, _, err := loader.Namespace()
	if err != nil || ns == "" {
		return "default"
	}
	return ns
}

// describe says where the configuration was looked for, for errors.
func describe(rules *clientcmd.ClientConfigLoadingRules, context string) string {
	where := "--kubeconfig " + rules.ExplicitPath
	if rules.ExplicitPath == "" {
		where = "looked in " + strings.Join(rules.Precedence, ":") + " and for an in-cluster service account; set KUBECONFIG or --kubeconfig"
	}
	if context != "" {
		where += ", --context " + context
	}
	return where
}

// NewClientset is RESTConfig followed by kubernetes.NewForConfig.
func NewClientset(kubeconfig, context, userAgent string) (kubernetes.Interface, error) {
	cfg, err := RESTConfig(kubeconfig, context, userAgent)
	if err != nil {
		return nil, err
	}
	return kubernetes.NewForConfig(cfg)
}
