package controllers

import (
	"context"
	"fmt"
	"slices"

	"github.com/outpost-edge/outpost/controlplane/api"
	"github.com/outpost-edge/outpost/controlplane/controller"
)

// claimer adopts and releases the dependents of one owner during one
// reconcile, as Kubernetes' ControllerRefManager does: an owner controls
// the objects whose controller reference names its UID and that its
// selector matches; it adopts orphans its selector matches and releases
// the objects it controls that its selector no longer matches.
type claimer struct {
	s     *shared
	owner api.Object
	sel   api.Selector
	// inf caches the dependents; writes are tracked under key in t.
	inf *controller.Informer
	t   *tracker
	key string
	// adoptable filters orphans further (nil: every matching orphan).
	adoptable func(api.Object) bool

	checked, canAdopt bool
}

// claim returns the dependents among candidates that the owner controls
// once adoption and release are done, with adopted ones as written.
func (c *claimer) claim(ctx context.Context, candidates []api.Object) ([]api.Object, error) {
	om := c.owner.GetObjectMeta()
	out := make([]api.Object, 0, len(candidates))
	seen := make(map[string]bool, len(candidates)) // an orphan may also be listed as a dependent
	for _, obj := range candidates {
		m := obj.GetObjectMeta()
		if seen[m.UID] {
			continue
		}
		seen[m.UID] = true
		if ref := api.ControllerRef(m); ref != nil {
			if ref.UID != om.UID {
				continue
			}
			if c.sel.Matches(m.Labels) {
				out = append(out, obj)
				continue
			}
			if om.DeletionTimestamp != nil || m.DeletionTimestamp != nil {
				continue
			}
			if err := c.release(ctx, obj); err != nil {
				return nil, err
			}
			continue
		}
		if om.DeletionTimestamp != nil || m.DeletionTimestamp != nil || !c.sel.Matches(m.Labels) {
			continue
		}
		if c.adoptable != nil && !c.adoptable(obj) {
			continue
		}
		ok, err := c.mayAdopt()
		if err != nil {
			return nil, err
		}
		if !ok {
			continue
		}
		adopted, err := c.adopt(ctx, obj)
		if err != nil {
			if api.IsNotFound(err) {
				continue
			}
			return nil, err
		}
		out = append(out, adopted)
	}
	return out, nil
}

// mayAdopt reads the owner from the store itself, once: an owner that was
// deleted (or deleted and created again) after the cache saw it must not
// adopt anything.
func (c *claimer) mayAdopt() (bool, error) {
	if c.checked {
		return c.canAdopt, nil
	}
	om := c.owner.GetObjectMeta()
	fresh, err := c.s.client.Get(api.ResourceOf(c.owner), om.Namespace, om.Name)
	switch {
	case api.IsNotFound(err):
		c.canAdopt = false
	case err != nil:
		return false, fmt.Errorf("check %s before adopting: %w", om.Name, err)
	default:
		fm := fresh.GetObjectMeta()
		c.canAdopt = fm.UID == om.UID && fm.DeletionTimestamp == nil
	}
	c.checked = true
	return c.canAdopt, nil
}

func (c *claimer) adopt(ctx context.Context, obj api.Object) (api.Object, error) {
	cp, err := controller.Copy(obj)
	if err != nil {
		return nil, err
	}
	m := cp.GetObjectMeta()
	m.OwnerReferences = append(slices.Clone(m.OwnerReferences), newControllerRef(c.owner))
	out, err := c.s.client.Update(ctx, cp)
	if err != nil {
		return nil, fmt.Errorf("adopt %s: %w", controller.KeyOf(obj), err)
	}
	c.t.wrote(c.key, c.inf, out)
	c.s.log.Info("adopted", "owner", controller.KeyOf(c.owner), "kind", api.ResourceOf(obj).Kind, "object", controller.KeyOf(obj))
	return out, nil
}

func (c *claimer) release(ctx context.Context, obj api.Object) error {
	cp, err := controller.Copy(obj)
	if err != nil {
		return err
	}
	uid := c.owner.GetObjectMeta().UID
	m := cp.GetObjectMeta()
	m.OwnerReferences = slices.DeleteFunc(m.OwnerReferences, func(r api.OwnerReference) bool { return r.UID == uid })
	out, err := c.s.client.Update(ctx, cp)
	if err != nil {
		if api.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("release %s: %w", controller.KeyOf(obj), err)
	}
	c.t.wrote(c.key, c.inf, out)
	c.s.log.Info("released", "owner", controller.KeyOf(c.owner), "kind", api.ResourceOf(obj).Kind, "object", controller.KeyOf(obj))
	return nil
}

// claimPods returns the pods owner controls (adopting and releasing as
// needed), every phase included.
func (s *shared) claimPods(ctx context.Context, owner api.Object, sel api.Selector, t *tracker, key string) ([]*api.Pod, error) {
	m := owner.GetObjectMeta()
	candidates := append(s.pods.ownedBy(m.UID), s.pods.orphansIn(m.Namespace)...)
	c := &claimer{s: s, owner: owner, sel: sel, inf: s.podInf, t: t, key: key,
		adoptable: func(obj api.Object) bool { return podActive(obj.(*api.Pod)) }}
	objs, err := c.claim(ctx, candidates)
	if err != nil {
		return nil, err
	}
	pods := make([]*api.Pod, len(objs))
	for i, obj := range objs {
		pods[i] = obj.(*api.Pod)
	}
	return pods, nil
}

// deleteAll deletes objs (each under its UID precondition) in parallel,
// tracking them under key until the cache x no longer holds them. It
// returns the names deleted and the first error.
func (s *shared) deleteAll(ctx context.Context, t *tracker, key string, objs []api.Object) ([]string, error) {
	for _, obj := range objs {
		t.deleting(key, obj)
	}
	errs := parallel(ctx, len(objs), func(ctx context.Context, i int) error {
		m := objs[i].GetObjectMeta()
		err := s.client.Delete(ctx, api.ResourceOf(objs[i]), m.Namespace, m.Name, preconditionUID(m.UID))
		// Not found, or a conflict on the UID: the object we meant is
		// gone either way.
		if err == nil || api.IsNotFound(err) || api.IsConflict(err) {
			return nil
		}
		t.deleteFailed(key, objs[i])
		return fmt.Errorf("delete %s: %w", controller.KeyOf(objs[i]), err)
	})
	var names []string
	var first error
	for i, err := range errs {
		if err == nil {
			names = append(names, objs[i].GetObjectMeta().Name)
		} else if first == nil {
			first = err
		}
	}
	return names, first
}
