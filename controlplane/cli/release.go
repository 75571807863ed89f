package cli

import (
	"bytes"
	"context"
	"crypto"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	"github.com/outpost-edge/outpost/controlplane/api"
	"github.com/outpost-edge/outpost/controlplane/release"
)

// newReleaseCommand is `adm release`: build, inspect, sign and extract
// release payloads (SPEC UPD-3, UPD-4). None of it needs a server.
func newReleaseCommand() *cobra.Command {
	rel := &cobra.Command{
		Use:   "release",
		Short: "Build, inspect, sign and extract release payloads",
		Long: `A release payload is one OCI image layout (a directory, or a tar archive of one):
release-metadata, the manifests the cluster applies by runlevel
(0000_<runlevel>_<component>_<name>.yaml), image-references pinning the add-ons' and the
pools' OS images by digest, and the outpost binary for each platform. Its digest is its
manifest's, and it is signed over that manifest with a key a site keeps (ECDSA P-256 or
Ed25519, PEM); 'info --key' and 'extract --key' verify it against trusted keys. Sign with
'outpost adm release sign --key', or with cosign or openssl over the bytes
'outpost adm release manifest' prints, and attach that with --signature.`,
	}
	rel.AddCommand(newReleaseNewCommand(), newReleaseInfoCommand(), newReleaseExtractCommand(),
		newReleaseSignCommand(), newReleaseManifestCommand(), newReleaseServeCommand())
	return rel
}

func newReleaseNewCommand() *cobra.Command {
	var (
		fromDir, version, url, toDir, toFile, signKey, created string
		previous                                               []string
		binaries, images                                       []string
	)
	cmd := &cobra.Command{
		Use:   "new --from-dir DIR --version V (--to-dir DIR | --to-file FILE) [flags]",
		Short: "Build a release payload from manifests and binaries",
		Long: `new builds a release payload. --from-dir holds the manifests (every .yaml, .yml and
.json file), each named 0000_<runlevel>_<component>_<name>.yaml; each is decoded and
validated as the API would, and a payload with a bad one is not written: every problem is
listed by file and field. --binary gives the outpost binary of a platform (repeat it for
each), --image an image the release pins by digest (an add-on's, or a pool's OS image as
os-<pool>). With --sign-key the payload is signed at once.`,
		Example: `  outpost adm release new --from-dir manifests/ --version 1.3.0 --previous 1.2.0,1.2.1 \
      --binary linux/amd64=bin/outpost --binary linux/arm64=bin/outpost-arm64 \
      --image edge-dns=registry.example/edge-dns@sha256:0123... \
      --to-file outpost-1.3.0.tar --sign-key release.key`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			switch {
			case fromDir == "":
				return usagef("--from-dir is required")
			case version == "":
				return usagef("--version is required")
			case (toDir == "") == (toFile == ""):
				return usagef("give one of --to-dir and --to-file")
			}
			in := release.Input{Metadata: release.Metadata{Version: version, Previous: previous}, Binaries: map[string]string{}}
			if url != "" {
				in.Metadata.Metadata = map[string]string{"url": url}
			}
			if created != "" {
				t, err := time.Parse(time.RFC3339, created)
				if err != nil {
					return usagef("--created %q: %v", created, err)
				}
				in.Created = t
			}
			for _, b := range binaries {
				platform, path, ok := strings.Cut(b, "=")
				if !ok {
					return usagef("--binary %q: give OS/ARCH=PATH", b)
				}
				if _, dup := in.Binaries[platform]; dup {
					return usagef("--binary %q: platform %s given twice", b, platform)
				}
				in.Binaries[platform] = path
			}
			for _, im := range images {
				name, ref, ok := strings.Cut(im, "=")
				if !ok {
					return usagef("--image %q: give NAME=REPOSITORY@sha256:DIGEST", im)
				}
				tag := release.ImageTag{Name: name}
				tag.From.Kind, tag.From.Name = "DockerImage", ref
				in.Images = append(in.Images, tag)
			}
			files, err := readManifestDir(fromDir)
			if err != nil {
				return err
			}
			in.Manifests = files
			var key crypto.Signer
			if signKey != "" {
				b, err := os.ReadFile(signKey)
				if err != nil {
					return err
				}
				if key, err = release.ParsePrivateKey(b); err != nil {
					return fmt.Errorf("--sign-key %s: %w", signKey, err)
				}
			}
			dest := toDir
			if toFile != "" {
				dest = toFile
			}
			if toFile != "" {
				if _, err := os.Stat(toFile); err == nil {
					return fmt.Errorf("%s exists: remove it, or write elsewhere", toFile)
				}
			} else if ents, err := os.ReadDir(toDir); err == nil && len(ents) > 0 {
				return fmt.Errorf("%s is not empty: remove it, or write elsewhere", toDir)
			}
			// Built beside the destination and moved there at the end: a
			// failed build leaves nothing behind.
			tmp, err := os.MkdirTemp(filepath.Dir(filepath.Clean(dest)), ".release-")
			if err != nil {
				return err
			}
			defer os.RemoveAll(tmp)
			dir := filepath.Join(tmp, "layout")
			digest, err := release.Build(dir, in)
			if err != nil {
				return err
			}
			if key != nil {
				if err := release.Sign(dir, key); err != nil {
					return err
				}
			}
			if toFile != "" {
				if err := writeTarFile(toFile, dir); err != nil {
					return err
				}
			} else {
				_ = os.Remove(toDir) // an empty one may be there
				if err := os.Rename(dir, toDir); err != nil {
					return err
				}
			}
			where := dest
			signed := "unsigned"
			if key != nil {
				signed = "signed"
			}
			fmt.Fprintf(cmd.OutOrStdout(), "release %s %s, %s, written to %s\n", version, digest, signed, where)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&fromDir, "from-dir", "", "directory of the release's manifests")
	f.StringVar(&version, "version", "", "the release's version")
	f.StringSliceVar(&previous, "previous", nil, "versions this release updates from (comma-separated)")
	f.StringVar(&url, "url", "", "a URL about the release (its notes)")
	f.StringArrayVar(&binaries, "binary", nil, "OS/ARCH=PATH of the outpost binary for a platform (repeatable)")
	f.StringArrayVar(&images, "image", nil, "NAME=REPOSITORY@sha256:DIGEST of an image the release pins (repeatable)")
	f.StringVar(&toDir, "to-dir", "", "write the payload as an OCI layout directory (new or empty)")
	f.StringVar(&toFile, "to-file", "", "write the payload as a tar archive of its OCI layout")
	f.StringVar(&signKey, "sign-key", "", "sign with this PEM private key (ECDSA P-256 or Ed25519)")
	f.StringVar(&created, "created", "", "the creation time to record (RFC 3339; default now)")
	return cmd
}

// readManifestDir reads the manifest files of dir, by name.
func readManifestDir(dir string) ([]release.File, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var files []release.File
	for _, e := range ents {
		ext := filepath.Ext(e.Name())
		if e.IsDir() || (ext != ".yaml" && ext != ".yml" && ext != ".json") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			return nil, err
		}
		files = append(files, release.File{Name: e.Name(), Data: b})
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("%s has no .yaml, .yml or .json manifest", dir)
	}
	return files, nil
}

func writeTarFile(path, dir string) error {
	// Hidden while it is written: a graph's releases/ skips it.
	tmp := filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+".partial")
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	err = release.WriteTar(f, dir)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = os.Remove(tmp)
		return err
	}
	return os.Rename(tmp, path)
}

// openPayload opens a payload and, with key files, verifies it; it
// returns the keys read.
func openPayload(src string, keyFiles []string) (*release.Payload, []crypto.PublicKey, error) {
	p, err := release.Open(src)
	if err != nil {
		return nil, nil, err
	}
	var keys []crypto.PublicKey
	for _, kf := range keyFiles {
		b, err := os.ReadFile(kf)
		if err != nil {
			return nil, nil, err
		}
		k, err := api.ParseTrustedKeys(b)
		if err != nil {
			return nil, nil, fmt.Errorf("--key %s: %w", kf, err)
		}
		keys = append(keys, k...)
	}
	if len(keys) > 0 {
		if err := p.Verify(keys); err != nil {
			return nil, nil, err
		}
	}
	return p, keys, nil
}

func newReleaseInfoCommand() *cobra.Command {
	var keys []string
	var output string
	cmd := &cobra.Command{
		Use:   "info PAYLOAD",
		Short: "Show a release payload: version, digest, images, binaries, manifests by runlevel",
		Long: `info reads a payload (a layout directory or a tar archive), checks every blob's digest,
and prints what it holds. With --key it also verifies its signature and fails if none
verifies.`,
		Example: `  outpost adm release info outpost-1.3.0.tar --key /etc/outpost/release-keys.pem`,
		Args:    exactArgs(1, "one payload (a directory or a tar file)"),
		RunE: func(cmd *cobra.Command, args []string) error {
			p, trusted, err := openPayload(args[0], keys)
			if err != nil {
				return err
			}
			verified := p.Verified(trusted)
			sigs := fmt.Sprintf("%d, not checked (give --key)", len(p.Signatures))
			if len(trusted) > 0 {
				sigs = fmt.Sprintf("%d, %d verified by the keys given", len(p.Signatures), verified)
			}
			rls, err := release.Order(p.Manifests)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if output == "json" || output == "yaml" {
				doc := map[string]any{
					"digest": p.Digest, "created": p.Created, "metadata": p.Metadata, "imageReferences": p.Images,
					"binaries": p.Binaries, "signatures": len(p.Signatures), "runlevels": rls,
				}
				if len(keys) > 0 {
					doc["signaturesVerified"] = verified
				}
				b, err := json.MarshalIndent(doc, "", "  ")
				if err != nil {
					return err
				}
				if output == "yaml" {
					if b, err = yaml.JSONToYAML(b); err != nil {
						return err
					}
					_, err = out.Write(b)
					return err
				}
				_, err = fmt.Fprintf(out, "%s\n", b)
				return err
			} else if output != "" {
				return usagef("--output %q: give json, yaml or nothing", output)
			}
			tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
			fmt.Fprintf(tw, "Name:\t%s\n", p.Metadata.Version)
			fmt.Fprintf(tw, "Digest:\t%s\n", p.Digest)
			fmt.Fprintf(tw, "Created:\t%s\n", p.Created.UTC().Format(time.RFC3339))
			fmt.Fprintf(tw, "Previous:\t%s\n", orNone(strings.Join(p.Metadata.Previous, ", ")))
			if u := p.Metadata.Metadata["url"]; u != "" {
				fmt.Fprintf(tw, "URL:\t%s\n", u)
			}
			fmt.Fprintf(tw, "Signatures:\t%s\n", sigs)
			_ = tw.Flush()
			fmt.Fprintln(out, "\nBinaries:")
			tw = tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "  PLATFORM\tDIGEST\tSIZE")
			for _, b := range p.Binaries {
				fmt.Fprintf(tw, "  %s\t%s\t%.1f MiB\n", b.Platform, b.Digest, float64(b.Size)/(1<<20))
			}
			_ = tw.Flush()
			fmt.Fprintln(out, "\nImages:")
			tw = tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "  NAME\tIMAGE")
			for _, t := range p.Images.Spec.Tags {
				fmt.Fprintf(tw, "  %s\t%s\n", t.Name, t.From.Name)
			}
			_ = tw.Flush()
			fmt.Fprintf(out, "\nManifests (%d), applied by runlevel; components of one runlevel side by side:\n", len(p.Manifests))
			tw = tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "  RUNLEVEL\tCOMPONENT\tMANIFESTS")
			for _, rl := range rls {
				for _, c := range rl.Components {
					names := make([]string, len(c.Manifests))
					for i, m := range c.Manifests {
						names[i] = m.Name
					}
					fmt.Fprintf(tw, "  %02d\t%s\t%s\n", rl.Level, c.Name, strings.Join(names, ", "))
				}
			}
			return tw.Flush()
		},
	}
	cmd.Flags().StringArrayVar(&keys, "key", nil, "PEM file of trusted public keys: verify the signature (repeatable)")
	cmd.Flags().StringVarP(&output, "output", "o", "", "json or yaml for the whole of it")
	return cmd
}

func newReleaseExtractCommand() *cobra.Command {
	var (
		to       string
		keys     []string
		binaries bool
	)
	cmd := &cobra.Command{
		Use:   "extract PAYLOAD [--to DIR]",
		Short: "Write a release payload's manifests, release-metadata and image-references to a directory",
		Long: `extract writes the payload's manifests, release-metadata and image-references into
--to (default: the current directory), as oc adm release extract does; --binaries writes
the outpost binaries too, as outpost-<os>-<arch>. With --key the signature is verified first
and nothing is written when none verifies.`,
		Example: `  outpost adm release extract outpost-1.3.0.tar --to /tmp/1.3.0 --key release.pub`,
		Args:    exactArgs(1, "one payload (a directory or a tar file)"),
		RunE: func(cmd *cobra.Command, args []string) error {
			p, _, err := openPayload(args[0], keys)
			if err != nil {
				return err
			}
			if err := p.Extract(to, binaries); err != nil {
				return err
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "Extracted release payload from digest %s created at %s\n", p.Digest, p.Created.UTC().Format(time.RFC3339))
			return nil
		},
	}
	cmd.Flags().StringVar(&to, "to", ".", "directory to write into (made if missing)")
	cmd.Flags().StringArrayVar(&keys, "key", nil, "PEM file of trusted public keys: verify before extracting (repeatable)")
	cmd.Flags().BoolVar(&binaries, "binaries", false, "also write the outpost binaries")
	return cmd
}

func newReleaseSignCommand() *cobra.Command {
	var key, sigFile string
	cmd := &cobra.Command{
		Use:   "sign PAYLOAD-DIR (--key KEY | --signature FILE)",
		Short: "Sign a release payload, or attach a signature made with cosign or openssl",
		Long: `sign adds a signature to a payload in a layout directory (pack it with
'adm release new --to-file' afterwards, or tar the directory). --key signs with a PEM private
key (PKCS #8 or SEC 1; ECDSA P-256 or Ed25519). --signature attaches one made elsewhere over
the bytes 'outpost adm release manifest' prints: the base64 that 'cosign sign-blob --key
cosign.key' prints, or the DER of 'openssl dgst -sha256 -sign key.pem'. The signature is
checked when the payload is verified, not here.`,
		Example: `  outpost adm release manifest payload/ > manifest.json
  cosign sign-blob --key cosign.key manifest.json > manifest.sig
  outpost adm release sign payload/ --signature manifest.sig`,
		Args: exactArgs(1, "one payload directory"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if (key == "") == (sigFile == "") {
				return usagef("give one of --key and --signature")
			}
			if key != "" {
				b, err := os.ReadFile(key)
				if err != nil {
					return err
				}
				k, err := release.ParsePrivateKey(b)
				if err != nil {
					return fmt.Errorf("--key %s: %w", key, err)
				}
				if err := release.Sign(args[0], k); err != nil {
					return err
				}
			} else {
				sig, err := os.ReadFile(sigFile)
				if err != nil {
					return err
				}
				if len(bytes.TrimSpace(sig)) == 0 {
					return fmt.Errorf("--signature %s is empty", sigFile)
				}
				if err := release.AddSignature(args[0], sig); err != nil {
					return err
				}
			}
			fmt.Fprintf(cmd.OutOrStdout(), "signature added to %s\n", args[0])
			return nil
		},
	}
	cmd.Flags().StringVar(&key, "key", "", "PEM private key to sign with")
	cmd.Flags().StringVar(&sigFile, "signature", "", "a signature file made with cosign sign-blob or openssl dgst")
	return cmd
}

func newReleaseManifestCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "manifest PAYLOAD",
		Short: "Print the bytes a release signature signs (its OCI manifest)",
		Example: `  outpost adm release manifest payload/ > manifest.json
  outpost adm release manifest outpost-1.3.0.tar | sha256sum`,
		Args: exactArgs(1, "one payload (a directory or a tar file)"),
		RunE: func(cmd *cobra.Command, args []string) error {
			p, err := release.Open(args[0])
			if err != nil {
				return err
			}
			_, err = cmd.OutOrStdout().Write(p.ManifestBytes())
			return err
		},
	}
}

func newReleaseServeCommand() *cobra.Command {
	var dir, listen, baseURL, cert, key string
	cmd := &cobra.Command{
		Use:   "serve --dir DIR --listen ADDR --url BASE-URL",
		Short: "Serve an update graph and its payloads from a directory, as an update service",
		Long: `serve answers Cincinnati's graph requests (` + release.GraphPath + `?channel=C&arch=A),
so that a site hosts its own update service for its clusters' spec.upstream, and serves the
payloads the graph names. The directory holds releases/ (payloads: tar files), channels/
(name: stable-1, versions: [...]) and blocked-edges/ (to, from as a regular expression, url,
name, message, and matchingRules: with rules the update becomes conditional, without it is
removed), as OpenShift's graph-data does. Each release's previous versions in the channel are
its edges. The directory is read again as it changes. --url is the address clients use (it
prefixes the payloads' URLs); with --tls-cert and --tls-key it serves HTTPS.`,
		Example: `  outpost adm release serve --dir /srv/outpost-updates --listen :8443 \
      --url https://updates.site.example:8443 --tls-cert tls.crt --tls-key tls.key`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if dir == "" || listen == "" || baseURL == "" {
				return usagef("--dir, --listen and --url are required")
			}
			if (cert == "") != (key == "") {
				return usagef("give both --tls-cert and --tls-key, or neither")
			}
			if u, err := url.Parse(baseURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				return usagef("--url %q: the http:// or https:// address clients reach this service at", baseURL)
			}
			if _, err := os.Stat(filepath.Join(dir, "releases")); err != nil {
				return fmt.Errorf("%s: %w", dir, err)
			}
			ln, err := net.Listen("tcp", listen)
			if err != nil {
				return err
			}
			log := slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), nil))
			srv := &http.Server{Handler: &release.GraphDir{Dir: dir, BaseURL: baseURL, Logger: log}, ReadHeaderTimeout: 10 * time.Second}
			ctx := cmd.Context()
			go func() {
				<-ctx.Done()
				sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				_ = srv.Shutdown(sctx)
			}()
			fmt.Fprintf(cmd.ErrOrStderr(), "serving the update graph of %s on %s (%s%s)\n", dir, listen, strings.TrimSuffix(baseURL, "/"), release.GraphPath)
			if cert != "" {
				err = srv.ServeTLS(ln, cert, key)
			} else {
				err = srv.Serve(ln)
			}
			if errors.Is(err, http.ErrServerClosed) {
				return nil
			}
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&dir, "dir", "", "the graph's directory (releases/, channels/, blocked-edges/)")
	f.StringVar(&listen, "listen", "", "address to listen on (host:port)")
	f.StringVar(&baseURL, "url", "", "the URL clients reach this service at")
	f.StringVar(&cert, "tls-cert", "", "PEM certificate (chain) for HTTPS")
	f.StringVar(&key, "tls-key", "", "PEM key of --tls-cert")
	return cmd
}
