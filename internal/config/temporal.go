package config

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/contrib/envconfig"

	"github.com/deployflow/deployflow/internal/codec"
)

// Temporal is how deployflow reaches Temporal, configured the way the
// `temporal` CLI and every SDK are: a profile of the client config file
// (TEMPORAL_CONFIG_FILE, by default ~/.config/temporalio/temporal.toml;
// TEMPORAL_PROFILE, by default "default"), then the environment
// (TEMPORAL_ADDRESS, TEMPORAL_NAMESPACE, TEMPORAL_API_KEY, TEMPORAL_TLS,
// TEMPORAL_TLS_CLIENT_CERT_PATH, TEMPORAL_TLS_CLIENT_KEY_PATH,
// TEMPORAL_TLS_SERVER_CA_CERT_PATH, TEMPORAL_TLS_SERVER_NAME, ... as the
// SDK's envconfig reads them), then deployflow's flags on top. Nothing set
// anywhere means the local dev server, 127.0.0.1:7233, without TLS.
//
// An API key turns TLS on (Temporal Cloud's rule); TLS is never dropped for
// plaintext once configured.
type Temporal struct {
	TemporalAddress    string // --temporal-address
	TemporalNamespace  string // --temporal-namespace
	TemporalProfile    string // --temporal-profile
	TemporalConfigFile string // --temporal-config-file
	TemporalTLS        bool   // --temporal-tls
	TemporalTLSCA      string // --temporal-tls-ca
	TemporalTLSCert    string // --temporal-tls-cert
	TemporalTLSKey     string // --temporal-tls-key
	TemporalServerName string // --temporal-tls-server-name
	// CodecKeysFile (--codec-keys-file) holds the keys that encrypt every
	// payload and failure message deployflow writes into Temporal
	// (internal/codec); empty: none are encrypted, and manifests with
	// secrets are refused.
	CodecKeysFile string

	profile envconfig.ClientConfigProfile // resolved
}

// RegisterFlags binds t to fs. Flags left empty fall back to the profile
// and the environment (Resolve).
func (t *Temporal) RegisterFlags(fs *flag.FlagSet) {
	fs.StringVar(&t.TemporalAddress, "temporal-address", "", "Temporal frontend host:port (default: TEMPORAL_ADDRESS, the profile's address, else "+DefaultTemporalAddress+")")
	fs.StringVar(&t.TemporalNamespace, "temporal-namespace", "", "Temporal namespace (default: TEMPORAL_NAMESPACE, the profile's, else "+DefaultNamespace+")")
	fs.StringVar(&t.TemporalProfile, "temporal-profile", "", "profile of the Temporal client config file to use (default: TEMPORAL_PROFILE, else \"default\")")
	fs.StringVar(&t.TemporalConfigFile, "temporal-config-file", "", "Temporal client config file, TOML as the temporal CLI writes it (default: TEMPORAL_CONFIG_FILE, else ~/.config/temporalio/temporal.toml)")
	fs.BoolVar(&t.TemporalTLS, "temporal-tls", false, "connect to Temporal with TLS (also on with any --temporal-tls-* flag, TEMPORAL_TLS=true, or an API key)")
	fs.StringVar(&t.TemporalTLSCA, "temporal-tls-ca", "", "PEM file of the CA that signed the Temporal server's certificate (default: TEMPORAL_TLS_SERVER_CA_CERT_PATH, else the system roots)")
	fs.StringVar(&t.TemporalTLSCert, "temporal-tls-cert", "", "PEM client certificate for mutual TLS (default: TEMPORAL_TLS_CLIENT_CERT_PATH)")
	fs.StringVar(&t.TemporalTLSKey, "temporal-tls-key", "", "PEM client key for mutual TLS (default: TEMPORAL_TLS_CLIENT_KEY_PATH)")
	fs.StringVar(&t.TemporalServerName, "temporal-tls-server-name", "", "server name the Temporal server's certificate must carry, if not the address's host (default: TEMPORAL_TLS_SERVER_NAME)")
	fs.StringVar(&t.CodecKeysFile, "codec-keys-file", os.Getenv("DEPLOYFLOW_CODEC_KEYS_FILE"), "JSON file of the keys that encrypt what deployflow writes into Temporal, {\"active\": id, \"keys\": {id: base64}} (make one with 'deployflow codec-key'); every worker and CLI of a namespace needs the same; empty: nothing is encrypted and manifests with secrets are refused (env DEPLOYFLOW_CODEC_KEYS_FILE)")
}

// Resolve loads the profile and the environment under the flags: afterwards
// TemporalAddress and TemporalNamespace hold what the client dials.
func (t *Temporal) Resolve() error {
	prof, err := envconfig.LoadClientConfigProfile(envconfig.LoadClientConfigProfileOptions{
		ConfigFilePath:    t.TemporalConfigFile,
		ConfigFileProfile: t.TemporalProfile,
	})
	if err != nil {
		return fmt.Errorf("temporal client config (--temporal-config-file %s, --temporal-profile %s): %w; list the profiles with 'temporal config list'",
			orDefault(t.TemporalConfigFile, orDefault(os.Getenv("TEMPORAL_CONFIG_FILE"), envconfig.DefaultConfigFilePath())),
			orDefault(t.TemporalProfile, orDefault(os.Getenv("TEMPORAL_PROFILE"), envconfig.DefaultConfigFileProfile)), err)
	}
	prof.Address = orDefault(t.TemporalAddress, orDefault(prof.Address, DefaultTemporalAddress))
	prof.Namespace = orDefault(t.TemporalNamespace, orDefault(prof.Namespace, DefaultNamespace))
	if t.TemporalTLS || t.TemporalTLSCA != "" || t.TemporalTLSCert != "" || t.TemporalTLSKey != "" || t.TemporalServerName != "" {
		if prof.TLS == nil {
			prof.TLS = &envconfig.ClientConfigTLS{}
		}
		prof.TLS.Disabled = false
		setPath(&prof.TLS.ServerCACertPath, &prof.TLS.ServerCACertData, t.TemporalTLSCA)
		setPath(&prof.TLS.ClientCertPath, &prof.TLS.ClientCertData, t.TemporalTLSCert)
		setPath(&prof.TLS.ClientKeyPath, &prof.TLS.ClientKeyData, t.TemporalTLSKey)
		prof.TLS.ServerName = orDefault(t.TemporalServerName, prof.TLS.ServerName)
	}
	t.TemporalAddress, t.TemporalNamespace = prof.Address, prof.Namespace
	t.profile = prof
	return nil
}

// setPath makes a flag's file win over the profile's path or inline data.
func setPath(path *string, data *[]byte, flagPath string) {
	if flagPath != "" {
		*path, *data = flagPath, nil
	}
}

// TLSEnabled reports whether the client dials with TLS.
func (t *Temporal) TLSEnabled() bool {
	if t.profile.TLS != nil {
		return !t.profile.TLS.Disabled
	}
	return t.profile.APIKey != ""
}

// ClientOptions are the SDK client options for the resolved settings:
// address, namespace, TLS (custom CA, client certificate), API key, gRPC
// metadata. Callers add their logger and metrics handler.
func (t *Temporal) ClientOptions() (client.Options, error) {
	if t.profile.Address == "" {
		return client.Options{}, errors.New("temporal settings not resolved (internal error: call Resolve first)")
	}
	opts, err := t.profile.ToClientOptions(envconfig.ToClientOptionsRequest{})
	if err != nil {
		return client.Options{}, fmt.Errorf("temporal TLS settings: %w (check --temporal-tls-ca/-cert/-key or TEMPORAL_TLS_*)", err)
	}
	c, err := t.Codec()
	if err != nil {
		return client.Options{}, err
	}
	if c != nil {
		c.Apply(&opts)
	}
	return opts, nil
}

// Codec is the payload codec of --codec-keys-file, or nil without one.
func (t *Temporal) Codec() (*codec.Codec, error) {
	if t.CodecKeysFile == "" {
		return nil, nil
	}
	k, err := codec.LoadKeys(t.CodecKeysFile)
	if err != nil {
		return nil, fmt.Errorf("--codec-keys-file: %w", err)
	}
	return codec.New(k)
}

// validate names the first bad Temporal setting.
func (t *Temporal) validate() []error {
	var errs []error
	if t.TemporalAddress == "" || !strings.Contains(t.TemporalAddress, ":") {
		errs = append(errs, fmt.Errorf("--temporal-address %q: want host:port, e.g. %s", t.TemporalAddress, DefaultTemporalAddress))
	}
	if t.TemporalNamespace == "" {
		errs = append(errs, errors.New("--temporal-namespace is empty: set it or TEMPORAL_NAMESPACE (e.g. default)"))
	}
	if (t.TemporalTLSCert == "") != (t.TemporalTLSKey == "") {
		errs = append(errs, errors.New("--temporal-tls-cert and --temporal-tls-key go together: mutual TLS needs both"))
	}
	return errs
}

// DialHint explains a failed dial with these settings, or is "": TLSHint,
// and, with TLS on and no client certificate, a connection the server closed
// during or right after the handshake (TLS 1.3 reports a missing client
// certificate that way).
func (t *Temporal) DialHint(err error) string {
	if hint := TLSHint(err); hint != "" {
		return hint
	}
	if err == nil || !t.TLSEnabled() || t.profile.TLS != nil && (t.profile.TLS.ClientCertPath != "" || len(t.profile.TLS.ClientCertData) > 0) {
		return ""
	}
	msg := err.Error()
	if strings.Contains(msg, "broken pipe") || strings.Contains(msg, "connection reset") || strings.Contains(msg, "EOF") {
		return "the server closed the TLS connection: it may require a client certificate (--temporal-tls-cert and --temporal-tls-key, or TEMPORAL_TLS_CLIENT_CERT_PATH and TEMPORAL_TLS_CLIENT_KEY_PATH)"
	}
	return ""
}

// TLSHint explains a failed dial that is a TLS problem, or is "".
func TLSHint(err error) string {
	if err == nil {
		return ""
	}
	msg := err.Error()
	switch {
	case strings.Contains(msg, "certificate required"):
		return "the server requires a client certificate (mutual TLS): set --temporal-tls-cert and --temporal-tls-key (TEMPORAL_TLS_CLIENT_CERT_PATH, TEMPORAL_TLS_CLIENT_KEY_PATH)"
	case strings.Contains(msg, "bad certificate") || strings.Contains(msg, "unknown certificate authority") && strings.Contains(msg, "remote error"):
		return "the server refused the client certificate: use one signed by a CA the server trusts (--temporal-tls-cert, --temporal-tls-key)"
	case strings.Contains(msg, "x509:") || strings.Contains(msg, "certificate"):
		return "the Temporal server's certificate is not trusted or does not match: set --temporal-tls-ca (TEMPORAL_TLS_SERVER_CA_CERT_PATH) to the CA that signed it, or --temporal-tls-server-name to the name it carries"
	case strings.Contains(msg, "first record does not look like a TLS handshake"):
		return "the server does not speak TLS: drop --temporal-tls (and TEMPORAL_TLS*, the API key) or point at its TLS port"
	case strings.Contains(msg, "tls:") || strings.Contains(msg, "handshake"):
		return "the TLS handshake failed: the server may require a client certificate (--temporal-tls-cert and --temporal-tls-key) or not speak TLS"
	}
	return ""
}

func orDefault(s, def string) string {
	if s != "" {
		return s
	}
	return def
}
