package server

import (
	"errors"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/outpost-edge/outpost/controlplane/api"
	"github.com/outpost-edge/outpost/controlplane/auth"
	"github.com/outpost-edge/outpost/controlplane/scheduler"
	"github.com/outpost-edge/outpost/controlplane/scheduler/policy"
)

// schedulerSet is the named schedulers this server runs while it leads
// (SCH-12) and their policies (SCH-2), read from files. A reload reads
// every file again; a file that fails keeps its scheduler's last good
// policy, so a typo never stops scheduling.
type schedulerSet struct {
	mu       sync.Mutex
	files    map[string]string // name -> policy file; "" is the default policy
	policies map[string]*policy.Policy
	errs     map[string]string // name -> why the last reload of its file failed
	loaded   time.Time
	// onChange, set while a scheduler loop runs, receives new schedulers.
	onChange func(map[string]*scheduler.Scheduler)
}

// newSchedulerSet reads every file once; any failure is an error, since a
// server must not start on a policy its operator did not mean.
func newSchedulerSet(files map[string]string) (*schedulerSet, error) {
	ss := &schedulerSet{files: files, policies: map[string]*policy.Policy{}, errs: map[string]string{}}
	var errs []string
	for name, file := range files {
		p, err := loadPolicy(file)
		if err != nil {
			errs = append(errs, fmt.Sprintf("scheduler %q: %v", name, err))
			continue
		}
		ss.policies[name] = p
	}
	if len(errs) > 0 {
		slices.Sort(errs)
		return nil, fmt.Errorf("%w: %s", ErrConfig, strings.Join(errs, "; "))
	}
	ss.loaded = time.Now()
	return ss, nil
}

func loadPolicy(file string) (*policy.Policy, error) {
	if file == "" {
		return policy.Default(), nil
	}
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("policy file: %w", err)
	}
	p, _, err := policy.Parse(data)
	if err != nil {
		return nil, fmt.Errorf("policy file %s: %w", file, err)
	}
	return p, nil
}

// build makes a fresh Scheduler per name; a Scheduler belongs to the one
// loop that runs it.
func (ss *schedulerSet) build() map[string]*scheduler.Scheduler {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	return ss.buildLocked()
}

func (ss *schedulerSet) buildLocked() map[string]*scheduler.Scheduler {
	out := make(map[string]*scheduler.Scheduler, len(ss.policies))
	for name, p := range ss.policies {
		s, err := scheduler.New(scheduler.Config{Policy: p})
		if err != nil {
			// Parse validated the policy; New refusing it is a bug, and
			// the scheduler is left out rather than run half-configured.
			ss.errs[name] = err.Error()
			continue
		}
		out[name] = s
	}
	return out
}

// reload reads every file again and hands the running loop the new
// schedulers. It returns the failures; their schedulers keep their
// policies.
func (ss *schedulerSet) reload() error {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	var errs []error
	for name, file := range ss.files {
		p, err := loadPolicy(file)
		if err != nil {
			ss.errs[name] = err.Error()
			errs = append(errs, fmt.Errorf("scheduler %q keeps its last good policy: %w", name, err))
			continue
		}
		delete(ss.errs, name)
		ss.policies[name] = p
	}
	ss.loaded = time.Now()
	if ss.onChange != nil {
		ss.onChange(ss.buildLocked())
	}
	return errors.Join(errs...)
}

// setOnChange registers (or with nil, removes) the running loop.
func (ss *schedulerSet) setOnChange(f func(map[string]*scheduler.Scheduler)) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	ss.onChange = f
}

// SchedulerInfo describes one running scheduler, as GET
// /apis/outpost.io/v1/schedulers lists them.
type SchedulerInfo struct {
	Name string `json:"name"`
	// PolicyFile is where the policy is read from; empty for the default.
	PolicyFile string `json:"policyFile,omitempty"`
	// Policy is what the policy enables (policy.Describe).
	Policy string `json:"policy"`
	// Warnings are the policy's warnings (cloud-only predicates ...).
	Warnings []string `json:"warnings,omitempty"`
	// ReloadError says why the last reload of the file failed; the policy
	// shown is the last good one.
	ReloadError string `json:"reloadError,omitempty"`
}

// SchedulerList is the reply of GET /apis/outpost.io/v1/schedulers and of
// POST .../schedulers/reload.
type SchedulerList struct {
	Kind       string          `json:"kind"`
	APIVersion string          `json:"apiVersion"`
	Server     string          `json:"server"`
	LoadedAt   *api.Time       `json:"loadedAt,omitempty"`
	Items      []SchedulerInfo `json:"items"`
}

func (ss *schedulerSet) list(server string) *SchedulerList {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	l := &SchedulerList{Kind: "SchedulerList", APIVersion: "outpost.io/v1", Server: server, LoadedAt: api.NewTime(ss.loaded), Items: []SchedulerInfo{}}
	for name, p := range ss.policies {
		l.Items = append(l.Items, SchedulerInfo{Name: name, PolicyFile: ss.files[name], Policy: policy.Describe(p), Warnings: policy.Warnings(p), ReloadError: ss.errs[name]})
	}
	slices.SortFunc(l.Items, func(a, b SchedulerInfo) int { return strings.Compare(a.Name, b.Name) })
	return l
}

// ReloadSchedulers reads the scheduler policy files again (SIGHUP). A file
// that fails keeps its scheduler's last good policy; the error lists them.
func (s *Server) ReloadSchedulers() error {
	err := s.schedulers.reload()
	if err != nil {
		s.log.Error("scheduler policy reload failed", "err", err)
	} else {
		s.log.Info("scheduler policies reloaded")
	}
	return err
}

// serveSchedulers serves GET /apis/outpost.io/v1/schedulers and POST
// .../schedulers/reload, on the leader, which runs the schedulers.
func (s *Server) serveSchedulers(w *recorder, r *http.Request, id *auth.Identity, segs []string) {
	w.label(verbGet, "schedulers")
	var verb string
	switch {
	case len(segs) == 0 && (r.Method == http.MethodGet || r.Method == http.MethodHead):
		verb = auth.VerbList
	case len(segs) == 1 && segs[0] == "reload" && r.Method == http.MethodPost:
		verb = auth.VerbUpdate
	default:
		writeError(w, api.NewMethodNotAllowed(r.Method+" is not supported on "+r.URL.Path))
		return
	}
	w.label(verb, "schedulers")
	if err := auth.Authorize(id, auth.Request{Verb: verb, Path: "/apis/outpost.io/v1/schedulers"}, nil); err != nil {
		writeError(w, api.NewForbidden(err.Error()))
		return
	}
	if s.forwardIfFollower(w, r) {
		return
	}
	if verb == auth.VerbUpdate {
		if err := s.ReloadSchedulers(); err != nil {
			writeError(w, api.NewInvalid("Policy", "", api.ErrorList{api.Invalid(api.Root("policyFile"), "", err.Error())}))
			return
		}
	}
	writeJSON(w, http.StatusOK, s.schedulers.list(s.cfg.ID))
}
