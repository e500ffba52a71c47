package server

import (
	"encoding/json"
	"reflect"
	"testing"
	"unsafe"

	"github.com/snodod/snodod/protocol"
)

type flatIn struct {
	Text  string  `json:"text"`
	N     int     `json:"n,omitempty"`
	Small int8    `json:"small"`
	U     uint16  `json:"u"`
	F     float64 `json:"f"`
	B     bool    `json:"b"`
	Plain string
}

// The flat decoder agrees with encoding/json wherever it decodes, and
// leaves to encoding/json what it does not decode exactly alike.
func TestFlatArgsAgreesWithEncodingJSON(t *testing.T) {
	d := newFlatArgs(reflect.TypeFor[flatIn]())
	if d == nil {
		t.Fatal("flatIn has no flat decoder")
	}
	for _, tc := range []struct {
		args string
		flat bool // decoded without encoding/json
	}{
		{`{}`, true},
		{`{"text":"hi","n":-42,"small":127,"u":65535,"f":1.5e3,"b":true,"Plain":"p"}`, true},
		{`{"text":"a\u00e9\n\"","b":false,"f":-0}`, true},
		{`{"n":0,"f":7}`, true},
		{`{"small":128}`, false}, // out of range: encoding/json's error
		{`{"u":-1}`, false},      // likewise
		{`{"n":5.0}`, false},     // an integer value in another form
		{`{"n":1e2}`, false},     // likewise
		{`{"text":null}`, false}, // null leaves the field: encoding/json's rule
		{`{"text":5}`, false},    // a type mismatch
		{`{"Text":"x"}`, false},  // matched without case by encoding/json
		{`{"plain":"x"}`, false}, // likewise
		{`{"other":1}`, false},   // ignored by encoding/json
		{`{"b":"true"}`, false},  // a mismatch
		{`{"text":"x","f":"1"}`, false},
	} {
		members, ok := protocol.SplitObject(nil, json.RawMessage(tc.args))
		if !ok {
			t.Fatalf("%s does not split", tc.args)
		}
		var got flatIn
		flat := d.decode(unsafe.Pointer(&got), members)
		if flat != tc.flat {
			t.Errorf("%s: decoded flat %v, want %v", tc.args, flat, tc.flat)
		}
		if !flat {
			continue
		}
		var want flatIn
		if err := json.Unmarshal([]byte(tc.args), &want); err != nil {
			t.Fatalf("%s: encoding/json: %v", tc.args, err)
		}
		if got != want {
			t.Errorf("%s: flat %+v, encoding/json %+v", tc.args, got, want)
		}
	}
}

type level string

// Types the flat decoder must leave to encoding/json.
func TestFlatArgsRefusesOtherTypes(t *testing.T) {
	for _, typ := range []reflect.Type{
		reflect.TypeFor[struct {
			L level `json:"l"`
		}](),
		reflect.TypeFor[struct {
			N int `json:"n,string"`
		}](),
		reflect.TypeFor[struct {
			P *string `json:"p"`
		}](),
		reflect.TypeFor[struct {
			F float32 `json:"f"`
		}](),
		reflect.TypeFor[struct {
			A []string `json:"a"`
		}](),
		reflect.TypeFor[struct {
			flatIn
		}](),
		reflect.TypeFor[map[string]any](),
		reflect.TypeFor[*flatIn](),
	} {
		if newFlatArgs(typ) != nil {
			t.Errorf("%s has a flat decoder", typ)
		}
	}
}
