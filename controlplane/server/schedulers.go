package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/outpost-edge/outpost/controlplane/api"
	"github.com/outpost-edge/outpost/controlplane/auth"
	"github.com/outpost-edge/outpost/controlplane/client"
	"github.com/outpost-edge/outpost/controlplane/controller"
	"github.com/outpost-edge/outpost/controlplane/core"
	"github.com/outpost-edge/outpost/controlplane/scheduler"
	"github.com/outpost-edge/outpost/controlplane/scheduler/loop"
	"github.com/outpost-edge/outpost/controlplane/scheduler/policy"
	"github.com/outpost-edge/outpost/controlplane/store"
)

// The policies in force live in the replicated store, one SchedulerPolicy
// per scheduler (SCH-2, SCH-12), so that every leader runs the same
// schedulers with the same policies whatever its own files say. A
// server's policy files (--scheduler-policy, --scheduler NAME=FILE) only
// seed them: the leader creates the SchedulerPolicy of each scheduler it
// was configured with when there is none, and a reload (SIGHUP, POST
// .../schedulers/reload) writes the server's files into the store. The
// leader's scheduler loop follows the stored policies as they change.

var schedulerPoliciesResource = api.ResourceForKind("SchedulerPolicy")

// schedulerSet is this server's policy files and the documents last read
// from them. A reload reads every file again; a file that fails keeps the
// document last read, so a typo never reaches the store.
type schedulerSet struct {
	mu     sync.Mutex
	files  map[string]string // name -> policy file; "" is the default policy
	docs   map[string]string // name -> the document last read, valid
	errs   map[string]string // name -> why the last reload of its file failed
	loaded time.Time
}

// defaultPolicyDocument is the default policy as a policy file would hold
// it, for the stored SchedulerPolicy of a scheduler without a file.
var defaultPolicyDocument = func() string {
	b, err := json.MarshalIndent(policy.Default(), "", "  ")
	if err != nil {
		panic(err) // fixed data known at build time
	}
	return string(b) + "\n"
}()

// newSchedulerSet reads every file once; any failure is an error, since a
// server must not start on a policy its operator did not mean.
func newSchedulerSet(files map[string]string) (*schedulerSet, error) {
	ss := &schedulerSet{files: files, docs: map[string]string{}, errs: map[string]string{}}
	if _, failed := ss.read(); len(failed) > 0 {
		var errs []string
		for name, err := range failed {
			errs = append(errs, fmt.Sprintf("scheduler %q: %v", name, err))
		}
		slices.Sort(errs)
		return nil, fmt.Errorf("%w: %s", ErrConfig, strings.Join(errs, "; "))
	}
	return ss, nil
}

// read reads every file, keeping each document that reads well and each
// failed file's last document and failure. The caller holds mu or owns ss.
func (ss *schedulerSet) read() (good map[string]string, failed map[string]error) {
	good, failed = map[string]string{}, map[string]error{}
	for name, file := range ss.files {
		doc, err := readPolicy(file)
		if err != nil {
			ss.errs[name] = err.Error()
			failed[name] = err
			continue
		}
		delete(ss.errs, name)
		ss.docs[name] = doc
		good[name] = doc
	}
	ss.loaded = time.Now()
	return good, failed
}

// readPolicy returns the document of a policy file ("" for the default
// policy), checked.
func readPolicy(file string) (string, error) {
	if file == "" {
		return defaultPolicyDocument, nil
	}
	data, err := os.ReadFile(file)
	if err != nil {
		return "", fmt.Errorf("policy file: %w", err)
	}
	if _, _, err := policy.Parse(data); err != nil {
		return "", fmt.Errorf("policy file %s: %w", file, err)
	}
	return string(data), nil
}

// source names where name's document came from, for SchedulerPolicy's
// spec.source.
func (ss *schedulerSet) source(serverID, name string) string {
	if f := ss.files[name]; f != "" {
		return serverID + ":" + f
	}
	return serverID + ":default"
}

// reload reads every file again. It returns the documents that read well
// and the failures; a failed file keeps its last document.
func (ss *schedulerSet) reload() (map[string]string, error) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	good, failed := ss.read()
	var errs []error
	for name, err := range failed {
		errs = append(errs, fmt.Errorf("scheduler %q keeps its last good policy: %w", name, err))
	}
	return good, errors.Join(errs...)
}

// seeds returns the documents the leader stores for schedulers that have
// no SchedulerPolicy yet.
func (ss *schedulerSet) seeds() map[string]string {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	return maps.Clone(ss.docs)
}

// seedSchedulerPolicies creates the SchedulerPolicy of every scheduler
// this server is configured with that has none. An existing one is the
// policy in force and is left alone: a failover must not change it. A
// file that differs from it is only logged; a reload puts it in force.
func (s *Server) seedSchedulerPolicies(ctx context.Context) error {
	for name, doc := range s.schedulers.seeds() {
		obj, err := s.core.GetObject(schedulerPoliciesResource, "", name)
		if err == nil {
			if sp, ok := obj.(*api.SchedulerPolicy); ok && sp.Spec.Policy != doc {
				s.log.Warn("the policy in force differs from this server's policy file; send SIGHUP or POST /apis/outpost.io/v1/schedulers/reload to put the file in force",
					"scheduler", name, "file", s.schedulers.files[name], "in_force_from", sp.Spec.Source)
			}
			continue
		}
		sp := &api.SchedulerPolicy{
			ObjectMeta: api.ObjectMeta{Name: name, UID: core.NewUID(), CreationTimestamp: api.NewTime(time.Now())},
			Spec:       api.SchedulerPolicySpec{Policy: doc, Source: s.schedulers.source(s.cfg.ID, name)},
		}
		if err := s.core.Ensure(ctx, sp); err != nil {
			return err
		}
	}
	return nil
}

// ReloadSchedulers reads the scheduler policy files again (SIGHUP) and
// writes those that changed into the store, where the leader's scheduler
// loop picks them up. A file that fails is left out; the error lists
// those. It writes through this server's own API, so a follower's files
// reach the leader as any client's write would.
func (s *Server) ReloadSchedulers() error {
	good, err := s.schedulers.reload()
	if werr := s.storePolicies(s.stopCtx, good); werr != nil {
		err = errors.Join(err, werr)
	}
	if err != nil {
		s.log.Error("scheduler policy reload failed", "err", err)
	} else {
		s.log.Info("scheduler policies reloaded")
	}
	return err
}

// storePolicies creates or updates the SchedulerPolicy of each document
// that differs from the stored one.
func (s *Server) storePolicies(ctx context.Context, docs map[string]string) error {
	if len(docs) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, core.ApplyTimeout)
	defer cancel()
	// Written through this server's own API, which answers once it has
	// caught up after its start.
	if err := s.core.WaitCaughtUp(ctx); err != nil {
		return fmt.Errorf("scheduler policies: %w", err)
	}
	cl, err := client.New(s.adminConfig())
	if err != nil {
		return fmt.Errorf("scheduler policies: %w", err)
	}
	var errs []error
	for _, name := range slices.Sorted(maps.Keys(docs)) {
		spec := api.SchedulerPolicySpec{Policy: docs[name], Source: s.schedulers.source(s.cfg.ID, name)}
		cur, err := cl.Get(ctx, schedulerPoliciesResource, "", name, client.GetOptions{})
		switch {
		case api.IsNotFound(err):
			_, _, err = cl.Create(ctx, &api.SchedulerPolicy{ObjectMeta: api.ObjectMeta{Name: name}, Spec: spec})
		case err == nil:
			sp, ok := cur.(*api.SchedulerPolicy)
			if !ok || sp.Spec == spec {
				continue
			}
			sp.Spec = spec
			_, _, err = cl.Update(ctx, sp)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("scheduler %q: storing its policy: %w", name, err))
		}
	}
	return errors.Join(errs...)
}

// runSchedulers runs the scheduler loop while this server leads, with one
// scheduler per stored SchedulerPolicy, following them as they change. The
// loop starts once there is a policy at all: without one nothing schedules
// (an outside program may bind pods through the API).
func (s *Server) runSchedulers(ctx context.Context, c controller.Client, infs *controller.Informers) {
	inf := infs.For(schedulerPoliciesResource)
	var l *loop.Loop
	var wg sync.WaitGroup
	defer wg.Wait()
	changed := make(chan struct{}, 1)
	defer inf.Handle(ctx, func(controller.Event) {
		select {
		case changed <- struct{}{}:
		default:
		}
	})()
	select {
	case <-inf.Synced():
	case <-ctx.Done():
		return
	}
	for {
		scheds := buildSchedulers(inf.List(), s.log)
		switch {
		case l != nil:
			l.SetSchedulers(scheds)
		case len(scheds) > 0:
			var err error
			l, err = loop.New(loop.Config{
				Client:     c,
				Informers:  infs,
				Schedulers: scheds,
				Logger:     s.cfg.Logger.With("component", "scheduler"),
				Registerer: s.cfg.Registry,
			})
			if err != nil {
				s.log.Error("the scheduler cannot start", "err", err)
				return
			}
			wg.Go(func() {
				if err := l.Run(ctx); err != nil && ctx.Err() == nil {
					s.log.Error("the scheduler stopped", "err", err)
				}
			})
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return
		}
	}
}

// buildSchedulers makes a fresh Scheduler per stored policy; a Scheduler
// belongs to the one loop that runs it. A policy this server cannot parse
// (admission checked it when it was written, so only a newer server's
// policy) leaves its scheduler out, said in the log.
func buildSchedulers(objs []api.Object, log *slog.Logger) map[string]*scheduler.Scheduler {
	out := make(map[string]*scheduler.Scheduler, len(objs))
	for _, o := range objs {
		sp, ok := o.(*api.SchedulerPolicy)
		if !ok {
			continue
		}
		p, _, err := policy.Parse([]byte(sp.Spec.Policy))
		if err == nil {
			out[sp.Name], err = scheduler.New(scheduler.Config{Policy: p})
		}
		if err != nil {
			delete(out, sp.Name)
			log.Error("a stored scheduler policy cannot be used; its scheduler does not run", "scheduler", sp.Name, "err", err)
		}
	}
	return out
}

// SchedulerInfo describes one scheduler of the cluster, as GET
// /apis/outpost.io/v1/schedulers lists them.
type SchedulerInfo struct {
	Name string `json:"name"`
	// Source is where the policy in force came from (SchedulerPolicy's
	// spec.source).
	Source string `json:"source,omitempty"`
	// PolicyFile is this server's file for the scheduler, if it has one.
	PolicyFile string `json:"policyFile,omitempty"`
	// Policy is what the policy in force enables (policy.Describe).
	Policy string `json:"policy"`
	// Warnings are the policy's warnings (cloud-only predicates ...).
	Warnings []string `json:"warnings,omitempty"`
	// ReloadError says why this server's last reload of its file failed.
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

// listSchedulers describes the stored policies, with this server's files
// and reload errors.
func (s *Server) listSchedulers() (*SchedulerList, error) {
	objs, _, err := s.core.ListObjects(schedulerPoliciesResource, "", store.ListOptions{})
	if err != nil {
		return nil, err
	}
	ss := s.schedulers
	ss.mu.Lock()
	defer ss.mu.Unlock()
	l := &SchedulerList{Kind: "SchedulerList", APIVersion: "outpost.io/v1", Server: s.cfg.ID, LoadedAt: api.NewTime(ss.loaded), Items: []SchedulerInfo{}}
	for _, obj := range objs {
		sp, ok := obj.(*api.SchedulerPolicy)
		if !ok {
			continue
		}
		info := SchedulerInfo{Name: sp.Name, Source: sp.Spec.Source, PolicyFile: ss.files[sp.Name], ReloadError: ss.errs[sp.Name]}
		if p, _, err := policy.Parse([]byte(sp.Spec.Policy)); err == nil {
			info.Policy, info.Warnings = policy.Describe(p), policy.Warnings(p)
		} else {
			info.Policy = "(cannot be read: " + err.Error() + ")"
		}
		l.Items = append(l.Items, info)
	}
	return l, nil
}

// serveSchedulers serves GET /apis/outpost.io/v1/schedulers and POST
// .../schedulers/reload. A reload is done by the server asked, with its
// own files.
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
	if verb == auth.VerbUpdate {
		if err := s.ReloadSchedulers(); err != nil {
			writeError(w, api.NewInvalid("Policy", "", api.ErrorList{api.Invalid(api.Root("policyFile"), "", err.Error())}))
			return
		}
	}
	if err := s.consistentRead(r.Context()); err != nil {
		writeError(w, err)
		return
	}
	l, err := s.listSchedulers()
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, l)
}
