package store

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// Every build decodes raft entries the same way (issue 9 item 4a): no
// file of the store or the API is built only with or without an
// experiment, the Makefile sets none (so `go install` builds what `make
// build` builds), and the store encodes and decodes only through the
// API's one engine, never through encoding/json, whose implementation
// GOEXPERIMENT=jsonv2 swaps.
func TestOneJSONEngineInEveryBuild(t *testing.T) {
	mk, err := os.ReadFile("../../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	if regexp.MustCompile(`(?m)^\s*(export\s+)?GOEXPERIMENT\b`).Match(mk) {
		t.Errorf("the Makefile sets GOEXPERIMENT: make build and go install would build different programs")
	}
	for _, dir := range []string{".", "../api"} {
		files, err := filepath.Glob(filepath.Join(dir, "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			fset := token.NewFileSet()
			af, err := parser.ParseFile(fset, f, nil, parser.ParseComments|parser.SkipObjectResolution)
			if err != nil {
				t.Fatal(err)
			}
			for _, cg := range af.Comments {
				for _, c := range cg.List {
					if strings.HasPrefix(c.Text, "//go:build") && strings.Contains(c.Text, "goexperiment") {
						t.Errorf("%s: %s: this file is in some builds only", f, c.Text)
					}
				}
			}
			if dir != "." {
				continue
			}
			std := ""
			for _, imp := range af.Imports {
				if p, _ := strconv.Unquote(imp.Path.Value); p == "encoding/json" {
					std = "json"
					if imp.Name != nil {
						std = imp.Name.Name
					}
				}
			}
			if std == "" {
				continue
			}
			ast.Inspect(af, func(n ast.Node) bool {
				call, ok := n.(*ast.CallExpr)
				if !ok {
					return true
				}
				if sel, ok := call.Fun.(*ast.SelectorExpr); ok {
					if x, ok := sel.X.(*ast.Ident); ok && x.Name == std {
						t.Errorf("%s: calls encoding/json's %s; use api.Marshal/api.Unmarshal", fset.Position(call.Pos()), sel.Sel.Name)
					}
				}
				return true
			})
		}
	}
}
