package upstream

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
)

// A final result is passed on as the upstream wrote it, without decoding
// it: checking it for input_required allocates nothing of its
// own, however large it is.
func TestFinalResultNotDecoded(t *testing.T) {
	big := json.RawMessage(`{"content":[{"type":"text","text":"` + strings.Repeat("x", 1<<20) + `"}],"structuredContent":{"a":[1,2,{"b":null}]},"isError":false}`)
	u, o := &upstream{}, &owner{}
	allocs := testing.AllocsPerRun(20, func() {
		res, err := u.inputRounds(context.Background(), nil, nil, o, "tools/call", nil, nil, big)
		if err != nil || &res.Result[0] != &big[0] {
			t.Fatalf("got %v, %v; want the result itself", res, err)
		}
	})
	if allocs > 1 { // the RawResult
		t.Errorf("%v allocations for a final result, want 1", allocs)
	}
}

func TestInputRequiredType(t *testing.T) {
	for raw, want := range map[string]bool{
		`{"resultType":"input_required","inputRequests":{}}`:                       true,
		`{"content":[],"resultType":"input_required"}`:                             true,
		`{"resultType":"complete"}`:                                                false,
		`{"content":[{"type":"text","text":"\"resultType\":\"input_required\""}]}`: false,
		`{"resultType":"input_required","resultType":"complete"}`:                  false, // the last counts
		`{"resultType":"input_\u0072equired"}`:                                     true,
		`{"resultType":1}`:                                                         false,
		`[]`:                                                                       false,
		`not json`:                                                                 false,
	} {
		if got := inputRequiredType(json.RawMessage(raw)); got != want {
			t.Errorf("inputRequiredType(%s) = %v, want %v", raw, got, want)
		}
	}
}
