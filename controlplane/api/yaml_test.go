package api

import (
	"strings"
	"testing"
)

func TestYAMLDocumentsRefusesDuplicateKeys(t *testing.T) {
	tests := []struct {
		name, in string
		want     []string // substrings of the error
	}{
		{
			name: "duplicate in the first document",
			in:   "apiVersion: v1\nkind: Pod\nmetadata:\n  name: dup\n  name: dup2\n",
			want: []string{"YAML document 1 (from line 1)", `line 5: key "name" already set in map`},
		},
		{
			name: "line numbers count from the start of the stream",
			in:   "a: 1\n---\nkind: Pod\nkind: Node\n",
			want: []string{"YAML document 2 (from line 3)", `line 4: key "kind" already set in map`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := YAMLDocuments([]byte(tt.in))
			if err == nil {
				t.Fatal("a mapping with a key given twice was accepted")
			}
			if ReasonOf(err) != ReasonBadRequest {
				t.Errorf("error %v is not a BadRequest", err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("error %q spans lines", err)
			}
		})
	}
	// The same key in two documents, or in two mappings, is fine.
	docs, err := YAMLDocuments([]byte("name: a\nspec: {name: b}\n---\nname: c\n"))
	if err != nil || len(docs) != 2 {
		t.Errorf("YAMLDocuments = %d documents, %v; want 2, nil", len(docs), err)
	}
}
