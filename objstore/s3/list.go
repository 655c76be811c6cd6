package s3

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/lancectx/lancectx/objstore"
)

// maxListRequests bounds the ListObjectsV2 calls of one List that has found something;
// see List.
const maxListRequests = 16

// List is ListObjectsV2 with Prefix, StartAfter, Delimiter and MaxKeys.
//
// The objstore contract skips a common prefix equal to StartAfter, and everything
// below it; a server may return that prefix again (gofakes3 does, and also repeats a
// prefix on every page its keys span), so List drops every item not strictly after
// the last one it has, and asks for more with the continuation token until the page
// is full or the listing ends. MaxKeys above S3's 1000 takes several requests too.
// NextStartAfter is the last item of a full page when S3 says more follow (gofakes3
// sometimes says so wrongly, and the next page is then empty and final). To bound the
// latency of one call when a server keeps repeating a prefix, List returns a partial,
// non-empty page with NextStartAfter after maxListRequests requests.
func (s *Store) List(ctx context.Context, opts objstore.ListOptions) (objstore.ListPage, error) {
	if err := ctx.Err(); err != nil {
		return objstore.ListPage{}, err
	}
	if opts.Delimiter != "" && opts.Delimiter != "/" {
		return objstore.ListPage{}, fmt.Errorf("s3: unsupported list delimiter %q", opts.Delimiter)
	}
	want := opts.MaxKeys
	if want <= 0 {
		want = objstore.DefaultMaxKeys
	}
	in := &s3.ListObjectsV2Input{Bucket: &s.bucket}
	if p := s.root + opts.Prefix; p != "" {
		in.Prefix = &p
	}
	if opts.Delimiter != "" {
		in.Delimiter = &opts.Delimiter
	}
	last := "" // every item returned must sort after it
	if opts.StartAfter != "" {
		last = s.root + opts.StartAfter
		in.StartAfter = aws.String(last)
	}
	var page objstore.ListPage
	n := 0
	for req := 1; ; req++ {
		in.MaxKeys = aws.Int32(int32(min(want-n, 1000)))
		out, err := s.client.ListObjectsV2(ctx, in)
		if err != nil {
			return objstore.ListPage{}, fail(ctx, "list", s.root+opts.Prefix, err)
		}
		// Contents and CommonPrefixes are each sorted; merge them in key order.
		objs, cps := out.Contents, out.CommonPrefixes
		for (len(objs) > 0 || len(cps) > 0) && n < want {
			if len(cps) == 0 || len(objs) > 0 && aws.ToString(objs[0].Key) < aws.ToString(cps[0].Prefix) {
				o := objs[0]
				objs = objs[1:]
				if k := aws.ToString(o.Key); k > last {
					page.Objects = append(page.Objects, objstore.ObjectInfo{
						Key: s.rel(k), Size: aws.ToInt64(o.Size), LastModified: aws.ToTime(o.LastModified),
					})
					last, n = k, n+1
				}
			} else {
				p := aws.ToString(cps[0].Prefix)
				cps = cps[1:]
				if p > last {
					page.CommonPrefixes = append(page.CommonPrefixes, s.rel(p))
					last, n = p, n+1
				}
			}
		}
		truncated := aws.ToBool(out.IsTruncated) || len(objs) > 0 || len(cps) > 0
		if !truncated {
			return page, nil
		}
		if n == want || n > 0 && req >= maxListRequests {
			page.NextStartAfter = s.rel(last)
			return page, nil
		}
		if err := ctx.Err(); err != nil {
			return objstore.ListPage{}, err
		}
		switch tok := aws.ToString(out.NextContinuationToken); {
		case tok != "":
			in.ContinuationToken, in.StartAfter = &tok, nil
		case last != "" && last != aws.ToString(in.StartAfter): // no token: resume after what we have
			in.ContinuationToken, in.StartAfter = nil, aws.String(last)
		default:
			return objstore.ListPage{}, fmt.Errorf("s3 list %s: truncated listing without a continuation token", s.root+opts.Prefix)
		}
	}
}
