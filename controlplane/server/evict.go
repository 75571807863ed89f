package server

import (
	"fmt"
	"net/http"

	"github.com/outpost-edge/outpost/controlplane/api"
	"github.com/outpost-edge/outpost/controlplane/auth"
)

// serveEvict is POST pods/NAME/eviction: the body is a policy/v1 (or
// v1beta1) Eviction naming the pod, its deleteOptions those of the
// delete. The core decides against the pod's disruption budget (a 429
// names it); the reply is a Status, 201, as Kubernetes answers.
func (s *Server) serveEvict(w *recorder, r *http.Request, id *auth.Identity, rt *route) {
	var ev api.Eviction
	body, warnings, ok := s.decodeSubresource(w, r, id, rt, &ev)
	if !ok {
		return
	}
	opts, err := checkEviction(&ev, rt)
	if err != nil {
		writeError(w, err)
		return
	}
	res, err := s.core.Evict(r.Context(), id, rt.ns, rt.name, opts)
	if err != nil {
		s.failWrite(w, r, body, err)
		return
	}
	addWarnings(w, warnings)
	writeJSON(w, http.StatusCreated, &api.Status{TypeMeta: api.TypeMeta{Kind: "Status", APIVersion: "v1"}, Status: "Success", Code: http.StatusCreated,
		Details: &api.StatusDetails{Name: rt.name, Kind: "pods"}})
	s.logWrite(r, id, rt, http.StatusCreated, res)
}

// checkEviction checks an Eviction body against the URL and returns its
// delete options.
func checkEviction(ev *api.Eviction, rt *route) (api.DeleteOptions, error) {
	var opts api.DeleteOptions
	if ev.Kind != "" && ev.Kind != "Eviction" {
		return opts, api.NewBadRequest(fmt.Sprintf("the kind in the body (%s) does not match the expected kind (Eviction)", ev.Kind))
	}
	if ev.APIVersion != "" && ev.APIVersion != "policy/v1" && ev.APIVersion != "policy/v1beta1" {
		return opts, api.NewBadRequest(fmt.Sprintf("apiVersion %q: an Eviction is policy/v1", ev.APIVersion))
	}
	var errs api.ErrorList
	if ev.Name != rt.name {
		errs = append(errs, api.Invalid(api.Root("metadata").Child("name"), ev.Name, fmt.Sprintf("must be the pod's name in the path, %q", rt.name)))
	}
	if ev.Namespace != "" && ev.Namespace != rt.ns {
		errs = append(errs, api.Invalid(api.Root("metadata").Child("namespace"), ev.Namespace, fmt.Sprintf("must be the namespace in the path, %q", rt.ns)))
	}
	if d := ev.DeleteOptions; d != nil {
		if len(d.DryRun) > 0 {
			errs = append(errs, api.Invalid(api.Root("deleteOptions").Child("dryRun"), d.DryRun, "outpost does not support dry-run evictions"))
		}
		if g := d.GracePeriodSeconds; g != nil && *g < 0 {
			errs = append(errs, api.Invalid(api.Root("deleteOptions").Child("gracePeriodSeconds"), *g, "must be greater than or equal to 0"))
		}
		opts.GracePeriodSeconds = d.GracePeriodSeconds
		if p := d.Preconditions; p != nil {
			if p.UID != nil {
				opts.UID = *p.UID
			}
			if p.ResourceVersion != nil {
				opts.ResourceVersion = *p.ResourceVersion
			}
		}
	}
	if len(errs) > 0 {
		return opts, api.NewInvalid("Eviction", ev.Name, errs)
	}
	return opts, nil
}
