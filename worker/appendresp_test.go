package worker

import (
	"math"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"reflect"
	"testing"

	"github.com/lancectx/lancectx/api"
)

// TestWriteAppendCreatedMatchesWriteJSON: the hand-written append answer is byte for
// byte, header for header, what api.WriteJSON writes, for ids that need escaping and
// ids that do not, nil and empty id lists, and extreme counts.
func TestWriteAppendCreatedMatchesWriteJSON(t *testing.T) {
	cases := []api.AppendResponse{
		{},
		{IDs: []string{}},
		{Version: math.MaxUint64, IDs: []string{"a", "b-1", "c_2.x"}, Count: 3, Durable: true},
		{Version: 7, IDs: []string{`q"uote`, `back\slash`, "<html>&amp;", "tab\there", "é", "\u2028", "\x7f", "\xff"}, Count: 8, Durable: true, Visible: true},
		{IDs: []string{"a"}, Count: -1},
	}
	rng := rand.New(rand.NewPCG(3, 4))
	for range 500 {
		ids := make([]string, rng.IntN(6))
		for i := range ids {
			b := make([]byte, rng.IntN(12))
			for j := range b {
				b[j] = byte(rng.IntN(256))
				if rng.IntN(3) > 0 {
					b[j] = byte('a' + rng.IntN(26))
				}
			}
			ids[i] = string(b)
		}
		cases = append(cases, api.AppendResponse{Version: rng.Uint64(), IDs: ids, Count: rng.IntN(1 << 20), Durable: rng.IntN(2) == 0, Visible: rng.IntN(2) == 0})
	}
	for _, resp := range cases {
		want := httptest.NewRecorder()
		api.WriteJSON(want, http.StatusCreated, resp)
		got := httptest.NewRecorder()
		writeAppendCreated(got, resp)
		if got.Code != want.Code || got.Body.String() != want.Body.String() || !reflect.DeepEqual(got.Header(), want.Header()) {
			t.Fatalf("answer for %+v:\n got %d %v %q\nwant %d %v %q", resp, got.Code, got.Header(), got.Body, want.Code, want.Header(), want.Body)
		}
	}
}
