package daemon

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/snodod/snodod/upstream"
)

// TestUpstreamRowsCopyEveryField keeps the control protocol's upstream
// row and the upstream package's alike: a field added to one and not the
// other, or not copied by upstreamRows, shows as a difference in JSON.
func TestUpstreamRowsCopyEveryField(t *testing.T) {
	var in upstream.Status
	v := reflect.ValueOf(&in).Elem()
	for i := range v.NumField() {
		f := v.Field(i)
		name := v.Type().Field(i).Name
		switch f.Kind() {
		case reflect.String:
			f.SetString("x-" + name)
		case reflect.Int, reflect.Int64:
			f.SetInt(int64(i + 1))
		case reflect.Bool:
			f.SetBool(true)
		case reflect.Slice:
			f.Set(reflect.ValueOf([]string{"x-" + name}))
		case reflect.Pointer:
			n := int64(i + 1)
			f.Set(reflect.ValueOf(&n))
		case reflect.Struct:
			f.Set(reflect.ValueOf(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)))
		default:
			t.Fatalf("upstream.Status.%s is a %s: teach this test to fill it", name, f.Kind())
		}
	}
	want, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	got, err := json.Marshal(upstreamRows([]upstream.Status{in})[0])
	if err != nil {
		t.Fatal(err)
	}
	var a, b map[string]any
	if err := json.Unmarshal(want, &a); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(got, &b); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(a, b) {
		t.Errorf("control.Upstream differs from upstream.Status:\n got %s\nwant %s", got, want)
	}
}
