package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/spf13/cobra"

	"github.com/lancectx/lancectx/internal/arrowjson"
	"github.com/lancectx/lancectx/lance"
)

func newDatasetCmd(store *storeFlags) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "dataset",
		Short: "Inspect, read and write Lance datasets directly",
		Long: `Work on one Lance dataset by URI: a directory path, file:///path, or mem:// (tests).
The dataset directory is the one holding _versions/ and data/ (LanceDB names it TABLE.lance).`,
	}
	cmd.AddCommand(newInspectCmd(store), newVersionsCmd(store), newScanCmd(store), newImportCmd(store), newCompactCmd(store), newCleanupCmd(store), newIndexCmd(store), newSearchCmd(store))
	return cmd
}

func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

type inspectFile struct {
	Path          string  `json:"path"`
	SizeBytes     uint64  `json:"size_bytes"`
	Fields        []int32 `json:"fields"`
	FormatVersion string  `json:"format_version"`
}

type inspectFragment struct {
	ID           uint64        `json:"id"`
	PhysicalRows uint64        `json:"physical_rows"`
	DeletedRows  uint64        `json:"deleted_rows"`
	DeletionFile string        `json:"deletion_file,omitempty"`
	Files        []inspectFile `json:"files"`
}

type inspectOutput struct {
	URI           string            `json:"uri"`
	Version       uint64            `json:"version"`
	Timestamp     time.Time         `json:"timestamp"`
	Rows          int64             `json:"rows"`
	DeletedRows   uint64            `json:"deleted_rows"`
	NumFragments  int               `json:"num_fragments"`
	NumFiles      int               `json:"num_files"`
	DataBytes     uint64            `json:"data_bytes"`
	FormatVersion string            `json:"format_version"`
	Writer        string            `json:"writer,omitempty"`
	Schema        json.RawMessage   `json:"schema"`
	Config        map[string]string `json:"config,omitempty"`
	TableMetadata map[string]string `json:"table_metadata,omitempty"`
	Tags          map[string]uint64 `json:"tags,omitempty"`
	Fragments     []inspectFragment `json:"fragments,omitempty"`
}

func newInspectCmd(store *storeFlags) *cobra.Command {
	var version uint64
	var withFragments bool
	cmd := &cobra.Command{
		Use:   "inspect URI",
		Short: "Print a JSON summary of a dataset version: rows, fragments, files, schema, format",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			ds, err := openAt(cmd, store, args[0], version, "")
			if err != nil {
				return err
			}
			out := inspectOutput{URI: args[0], Version: ds.Version(), Timestamp: ds.Timestamp(), Rows: ds.CountRows(),
				FormatVersion: ds.DataStorageVersion(), Config: ds.Config(), TableMetadata: ds.TableMetadata()}
			if wv := ds.Manifest().GetWriterVersion(); wv != nil {
				out.Writer = wv.GetLibrary() + " " + wv.GetVersion()
			}
			if out.Schema, err = arrowjson.FormatSchema(ds.Schema().Arrow()); err != nil {
				return err
			}
			for _, f := range ds.Fragments() {
				fr := inspectFragment{ID: f.GetId(), PhysicalRows: f.GetPhysicalRows(), DeletedRows: f.GetDeletionFile().GetNumDeletedRows()}
				out.DeletedRows += fr.DeletedRows
				if df := f.GetDeletionFile(); df != nil {
					fr.DeletionFile = df.GetFileType().String()
				}
				for _, df := range f.GetFiles() {
					out.NumFiles++
					out.DataBytes += df.GetFileSizeBytes()
					fr.Files = append(fr.Files, inspectFile{Path: df.GetPath(), SizeBytes: df.GetFileSizeBytes(), Fields: df.GetFields(),
						FormatVersion: fmt.Sprintf("%d.%d", df.GetFileMajorVersion(), df.GetFileMinorVersion())})
				}
				if withFragments {
					out.Fragments = append(out.Fragments, fr)
				}
			}
			out.NumFragments = len(ds.Fragments())
			tags, err := ds.Tags(ctx)
			if err != nil {
				return err
			}
			if len(tags) > 0 {
				out.Tags = map[string]uint64{}
				for name, t := range tags {
					out.Tags[name] = t.Version
				}
			}
			return printJSON(cmd.OutOrStdout(), out)
		},
	}
	cmd.Flags().Uint64Var(&version, "version", 0, "inspect this version instead of the latest")
	cmd.Flags().BoolVar(&withFragments, "fragments", true, "list every fragment and its files")
	return cmd
}

// openAt opens the latest version, or the given version or tag.
func openAt(cmd *cobra.Command, store *storeFlags, uri string, version uint64, tag string) (*lance.Dataset, error) {
	ctx := cmd.Context()
	st, err := store.open(ctx, uri)
	if err != nil {
		return nil, err
	}
	ds, err := lance.OpenStore(ctx, st)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", uri, err)
	}
	switch {
	case version != 0 && tag != "":
		return nil, fmt.Errorf("--version and --tag are exclusive")
	case version != 0:
		return ds.Checkout(ctx, version)
	case tag != "":
		return ds.CheckoutTag(ctx, tag)
	}
	return ds, nil
}

func newVersionsCmd(store *storeFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "versions URI",
		Short: "List the committed versions of a dataset as JSON",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ds, err := openAt(cmd, store, args[0], 0, "")
			if err != nil {
				return err
			}
			vs, err := ds.Versions(cmd.Context())
			if err != nil {
				return err
			}
			return printJSON(cmd.OutOrStdout(), vs)
		},
	}
}

func newScanCmd(store *storeFlags) *cobra.Command {
	var (
		columns, filter, tag string
		limit, offset        int64
		version              uint64
		rowID, rowAddr       bool
		blobBytes            bool
	)
	cmd := &cobra.Command{
		Use:   "scan URI",
		Short: "Print rows as JSON lines",
		Long: `Print rows as JSON lines in table order. 64-bit integers and timestamps are printed as
decimal strings and binary values as base64, so no value loses precision.

Blob columns print as LanceDB's queries return them: a description of where each value
is ({position, size}; for blob v2 {kind, position, size, blob_id, blob_uri}), not the
bytes; --blob-bytes prints the values instead. _rowid is the stable row id on tables with
stable row ids, the row address otherwise; _rowaddr is always the address.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ds, err := openAt(cmd, store, args[0], version, tag)
			if err != nil {
				return err
			}
			opts := lance.ScanOptions{Filter: filter, Limit: limit, Offset: offset, WithRowID: rowID, WithRowAddr: rowAddr, BlobBytes: blobBytes}
			if columns != "" {
				opts.Columns = strings.Split(columns, ",")
			}
			s, err := ds.Scan(cmd.Context(), opts)
			if err != nil {
				return err
			}
			defer s.Release()
			w := bufio.NewWriterSize(cmd.OutOrStdout(), 1<<16)
			for s.Next() {
				if err := arrowjson.WriteJSONL(w, s.RecordBatch()); err != nil {
					return err
				}
			}
			if err := s.Err(); err != nil {
				return err
			}
			return w.Flush()
		},
	}
	cmd.Flags().StringVar(&columns, "columns", "", "comma-separated columns to print (default: all; _rowid and _rowaddr add row ids and addresses)")
	cmd.Flags().StringVar(&filter, "filter", "", "SQL predicate, e.g. \"reward > 0.5 AND role = 'assistant'\"")
	cmd.Flags().Int64Var(&limit, "limit", 0, "stop after N rows (0: no limit)")
	cmd.Flags().Int64Var(&offset, "offset", 0, "skip the first N matching rows")
	cmd.Flags().Uint64Var(&version, "version", 0, "read this version instead of the latest")
	cmd.Flags().StringVar(&tag, "tag", "", "read the version this tag points at")
	cmd.Flags().BoolVar(&rowID, "row-id", false, "add the _rowid column")
	cmd.Flags().BoolVar(&rowAddr, "row-addr", false, "add the _rowaddr column (fragment_id<<32 | offset)")
	cmd.Flags().BoolVar(&blobBytes, "blob-bytes", false, "print blob columns' values (base64) instead of their descriptions")
	return cmd
}

func newImportCmd(store *storeFlags) *cobra.Command {
	var (
		jsonl, schemaFile, mode string
		storageVersion          string
		batchRows               int
		maxRowsPerFile          int64
	)
	cmd := &cobra.Command{
		Use:   "import URI --jsonl FILE",
		Short: "Write JSON lines into a dataset (create, append or overwrite)",
		Long: `Write JSON lines (one object per row) into a dataset. Without --schema the schema is
inferred from the first rows; with --schema FILE.json the types are exact, e.g.
{"fields":[{"name":"id","type":"utf8","nullable":false},{"name":"tokens","type":{"list":"int32"}}]}.
Use --jsonl - to read standard input. Nothing is committed unless every row is valid.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			m, err := lance.ParseWriteMode(mode)
			if err != nil {
				return err
			}
			if storageVersion != "" {
				if _, err := lance.ParseDataStorageVersion(storageVersion); err != nil {
					return &exitError{code: 2, err: fmt.Errorf("--data-storage-version (env LANCECTX_DATA_STORAGE_VERSION): %w", err)}
				}
			}
			var in io.Reader = cmd.InOrStdin()
			if jsonl != "-" {
				f, err := os.Open(jsonl)
				if err != nil {
					return err
				}
				defer f.Close()
				in = f
			}
			s, body, err := importSchema(schemaFile, in)
			if err != nil {
				return err
			}
			rdr, err := arrowjson.ReadJSONL(body, s, batchRows)
			if err != nil {
				return err
			}
			defer rdr.Release()
			st, err := store.open(ctx, args[0])
			if err != nil {
				return err
			}
			ds, err := lance.WriteStore(ctx, st, rdr, lance.WriteOptions{Mode: m, MaxRowsPerFile: maxRowsPerFile, DataStorageVersion: storageVersion})
			if err != nil {
				return err
			}
			return printJSON(cmd.OutOrStdout(), map[string]any{"uri": args[0], "version": ds.Version(), "rows": ds.CountRows()})
		},
	}
	cmd.Flags().StringVar(&jsonl, "jsonl", "", "JSON lines file to import (- for stdin)")
	cmd.Flags().StringVar(&schemaFile, "schema", "", "schema JSON file (default: infer from the data)")
	cmd.Flags().StringVar(&mode, "mode", "create", "create | append | overwrite")
	cmd.Flags().IntVar(&batchRows, "batch-rows", 8192, "rows per Arrow batch while importing")
	cmd.Flags().Int64Var(&maxRowsPerFile, "max-rows-per-file", 0, "rows per data file (default 1,048,576)")
	cmd.Flags().StringVar(&storageVersion, "data-storage-version", envOr("LANCECTX_DATA_STORAGE_VERSION", ""),
		"Lance data file format of a dataset this creates (or overwrites): 2.0 or 2.1; appends use the dataset's "+
			"(default "+lance.DefaultDataStorageVersion+", env LANCECTX_DATA_STORAGE_VERSION)")
	_ = cmd.MarkFlagRequired("jsonl")
	return cmd
}

// inferRows is how many leading rows import reads to infer a schema.
const inferRows = 1000

// importSchema returns the schema to import with and a reader of the whole input: the
// schema file when given, else a schema inferred from the first rows (which are replayed).
func importSchema(schemaFile string, in io.Reader) (*arrow.Schema, io.Reader, error) {
	if schemaFile != "" {
		b, err := os.ReadFile(schemaFile)
		if err != nil {
			return nil, nil, err
		}
		s, err := arrowjson.ParseSchema(b)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", schemaFile, err)
		}
		return s, in, nil
	}
	br := bufio.NewReaderSize(in, 1<<20)
	var headBuf bytes.Buffer
	for i := 0; i < inferRows; i++ {
		line, err := br.ReadBytes('\n')
		headBuf.Write(line)
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, nil, err
		}
	}
	s, err := arrowjson.InferSchema(bytes.NewReader(headBuf.Bytes()), inferRows)
	if err != nil {
		return nil, nil, fmt.Errorf("infer schema (pass --schema to set it): %w", err)
	}
	return s, io.MultiReader(bytes.NewReader(headBuf.Bytes()), br), nil
}
