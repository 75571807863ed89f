package client

import (
	"crypto/tls"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"sigs.k8s.io/yaml"
)

// Config says which server to talk to and how.
type Config struct {
	// Server is the API's base URL, "https://host:port"; without a
	// scheme ("host:port"), https:// is assumed.
	Server string
	// Servers are more API URLs of the same cluster: a request that
	// cannot reach the server in use goes to the next (agents fail over
	// between servers this way). Not written to the config file.
	Servers []string
	// CAData is the PEM of the cluster CA that signed the server's
	// certificate. Without it the system roots are used.
	CAData []byte
	// Token is the bearer token, "<id>.<secret>".
	Token string
	// Insecure allows a plain http:// server URL. It never switches off
	// certificate checks for https:// servers: a cluster always has a CA
	// to verify against, so there is no reason to skip verification.
	Insecure bool
	// Namespace is the namespace used when a request names none.
	Namespace string
	// Timeout bounds each request except watches; 0 means no bound.
	Timeout time.Duration
	// TLS, when set, replaces the TLS configuration made from CAData: an
	// agent that joins with only the CA's pin verifies by the pin.
	TLS *tls.Config
}

// fileConfig is the on-disk shape of a Config. The keys follow
// kubeconfig's spelling so users recognise them.
type fileConfig struct {
	Server    string `json:"server,omitempty"`
	CAData    []byte `json:"certificate-authority-data,omitempty"`
	Token     string `json:"token,omitempty"`
	Namespace string `json:"namespace,omitempty"`
}

// Environment variables that locate or override the configuration.
const (
	EnvConfig = "OUTPOST_CONFIG"
	EnvServer = "OUTPOST_SERVER"
	EnvToken  = "OUTPOST_TOKEN"
)

// DefaultConfigPath is $OUTPOST_CONFIG, else $XDG_CONFIG_HOME/outpost/config,
// else ~/.config/outpost/config. It returns "" only when no home directory
// can be found.
func DefaultConfigPath() string {
	if p := os.Getenv(EnvConfig); p != "" {
		return p
	}
	if x := os.Getenv("XDG_CONFIG_HOME"); x != "" {
		return filepath.Join(x, "outpost", "config")
	}
	home, err := os.UserHomeDir()
	if err != nil || home == "" {
		return ""
	}
	return filepath.Join(home, ".config", "outpost", "config")
}

// LoadConfig reads the configuration file at path (DefaultConfigPath when
// path is "") and applies the OUTPOST_SERVER and OUTPOST_TOKEN overrides.
//
// A missing file at the default location, or at $OUTPOST_CONFIG, is not
// an error: a user may give everything through the environment or flags,
// and the caller finds out that Server is empty (MissingConfigFile then
// says why). A missing file the caller named explicitly is an error
// wrapping ErrNoConfig, since a typo there should not go unnoticed.
func LoadConfig(path string) (Config, error) {
	cfg, err := LoadConfigFile(path)
	if err != nil {
		return Config{}, err
	}
	if s := os.Getenv(EnvServer); s != "" {
		cfg.Server = s
	}
	if t := os.Getenv(EnvToken); t != "" {
		cfg.Token = t
	}
	return cfg, nil
}

// LoadConfigFile is LoadConfig without the environment: what the file
// itself holds, for a command that writes the file back.
func LoadConfigFile(path string) (Config, error) {
	explicit := path != ""
	if !explicit {
		path = DefaultConfigPath()
	}
	var cfg Config
	if path != "" {
		data, err := os.ReadFile(path)
		switch {
		case errors.Is(err, fs.ErrNotExist) && !explicit:
		case errors.Is(err, fs.ErrNotExist):
			return Config{}, fmt.Errorf("%w: %s does not exist", ErrNoConfig, path)
		case err != nil:
			return Config{}, fmt.Errorf("read client configuration: %w", err)
		default:
			var fc fileConfig
			if err := yaml.Unmarshal(data, &fc); err != nil {
				return Config{}, fmt.Errorf("client configuration %s: %w", path, err)
			}
			cfg = Config{Server: fc.Server, CAData: fc.CAData, Token: fc.Token, Namespace: fc.Namespace}
		}
	}
	return cfg, nil
}

// MissingConfigFile explains an empty Server after LoadConfig(""): when
// $OUTPOST_CONFIG names a file that does not exist, it returns an error
// wrapping ErrNoConfig that says so, else nil. A user who pointed the
// variable at a file wants to hear about that file, not that no server is
// configured.
func MissingConfigFile() error {
	p := os.Getenv(EnvConfig)
	if p == "" {
		return nil
	}
	if _, err := os.Stat(p); errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%w: %s (named by $%s) does not exist", ErrNoConfig, p, EnvConfig)
	}
	return nil
}

// WriteConfig writes cfg to path with mode 0600, creating the directories
// (0700) it needs. The file is replaced atomically so a reader never sees
// half a token. Insecure and Timeout are per-invocation settings and are
// not written.
func WriteConfig(path string, cfg Config) error {
	if path == "" {
		return fmt.Errorf("%w: no path to write the client configuration to", ErrNoConfig)
	}
	data, err := yaml.Marshal(fileConfig{Server: cfg.Server, CAData: cfg.CAData, Token: cfg.Token, Namespace: cfg.Namespace})
	if err != nil {
		return fmt.Errorf("encode client configuration: %w", err)
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("write client configuration: %w", err)
	}
	f, err := os.CreateTemp(dir, ".config-*")
	if err != nil {
		return fmt.Errorf("write client configuration: %w", err)
	}
	tmp := f.Name()
	defer os.Remove(tmp) // no-op after a successful rename
	if err := f.Chmod(0o600); err != nil {
		f.Close()
		return fmt.Errorf("write client configuration: %w", err)
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return fmt.Errorf("write client configuration: %w", err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("write client configuration: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write client configuration: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("write client configuration: %w", err)
	}
	return nil
}
