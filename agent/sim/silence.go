package sim

import (
	"context"
	"errors"
	"fmt"

	"github.com/outpost-edge/outpost/controlplane/api"
	"github.com/outpost-edge/outpost/controlplane/client"
)

// SetSilenced sets (silenced) or removes SilencedAnnotation on the named
// nodes through the API; the simulation running them goes quiet or
// resumes when it sees the change. done, if not nil, is called with each
// node that was changed or already as asked. The error joins one error
// per node that failed.
func SetSilenced(ctx context.Context, cl *client.Client, silenced bool, names []string, done func(name string)) error {
	var errs []error
	for _, name := range names {
		if err := setSilenced(ctx, cl, silenced, name); err != nil {
			errs = append(errs, err)
			continue
		}
		if done != nil {
			done(name)
		}
	}
	return errors.Join(errs...)
}

func setSilenced(ctx context.Context, cl *client.Client, silenced bool, name string) error {
	for attempt := 1; ; attempt++ {
		obj, err := cl.Get(ctx, nodesResource, "", name, client.GetOptions{})
		if err != nil {
			return err
		}
		node, ok := obj.(*api.Node)
		if !ok {
			return fmt.Errorf("node %q: got %T: %w", name, obj, ErrBadReply)
		}
		_, has := node.Annotations[SilencedAnnotation]
		switch {
		case silenced && node.Annotations[SilencedAnnotation] == "true", !silenced && !has:
			return nil
		case silenced:
			if node.Annotations == nil {
				node.Annotations = map[string]string{}
			}
			node.Annotations[SilencedAnnotation] = "true"
		default:
			delete(node.Annotations, SilencedAnnotation)
		}
		_, _, err = cl.Update(ctx, node)
		if err == nil {
			return nil
		}
		// A heartbeat is a status write and moves the resourceVersion:
		// conflicts are expected on a busy node.
		if !api.IsConflict(err) || attempt >= 10 {
			return err
		}
	}
}
