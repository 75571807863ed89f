package install

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"
)

// Role is what a host runs: a control-plane server or a node agent.
type Role string

// The roles.
const (
	Server Role = "server"
	Agent  Role = "agent"
)

// Roles are every role, in the order uninstall stops them (the agent
// first: its node then goes NotReady while the API still answers).
var Roles = []Role{Agent, Server}

// Where things go.
const (
	ConfigDir  = "/etc/outpost"
	UnitDir    = "/etc/systemd/system"
	DataRoot   = "/var/lib/outpost"
	SecretFile = ConfigDir + "/cluster-secret"
	// PackagedBinary is where the packages put the binary, and so what
	// the packaged units run first.
	PackagedBinary = "/usr/bin/outpost"
	// LocalBinary is where install copies a binary run from elsewhere
	// (StableBinary).
	LocalBinary = "/usr/local/bin/outpost"
	// BinaryNote names the binary install copied to LocalBinary, so that
	// uninstall removes that copy and nothing else.
	BinaryNote = ConfigDir + "/installed-binary"
)

// PackagedUnitDirs are where a package puts units (Debian's /lib is
// /usr/lib on merged-/usr hosts, not on older ones).
var PackagedUnitDirs = []string{"/usr/lib/systemd/system", "/lib/systemd/system"}

// Marker is the first line of every unit install writes: uninstall
// removes only files that carry it.
const Marker = "# Written by outpost install; outpost uninstall removes it."

// Unit is the role's unit name.
func (r Role) Unit() string { return "outpost-" + string(r) + ".service" }

// BinaryDir is the self-update directory the role's binary runs from
// (package selfupdate): a release replaces it there.
func (r Role) BinaryDir() string {
	if r == Agent {
		return DataRoot + "/agent-bin"
	}
	return DataRoot + "/bin"
}

// DataDir is the role's default --data-dir.
func (r Role) DataDir() string { return DataRoot + "/" + string(r) }

// EnvFile holds the role's flags (and the agent's join string).
func (r Role) EnvFile() string { return ConfigDir + "/" + string(r) + ".env" }

// ArgsVar is the variable of EnvFile that holds the role's flags.
func (r Role) ArgsVar() string { return "OUTPOST_" + strings.ToUpper(string(r)) + "_ARGS" }

// JoinVar is the agent's join string in its EnvFile: `outpost agent`
// takes --token from it.
const JoinVar = "OUTPOST_JOIN"

// File is a file install writes.
type File struct {
	Path    string
	Content string
	Mode    fs.FileMode
	// Redacted, if set, is what --dry-run shows instead of Content: the
	// file holds a secret.
	Redacted string
}

// Shown is the file as --dry-run prints it.
func (f File) Shown() string {
	if f.Redacted != "" {
		return f.Redacted
	}
	return f.Content
}

// Unit renders the role's unit for binary, the outpost binary that
// installs itself into the role's BinaryDir at the first start.
//
// Restart=always rather than on-failure: a server or agent that has
// swapped in a new binary exits 0 to be started on it (package
// selfupdate), and a crash is restarted either way.
func Unit(r Role, binary string) string {
	bin := r.BinaryDir()
	good := bin + "/good/outpost"
	var b strings.Builder
	b.WriteString(Marker + "\n")
	switch r {
	case Server:
		b.WriteString("# outpost control-plane member. Its flags are in " + r.EnvFile() + ",\n# the cluster secret in " + SecretFile + " (mode 0600).\n")
	case Agent:
		b.WriteString("# outpost node agent. Its flags and its join string are in\n# " + r.EnvFile() + " (mode 0600); after the first start it uses the\n# credential it saved in its data dir.\n")
	}
	desc := map[Role]string{Server: "outpost control-plane server", Agent: "outpost node agent"}[r]
	fmt.Fprintf(&b, `[Unit]
Description=%s
Documentation=man:outpost-%s(1)
Wants=network-online.target
After=network-online.target
# A binary on trial that fails at start must be started again until the
# trial check rolls it back; a start limit would leave the unit failed.
StartLimitIntervalSec=0

[Service]
Type=notify
EnvironmentFile=%s
ExecStartPre=%s adm binary install --dir %s
ExecStartPre=%s adm binary check --dir %s
`, desc, r, r.EnvFile(), binary, bin, good, bin)
	switch r {
	case Server:
		fmt.Fprintf(&b, "ExecStart=%s/current/outpost server --binary-dir %s --data-dir %s --cluster-secret-file %s $%s\n", bin, bin, r.DataDir(), SecretFile, r.ArgsVar())
	case Agent:
		fmt.Fprintf(&b, "ExecStart=%s/current/outpost agent --binary-dir %s --data-dir %s $%s\n", bin, bin, r.DataDir(), r.ArgsVar())
	}
	fmt.Fprintf(&b, "ExecStopPost=%s adm binary stopped --dir %s\n", good, bin)
	if r == Agent {
		b.WriteString(`# The agent's containerd and the containers' shims live in this unit's
# cgroup: restarting or stopping the agent (a binary update too) must not
# kill them; pods run on while the agent is away.
KillMode=process
Delegate=yes
`)
	}
	pet := map[Role]string{Server: "the server's API answers /livez", Agent: "the agent's node loop turns"}[r]
	b.WriteString("# It pets systemd's watchdog while " + pet + ";\n# systemd restarts it when it stops.\n")
	b.WriteString(`Restart=always
RestartSec=2
WatchdogSec=60
TimeoutStartSec=120
`)
	if r == Server {
		b.WriteString(`# The raft log must reach the disk before a write is acknowledged; give
# shutdown time to finish in-flight applies.
TimeoutStopSec=30
`)
	}
	b.WriteString(`LimitNOFILE=1048576

[Install]
WantedBy=multi-user.target
`)
	return b.String()
}

// Config renders the role's files under /etc/outpost: its flags, and
// the secret (the server's cluster secret, the agent's join string; ""
// for an agent that has joined already).
func Config(r Role, args []string, secret string) ([]File, error) {
	if err := checkArgs(args); err != nil {
		return nil, err
	}
	quoted := `"` + strings.Join(args, " ") + `"`
	switch r {
	case Server:
		if secret == "" {
			return nil, errors.New("the cluster secret is empty")
		}
		return []File{
			{Path: r.EnvFile(), Mode: 0o644, Content: "# outpost server's flags (outpost server --help), read by " + r.Unit() + ".\n" +
				"# Change them here and run: systemctl restart " + r.Unit() + "\n" + r.ArgsVar() + "=" + quoted + "\n"},
			{Path: SecretFile, Mode: 0o600, Content: secret + "\n", Redacted: hidden(secret) + "\n"},
		}, nil
	case Agent:
		content := "# outpost agent's flags (outpost agent --help), read by " + r.Unit() + ".\n" +
			"# Change them here and run: systemctl restart " + r.Unit() + "\n" + r.ArgsVar() + "=" + quoted + "\n"
		if secret != "" {
			if strings.ContainsAny(secret, " \t\n\"'\\$") {
				return nil, errors.New("the join string has a space, a quote, a backslash or a $ in it: it is not one from outpost adm token create")
			}
			const head = "# The join string, needed until the agent has joined.\n" + JoinVar + "="
			return []File{{Path: r.EnvFile(), Mode: 0o600, Content: content + head + secret + "\n", Redacted: content + head + hidden(secret) + "\n"}}, nil
		}
		return []File{{Path: r.EnvFile(), Mode: 0o600, Content: content}}, nil
	}
	return nil, fmt.Errorf("role %q: want server or agent", r)
}

// checkArgs refuses arguments that systemd would split or expand: the
// unit reads them as $VAR, which splits at whitespace and takes no
// quotes.
func checkArgs(args []string) error {
	var errs []error
	for _, a := range args {
		if a == "" || strings.ContainsAny(a, " \t\n\"'\\$%") {
			errs = append(errs, fmt.Errorf("%q: a flag of the installed unit may not be empty or have a space, a quote, a backslash, a $ or a %% in it", a))
		}
	}
	return errors.Join(errs...)
}

// envValue is the value of name in an env file as Config writes it ("" if
// absent), unquoted.
func envValue(content, name string) string {
	for _, l := range strings.Split(content, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(l), name+"="); ok {
			return strings.Trim(v, `"`)
		}
	}
	return ""
}

// under is p inside root.
func under(root, p string) string {
	if root == "" {
		return p
	}
	return filepath.Join(root, p)
}
