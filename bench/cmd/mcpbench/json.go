package main

import (
	"encoding/json"
	"math"
	"reflect"
)

// jsonSafe returns v as generic JSON values with every NaN (a figure not
// measured) turned into null, which encoding/json cannot do by itself.
func jsonSafe(v any) any {
	return clean(reflect.ValueOf(v))
}

func clean(v reflect.Value) any {
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if v.IsNil() {
			return nil
		}
		return clean(v.Elem())
	case reflect.Float32, reflect.Float64:
		f := v.Float()
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return nil
		}
		return f
	case reflect.Struct:
		if m, ok := v.Interface().(json.Marshaler); ok {
			return m
		}
		out := map[string]any{}
		for i := range v.NumField() {
			if f := v.Type().Field(i); f.IsExported() {
				out[f.Name] = clean(v.Field(i))
			}
		}
		return out
	case reflect.Slice, reflect.Array:
		if v.Kind() == reflect.Slice && v.IsNil() {
			return nil
		}
		out := make([]any, v.Len())
		for i := range out {
			out[i] = clean(v.Index(i))
		}
		return out
	case reflect.Map:
		out := map[string]any{}
		for _, k := range v.MapKeys() {
			out[k.String()] = clean(v.MapIndex(k))
		}
		return out
	}
	return v.Interface()
}
