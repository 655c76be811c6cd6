package lance

import (
	"context"
	"errors"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/lancectx/lancectx/lance/file"
	"github.com/lancectx/lancectx/lance/format/filepb"
	"github.com/lancectx/lancectx/lance/format/tablepb"
	"github.com/lancectx/lancectx/lance/schema"
	"github.com/lancectx/lancectx/objstore"
)

// AddNullColumns adds nullable columns to the schema without rewriting data: existing
// fragments do not store the new fields, and readers (lancectx and Lance alike) read them
// as null. It commits a Merge transaction with the fragments unchanged, as Lance's
// add_columns(AllNulls) does. Columns that already exist with the same type are skipped;
// with nothing to add it returns d.
func (d *Dataset) AddNullColumns(ctx context.Context, fields []arrow.Field) (*Dataset, error) {
	cur := d
	for attempt := 1; ; attempt++ {
		var add []arrow.Field
		for _, f := range fields {
			have := cur.schema.Field(f.Name)
			switch {
			case have == nil:
				if !f.Nullable {
					return nil, fmt.Errorf("lance: new column %q must be nullable", f.Name)
				}
				add = append(add, f)
			case !arrow.TypeEqual(have.ArrowType(), f.Type):
				return nil, fmt.Errorf("lance: column %q exists with type %s, not %s", f.Name, have.ArrowType(), f.Type)
			}
		}
		if len(add) == 0 {
			return cur, nil
		}
		if err := checkWriterFlags(cur.mf.Manifest); err != nil {
			return nil, err
		}
		next, err := cur.schema.AddFields(add)
		if errors.Is(err, schema.ErrUnsupportedType) {
			return nil, fmt.Errorf("%w: %w", ErrUnsupported, err)
		}
		if err != nil {
			return nil, err
		}
		// No data is written now, but every later write must be able to store the
		// columns: a map in a 2.0 or 2.1 dataset could never get a value (2.2 datasets,
		// which lancectx does not write, take any).
		if v, err := cur.fileVersion(); err == nil {
			fv, _ := file.ParseFormatVersion(v)
			if err := checkWritable(next, fv); err != nil {
				return nil, err
			}
		}
		pf, meta := next.ToProto()
		out, err := commit(ctx, cur.store, cur, &schemaOp{fields: pf, meta: meta, fragments: cur.Fragments()}, commitOptions{})
		if err == nil {
			out.uri = d.uri
			return out, nil
		}
		if !errors.Is(err, errRetryOp) || attempt >= retryBudget {
			return nil, err
		}
		if cur, err = cur.Latest(ctx); err != nil {
			return nil, err
		}
	}
}

// schemaOp changes the schema only (Lance's Merge with unchanged fragments).
type schemaOp struct {
	fields    []*filepb.Field
	meta      map[string][]byte
	fragments []*tablepb.DataFragment // recorded in the transaction, as Lance does
}

func (o *schemaOp) name() string { return "merge" }

func (o *schemaOp) fill(txn *tablepb.Transaction) {
	txn.Operation = &tablepb.Transaction_Merge_{Merge: &tablepb.Transaction_Merge{
		Fragments: o.fragments, Schema: o.fields, SchemaMetadata: o.meta,
	}}
}

func (o *schemaOp) apply(_ context.Context, _ objstore.Store, base *manifestFile) (*manifestFile, error) {
	next := cloneBase(base)
	next.Manifest.Fields = o.fields
	next.Manifest.SchemaMetadata = o.meta
	return next, nil
}

// rebase: appended fragments simply lack the new fields; anything that changes the
// schema or replaces the table makes the change recompute.
func (o *schemaOp) rebase(other *tablepb.Transaction) error {
	switch other.GetOperation().(type) {
	case *tablepb.Transaction_Append_, *tablepb.Transaction_Delete_, *tablepb.Transaction_Update_,
		*tablepb.Transaction_Rewrite_, *tablepb.Transaction_ReserveFragments_, *tablepb.Transaction_CreateIndex_,
		*tablepb.Transaction_UpdateConfig_, *tablepb.Transaction_DataReplacement_:
		return nil
	}
	return errRetryOp
}
