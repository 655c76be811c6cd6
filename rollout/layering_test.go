package rollout

import (
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestDataModelImportsNoHTTP keeps the HTTP layer out of the data model: request
// decoding (media types, body limits, multipart framing) lives in the worker, and
// this package only turns JSON into validated records and records into Arrow.
func TestDataModelImportsNoHTTP(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(token.NewFileSet(), f, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		checked++
		for _, imp := range file.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			if path == "net/http" || strings.HasPrefix(path, "net/http/") || path == "mime/multipart" {
				t.Errorf("%s imports %s: HTTP decoding belongs in the worker", f, path)
			}
		}
	}
	if checked < 5 {
		t.Fatalf("only %d files checked", checked)
	}
}
