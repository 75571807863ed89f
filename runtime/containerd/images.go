package containerd

import (
	"context"
	"errors"
	"fmt"
	"io"

	containerd "github.com/containerd/containerd"
	"github.com/containerd/containerd/errdefs"
	"github.com/containerd/containerd/remotes"
	"github.com/containerd/containerd/remotes/docker"

	"github.com/outpost-edge/outpost/runtime"
)

// EnsureImage makes ref present and unpacked according to policy (empty
// means IfNotPresent).
func (r *Runtime) EnsureImage(ctx context.Context, ref string, policy runtime.PullPolicy, auth []runtime.RegistryAuth) (runtime.Image, error) {
	name, err := runtime.NormalizeImageRef(ref)
	if err != nil {
		return runtime.Image{}, fmt.Errorf("%w: %w", runtime.ErrImagePull, err)
	}
	switch policy {
	case "", runtime.PullIfNotPresent, runtime.PullAlways, runtime.PullNever:
	default:
		return runtime.Image{}, fmt.Errorf("%w: pull policy %q: want Always, IfNotPresent or Never", runtime.ErrImagePull, policy)
	}
	c, err := r.conn(ctx)
	if err != nil {
		return runtime.Image{}, err
	}
	sn, err := r.snapshotterName(ctx, c)
	if err != nil {
		return runtime.Image{}, err
	}
	nctx := r.ns(ctx)
	if policy == runtime.PullAlways {
		// A pull's errors all read as the registry's; ask containerd
		// first so that a runtime that is down is not blamed on the image.
		if _, err := c.Version(nctx); err != nil {
			return runtime.Image{}, wrap(err, "image %s", name)
		}
	} else {
		img, err := c.GetImage(nctx, name)
		switch {
		case err == nil:
			if err := unpack(nctx, img, sn); err != nil {
				return runtime.Image{}, err
			}
			return imageOf(nctx, img), nil
		case !errdefs.IsNotFound(err):
			return runtime.Image{}, wrap(err, "image %s", name)
		case policy == runtime.PullNever:
			return runtime.Image{}, fmt.Errorf("image %s: %w", name, runtime.ErrImageNeverPull)
		}
	}
	r.log.Info("pulling image", "image", name, "policy", string(policy))
	img, err := c.Pull(nctx, name,
		containerd.WithPullUnpack,
		containerd.WithPullSnapshotter(sn),
		containerd.WithResolver(resolver(auth)))
	if err != nil {
		return runtime.Image{}, fmt.Errorf("pull %s: %w: %w", name, runtime.ErrImagePull, err)
	}
	return imageOf(nctx, img), nil
}

// resolver builds a docker resolver whose credentials come from auth,
// matched by registry host (docker.io's credentials also serve its API
// host registry-1.docker.io). An IdentityToken is sent as a refresh
// token, the way docker's credential helpers hand them out.
func resolver(auth []runtime.RegistryAuth) remotes.Resolver {
	find := func(host string) (runtime.RegistryAuth, bool) {
		for _, a := range auth {
			h := a.Host
			if h == host || (host == "registry-1.docker.io" && (h == "docker.io" || h == "index.docker.io")) {
				return a, true
			}
		}
		return runtime.RegistryAuth{}, false
	}
	creds := func(host string) (string, string, error) {
		a, ok := find(host)
		if !ok {
			return "", "", nil
		}
		if a.IdentityToken != "" {
			return "", a.IdentityToken, nil
		}
		return a.Username, a.Password, nil
	}
	plain := func(host string) (bool, error) {
		if a, ok := find(host); ok && a.Insecure {
			return true, nil
		}
		return docker.MatchLocalhost(host)
	}
	return docker.NewResolver(docker.ResolverOptions{
		Hosts: docker.ConfigureDefaultRegistries(
			docker.WithAuthorizer(docker.NewDockerAuthorizer(docker.WithAuthCreds(creds))),
			docker.WithPlainHTTP(plain),
		),
	})
}

// unpack unpacks img for the snapshotter unless it already is.
func unpack(ctx context.Context, img containerd.Image, sn string) error {
	ok, err := img.IsUnpacked(ctx, sn)
	if err != nil {
		return wrap(err, "image %s", img.Name())
	}
	if ok {
		return nil
	}
	if err := img.Unpack(ctx, sn); err != nil {
		return wrap(err, "unpack %s for %s", img.Name(), sn)
	}
	return nil
}

func imageOf(ctx context.Context, img containerd.Image) runtime.Image {
	out := runtime.Image{Names: []string{img.Name()}, Digest: img.Target().Digest.String()}
	if n, err := img.Size(ctx); err == nil {
		out.Size = n
	}
	return out
}

// ImportImages loads an OCI layout or docker save archive and unpacks every
// image in it for the node's snapshotter.
func (r *Runtime) ImportImages(ctx context.Context, archive io.Reader) ([]runtime.Image, error) {
	c, err := r.conn(ctx)
	if err != nil {
		return nil, err
	}
	sn, err := r.snapshotterName(ctx, c)
	if err != nil {
		return nil, err
	}
	nctx := r.ns(ctx)
	imgs, err := c.Import(nctx, archive)
	if err != nil {
		return nil, wrap(err, "import images")
	}
	if len(imgs) == 0 {
		return nil, errors.New("import images: the archive names no image (index.json needs an io.containerd.image.name or org.opencontainers.image.ref.name annotation)")
	}
	out := make([]runtime.Image, 0, len(imgs))
	for _, i := range imgs {
		img := containerd.NewImage(c, i)
		if err := unpack(nctx, img, sn); err != nil {
			return nil, err
		}
		out = append(out, imageOf(nctx, img))
		r.log.Info("image imported", "image", i.Name, "digest", i.Target.Digest.String())
	}
	return out, nil
}

// ListImages lists the images of outpost's namespace, one entry per
// digest with all its names.
func (r *Runtime) ListImages(ctx context.Context) ([]runtime.Image, error) {
	c, err := r.conn(ctx)
	if err != nil {
		return nil, err
	}
	nctx := r.ns(ctx)
	imgs, err := c.ListImages(nctx)
	if err != nil {
		return nil, wrap(err, "list images")
	}
	byDigest := map[string]int{}
	var out []runtime.Image
	for _, img := range imgs {
		d := img.Target().Digest.String()
		if i, ok := byDigest[d]; ok {
			out[i].Names = append(out[i].Names, img.Name())
			continue
		}
		byDigest[d] = len(out)
		out = append(out, imageOf(nctx, img))
	}
	return out, nil
}
