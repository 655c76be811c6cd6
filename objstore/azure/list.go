package azure

import (
	"container/list"
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/bloberror"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"

	"github.com/lancectx/lancectx/objstore"
)

// maxResultsLimit is the most results one List Blobs request returns.
const maxResultsLimit = 5000

// The marker cache: how many resume points it keeps and for how long. Sequential paging
// uses an entry within seconds; the TTL bounds how stale a reused marker can be (see List).
const (
	markerCacheSize = 1024
	markerTTL       = 5 * time.Minute
)

// List returns one page of keys and common prefixes greater than opts.StartAfter.
//
// Azure has no StartAfter, only opaque continuation markers. So each page that ends with
// a NextStartAfter leaves behind, in a small LRU cache, where the listing resumes: the
// marker of the request that returned the next item, and how many items of that request
// precede it. A List that passes that NextStartAfter back (the usual sequential paging)
// costs one request sized to end exactly at the page boundary. With a StartAfter the
// cache does not know (another process, an evicted entry, a new Store), List starts at
// the beginning of Prefix with requests of 5000 results and skips every item <=
// StartAfter: correct, only slower. Items are always filtered by name, so a stale marker
// never returns an item twice or out of order; like any marker-based listing, it can
// miss a key created meanwhile between StartAfter and the marker's position.
func (s *Store) List(ctx context.Context, opts objstore.ListOptions) (objstore.ListPage, error) {
	if err := ctx.Err(); err != nil {
		return objstore.ListPage{}, err
	}
	if opts.Delimiter != "" && opts.Delimiter != "/" {
		return objstore.ListPage{}, fmt.Errorf("objstore/azure: unsupported list delimiter %q", opts.Delimiter)
	}
	page, staleMarker, err := s.list(ctx, opts, true)
	if staleMarker {
		// A cached marker the service no longer accepts: it is forgotten; start over.
		page, _, err = s.list(ctx, opts, false)
	}
	return page, err
}

// listPos is where a listing resumes: request from marker, then skip items that are
// <= StartAfter, of which skip are expected (-1: unknown, request the most per page).
type listPos struct {
	marker string
	skip   int
}

type listItem struct {
	name   string // full blob name or prefix (prefixes end in "/")
	prefix bool
	folder bool // an ADLS Gen2 directory blob: counts as a result, is never returned
	info   objstore.ObjectInfo
}

// list reports staleMarker when the service refused a marker from the cache.
func (s *Store) list(ctx context.Context, opts objstore.ListOptions, useCache bool) (page objstore.ListPage, staleMarker bool, err error) {
	max := opts.MaxKeys
	if max <= 0 {
		max = objstore.DefaultMaxKeys
	}
	full := s.prefix + opts.Prefix
	after := opts.StartAfter
	if after > opts.Prefix && !strings.HasPrefix(after, opts.Prefix) {
		return page, false, nil // every key under Prefix sorts before StartAfter
	}
	pos, fromCache := listPos{}, false
	if after != "" && after >= opts.Prefix {
		pos = listPos{skip: -1}
		if useCache {
			pos, fromCache = s.markers.get(markerKey{full, opts.Delimiter, after})
			if !fromCache {
				pos = listPos{skip: -1}
			}
		}
	}
	n, last := 0, ""
	for {
		want := max - n
		if pos.skip < 0 {
			want = maxResultsLimit
		} else {
			want += pos.skip
		}
		items, next, err := s.fetch(ctx, full, opts.Delimiter, pos.marker, min(want, maxResultsLimit))
		if err != nil {
			if fromCache && hasCode(err, bloberror.OutOfRangeInput, bloberror.InvalidQueryParameterValue) {
				s.markers.remove(markerKey{full, opts.Delimiter, after})
				return objstore.ListPage{}, true, err
			}
			return objstore.ListPage{}, false, wrapErr(ctx, "list", full, plainOp, err)
		}
		fromCache = false // a marker from a response is the service's own
		passed := false
		for i, it := range items {
			key := strings.TrimPrefix(it.name, s.prefix)
			if key <= after || n > 0 && key <= last { // the latter: a prefix repeated by the next request
				continue
			}
			passed = true
			if it.folder {
				continue
			}
			if n == max { // full, and another item exists: resume at this one
				page.NextStartAfter = last
				s.markers.put(markerKey{full, opts.Delimiter, last}, listPos{marker: pos.marker, skip: i})
				return page, false, nil
			}
			if it.prefix {
				page.CommonPrefixes = append(page.CommonPrefixes, key)
			} else {
				it.info.Key = key
				page.Objects = append(page.Objects, it.info)
			}
			n, last = n+1, key
		}
		if next == "" {
			return page, false, nil
		}
		if n == max {
			page.NextStartAfter = last
			s.markers.put(markerKey{full, opts.Delimiter, last}, listPos{marker: next})
			return page, false, nil
		}
		pos.marker = next
		if passed || n > 0 {
			pos.skip = 0
		} else {
			pos.skip = -1 // still before StartAfter: scan on with full pages
		}
	}
}

// fetch sends one List Blobs request and returns its blobs and prefixes merged in name
// order (the service orders each kind; Azurite even orders them apart) and the next marker.
func (s *Store) fetch(ctx context.Context, prefix, delim, marker string, n int) ([]listItem, string, error) {
	var items []listItem
	var next *string
	var blobs []*container.BlobItem
	include := container.ListBlobsInclude{Metadata: true}
	var pfx *string
	if prefix != "" {
		pfx = &prefix
	}
	var mk *string
	if marker != "" {
		mk = &marker
	}
	max := int32(n)
	if delim == "" {
		resp, err := s.client.NewListBlobsFlatPager(&container.ListBlobsFlatOptions{
			Include: include, Prefix: pfx, Marker: mk, MaxResults: &max,
		}).NextPage(ctx)
		if err != nil {
			return nil, "", err
		}
		next = resp.NextMarker
		if resp.Segment != nil {
			blobs = resp.Segment.BlobItems
		}
	} else {
		resp, err := s.client.NewListBlobsHierarchyPager(delim, &container.ListBlobsHierarchyOptions{
			Include: include, Prefix: pfx, Marker: mk, MaxResults: &max,
		}).NextPage(ctx)
		if err != nil {
			return nil, "", err
		}
		next = resp.NextMarker
		if resp.Segment != nil {
			blobs = resp.Segment.BlobItems
			for _, p := range resp.Segment.BlobPrefixes {
				if p != nil && p.Name != nil {
					items = append(items, listItem{name: *p.Name, prefix: true})
				}
			}
		}
	}
	for _, b := range blobs {
		if b == nil || b.Name == nil {
			continue
		}
		it := listItem{name: *b.Name, folder: isFolder(b.Metadata)}
		if p := b.Properties; p != nil {
			if p.ResourceType != nil && *p.ResourceType == "directory" {
				it.folder = true
			}
			if p.ContentLength != nil {
				it.info.Size = *p.ContentLength
			}
			if p.LastModified != nil {
				it.info.LastModified = *p.LastModified
			}
		}
		items = append(items, it)
	}
	slices.SortStableFunc(items, func(a, b listItem) int { return strings.Compare(a.name, b.name) })
	if next == nil {
		return items, "", nil
	}
	return items, *next, nil
}

// markerKey identifies a resume point: the listing (full prefix and delimiter) and the
// NextStartAfter that ended the previous page.
type markerKey struct {
	prefix, delim, after string
}

// markerCache is a small LRU of resume points with a time-to-live. Its lock is held only
// for map and list updates, never across a request.
type markerCache struct {
	mu      sync.Mutex
	size    int
	ttl     time.Duration
	order   *list.List // of *markerEntry, most recently used first
	entries map[markerKey]*list.Element
}

type markerEntry struct {
	key     markerKey
	pos     listPos
	expires time.Time
}

func newMarkerCache(size int, ttl time.Duration) *markerCache {
	return &markerCache{size: size, ttl: ttl, order: list.New(), entries: map[markerKey]*list.Element{}}
}

func (c *markerCache) get(k markerKey) (listPos, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[k]
	if !ok {
		return listPos{}, false
	}
	me := e.Value.(*markerEntry)
	if time.Now().After(me.expires) {
		c.order.Remove(e)
		delete(c.entries, k)
		return listPos{}, false
	}
	c.order.MoveToFront(e)
	return me.pos, true
}

func (c *markerCache) put(k markerKey, pos listPos) {
	c.mu.Lock()
	defer c.mu.Unlock()
	expires := time.Now().Add(c.ttl)
	if e, ok := c.entries[k]; ok {
		me := e.Value.(*markerEntry)
		me.pos, me.expires = pos, expires
		c.order.MoveToFront(e)
		return
	}
	c.entries[k] = c.order.PushFront(&markerEntry{key: k, pos: pos, expires: expires})
	for c.order.Len() > c.size {
		e := c.order.Back()
		c.order.Remove(e)
		delete(c.entries, e.Value.(*markerEntry).key)
	}
}

func (c *markerCache) remove(k markerKey) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.entries[k]; ok {
		c.order.Remove(e)
		delete(c.entries, k)
	}
}

func (c *markerCache) clear() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.order.Init()
	clear(c.entries)
}
