package file

import (
	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
)

// Maps in 2.2 files. Lance stores map<K, V> exactly like list<struct<key: K, value: V>>
// (logical type "map" on the list field, the entries struct below it), so a map is a
// list layer of the repetition and definition levels; the reader only has to give the
// rebuilt list its map type. Lance's writer refuses maps in files before 2.2, and
// lancectx reads them in whatever file they come.

// isList21 reports whether a field of type t is a list layer of 2.1 levels.
func isList21(t arrow.DataType) bool {
	switch t.ID() {
	case arrow.LIST, arrow.LARGE_LIST, arrow.MAP:
		return true
	}
	return false
}

// mapEntries returns the entries struct rebuilt from the levels (entries) typed as m's
// entries. arrow-go names a map's entries "entries", "key" and "value" whatever Lance
// stored, so the struct built from the Lance fields may differ from m's by names only.
// A null entry or a null key is corruption (Arrow forbids both: arrow-go panics on such
// a map, arrow-rs, and so LanceDB, refuses it), whatever the page's layers claim.
func mapEntries(m *arrow.MapType, entries arrow.ArrayData) (arrow.ArrayData, error) {
	if len(entries.Children()) != 2 {
		return nil, corruptf(-1, "map entries with %d members", len(entries.Children()))
	}
	if entries.NullN() != 0 {
		return nil, corruptf(-1, "map with %d null entries", entries.NullN())
	}
	if n := entries.Children()[0].NullN(); n != 0 {
		return nil, corruptf(-1, "map with %d null keys", n)
	}
	return array.NewData(m.Elem(), entries.Len(), entries.Buffers(), entries.Children(), entries.NullN(), entries.Offset()), nil
}
