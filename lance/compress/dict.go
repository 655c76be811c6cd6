package compress

// Dictionary resolves dictionary indices: the result holds items[indices[i]] for every i.
// indices is a block of 8, 16, 32 or 64-bit unsigned integers (a dictionary-encoded
// mini-block page's decoded values) and items the page's dictionary as Buffer decoded it:
// variable width (strings, binary) or fixed width in whole bytes. Lance stores no null
// marker in the indices (nulls come from the definition levels and point at any item,
// usually an extra empty one), so every index must be in range.
func Dictionary(items, indices *Block) (*Block, error) {
	iw, ok := byteWidth(indices.BitsPerValue)
	if !ok || len(indices.Offsets) != 0 {
		return nil, corruptf("dictionary indices of %d bits", indices.BitsPerValue)
	}
	n := indices.N
	if uint64(len(indices.Data)) < n*uint64(iw) {
		return nil, corruptf("dictionary indices: %d values in %d bytes", n, len(indices.Data))
	}
	idx := func(i uint64) uint64 { return readUint(indices.Data[i*uint64(iw):], iw) }
	if items.Offsets != nil {
		if uint64(len(items.Offsets)) != items.N+1 {
			return nil, corruptf("dictionary of %d items with %d offsets", items.N, len(items.Offsets))
		}
		size := uint64(0)
		for i := uint64(0); i < n; i++ {
			k := idx(i)
			if k >= items.N {
				return nil, corruptf("dictionary index %d of %d items", k, items.N)
			}
			size += items.Offsets[k+1] - items.Offsets[k]
		}
		out := &Block{N: n, Data: make([]byte, 0, size), Offsets: make([]uint64, n+1)}
		for i := uint64(0); i < n; i++ {
			k := idx(i)
			out.Data = append(out.Data, items.Data[items.Offsets[k]:items.Offsets[k+1]]...)
			out.Offsets[i+1] = uint64(len(out.Data))
		}
		return out, nil
	}
	if items.BitsPerValue == 0 || items.BitsPerValue%8 != 0 {
		return nil, unsupportedf("dictionary of %d-bit items", items.BitsPerValue)
	}
	w := items.BitsPerValue / 8
	if uint64(len(items.Data)) < items.N*w {
		return nil, corruptf("dictionary: %d items in %d bytes", items.N, len(items.Data))
	}
	size, err := mulLen(n, w)
	if err != nil {
		return nil, err
	}
	out := &Block{N: n, BitsPerValue: items.BitsPerValue, Data: make([]byte, size)}
	for i := uint64(0); i < n; i++ {
		k := idx(i)
		if k >= items.N {
			return nil, corruptf("dictionary index %d of %d items", k, items.N)
		}
		copy(out.Data[i*w:(i+1)*w], items.Data[k*w:(k+1)*w])
	}
	return out, nil
}
