package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/spf13/cobra"

	"github.com/outpost-edge/outpost/agent/endpoint/wire"
	"github.com/outpost-edge/outpost/controlplane/api"
	"github.com/outpost-edge/outpost/controlplane/client"
)

// importParallel is how many nodes receive an archive at once: enough to
// overlap slow links, few enough not to swamp the uplink of one site.
const importParallel = 4

func newImageCommand(o *options) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "image",
		Short: "Manage the images held by nodes",
		Long: "image works on the container images of nodes, for sites without a registry.\n" +
			"Pods use an imported image when their imagePullPolicy is IfNotPresent or Never.",
	}
	cmd.AddCommand(newImageImportCommand(o))
	return cmd
}

// importJob is one node's upload.
type importJob struct {
	node     string
	sent     atomic.Int64
	finished atomic.Bool
	images   []wire.Image
	err      error
}

func newImageImportCommand(o *options) *cobra.Command {
	var (
		nodes []string
		all   bool
	)
	cmd := &cobra.Command{
		Use:   "import FILE.tar (--node NODE... | --all)",
		Short: "Load an image archive onto nodes",
		Long: "import sends an OCI or docker image archive (a tar, as `docker save` or\n" +
			"`podman save` write it) through the API server to the agent of each node, which loads\n" +
			"it into the node's container runtime. The archive is streamed, never held in memory,\n" +
			"and read once per node, up to 4 nodes at a time. stderr shows the bytes sent to each\n" +
			"node (a line rewritten on a terminal, else a line every few seconds); at the end\n" +
			"every node's line on stdout lists the images it loaded, or the error on stderr (and\n" +
			"outpost exits 1 if any node failed). Only cluster admins may import images.",
		Example: `  outpost image import app.tar --node edge-1
  outpost image import app.tar --node edge-1,edge-2 --node edge-3
  outpost image import app.tar --all`,
		Args: exactArgs(1, "one archive file, e.g. `outpost image import app.tar --all`"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if all == (len(nodes) > 0) {
				return usagef("give the nodes to load the archive onto with --node NODE, or --all for every node")
			}
			path := args[0]
			st, err := os.Stat(path)
			if err != nil {
				return fmt.Errorf("image archive: %w", err)
			}
			if !st.Mode().IsRegular() {
				return fmt.Errorf("image archive %s is not a regular file", path)
			}
			cl, err := o.client(cmd)
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			if all {
				if nodes, err = allNodes(ctx, cl); err != nil {
					return err
				}
				if len(nodes) == 0 {
					return fmt.Errorf("the cluster has no nodes to import %s onto", path)
				}
			}
			nodes = dedupe(nodes)
			jobs := make([]*importJob, len(nodes))
			for i, n := range nodes {
				jobs[i] = &importJob{node: n}
			}
			stderr := cmd.ErrOrStderr()
			p := newProgressOn(stderr)
			var mu sync.Mutex // one line at a time, the newest last
			report := func() {
				mu.Lock()
				defer mu.Unlock()
				p.Update("%s", importStatus(jobs, st.Size()))
			}
			report()
			runImports(ctx, cl, path, st.Size(), jobs, report)
			report()
			p.Done()
			failed := false
			for _, j := range jobs {
				if j.err != nil {
					failed = true
					fmt.Fprintf(stderr, "%s: %s\n", j.node, FormatError(j.err))
					continue
				}
				fmt.Fprintf(cmd.OutOrStdout(), "%s: %s\n", j.node, imageNames(j.images))
			}
			if failed {
				return errReported
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringSliceVar(&nodes, "node", nil, "a node to load the archive onto (repeatable, or comma-separated)")
	f.BoolVar(&all, "all", false, "load the archive onto every node of the cluster")
	return cmd
}

func allNodes(ctx context.Context, cl *client.Client) ([]string, error) {
	objs, _, err := cl.List(ctx, api.ResourceForKind("Node"), "", client.ListOptions{})
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(objs))
	for _, o := range objs {
		names = append(names, o.GetObjectMeta().Name)
	}
	slices.Sort(names)
	return names, nil
}

func dedupe(names []string) []string {
	var out []string
	for _, n := range names {
		if n = strings.TrimSpace(n); n != "" && !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	return out
}

// runImports uploads path to every job's node, a few at a time, each
// from its own file handle so that nothing is buffered. report is called
// as bytes are sent and as each node ends.
func runImports(ctx context.Context, cl *client.Client, path string, size int64, jobs []*importJob, report func()) {
	sem := make(chan struct{}, importParallel)
	var wg sync.WaitGroup
	for _, j := range jobs {
		wg.Go(func() {
			defer report()
			defer j.finished.Store(true)
			sem <- struct{}{}
			defer func() { <-sem }()
			f, err := os.Open(path)
			if err != nil {
				j.err = fmt.Errorf("image archive: %w", err)
				return
			}
			defer f.Close()
			j.images, j.err = cl.ImportImages(ctx, j.node, &countReader{r: f, n: &j.sent, report: report}, size)
		})
	}
	wg.Wait()
}

// countReader counts the bytes read through it for the progress line.
type countReader struct {
	r      io.Reader
	n      *atomic.Int64
	report func()
}

func (c *countReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n.Add(int64(n))
	c.report()
	return n, err
}

// importStatus is the progress line of an import: the bytes sent of the
// total to the one node, or to each node sending now with how many have
// finished.
func importStatus(jobs []*importJob, total int64) string {
	node := func(j *importJob) string {
		return fmt.Sprintf("%s %s/%s", j.node, byteSize(j.sent.Load()), byteSize(total))
	}
	if len(jobs) == 1 {
		return node(jobs[0])
	}
	finished := 0
	var sending []string
	for _, j := range jobs {
		switch {
		case j.finished.Load():
			finished++
		case j.sent.Load() > 0:
			sending = append(sending, node(j))
		}
	}
	return strings.Join(append([]string{fmt.Sprintf("%d/%d nodes done", finished, len(jobs))}, sending...), "  ")
}

// byteSize renders n bytes for people: 512 B, 3.5 MiB.
func byteSize(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

// imageNames lists what a node loaded: names, or the digest of an
// image without one.
func imageNames(imgs []wire.Image) string {
	if len(imgs) == 0 {
		return "the archive held no images"
	}
	var parts []string
	for _, im := range imgs {
		if len(im.Names) == 0 {
			parts = append(parts, im.Digest)
			continue
		}
		parts = append(parts, im.Names...)
	}
	return "loaded " + strings.Join(parts, ", ")
}
