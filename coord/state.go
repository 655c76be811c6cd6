package coord

import (
	"context"
	"encoding/json"
	"fmt"
)

// maxStateBytes bounds one state document: etcd's default request limit is 1.5 MiB,
// and these are small bookkeeping records, not data.
const maxStateBytes = 256 << 10

// GetState reads the durable JSON document name (P/state/<name>) into v and reports
// whether it exists; v is left alone when it does not. It needs no session.
func (c *Client) GetState(ctx context.Context, name string, v any) (bool, error) {
	if err := validName("state name", name); err != nil {
		return false, err
	}
	k := c.key("state", name)
	resp, err := c.cli.Get(ctx, k)
	if err != nil {
		return false, fmt.Errorf("read state %q: %w", name, err)
	}
	if len(resp.Kvs) == 0 {
		return false, nil
	}
	if err := json.Unmarshal(resp.Kvs[0].Value, v); err != nil {
		return false, fmt.Errorf("decode state %q: %w", name, err)
	}
	return true, nil
}

// PutState writes v as the JSON document name (P/state/<name>). The key is durable:
// it is attached to no lease and outlives the process. The last writer wins, so the
// callers must serialise their writers (e.g. through the task queue, which runs one
// task per target at a time). Documents are limited to 256 KiB.
func (c *Client) PutState(ctx context.Context, name string, v any) error {
	if err := validName("state name", name); err != nil {
		return err
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode state %q: %w", name, err)
	}
	if len(b) > maxStateBytes {
		return fmt.Errorf("%w: state %q is %d bytes, over the %d byte limit", ErrInvalidArgument, name, len(b), maxStateBytes)
	}
	if _, err := c.cli.Put(ctx, c.key("state", name), string(b)); err != nil {
		return fmt.Errorf("write state %q: %w", name, err)
	}
	return nil
}
