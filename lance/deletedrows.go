package lance

import (
	"context"
	"fmt"

	"github.com/RoaringBitmap/roaring/v2"
)

// DeletedRows returns the deleted row offsets of fragment fragID in this version (an
// empty bitmap when it has none): what an index kept outside the table needs to leave
// out the rows deleted since it was built.
func (d *Dataset) DeletedRows(ctx context.Context, fragID uint64) (*roaring.Bitmap, error) {
	for _, f := range d.Fragments() {
		if f.GetId() == fragID {
			return readDeletionVector(ctx, d.store, f)
		}
	}
	return nil, fmt.Errorf("lance: version %d has no fragment %d", d.Version(), fragID)
}
