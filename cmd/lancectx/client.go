package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"github.com/lancectx/lancectx/client"
	"github.com/lancectx/lancectx/rollout"
)

// clientFlags are the flags of the commands that call a running server.
type clientFlags struct {
	server string
	token  string
	json   bool
}

func (f *clientFlags) register(cmd *cobra.Command) {
	cmd.PersistentFlags().StringVar(&f.server, "server", envOr("LANCECTX_SERVER", "http://127.0.0.1:3000"),
		"address of the lancectx server (serve, worker or master) (env LANCECTX_SERVER)")
	cmd.PersistentFlags().StringVar(&f.token, "token", os.Getenv("LANCECTX_TOKEN"),
		"API token, sent as a bearer token (env LANCECTX_TOKEN)")
	cmd.PersistentFlags().BoolVar(&f.json, "json", false, "print the server's JSON answer instead of a table")
}

func (f *clientFlags) client() (*client.Client, error) {
	return client.New(f.server, client.WithToken(f.token))
}

// table prints rows under a header, tab-aligned; cells are shortened to width runes.
func table(w io.Writer, header []string, rows [][]string) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, strings.Join(header, "\t"))
	for _, r := range rows {
		for i := range r {
			r[i] = cell(r[i], 60)
		}
		fmt.Fprintln(tw, strings.Join(r, "\t"))
	}
	return tw.Flush()
}

// cell makes one line of at most width runes (tabs and newlines would break a table).
func cell(s string, width int) string {
	s = strings.NewReplacer("\t", " ", "\n", " ", "\r", " ").Replace(s)
	if utf8.RuneCountInString(s) > width {
		r := []rune(s)
		s = string(r[:width-1]) + "…"
	}
	return s
}

func optStr(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

func optNum[T int32 | int64 | float32](p *T) string {
	if p == nil {
		return ""
	}
	return fmt.Sprint(*p)
}

func msTime(ms int64) string {
	if ms == 0 {
		return ""
	}
	return time.UnixMilli(ms).UTC().Format(time.RFC3339)
}

func newRolloutsCmd() *cobra.Command {
	cf := &clientFlags{}
	cmd := &cobra.Command{Use: "rollouts", Short: "Create rollout stores, append and read records through a running server"}
	cf.register(cmd)

	cmd.AddCommand(&cobra.Command{
		Use:   "create NAME",
		Short: "Create a rollout store",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := cf.client()
			if err != nil {
				return err
			}
			info, err := c.CreateRolloutStore(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			if cf.json {
				return printJSON(cmd.OutOrStdout(), info)
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "created rollout store %s at %s (version %d)\n", info.Name, info.URI, info.Version)
			return err
		},
	})

	var file string
	var flush bool
	var batch int
	appendCmd := &cobra.Command{
		Use:   "append NAME",
		Short: "Append records read as JSON Lines (one record object per line) from --file or standard input",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := cf.client()
			if err != nil {
				return err
			}
			in := cmd.InOrStdin()
			if file != "" && file != "-" {
				f, err := os.Open(file)
				if err != nil {
					return err
				}
				defer f.Close()
				in = f
			}
			if batch < 1 || batch > rollout.DefaultMaxRecords {
				return fmt.Errorf("--batch must be 1..%d", rollout.DefaultMaxRecords)
			}
			n, err := appendLines(cmd.Context(), c, args[0], in, batch, flush)
			if err != nil {
				return err
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "appended %d records to %s (durable%s)\n", n, args[0], map[bool]string{true: ", visible"}[flush])
			return err
		},
	}
	appendCmd.Flags().StringVar(&file, "file", "-", "JSON Lines file of records (- for standard input)")
	appendCmd.Flags().BoolVar(&flush, "flush", false, "wait until the records are visible to every reader (sealed)")
	appendCmd.Flags().IntVar(&batch, "batch", 1000, "records per request")
	cmd.AddCommand(appendCmd)

	var lo client.ListOptions
	listCmd := &cobra.Command{
		Use:   "list NAME",
		Short: "List a store's records (without binary payloads)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := cf.client()
			if err != nil {
				return err
			}
			res, err := c.List(cmd.Context(), args[0], lo)
			if err != nil {
				return err
			}
			if cf.json {
				return printJSON(cmd.OutOrStdout(), res)
			}
			rows := make([][]string, len(res.Records))
			for i, r := range res.Records {
				rows[i] = []string{r.ID, r.RolloutID, strconv.Itoa(int(r.SequenceOrder)), r.Role, optNum(r.Reward), optStr(r.Content)}
			}
			if err := table(cmd.OutOrStdout(), []string{"ID", "ROLLOUT", "SEQ", "ROLE", "REWARD", "CONTENT"}, rows); err != nil {
				return err
			}
			if res.HasMore {
				_, err = fmt.Fprintf(cmd.OutOrStdout(), "(more: --offset %d)\n", res.Offset+len(res.Records))
			}
			return err
		},
	}
	listCmd.Flags().IntVar(&lo.Limit, "limit", 20, "records per page")
	listCmd.Flags().IntVar(&lo.Offset, "offset", 0, "records to skip")
	listCmd.Flags().StringVar(&lo.Filter, "filter", "", "SQL predicate, e.g. \"reward > 0.5 AND role = 'assistant'\"")
	cmd.AddCommand(listCmd)

	cmd.AddCommand(&cobra.Command{
		Use:   "get NAME ID",
		Short: "Print one record as JSON",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := cf.client()
			if err != nil {
				return err
			}
			rec, err := c.Get(cmd.Context(), args[0], args[1])
			if err != nil {
				return err
			}
			return printJSON(cmd.OutOrStdout(), rec)
		},
	})
	return cmd
}

// appendLines appends the JSON Lines of in, batch records per request; a line that
// is not a record stops it before that batch is sent, naming the line.
func appendLines(ctx context.Context, c *client.Client, name string, in io.Reader, batch int, flush bool) (int, error) {
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 1<<20), 256<<20)
	var pending []rollout.AddRecord
	total, line := 0, 0
	send := func() error {
		if len(pending) == 0 {
			return nil
		}
		if _, err := c.Append(ctx, name, pending, flush); err != nil {
			return fmt.Errorf("records %d..%d: %w", total+1, total+len(pending), err)
		}
		total += len(pending)
		pending = pending[:0]
		return nil
	}
	for sc.Scan() {
		line++
		text := strings.TrimSpace(sc.Text())
		if text == "" {
			continue
		}
		var r rollout.AddRecord
		dec := json.NewDecoder(strings.NewReader(text))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&r); err != nil {
			return total, fmt.Errorf("line %d: not a record: %w", line, err)
		}
		pending = append(pending, r)
		if len(pending) == batch {
			if err := send(); err != nil {
				return total, err
			}
		}
	}
	if err := sc.Err(); err != nil {
		return total, fmt.Errorf("line %d: %w", line+1, err)
	}
	if err := send(); err != nil {
		return total, err
	}
	if total == 0 {
		return 0, fmt.Errorf("no records in the input (JSON Lines: one record object per line)")
	}
	return total, nil
}

func newExperimentsCmd() *cobra.Command {
	cf := &clientFlags{}
	var o client.ExperimentsOptions
	cmd := &cobra.Command{
		Use:   "experiments",
		Short: "List the experiments (stores of every kind) a master knows",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := cf.client()
			if err != nil {
				return err
			}
			res, err := c.Experiments(cmd.Context(), o)
			if err != nil {
				return err
			}
			if cf.json {
				return printJSON(cmd.OutOrStdout(), res)
			}
			rows := make([][]string, len(res.Experiments))
			for i, e := range res.Experiments {
				rows[i] = []string{e.Name, e.Kind, strconv.FormatInt(e.RowCount, 10), strconv.FormatInt(e.FragmentCount, 10),
					strconv.FormatInt(e.PendingWALGenerations, 10), msTime(e.LastUpdated)}
			}
			if err := table(cmd.OutOrStdout(), []string{"NAME", "KIND", "ROWS", "FRAGMENTS", "PENDING", "UPDATED"}, rows); err != nil {
				return err
			}
			stale := ""
			if res.Stale {
				stale = " (stale: the stats snapshot is older than three scan intervals)"
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "%d of %d experiments%s\n", len(res.Experiments), res.Total, stale)
			return err
		},
	}
	cf.register(cmd)
	cmd.Flags().StringVar(&o.Search, "search", "", "substring of the name")
	cmd.Flags().StringVar(&o.Kind, "kind", "", "store kind: rollout, generic or datagen (default: every kind)")
	cmd.Flags().IntVar(&o.Limit, "limit", 50, "experiments per page")
	cmd.Flags().IntVar(&o.Offset, "offset", 0, "experiments to skip")
	return cmd
}

func newTasksCmd() *cobra.Command {
	cf := &clientFlags{}
	var o client.TasksOptions
	cmd := &cobra.Command{
		Use:   "tasks",
		Short: "List a master's tasks, newest first",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := cf.client()
			if err != nil {
				return err
			}
			res, err := c.Tasks(cmd.Context(), o)
			if err != nil {
				return err
			}
			if cf.json {
				return printJSON(cmd.OutOrStdout(), res)
			}
			rows := make([][]string, len(res.Tasks))
			for i, tk := range res.Tasks {
				rows[i] = []string{tk.ID, tk.Kind, tk.Target, tk.State, tk.EnqueuedTime.UTC().Format(time.RFC3339), tk.Error}
			}
			if err := table(cmd.OutOrStdout(), []string{"ID", "KIND", "TARGET", "STATE", "ENQUEUED", "ERROR"}, rows); err != nil {
				return err
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "%d of %d tasks\n", len(res.Tasks), res.Total)
			return err
		},
	}
	cf.register(cmd)
	cmd.Flags().StringVar(&o.Kind, "kind", "", "task kind (merge_wal, compact, cleanup, ...)")
	cmd.Flags().StringVar(&o.Target, "target", "", "task target (a store name or {kind}/{name})")
	cmd.Flags().StringVar(&o.State, "state", "", "comma-separated states")
	cmd.Flags().IntVar(&o.Limit, "limit", 50, "tasks per page")
	cmd.Flags().IntVar(&o.Offset, "offset", 0, "tasks to skip")
	return cmd
}

func newQueryCmd() *cobra.Command {
	cf := &clientFlags{}
	var kind string
	cmd := &cobra.Command{
		Use:   "query EXPERIMENT SQL",
		Short: "Run read-only SQL over one experiment (the table is named records)",
		Example: `  lancectx query demo "SELECT rollout_id, avg(reward) FROM records GROUP BY rollout_id"
  lancectx query docs --kind generic "SELECT count(*) FROM records"`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := cf.client()
			if err != nil {
				return err
			}
			res, err := c.Query(cmd.Context(), args[0], kind, args[1])
			if err != nil {
				return err
			}
			if cf.json {
				return printJSON(cmd.OutOrStdout(), res)
			}
			rows := make([][]string, len(res.Rows))
			for i, r := range res.Rows {
				rows[i] = make([]string, len(r))
				for j, v := range r {
					rows[i][j] = sqlCell(v)
				}
			}
			if err := table(cmd.OutOrStdout(), res.Columns, rows); err != nil {
				return err
			}
			more := ""
			if res.Truncated {
				more = " (truncated: the answer holds the first rows only)"
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "%d rows%s\n", res.RowCount, more)
			return err
		},
	}
	cf.register(cmd)
	cmd.Flags().StringVar(&kind, "kind", "", "store kind: rollout (default), generic or datagen")
	return cmd
}

// sqlCell renders one JSON value of a query answer.
func sqlCell(v any) string {
	switch x := v.(type) {
	case nil:
		return "NULL"
	case string:
		return x
	case float64:
		return strconv.FormatFloat(x, 'g', -1, 64)
	}
	b, _ := json.Marshal(v)
	return string(b)
}
