package repo

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// insiderWords are names users do not know: "the seed" is what the
// project's own specification calls the OpenShift manual it follows.
var insiderWords = regexp.MustCompile(`(?i)\bthe seed\b|\bseed's\b|\bseed \d{3}\b`)

// What outpost prints and what its documents say name the OpenShift
// manual, not "the seed" (issue 15 item 7): string literals of the
// non-test Go code (CLI output, warnings, errors, help) and the Markdown
// documents. Comments and tests may keep the project's own word.
func TestNoInsiderWordsForUsers(t *testing.T) {
	root := "../.."
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() {
			if strings.HasPrefix(d.Name(), ".") && rel != "." || d.Name() == "testdata" || d.Name() == "node_modules" || rel == "testing" {
				return filepath.SkipDir
			}
			return nil
		}
		switch {
		case strings.HasSuffix(path, ".md"):
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			for i, line := range strings.Split(string(b), "\n") {
				if m := insiderWords.FindString(line); m != "" {
					t.Errorf("%s:%d says %q: name the OpenShift manual", rel, i+1, m)
				}
			}
		case strings.HasSuffix(path, ".go") && !strings.HasSuffix(path, "_test.go"):
			fset := token.NewFileSet()
			f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
			if err != nil {
				return err
			}
			ast.Inspect(f, func(n ast.Node) bool {
				lit, ok := n.(*ast.BasicLit)
				if !ok || lit.Kind != token.STRING {
					return true
				}
				s, err := strconv.Unquote(lit.Value)
				if err != nil {
					s = lit.Value
				}
				if m := insiderWords.FindString(s); m != "" {
					t.Errorf("%s: a string says %q: name the OpenShift manual", fset.Position(lit.Pos()), m)
				}
				return true
			})
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
