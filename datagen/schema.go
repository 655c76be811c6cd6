package datagen

import (
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
)

// KeyColumn is the primary key of a datagen log: reads keep the newest row per
// event_id and merges one.
const KeyColumn = "event_id"

// SchemaVersion is the schema_version this implementation writes about (events of
// any positive version are accepted).
const SchemaVersion = 1

// Column names.
const (
	ColEventID       = "event_id"
	ColItemID        = "item_id"
	ColRootItemID    = "root_item_id"
	ColParentItemID  = "parent_item_id"
	ColItemSeq       = "item_seq"
	ColCheckpointID  = "checkpoint_id"
	ColEventType     = "event_type"
	ColStepName      = "step_name"
	ColStepKind      = "step_kind"
	ColStepIndex     = "step_index"
	ColEnclosingStep = "enclosing_step"
	ColSelectorStep  = "selector_step"
	ColAttempt       = "attempt"
	ColRunID         = "run_id"
	ColWriterEpoch   = "writer_epoch"
	ColFieldName     = "field_name"
	ColFieldType     = "field_type"
	ColCodecVersion  = "codec_version"
	ColValueKind     = "value_kind"
	ColValueI64      = "value_i64"
	ColValueF64      = "value_f64"
	ColValueBool     = "value_bool"
	ColValueStr      = "value_str"
	ColValueJSON     = "value_json"
	ColValueBlob     = "value_blob"
	ColPayloadSize   = "payload_size"
	ColPayloadCksum  = "payload_checksum"
	ColQueryTags     = "query_tags_json"
	ColStatus        = "status"
	ColErrorType     = "error_type"
	ColErrorDump     = "error_dump"
	ColTraceback     = "traceback"
	ColEventTS       = "event_ts"
	ColSchemaVersion = "schema_version"
)

const metaPrimaryKey = "lance-schema:unenforced-primary-key"

var tsType = &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}

// Schema is the table schema of a datagen log (the reference's datagen_log_schema,
// column for column; event_id carries the primary-key field metadata).
func Schema() *arrow.Schema {
	s, u, l := arrow.BinaryTypes.String, arrow.BinaryTypes.LargeString, arrow.BinaryTypes.LargeBinary
	i64, i32 := arrow.PrimitiveTypes.Int64, arrow.PrimitiveTypes.Int32
	f := func(name string, t arrow.DataType, null bool) arrow.Field {
		return arrow.Field{Name: name, Type: t, Nullable: null}
	}
	pk := f(ColEventID, s, false)
	pk.Metadata = arrow.NewMetadata([]string{metaPrimaryKey}, []string{"true"})
	return arrow.NewSchema([]arrow.Field{
		pk,
		f(ColItemID, s, false), f(ColRootItemID, s, false), f(ColParentItemID, s, true),
		f(ColItemSeq, i64, false), f(ColCheckpointID, s, false), f(ColEventType, s, false),
		f(ColStepName, s, true), f(ColStepKind, s, true), f(ColStepIndex, i64, true),
		f(ColEnclosingStep, s, true), f(ColSelectorStep, s, true), f(ColAttempt, i32, false),
		f(ColRunID, s, false), f(ColWriterEpoch, s, false), f(ColFieldName, s, true),
		f(ColFieldType, s, true), f(ColCodecVersion, i32, true), f(ColValueKind, s, true),
		f(ColValueI64, i64, true), f(ColValueF64, arrow.PrimitiveTypes.Float64, true),
		f(ColValueBool, arrow.FixedWidthTypes.Boolean, true), f(ColValueStr, u, true),
		f(ColValueJSON, u, true), f(ColValueBlob, l, true), f(ColPayloadSize, i64, true),
		f(ColPayloadCksum, s, true), f(ColQueryTags, u, true), f(ColStatus, s, true),
		f(ColErrorType, s, true), f(ColErrorDump, u, true), f(ColTraceback, u, true),
		f(ColEventTS, tsType, false), f(ColSchemaVersion, i32, false),
	}, nil)
}

// ReadColumns are every column but value_blob: what event reads project (blob
// bytes are read on demand, by event id).
func ReadColumns() []string {
	var out []string
	for _, f := range Schema().Fields() {
		if f.Name != ColValueBlob {
			out = append(out, f.Name)
		}
	}
	return out
}

// SameSchema reports whether sch is the datagen log schema (names, types and
// nullability, in order).
func SameSchema(sch *arrow.Schema) bool { return SchemaDiff(sch) == "" }

// SchemaDiff names the first difference between sch and the datagen log schema ("" when
// there is none): a table adopted from elsewhere is refused with it.
func SchemaDiff(sch *arrow.Schema) string {
	want := Schema()
	for i := range max(sch.NumFields(), want.NumFields()) {
		switch {
		case i >= sch.NumFields():
			return fmt.Sprintf("the table has %d columns, the schema %d: it lacks column %d %q (%s)", sch.NumFields(), want.NumFields(),
				i, want.Field(i).Name, want.Field(i).Type)
		case i >= want.NumFields():
			return fmt.Sprintf("the table has an extra column %d %q (%s)", i, sch.Field(i).Name, sch.Field(i).Type)
		}
		f, g := want.Field(i), sch.Field(i)
		switch {
		case g.Name != f.Name:
			return fmt.Sprintf("column %d is %q, the schema's is %q", i, g.Name, f.Name)
		case !arrow.TypeEqual(g.Type, f.Type):
			return fmt.Sprintf("column %q is %s, the schema's is %s", f.Name, g.Type, f.Type)
		case g.Nullable != f.Nullable:
			return fmt.Sprintf("column %q is nullable=%t, the schema's is nullable=%t", f.Name, g.Nullable, f.Nullable)
		}
	}
	return ""
}

// Column ids: the columns' positions in Schema() (TestColumnIDs checks them).
const (
	idEventID = iota
	idItemID
	idRootItemID
	idParentItemID
	idItemSeq
	idCheckpointID
	idEventType
	idStepName
	idStepKind
	idStepIndex
	idEnclosingStep
	idSelectorStep
	idAttempt
	idRunID
	idWriterEpoch
	idFieldName
	idFieldType
	idCodecVersion
	idValueKind
	idValueI64
	idValueF64
	idValueBool
	idValueStr
	idValueJSON
	idValueBlob
	idPayloadSize
	idPayloadCksum
	idQueryTags
	idStatus
	idErrorType
	idErrorDump
	idTraceback
	idEventTS
	idSchemaVersion
	numColumns
)

// columnID is the id of a column of the table (-1: not one).
func columnID(name string) int {
	switch name {
	case ColEventID:
		return idEventID
	case ColItemID:
		return idItemID
	case ColRootItemID:
		return idRootItemID
	case ColParentItemID:
		return idParentItemID
	case ColItemSeq:
		return idItemSeq
	case ColCheckpointID:
		return idCheckpointID
	case ColEventType:
		return idEventType
	case ColStepName:
		return idStepName
	case ColStepKind:
		return idStepKind
	case ColStepIndex:
		return idStepIndex
	case ColEnclosingStep:
		return idEnclosingStep
	case ColSelectorStep:
		return idSelectorStep
	case ColAttempt:
		return idAttempt
	case ColRunID:
		return idRunID
	case ColWriterEpoch:
		return idWriterEpoch
	case ColFieldName:
		return idFieldName
	case ColFieldType:
		return idFieldType
	case ColCodecVersion:
		return idCodecVersion
	case ColValueKind:
		return idValueKind
	case ColValueI64:
		return idValueI64
	case ColValueF64:
		return idValueF64
	case ColValueBool:
		return idValueBool
	case ColValueStr:
		return idValueStr
	case ColValueJSON:
		return idValueJSON
	case ColValueBlob:
		return idValueBlob
	case ColPayloadSize:
		return idPayloadSize
	case ColPayloadCksum:
		return idPayloadCksum
	case ColQueryTags:
		return idQueryTags
	case ColStatus:
		return idStatus
	case ColErrorType:
		return idErrorType
	case ColErrorDump:
		return idErrorDump
	case ColTraceback:
		return idTraceback
	case ColEventTS:
		return idEventTS
	case ColSchemaVersion:
		return idSchemaVersion
	}
	return -1
}
