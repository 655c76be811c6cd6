package lance

import (
	"fmt"

	"github.com/lancectx/lancectx/lance/format/tablepb"
)

// Feature flags (reference/lance-format.md section 2.5). A reader refuses a manifest whose
// reader flags it does not know; a writer refuses one whose writer flags it does not know.
const (
	flagDeletionFiles      uint64 = 1
	flagStableRowIDs       uint64 = 2
	flagUseV2Format        uint64 = 4 // deprecated, never written
	flagTableConfig        uint64 = 8
	flagBasePaths          uint64 = 16
	flagDisableTransaction uint64 = 32
)

// readerFlagsKnown: stable row ids change what _rowid means, which lancectx reads from
// the fragments' row id sequences; base paths need path resolution lancectx does not do.
const readerFlagsKnown = flagDeletionFiles | flagStableRowIDs | flagUseV2Format | flagTableConfig | flagDisableTransaction

// writerFlagsKnown: every commit on a dataset with stable row ids gives the fragments it
// adds row ids and advances next_row_id (assignRowIDs), and compaction carries them over
// (carryRowIDs). Base paths stay refused: lancectx does not resolve them.
const writerFlagsKnown = flagDeletionFiles | flagStableRowIDs | flagUseV2Format | flagTableConfig | flagDisableTransaction

func checkReaderFlags(m *tablepb.Manifest) error {
	if unknown := m.GetReaderFeatureFlags() &^ readerFlagsKnown; unknown != 0 {
		return fmt.Errorf("%w: dataset version %d needs reader feature flags %#x", ErrUnsupported, m.GetVersion(), unknown)
	}
	return nil
}

func checkWriterFlags(m *tablepb.Manifest) error {
	if unknown := m.GetWriterFeatureFlags() &^ writerFlagsKnown; unknown != 0 {
		return fmt.Errorf("%w: writing to dataset version %d needs writer feature flags %#x", ErrUnsupported, m.GetVersion(), unknown)
	}
	return nil
}

// setFeatureFlags recomputes the flags from content, as Lance does on every commit.
// Stable row ids are a property of the dataset, not only of its fragments: the flag
// stays once set (an emptied table keeps it), and any fragment with row ids sets it.
func setFeatureFlags(m *tablepb.Manifest) {
	var f uint64
	if usesStableRowIDs(m) {
		f |= flagStableRowIDs
	}
	for _, frag := range m.GetFragments() {
		if frag.GetDeletionFile() != nil {
			f |= flagDeletionFiles
		}
		if frag.GetRowIdSequence() != nil {
			f |= flagStableRowIDs
		}
	}
	var w uint64 = f
	if len(m.GetConfig()) > 0 {
		w |= flagTableConfig
	}
	m.ReaderFeatureFlags = f
	m.WriterFeatureFlags = w
}
