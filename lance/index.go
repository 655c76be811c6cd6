package lance

import (
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/RoaringBitmap/roaring/v2"
	"github.com/google/uuid"

	"github.com/lancectx/lancectx/lance/format/tablepb"
)

// Indices (reference/lance-format.md section 2.6) are LanceDB's, except the IVF_FLAT
// vector indices of ivf.go: other index files (index_details, files) are opaque here. The policy
// that keeps every index correct through lancectx's writes is in the package docs
// (doc.go); this file holds its rules: listing indices, what a commit keeps
// (maintainIndices), and which fragments compaction must leave alone
// (indexedFragments). Remapping an index, as Lance's own compaction does, would mean
// rewriting its files; lancectx does not try.

// fragReuseIndexName is Lance's system index recording compaction remaps deferred with
// defer_index_remap; Lance's index retention never drops it.
const fragReuseIndexName = "__lance_frag_reuse"

// IndexInfo describes one index of a version, as recorded in its manifest.
type IndexInfo struct {
	// Name is the index name (LanceDB's default is "{column}_idx").
	Name string `json:"name"`
	// UUID names the directory of the index files, _indices/{uuid}/.
	UUID string `json:"uuid"`
	// Fields are the ids of the indexed fields.
	Fields []int32 `json:"fields"`
	// Fragments are the ids of the fragments the index covers, ascending (some may no
	// longer exist); nil when the index does not record them.
	Fragments []uint64 `json:"fragments"`
	// DatasetVersion is the version the index was built on.
	DatasetVersion uint64 `json:"dataset_version"`
	// Type is the type URL of the index details, e.g. "/lance.table.BTreeIndexDetails".
	Type string `json:"type"`
	// Files are the index files (relative to the index directory), when recorded.
	Files []string `json:"files,omitempty"`
}

// Indices lists the indices of this version, in manifest order.
func (d *Dataset) Indices() ([]IndexInfo, error) {
	var out []IndexInfo
	for _, im := range d.mf.Indices.GetIndices() {
		id, err := indexUUID(im)
		if err != nil {
			return nil, err
		}
		info := IndexInfo{Name: im.GetName(), UUID: id, Fields: im.GetFields(), DatasetVersion: im.GetDatasetVersion(),
			Type: im.GetIndexDetails().GetTypeUrl()}
		if len(im.GetFragmentBitmap()) > 0 {
			bm, err := fragmentBitmap(im)
			if err != nil {
				return nil, err
			}
			info.Fragments = make([]uint64, 0, bm.GetCardinality())
			for it := bm.Iterator(); it.HasNext(); {
				info.Fragments = append(info.Fragments, uint64(it.Next()))
			}
		}
		for _, f := range im.GetFiles() {
			info.Files = append(info.Files, f.GetPath())
		}
		out = append(out, info)
	}
	return out, nil
}

// indexUUID renders an index's uuid the way its directory is named.
func indexUUID(im *tablepb.IndexMetadata) (string, error) {
	id, err := uuid.FromBytes(im.GetUuid().GetUuid())
	if err != nil {
		return "", corruptf("", "index %q has a malformed uuid (%d bytes)", im.GetName(), len(im.GetUuid().GetUuid()))
	}
	return id.String(), nil
}

// fragmentBitmap decodes an index's fragment bitmap (portable 32-bit roaring).
func fragmentBitmap(im *tablepb.IndexMetadata) (*roaring.Bitmap, error) {
	bm := roaring.New()
	if len(im.GetFragmentBitmap()) == 0 {
		return bm, nil
	}
	if err := bm.UnmarshalBinary(im.GetFragmentBitmap()); err != nil {
		return nil, corruptf("", "index %q: fragment bitmap: %v", im.GetName(), err)
	}
	return bm, nil
}

// indexedFragments returns the fragment ids any index covers.
func indexedFragments(idx *tablepb.IndexSection) (map[uint64]bool, error) {
	out := map[uint64]bool{}
	for _, im := range idx.GetIndices() {
		bm, err := fragmentBitmap(im)
		if err != nil {
			return nil, err
		}
		for it := bm.Iterator(); it.HasNext(); {
			out[uint64(it.Next())] = true
		}
	}
	return out, nil
}

// isVectorIndex tells vector indices (IVF_PQ, IVF_FLAT, HNSW, ...) by their details type.
func isVectorIndex(im *tablepb.IndexMetadata) bool {
	return strings.HasSuffix(im.GetIndexDetails().GetTypeUrl(), "VectorIndexDetails")
}

// maintainIndices applies the index rules of reference/lance-format.md section 2.6 to the
// manifest an operation built from cur (nil when creating; see the package comment on
// indices above).
func maintainIndices(txn *tablepb.Transaction, cur, next *manifestFile) error {
	if len(next.Indices.GetIndices()) == 0 {
		return nil
	}
	if cur != nil {
		// A fragment id this commit hands out for the first time must be in no index's
		// bitmap, or LanceDB would take the new rows for indexed ones.
		first := nextFragmentID(cur.Manifest)
		for _, im := range next.Indices.GetIndices() {
			if im.GetName() == fragReuseIndexName {
				continue
			}
			bm, err := fragmentBitmap(im)
			if err != nil {
				return err
			}
			for _, f := range next.Manifest.GetFragments() {
				if f.GetId() >= first && f.GetId() <= math.MaxUint32 && bm.Contains(uint32(f.GetId())) {
					return corruptf("", "index %q covers fragment %d, an id version %d never used: its max_fragment_id is below the ids its indices name",
						im.GetName(), f.GetId(), cur.Manifest.GetVersion())
				}
			}
		}
	}
	switch op := txn.GetOperation().(type) {
	case *tablepb.Transaction_Delete_, *tablepb.Transaction_Update_, *tablepb.Transaction_Merge_, *tablepb.Transaction_Project_:
		return retainRelevantIndices(next)
	case *tablepb.Transaction_Rewrite_:
		indexed, err := indexedFragments(next.Indices)
		if err != nil {
			return err
		}
		for _, g := range op.Rewrite.GetGroups() {
			for _, f := range g.GetOldFragments() {
				if indexed[f.GetId()] {
					return fmt.Errorf("%w: fragment %d, which the rewrite replaces, is covered by an index", errRetryOp, f.GetId())
				}
			}
		}
	}
	return nil
}

// retainRelevantIndices drops what Lance drops after a delete, update or schema change:
// indices on fields the schema no longer has, and indices whose fragments are all gone,
// except that of several same-named scalar indices that all lost their fragments the
// oldest stays (so the index definition survives), and Lance's system indices stay. An
// index that does not record its fragments is kept: lancectx cannot tell what it covers.
func retainRelevantIndices(mf *manifestFile) error {
	fieldIDs := map[int32]bool{}
	for _, f := range mf.Manifest.GetFields() {
		fieldIDs[f.GetId()] = true
	}
	live := roaring.New()
	for _, f := range mf.Manifest.GetFragments() {
		live.Add(uint32(f.GetId()))
	}
	type entry struct {
		im    *tablepb.IndexMetadata
		empty bool
	}
	byName := map[string][]entry{}
	var names []string
	var kept []*tablepb.IndexMetadata
	for _, im := range mf.Indices.GetIndices() {
		if im.GetName() == fragReuseIndexName {
			kept = append(kept, im)
			continue
		}
		gone := false
		for _, f := range im.GetFields() {
			gone = gone || !fieldIDs[f]
		}
		if gone {
			continue
		}
		empty := false
		if len(im.GetFragmentBitmap()) > 0 {
			bm, err := fragmentBitmap(im)
			if err != nil {
				return err
			}
			empty = !bm.Intersects(live)
		}
		if _, ok := byName[im.GetName()]; !ok {
			names = append(names, im.GetName())
		}
		byName[im.GetName()] = append(byName[im.GetName()], entry{im, empty})
	}
	keep := map[*tablepb.IndexMetadata]bool{}
	for _, name := range names {
		group := byName[name]
		var nonEmpty []entry
		for _, e := range group {
			if !e.empty {
				nonEmpty = append(nonEmpty, e)
			}
		}
		if len(nonEmpty) > 0 {
			for _, e := range nonEmpty {
				keep[e.im] = true
			}
			continue
		}
		sort.SliceStable(group, func(i, j int) bool { return group[i].im.GetDatasetVersion() < group[j].im.GetDatasetVersion() })
		if oldest := group[0].im; !isVectorIndex(oldest) {
			keep[oldest] = true
		}
	}
	for _, im := range mf.Indices.GetIndices() {
		if keep[im] {
			kept = append(kept, im)
		}
	}
	// Keep manifest order (frag reuse index included) for a stable section.
	order := map[*tablepb.IndexMetadata]int{}
	for i, im := range mf.Indices.GetIndices() {
		order[im] = i
	}
	sort.SliceStable(kept, func(i, j int) bool { return order[kept[i]] < order[kept[j]] })
	mf.Indices.Indices = kept
	return nil
}
