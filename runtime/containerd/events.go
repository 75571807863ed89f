package containerd

import (
	"context"
	"strconv"

	apievents "github.com/containerd/containerd/api/events"
	"github.com/containerd/typeurl/v2"

	"github.com/outpost-edge/outpost/runtime"
)

var _ runtime.ExitWatcher = (*Runtime)(nil)

// WatchExits follows containerd's /tasks/exit events of outpost's
// namespace and sends the container ID of each main process that exits
// (an exec's process exiting is not the container's). The channel is
// closed when ctx ends or the stream breaks (containerd restarted).
func (r *Runtime) WatchExits(ctx context.Context) (<-chan string, error) {
	c, err := r.conn(ctx)
	if err != nil {
		return nil, err
	}
	filter := `topic=="/tasks/exit",namespace==` + strconv.Quote(r.cfg.Namespace)
	envs, errs := c.Subscribe(r.ns(ctx), filter)
	out := make(chan string, 64)
	go func() {
		defer close(out)
		for {
			select {
			case <-ctx.Done():
				return
			case err := <-errs:
				if err != nil && ctx.Err() == nil {
					r.log.Warn("containerd event stream ended", "err", err)
				}
				return
			case env, ok := <-envs:
				if !ok {
					return
				}
				v, err := typeurl.UnmarshalAny(env.Event)
				if err != nil {
					r.log.Debug("undecodable containerd event", "topic", env.Topic, "err", err)
					continue
				}
				e, ok := v.(*apievents.TaskExit)
				if !ok || e.ID != e.ContainerID {
					continue
				}
				select {
				case out <- e.ContainerID:
				case <-ctx.Done():
					return
				}
			}
		}
	}()
	return out, nil
}
