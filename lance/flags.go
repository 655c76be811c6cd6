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

// readerFlagsKnown: stable row ids only change what _rowid means, which lancectx reads as
// row addresses anyway; base paths need path resolution lancectx does not do.
const readerFlagsKnown = flagDeletionFiles | flagStableRowIDs | flagUseV2Format | flagTableConfig | flagDisableTransaction

// writerFlagsKnown: lancectx cannot maintain stable row id sequences, so it refuses to
// write to such datasets rather than corrupt them.
const writerFlagsKnown = flagDeletionFiles | flagUseV2Format | flagTableConfig | flagDisableTransaction

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
func setFeatureFlags(m *tablepb.Manifest) {
	var f uint64
	for _, frag := range m.GetFragments() {
		if frag.GetDeletionFile() != nil {
			f |= flagDeletionFiles
			break
		}
	}
	var w uint64 = f
	if len(m.GetConfig()) > 0 {
		w |= flagTableConfig
	}
	m.ReaderFeatureFlags = f
	m.WriterFeatureFlags = w
}
