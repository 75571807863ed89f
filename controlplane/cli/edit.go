package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"reflect"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	"github.com/outpost-edge/outpost/controlplane/client"
)

const editHeader = `# Please edit the object below. Lines beginning with a '#' are comments.
# Saving the file sends it to the server; an empty file or an unchanged one
# cancels the edit. If the server refuses the change, the file is kept.
#
`

// editorCommand is $OUTPOST_EDITOR, else $EDITOR, else vi. It may carry
// arguments ("code --wait"), so it is run by the shell.
func editorCommand() string {
	for _, env := range []string{"OUTPOST_EDITOR", "EDITOR"} {
		if e := os.Getenv(env); e != "" {
			return e
		}
	}
	return "vi"
}

func newEditCommand(o *options) *cobra.Command {
	return &cobra.Command{
		Use:   "edit TYPE NAME | TYPE/NAME",
		Short: "Edit an object in $EDITOR as YAML and save it to the server",
		Long: "edit opens the object as YAML in $OUTPOST_EDITOR, $EDITOR or vi. When the editor exits,\n" +
			"the changed object replaces the stored one (a change made meanwhile by someone else makes\n" +
			"the save fail with a conflict). On failure the edited file is kept and its path printed.",
		Example: `  outpost edit deployment/web
  outpost edit svc web -n shop
  OUTPOST_EDITOR=nano outpost edit node edge-1`,
		Args: minArgs(1, "a resource and a name, e.g. `outpost edit deploy web`"),
		RunE: func(cmd *cobra.Command, args []string) error {
			r, name, err := oneObject(args, "edit")
			if err != nil {
				return err
			}
			cl, err := o.client(cmd)
			if err != nil {
				return err
			}
			ns := ""
			if r.Namespaced {
				ns = cl.Namespace()
			}
			path := client.PathFor(r, ns, name, "")
			ctx := cmd.Context()
			data, _, err := cl.Do(ctx, http.MethodGet, path, url.Values{"consistent": {"true"}}, nil)
			if err != nil {
				return err
			}
			data = withTypeMeta(r, data)
			orig, err := decodeJSONMap(data)
			if err != nil {
				return err
			}
			y, err := yaml.JSONToYAML(data)
			if err != nil {
				return fmt.Errorf("convert %s to YAML: %w", refName(r, name), err)
			}
			f, err := os.CreateTemp("", "outpost-edit-*.yaml")
			if err != nil {
				return fmt.Errorf("create the file to edit: %w", err)
			}
			file := f.Name()
			_, werr := f.Write(append([]byte(editHeader), y...))
			if cerr := f.Close(); werr == nil {
				werr = cerr
			}
			if werr != nil {
				os.Remove(file)
				return fmt.Errorf("write the file to edit: %w", werr)
			}
			ed := exec.CommandContext(ctx, "sh", "-c", editorCommand()+` "$1"`, "sh", file)
			ed.Stdin, ed.Stdout, ed.Stderr = cmd.InOrStdin(), cmd.OutOrStdout(), cmd.ErrOrStderr()
			if err := ed.Run(); err != nil {
				return fmt.Errorf("editor %q failed: %w (your changes, if any, are in %s)", editorCommand(), err, file)
			}
			edited, err := os.ReadFile(file)
			if err != nil {
				return fmt.Errorf("read the edited file: %w", err)
			}
			stdout, stderr := cmd.OutOrStdout(), cmd.ErrOrStderr()
			keep := func(err error) error {
				fmt.Fprintln(stderr, FormatError(err))
				fmt.Fprintf(stderr, "A copy of your changes has been stored to %q\n", file)
				return errReported
			}
			j, err := yaml.YAMLToJSONStrict(edited) // a key given twice is a mistake, not a choice
			if err != nil {
				return keep(fmt.Errorf("the edited file is not valid YAML: %w", err))
			}
			if t := bytes.TrimSpace(j); len(t) == 0 || string(t) == "null" {
				os.Remove(file)
				fmt.Fprintln(stdout, "Edit cancelled, saved file was empty.")
				return nil
			}
			obj, err := decodeJSONMap(j)
			if err != nil {
				return keep(fmt.Errorf("the edited file is not one object: %w", err))
			}
			if reflect.DeepEqual(obj, orig) {
				os.Remove(file)
				fmt.Fprintln(stdout, "Edit cancelled, no changes made.")
				return nil
			}
			md, _ := obj["metadata"].(map[string]any)
			if n, _ := md["name"].(string); n != name {
				return keep(fmt.Errorf("metadata.name cannot be changed by edit (it was %q)", name))
			}
			if k, _ := obj["kind"].(string); k != r.Kind {
				return keep(fmt.Errorf("kind cannot be changed by edit (it was %q)", r.Kind))
			}
			body, err := json.Marshal(obj)
			if err != nil {
				return keep(fmt.Errorf("encode %s: %w", refName(r, name), err))
			}
			if _, _, err := cl.Do(ctx, http.MethodPut, path, nil, body); err != nil {
				return keep(err)
			}
			os.Remove(file)
			fmt.Fprintf(stdout, "%s edited\n", refName(r, name))
			return nil
		},
	}
}
