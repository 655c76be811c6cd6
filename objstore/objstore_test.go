package objstore_test

import (
	"testing"

	"github.com/lancectx/lancectx/objstore"
	"github.com/lancectx/lancectx/objstore/objstoretest"
)

// TestAcceptance runs the contract against every local backend, bare and behind a
// prefix view. MemStore goes first: it is the simplest, so a contract bug shows there.
func TestAcceptance(t *testing.T) {
	backends := []struct {
		name string
		new  func(t *testing.T) objstore.Store
	}{
		{"mem", func(t *testing.T) objstore.Store { return objstore.NewMem() }},
		{"file", func(t *testing.T) objstore.Store {
			s, err := objstore.NewFile(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			return s
		}},
		// PutIfAbsent's fallback for filesystems without unnamed temp files.
		{"file-named-temp", func(t *testing.T) objstore.Store {
			s, err := objstore.NewFile(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			objstore.UseNamedTempFiles(s)
			return s
		}},
	}
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) { objstoretest.Acceptance(t, b.new) })
		t.Run(b.name+"/prefixed", func(t *testing.T) {
			objstoretest.Acceptance(t, func(t *testing.T) objstore.Store {
				return objstore.Prefixed(b.new(t), "some/prefix")
			})
		})
	}
}
