package admission

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/outpost-edge/outpost/controlplane/api"
)

// Config is the admission part of the server's config file (`outpost
// server --config FILE`). A nil plugin is not enabled.
//
// The file has the shape of the seed's master-config.yaml, YAML or JSON.
// A full example, with every accepted field:
//
//	apiVersion: v1                # optional; v1
//	kind: MasterConfig            # optional; MasterConfig
//	admissionConfig:
//	  pluginConfig:
//	    PodNodeConstraints:
//	      configuration:
//	        apiVersion: v1        # the seed's "apiversion" is accepted too
//	        kind: PodNodeConstraintsConfig
//	        nodeSelectorLabelBlacklist:   # left out: [kubernetes.io/hostname]
//	        - kubernetes.io/hostname
//	        - region
//	    PodNodeSelector:
//	      configuration:
//	        podNodeSelectorPluginConfig:
//	          clusterDefaultNodeSelector: "k3=v3"
//	          ns1: region=west,env=test,infra=fedora,os=fedora
//	    DefaultTolerationSeconds: # on unless disabled (SPEC ADM-3)
//	      configuration:
//	        kind: DefaultAdmissionConfig
//	        apiVersion: v1
//	        disable: false
//	kubernetesMasterConfig:       # the seed's second place: the same
//	  admissionConfig:            # plugins; where both name a plugin,
//	    pluginConfig:             # they must configure it alike
//	      PodNodeConstraints:
//	        configuration:
//	          apiVersion: v1
//	          kind: PodNodeConstraintsConfig
//	          nodeSelectorLabelBlacklist:
//	          - kubernetes.io/hostname
//	          - region
//	  controllerArguments:        # seed 000 §14.9.5; taint-based
//	    feature-gates:            # eviction is always on, so only
//	    - TaintBasedEvictions=true  # this gate is accepted
//	    node-monitor-grace-period: ["40s"]  # the eviction settings, as
//	    node-eviction-rate: ["0.1"]         # kube-controller-manager's
//	    secondary-node-eviction-rate: ["0.01"]  # flags and the server's
//	    unhealthy-zone-threshold: ["0.55"]
//	    large-cluster-size-threshold: ["50"]
//	    fence-margin: ["5s"]                # outpost's own
//
// Instead of configuration, a plugin may name a file holding it, as the
// seed does for PodNodeSelector (LoadConfig resolves it, relative to the
// config file's directory):
//
//	admissionConfig:
//	  pluginConfig:
//	    PodNodeSelector:
//	      location: podnodeselector.yaml
//
// Lines holding only "..." are ignored: the seed's samples use them for
// the parts of the file they leave out.
type Config struct {
	PodNodeConstraints       *PodNodeConstraintsConfig
	PodNodeSelector          *PodNodeSelectorConfig
	DefaultTolerationSeconds DefaultTolerationSecondsConfig
	// Warnings are what the file says that outpost accepts but does not
	// need (a feature gate of something always on); the server logs them.
	Warnings []string
	// ControllerArguments are the node lifecycle and eviction settings of
	// kubernetesMasterConfig.controllerArguments, by flag name (one of
	// ControllerArgumentNames), unparsed: the server reads them as it
	// reads its flags, and a flag on the command line wins.
	ControllerArguments map[string]string
}

// PodNodeConstraintsConfig configures the nodeSelector half of SPEC ADM-1.
type PodNodeConstraintsConfig struct {
	// NodeSelectorLabelBlacklist are the label keys only users with the
	// pods/binding permission may put in a nodeSelector. When the file
	// leaves the field out it is [kubernetes.io/hostname], as in
	// OpenShift: a selector on one node's name is nodeName by another
	// route. An empty list blacklists nothing.
	NodeSelectorLabelBlacklist []string
}

// PodNodeSelectorConfig configures SPEC ADM-2.
type PodNodeSelectorConfig struct {
	// ClusterDefaultNodeSelector is merged into the pods of namespaces
	// without the node-selector annotation.
	ClusterDefaultNodeSelector map[string]string
	// Whitelists are, per namespace, the only labels (with their values)
	// a pod's merged nodeSelector may hold. A namespace without an entry,
	// or with an empty one, has no whitelist.
	Whitelists map[string]map[string]string
}

// defaultBlacklist is OpenShift's default for a PodNodeConstraints
// configuration without nodeSelectorLabelBlacklist.
var defaultBlacklist = []string{"kubernetes.io/hostname"}

// maxConfigBytes bounds a config file and the files it references; an
// admission config is a few hundred bytes.
const maxConfigBytes = 1 << 20

// ParseConfig reads a config file's contents (see Config). Every problem
// is reported at once, by field path, in an error that wraps
// ErrInvalidConfig. An empty file enables no plugin. A plugin's location
// is refused here, since there is no file to resolve it against: read
// such a file with LoadConfig.
func ParseConfig(data []byte) (Config, error) {
	return parseConfig(data, nil)
}

// LoadConfig reads the config file at path, and the files its plugins'
// location fields name (relative to path's directory unless absolute).
func LoadConfig(path string) (Config, error) {
	data, err := readConfigFile(path)
	if err != nil {
		return Config{}, err
	}
	dir := filepath.Dir(path)
	return parseConfig(data, func(loc string) ([]byte, error) {
		if !filepath.IsAbs(loc) {
			loc = filepath.Join(dir, loc)
		}
		return readConfigFile(loc)
	})
}

// readConfigFile reads a regular file of at most maxConfigBytes: a
// device or a pipe named by mistake must not hang the server's start.
func readConfigFile(path string) ([]byte, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("admission config: %w", err)
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("admission config: %s: not a regular file", path)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("admission config: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxConfigBytes+1))
	if err != nil {
		return nil, fmt.Errorf("admission config: %s: %w", path, err)
	}
	if len(data) > maxConfigBytes {
		return nil, fmt.Errorf("admission config: %s: larger than %d bytes", path, maxConfigBytes)
	}
	return data, nil
}

func parseConfig(data []byte, read func(string) ([]byte, error)) (Config, error) {
	v, err := decodeYAML(data)
	if err != nil {
		return Config{}, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	ps := &parser{read: read}
	cfg := ps.file(v)
	if len(ps.errs) > 0 {
		return Config{}, listError(ps.errs)
	}
	return cfg, nil
}

// decodeYAML turns one YAML or JSON document into JSON values (numbers as
// json.Number); nil for an empty document.
func decodeYAML(data []byte) (any, error) {
	docs, err := api.YAMLDocuments(elideDots(data))
	if err != nil {
		return nil, err
	}
	switch len(docs) {
	case 0:
		return nil, nil
	case 1:
	default:
		return nil, fmt.Errorf("%d YAML documents: the file must hold one", len(docs))
	}
	dec := json.NewDecoder(bytes.NewReader(docs[0]))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	return v, nil
}

// elideDots blanks the lines that hold only "...", which YAML would read
// as the end of the document.
func elideDots(data []byte) []byte {
	if !bytes.Contains(data, []byte("...")) {
		return data
	}
	lines := bytes.SplitAfter(data, []byte("\n"))
	for i, l := range lines {
		if string(bytes.TrimSpace(l)) == "..." {
			lines[i] = []byte("\n")
		}
	}
	return bytes.Join(lines, nil)
}

// listError renders every problem, one per line.
func listError(errs api.ErrorList) error {
	if len(errs) == 1 {
		return fmt.Errorf("%w: %s", ErrInvalidConfig, errs[0].Error())
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d problems:", len(errs))
	for _, e := range errs {
		b.WriteString("\n  - ")
		b.WriteString(e.Error())
	}
	return fmt.Errorf("%w: %s", ErrInvalidConfig, b.String())
}

// parser checks the decoded file's shape and values, collecting every
// problem rather than stopping at the first.
type parser struct {
	errs api.ErrorList
	read func(string) ([]byte, error)
}

func (ps *parser) fail(e *api.FieldError) { ps.errs = append(ps.errs, e) }

// plugins is what one admissionConfig section configures.
type plugins struct {
	constraints *PodNodeConstraintsConfig
	selector    *PodNodeSelectorConfig
	// disable is DefaultTolerationSeconds' disable, nil when not given.
	disable *bool
}

var knownPlugins = []string{PluginDefaultTolerationSeconds, PluginPodNodeConstraints, PluginPodNodeSelector}

func (ps *parser) file(v any) Config {
	if v == nil {
		return Config{}
	}
	m, ok := ps.object(v, api.Root("(document)"), "apiVersion", "kind", "admissionConfig", "kubernetesMasterConfig")
	if !ok {
		return Config{}
	}
	ps.constant(m, "apiVersion", api.Root("apiVersion"), "v1")
	ps.constant(m, "kind", api.Root("kind"), "MasterConfig")
	p1 := api.Root("admissionConfig")
	first := ps.admissionConfig(m["admissionConfig"], p1)
	var second plugins
	p2 := api.Root("kubernetesMasterConfig").Child("admissionConfig")
	var warnings []string
	var args map[string]string
	if km, ok := ps.object(m["kubernetesMasterConfig"], api.Root("kubernetesMasterConfig"), "admissionConfig", "controllerArguments"); ok {
		second = ps.admissionConfig(km["admissionConfig"], p2)
		warnings, args = ps.controllerArguments(km["controllerArguments"], api.Root("kubernetesMasterConfig").Child("controllerArguments"))
	}
	cfg := Config{PodNodeConstraints: first.constraints, PodNodeSelector: first.selector, Warnings: warnings, ControllerArguments: args}
	switch d1, d2 := first.disable, second.disable; {
	case d1 != nil && d2 != nil && *d1 != *d2:
		ps.fail(differs(p2, p1, PluginDefaultTolerationSeconds))
	case d1 != nil:
		cfg.DefaultTolerationSeconds.Disable = *d1
	case d2 != nil:
		cfg.DefaultTolerationSeconds.Disable = *d2
	}
	// outpost has one admission chain where OpenShift 3 had two (its own
	// and the Kubernetes master's), so the seed's two places are one.
	if c := second.constraints; c != nil {
		if cfg.PodNodeConstraints == nil {
			cfg.PodNodeConstraints = c
		} else if !sameSet(cfg.PodNodeConstraints.NodeSelectorLabelBlacklist, c.NodeSelectorLabelBlacklist) {
			ps.fail(differs(p2, p1, PluginPodNodeConstraints))
		}
	}
	if c := second.selector; c != nil {
		if cfg.PodNodeSelector == nil {
			cfg.PodNodeSelector = c
		} else if !maps.Equal(cfg.PodNodeSelector.ClusterDefaultNodeSelector, c.ClusterDefaultNodeSelector) ||
			!maps.EqualFunc(cfg.PodNodeSelector.Whitelists, c.Whitelists, maps.Equal) {
			ps.fail(differs(p2, p1, PluginPodNodeSelector))
		}
	}
	return cfg
}

func differs(p, other *api.Path, plugin string) *api.FieldError {
	return api.Invalid(p.Child("pluginConfig", plugin), "(differs)",
		fmt.Sprintf("configures %s unlike %s: outpost has one admission chain, so give the plugin once or alike in both places",
			plugin, other.Child("pluginConfig", plugin)))
}

// admissionConfig reads one admissionConfig section; null is an empty one.
func (ps *parser) admissionConfig(v any, p *api.Path) plugins {
	var out plugins
	m, ok := ps.object(v, p, "pluginConfig")
	if !ok {
		return out
	}
	pp := p.Child("pluginConfig")
	pc, ok := ps.object(m["pluginConfig"], pp)
	if !ok {
		return out
	}
	for _, name := range slices.Sorted(maps.Keys(pc)) {
		p := pp.Child(name)
		if !slices.Contains(knownPlugins, name) {
			ps.fail(api.NotSupported(p, name, knownPlugins))
			continue
		}
		conf, cp, ok := ps.pluginConfig(pc[name], p)
		if !ok {
			continue
		}
		switch name {
		case PluginPodNodeConstraints:
			out.constraints = ps.podNodeConstraints(conf, cp)
		case PluginPodNodeSelector:
			out.selector = ps.podNodeSelector(conf, cp)
		case PluginDefaultTolerationSeconds:
			out.disable = ps.defaultAdmissionConfig(conf, cp)
		}
	}
	return out
}

// pluginConfig returns a plugin's configuration, from the file when it
// names a location, and the path its fields are reported under.
func (ps *parser) pluginConfig(v any, p *api.Path) (any, *api.Path, bool) {
	m, ok := ps.object(v, p, "configuration", "location")
	if !ok {
		return nil, nil, false
	}
	lv, hasLoc := m["location"]
	if !hasLoc {
		return m["configuration"], p.Child("configuration"), true
	}
	lp := p.Child("location")
	if _, both := m["configuration"]; both {
		ps.fail(api.Forbidden(lp, "give configuration or location, not both"))
		return nil, nil, false
	}
	loc, ok := ps.str(lv, lp)
	if !ok {
		return nil, nil, false
	}
	if strings.TrimSpace(loc) == "" {
		ps.fail(api.Required(lp, "the path of a file holding the plugin's configuration"))
		return nil, nil, false
	}
	if ps.read == nil {
		ps.fail(api.Invalid(lp, loc, "a file reference can only be resolved when the config is read from a file"))
		return nil, nil, false
	}
	data, err := ps.read(loc)
	if err != nil {
		ps.fail(api.Invalid(lp, loc, err.Error()))
		return nil, nil, false
	}
	conf, err := decodeYAML(data)
	if err != nil {
		ps.fail(api.Invalid(lp, loc, err.Error()))
		return nil, nil, false
	}
	return conf, lp.Key(loc), true
}

func (ps *parser) podNodeConstraints(v any, p *api.Path) *PodNodeConstraintsConfig {
	out := &PodNodeConstraintsConfig{NodeSelectorLabelBlacklist: slices.Clone(defaultBlacklist)}
	m, ok := ps.object(v, p, "apiVersion", "apiversion", "kind", "nodeSelectorLabelBlacklist")
	if !ok || m == nil {
		return out
	}
	// The seed writes "apiversion" in its admissionConfig samples.
	if _, ok := m["apiVersion"]; ok {
		if _, typo := m["apiversion"]; typo {
			ps.fail(api.Forbidden(p.Child("apiversion"), "apiVersion is given already"))
		}
		ps.constant(m, "apiVersion", p.Child("apiVersion"), "v1")
	} else {
		ps.constant(m, "apiversion", p.Child("apiversion"), "v1")
	}
	ps.constant(m, "kind", p.Child("kind"), "PodNodeConstraintsConfig")
	lv := m["nodeSelectorLabelBlacklist"]
	if lv == nil {
		return out
	}
	lp := p.Child("nodeSelectorLabelBlacklist")
	l, ok := lv.([]any)
	if !ok {
		ps.fail(api.Invalid(lp, describe(lv), "must be a list of label keys"))
		return out
	}
	keys := make([]string, 0, len(l))
	for i, e := range l {
		ep := lp.Index(i)
		k, ok := ps.str(e, ep)
		if !ok {
			continue
		}
		if msgs := api.IsQualifiedName(k); len(msgs) > 0 {
			detail := "a label key: " + strings.Join(msgs, "; ")
			if strings.HasPrefix(k, "<") && strings.HasSuffix(k, ">") {
				detail = "a placeholder of the OpenShift manual's sample: put a node label key here"
			}
			ps.fail(api.Invalid(ep, k, detail))
			continue
		}
		if slices.Contains(keys, k) {
			ps.fail(api.Duplicate(ep, k))
			continue
		}
		keys = append(keys, k)
	}
	out.NodeSelectorLabelBlacklist = keys
	return out
}

// defaultAdmissionConfig reads a DefaultAdmissionConfig (the seed's
// configuration of DefaultTolerationSeconds) and returns its disable.
func (ps *parser) defaultAdmissionConfig(v any, p *api.Path) *bool {
	off := false
	m, ok := ps.object(v, p, "apiVersion", "kind", "disable")
	if !ok || m == nil {
		return &off
	}
	ps.constant(m, "apiVersion", p.Child("apiVersion"), "v1")
	ps.constant(m, "kind", p.Child("kind"), "DefaultAdmissionConfig")
	if dv, given := m["disable"]; given {
		b, isBool := dv.(bool)
		if !isBool {
			ps.fail(api.Invalid(p.Child("disable"), describe(dv), "must be true or false"))
		}
		off = b
	}
	return &off
}

// alwaysOnGates are the feature gates the seed's configs set that name
// behaviour outpost always has.
var alwaysOnGates = []string{"TaintBasedEvictions"}

// controllerArguments reads kubernetesMasterConfig.controllerArguments:
// only feature-gates, and of those only gates that are always on here.
// Setting one to true is accepted without a word; false cannot be had,
// and says so.
func (ps *parser) controllerArguments(v any, p *api.Path) ([]string, map[string]string) {
	keys := append([]string{"feature-gates"}, ControllerArgumentNames...)
	m, ok := ps.object(v, p, keys...)
	if !ok || m == nil {
		return nil, nil
	}
	var args map[string]string
	for _, k := range ControllerArgumentNames {
		val, ok := ps.argument(m[k], p.Child(k))
		if !ok {
			continue
		}
		if args == nil {
			args = map[string]string{}
		}
		args[k] = val
	}
	gp := p.Child("feature-gates")
	gv := m["feature-gates"]
	if gv == nil {
		return nil, args
	}
	l, ok := gv.([]any)
	if !ok {
		ps.fail(api.Invalid(gp, describe(gv), "must be a list of Name=true|false"))
		return nil, args
	}
	var warnings []string
	for i, e := range l {
		ep := gp.Index(i)
		s, ok := ps.str(e, ep)
		if !ok {
			continue
		}
		for _, gate := range strings.Split(s, ",") {
			if strings.TrimSpace(gate) == "" {
				continue
			}
			name, val, _ := strings.Cut(gate, "=")
			name, val = strings.TrimSpace(name), strings.TrimSpace(val)
			if !slices.Contains(alwaysOnGates, name) {
				ps.fail(api.NotSupported(ep, name, alwaysOnGates))
				continue
			}
			switch strings.ToLower(val) {
			case "true":
			case "false":
				warnings = append(warnings, fmt.Sprintf("%s: %s=false is ignored: %s is always on in outpost", ep, name, name))
			default:
				ps.fail(api.Invalid(ep, gate, "must be "+name+"=true or "+name+"=false"))
			}
		}
	}
	return warnings, args
}

// ControllerArgumentNames are the kube-controller-manager arguments the
// config file's kubernetesMasterConfig.controllerArguments may set, with
// the server flags of the same names (SPEC TNT-7, TNT-8, TNT-9);
// fence-margin is outpost's own.
var ControllerArgumentNames = []string{
	"node-monitor-grace-period", "node-eviction-rate", "secondary-node-eviction-rate",
	"unhealthy-zone-threshold", "large-cluster-size-threshold", "fence-margin",
}

// argument reads one controller argument: a list of one string, as
// OpenShift's master config writes them (node-eviction-rate: ["0.1"]),
// or a plain string or number. ok is false when it is absent or wrong.
func (ps *parser) argument(v any, p *api.Path) (string, bool) {
	if l, isList := v.([]any); isList {
		if len(l) != 1 {
			ps.fail(api.Invalid(p, describe(v), "must hold one value"))
			return "", false
		}
		p, v = p.Index(0), l[0]
	}
	switch x := v.(type) {
	case nil:
		return "", false
	case string:
		return x, true
	case json.Number:
		return x.String(), true
	}
	ps.fail(api.Invalid(p, describe(v), "must be a string or a number"))
	return "", false
}

// clusterDefaultKey is the one key of podNodeSelectorPluginConfig that is
// not a namespace name.
const clusterDefaultKey = "clusterDefaultNodeSelector"

func (ps *parser) podNodeSelector(v any, p *api.Path) *PodNodeSelectorConfig {
	out := &PodNodeSelectorConfig{}
	m, ok := ps.object(v, p, "podNodeSelectorPluginConfig")
	if !ok || m == nil {
		return out
	}
	cp := p.Child("podNodeSelectorPluginConfig")
	entries, ok := ps.object(m["podNodeSelectorPluginConfig"], cp)
	if !ok {
		return out
	}
	for _, name := range slices.Sorted(maps.Keys(entries)) {
		ep := cp.Child(name)
		if name != clusterDefaultKey {
			if msgs := api.IsDNS1123Label(name); len(msgs) > 0 {
				ps.fail(&api.FieldError{Type: api.FieldValueUnknown, Field: ep.String(),
					Detail: "keys here are clusterDefaultNodeSelector and namespace names: " + strings.Join(msgs, "; ")})
				continue
			}
		}
		s, ok := ps.str(entries[name], ep)
		if !ok {
			continue
		}
		ls, err := parseNodeSelector(s)
		if err != nil {
			ps.fail(api.Invalid(ep, s, "a node selector of key=value labels separated by commas: "+err.Error()))
			continue
		}
		if name == clusterDefaultKey {
			out.ClusterDefaultNodeSelector = labelMap(ls)
			continue
		}
		if out.Whitelists == nil {
			out.Whitelists = make(map[string]map[string]string)
		}
		out.Whitelists[name] = labelMap(ls)
	}
	return out
}

// object checks that v is an object, or null (a nil map and true), whose
// keys are all in allowed; with no allowed keys any key is.
func (ps *parser) object(v any, p *api.Path, allowed ...string) (map[string]any, bool) {
	if v == nil {
		return nil, true
	}
	m, ok := v.(map[string]any)
	if !ok {
		ps.fail(api.Invalid(p, describe(v), "must be an object"))
		return nil, false
	}
	if len(allowed) == 0 {
		return m, true
	}
	for _, k := range slices.Sorted(maps.Keys(m)) {
		if !slices.Contains(allowed, k) {
			ps.fail(&api.FieldError{Type: api.FieldValueUnknown, Field: p.Child(k).String(),
				Detail: "allowed here: " + strings.Join(allowed, ", ")})
		}
	}
	return m, true
}

func (ps *parser) str(v any, p *api.Path) (string, bool) {
	s, ok := v.(string)
	if !ok {
		ps.fail(api.Invalid(p, describe(v), "must be a string"))
	}
	return s, ok
}

// constant checks that m[key], when given, is want.
func (ps *parser) constant(m map[string]any, key string, p *api.Path, want string) {
	v, ok := m[key]
	if !ok {
		return
	}
	if s, isStr := v.(string); !isStr || s != want {
		ps.fail(api.NotSupported(p, describe(v), []string{want}))
	}
}

// describe renders a decoded value for an error message, short.
func describe(v any) any {
	switch t := v.(type) {
	case string:
		return t
	case nil:
		return nil
	case json.Number:
		return t
	case bool:
		return t
	case []any:
		return "(a list)"
	case map[string]any:
		return "(an object)"
	}
	return fmt.Sprintf("%v", v)
}

// sameSet reports whether a and b hold the same strings, in any order.
func sameSet(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for _, s := range a {
		if !slices.Contains(b, s) {
			return false
		}
	}
	return true
}
