// Command demoimage packs a static binary into an OCI image archive that
// `outpost image import` loads onto nodes: `make run` builds the demo's
// image with it, without Docker or a registry.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/outpost-edge/outpost/runtime/ociarchive"
)

func main() {
	bin := flag.String("bin", "", "the static binary to pack")
	name := flag.String("name", "outpost.local/demo:1", "the image's name")
	out := flag.String("out", "", "where to write the archive")
	flag.Parse()
	if err := build(*bin, *name, *out); err != nil {
		fmt.Fprintln(os.Stderr, "demoimage:", err)
		os.Exit(1)
	}
}

func build(bin, name, out string) error {
	data, err := os.ReadFile(bin)
	if err != nil {
		return err
	}
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	err = ociarchive.Build(f, ociarchive.Image{
		Name:       name,
		Files:      []ociarchive.File{{Path: "/demo", Mode: 0o755, Data: data}},
		Entrypoint: []string{"/demo"},
	})
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
