package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/lancectx/lancectx/internal/arrowjson"
	"github.com/lancectx/lancectx/lance"
)

// uriArg takes the dataset URI from the positional argument (as the other dataset
// commands) or --uri.
func uriArg(args []string, flag string) (string, error) {
	switch {
	case len(args) == 1 && flag != "" && args[0] != flag:
		return "", fmt.Errorf("two dataset URIs: %q and --uri %q", args[0], flag)
	case len(args) == 1:
		return args[0], nil
	case flag != "":
		return flag, nil
	}
	return "", errors.New("a dataset URI is required (argument or --uri)")
}

func newIndexCmd(store *storeFlags) *cobra.Command {
	var (
		uri, column string
		o           lance.VectorIndexOptions
		extend      bool
	)
	cmd := &cobra.Command{
		Use:   "index [URI] --column C [--partitions N] [--metric l2|cosine|dot] [--extend]",
		Short: "Build an IVF_FLAT vector index (Lance's format; LanceDB uses it), or extend it over new fragments",
		Long: `Train IVF centroids on a fixed_size_list<float32> column and write an IVF_FLAT index in
Lance's own index format under _indices/{uuid}/, replacing the column's index of the same name.
LanceDB lists it and plans its nearest-neighbour queries in the same metric with it. With
--extend, fragments the index does not cover yet (appended since) get a delta segment that
reuses the centroids. Prints a JSON summary.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			u, err := uriArg(args, uri)
			if err != nil {
				return err
			}
			ds, err := openAt(cmd, store, u, 0, "")
			if err != nil {
				return err
			}
			start := time.Now()
			if extend {
				ds, err = lance.ExtendVectorIndex(cmd.Context(), ds, column, o.Name)
			} else {
				ds, err = lance.BuildVectorIndex(cmd.Context(), ds, column, o)
			}
			if err != nil {
				return err
			}
			infos, err := ds.Indices()
			if err != nil {
				return err
			}
			return printJSON(cmd.OutOrStdout(), map[string]any{"version": ds.Version(), "indices": infos, "seconds": time.Since(start).Seconds()})
		},
	}
	f := cmd.Flags()
	f.StringVar(&uri, "uri", "", "dataset URI (instead of the argument)")
	f.StringVar(&column, "column", "", "vector column (fixed_size_list<float32>)")
	f.StringVar(&o.Name, "name", "", "index name (default {column}_idx)")
	f.IntVar(&o.Partitions, "partitions", 0, "IVF partitions (default √rows)")
	f.StringVar(&o.Metric, "metric", "l2", "distance: l2, cosine or dot")
	f.IntVar(&o.KMeans.MaxIters, "max-iters", 50, "k-means iterations")
	f.Uint64Var(&o.KMeans.Seed, "seed", 0, "k-means seed")
	f.BoolVar(&extend, "extend", false, "cover fragments appended since the index was built (delta segment)")
	f.StringVar(&o.Type, "type", "IVF_FLAT", "IVF_FLAT, or IVF_PQ (l2 only; LanceDB uses it, lancectx's own searches of the table are then exact)")
	f.IntVar(&o.SubVectors, "sub-vectors", 0, "IVF_PQ sub-vectors (default dim/16; must divide the dimension)")
	_ = cmd.MarkFlagRequired("column")
	return cmd
}

func newSearchCmd(store *storeFlags) *cobra.Command {
	var (
		uri, column, vector string
		k                   int
		o                   lance.VectorSearchOptions
		columns             []string
	)
	cmd := &cobra.Command{
		Use:   "search [URI] --column C --vector '[...]' [-k 10] [--nprobes N]",
		Short: "Nearest-neighbour search: through the vector index where it covers, exactly elsewhere",
		Long: `Find the k rows nearest to --vector (a JSON array of numbers). Fragments the column's vector
index covers are searched through it (--nprobes partitions); the others exactly; deleted rows
never match. Prints the hits (row id, distance, and the --columns asked for) as JSON.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			u, err := uriArg(args, uri)
			if err != nil {
				return err
			}
			var q []float32
			if err := json.Unmarshal([]byte(vector), &q); err != nil {
				return fmt.Errorf("--vector must be a JSON array of numbers: %w", err)
			}
			ds, err := openAt(cmd, store, u, 0, "")
			if err != nil {
				return err
			}
			res, err := ds.VectorSearch(cmd.Context(), column, q, k, o)
			if err != nil {
				return err
			}
			out := map[string]any{"result": res}
			if len(columns) > 0 && len(res.Hits) > 0 {
				ids := make([]uint64, len(res.Hits))
				for i, h := range res.Hits {
					ids[i] = h.RowID
				}
				rec, err := ds.Take(cmd.Context(), ids, columns)
				if err != nil {
					return err
				}
				defer rec.Release()
				lines, err := arrowjson.Rows(rec)
				if err != nil {
					return err
				}
				rows := make([]json.RawMessage, len(lines))
				for i, l := range lines {
					rows[i] = json.RawMessage(l)
				}
				out["rows"] = rows
			}
			return printJSON(cmd.OutOrStdout(), out)
		},
	}
	f := cmd.Flags()
	f.StringVar(&uri, "uri", "", "dataset URI (instead of the argument)")
	f.StringVar(&column, "column", "", "vector column")
	f.StringVar(&vector, "vector", "", "query vector, a JSON array")
	f.IntVarP(&k, "k", "k", 10, "number of neighbours")
	f.IntVar(&o.NProbes, "nprobes", lance.DefaultNProbes, "IVF partitions probed per index segment")
	f.StringVar(&o.Metric, "metric", "", "distance (default: the index's, l2 without one)")
	f.BoolVar(&o.BypassIndex, "bypass-index", false, "search every row exactly")
	f.StringVar(&o.Filter, "where", "", "SQL predicate the hits must pass, applied before ranking (prefilter)")
	f.StringSliceVar(&columns, "columns", nil, "columns of the hit rows to print, in hit order")
	_ = cmd.MarkFlagRequired("column")
	_ = cmd.MarkFlagRequired("vector")
	return cmd
}
