// Package finitejson writes JSON as encoding/json does, but a NaN or
// infinite float as null where encoding/json refuses the whole value
// (refinery evaluate --json: an estimate undefined on a log is NaN).
package finitejson

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"reflect"
	"slices"
	"strings"
)

// MarshalIndent is json.MarshalIndent(v, prefix, indent), but a NaN or
// infinite float is written as null where encoding/json refuses the
// whole value: evaluate's estimates are NaN where they are undefined
// (issue 31, finding 5: evaluate --json failed on a NaN estimate).
// Only on that refusal does it take its own path, which follows
// encoding/json's rules for what evaluate writes: field names and
// "-", omitempty and omitzero, untagged embedded structs, json.Marshaler
// and encoding.TextMarshaler values, maps sorted by key.
func MarshalIndent(v any, prefix, indent string) ([]byte, error) {
	b, err := json.MarshalIndent(v, prefix, indent)
	var unsupported *json.UnsupportedValueError
	if !errors.As(err, &unsupported) {
		return b, err
	}
	raw, err := appendFinite(nil, reflect.ValueOf(v))
	if err != nil {
		return nil, err
	}
	var out bytes.Buffer
	if err := json.Indent(&out, raw, prefix, indent); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}

var (
	marshalerType     = reflect.TypeFor[json.Marshaler]()
	textMarshalerType = reflect.TypeFor[interface{ MarshalText() ([]byte, error) }]()
)

// appendFinite appends v as JSON, NaN and infinities as null.
func appendFinite(b []byte, v reflect.Value) ([]byte, error) {
	if !v.IsValid() {
		return append(b, "null"...), nil
	}
	t := v.Type()
	if t.Implements(marshalerType) || t.Implements(textMarshalerType) ||
		v.CanAddr() && (reflect.PointerTo(t).Implements(marshalerType) || reflect.PointerTo(t).Implements(textMarshalerType)) {
		if (v.Kind() == reflect.Pointer || v.Kind() == reflect.Interface) && v.IsNil() {
			return append(b, "null"...), nil
		}
		return appendLeaf(b, v)
	}
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if v.IsNil() {
			return append(b, "null"...), nil
		}
		return appendFinite(b, v.Elem())
	case reflect.Float32, reflect.Float64:
		if f := v.Float(); math.IsNaN(f) || math.IsInf(f, 0) {
			return append(b, "null"...), nil
		}
		return appendLeaf(b, v)
	case reflect.Struct:
		b = append(b, '{')
		first := true
		b, err := appendFields(b, v, &first)
		return append(b, '}'), err
	case reflect.Slice, reflect.Array:
		if v.Kind() == reflect.Slice && v.IsNil() {
			return append(b, "null"...), nil
		}
		if t.Elem().Kind() == reflect.Uint8 {
			return appendLeaf(b, v) // base64
		}
		b = append(b, '[')
		for i := range v.Len() {
			if i > 0 {
				b = append(b, ',')
			}
			var err error
			if b, err = appendFinite(b, v.Index(i)); err != nil {
				return b, err
			}
		}
		return append(b, ']'), nil
	case reflect.Map:
		if v.IsNil() {
			return append(b, "null"...), nil
		}
		type kv struct {
			k string
			v reflect.Value
		}
		var kvs []kv
		for it := v.MapRange(); it.Next(); {
			k, err := json.Marshal(it.Key().Interface())
			if err != nil {
				return b, err
			}
			ks := string(k)
			if it.Key().Kind() != reflect.String {
				ks = `"` + strings.Trim(ks, `"`) + `"`
			}
			kvs = append(kvs, kv{ks, it.Value()})
		}
		slices.SortFunc(kvs, func(a, b kv) int { return strings.Compare(a.k, b.k) })
		b = append(b, '{')
		for i, e := range kvs {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(append(b, e.k...), ':')
			var err error
			if b, err = appendFinite(b, e.v); err != nil {
				return b, err
			}
		}
		return append(b, '}'), nil
	}
	return appendLeaf(b, v)
}

// appendFields appends the members of the struct v, after a comma
// unless *first.
func appendFields(b []byte, v reflect.Value, first *bool) ([]byte, error) {
	t := v.Type()
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		fv := v.Field(i)
		if f.Anonymous && name == "" {
			ft := f.Type
			if ft.Kind() == reflect.Pointer {
				if fv.IsNil() {
					continue
				}
				fv, ft = fv.Elem(), ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				var err error
				if b, err = appendFields(b, fv, first); err != nil {
					return b, err
				}
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		if hasOpt(opts, "omitempty") && emptyValue(fv) || hasOpt(opts, "omitzero") && fv.IsZero() {
			continue
		}
		if !*first {
			b = append(b, ',')
		}
		*first = false
		key, _ := json.Marshal(name)
		b = append(append(b, key...), ':')
		var err error
		if b, err = appendFinite(b, fv); err != nil {
			return b, err
		}
	}
	return b, nil
}

func hasOpt(opts, o string) bool { return slices.Contains(strings.Split(opts, ","), o) }

// emptyValue is encoding/json's "empty" of omitempty.
func emptyValue(v reflect.Value) bool {
	switch v.Kind() {
	case reflect.Array, reflect.Map, reflect.Slice, reflect.String:
		return v.Len() == 0
	case reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr,
		reflect.Float32, reflect.Float64, reflect.Interface, reflect.Pointer:
		return v.IsZero()
	}
	return false
}

// appendLeaf appends what encoding/json makes of v.
func appendLeaf(b []byte, v reflect.Value) ([]byte, error) {
	x := v.Interface()
	if v.CanAddr() {
		x = v.Addr().Interface()
	}
	out, err := json.Marshal(x)
	return append(b, out...), err
}

// Marshal is json.Marshal(v), but NaN and infinite floats are null: it
// always takes MarshalIndent's own path, so that tests can hold that
// path to encoding/json's output on finite values.
func Marshal(v any) ([]byte, error) { return appendFinite(nil, reflect.ValueOf(v)) }
