package strictjson

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"strings"
)

// UnknownFields reports every key of data that names no field of the Go
// type t where t expects an object of fixed fields (a struct), with its
// full path ("policy.kindd", "features[1].Name"), and matches keys to
// fields case-sensitively: encoding/json accepts "NAME" for "name" and
// loses the path of an unknown nested field (issue 18, finding 6). A key
// that differs from a field only in case is named in the detail. Values
// the type does not expect as objects or arrays, json.RawMessage and
// types with their own UnmarshalJSON are left to the decoder. data must
// have passed Check. It lists at most limit keys, sorted by path (the
// first limit found, in the order of the document's sorted keys), and
// counts the others in omitted.
func UnknownFields(data []byte, t reflect.Type, limit int) (errs []Error, omitted int) {
	var doc any
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := dec.Decode(&doc); err != nil {
		return nil, 0 // malformed: the decoder reports it
	}
	v := fieldErrors{limit: limit}
	walkFields(&v, "", doc, t)
	sort.SliceStable(v.errs, func(i, j int) bool { return v.errs[i].Field < v.errs[j].Field })
	return v.errs, v.omitted
}

// fieldErrors collects at most limit errors and counts the others.
type fieldErrors struct {
	errs    []Error
	limit   int
	omitted int
}

func (v *fieldErrors) add(field, detail string) {
	if len(v.errs) >= v.limit {
		v.omitted++
		return
	}
	v.errs = append(v.errs, Error{Field: field, Detail: detail})
}

var (
	unmarshalerType = reflect.TypeFor[json.Unmarshaler]()
	rawMessageType  = reflect.TypeFor[json.RawMessage]()
)

func walkFields(v *fieldErrors, path string, doc any, t reflect.Type) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == rawMessageType || reflect.PointerTo(t).Implements(unmarshalerType) {
		return
	}
	at := func(key string) string {
		if path == "" {
			return key
		}
		return path + "." + key
	}
	switch t.Kind() {
	case reflect.Struct:
		obj, ok := doc.(map[string]any)
		if !ok {
			return
		}
		fields := map[string]reflect.Type{}
		collectFields(fields, t)
		keys := make([]string, 0, len(obj))
		for k := range obj {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			ft, ok := fields[k]
			if !ok {
				detail := "unknown field"
				for name := range fields {
					if strings.EqualFold(name, k) {
						detail = fmt.Sprintf("unknown field (keys are case-sensitive: %q)", name)
						break
					}
				}
				v.add(at(k), detail)
				continue
			}
			walkFields(v, at(k), obj[k], ft)
		}
	case reflect.Slice, reflect.Array:
		arr, ok := doc.([]any)
		if !ok {
			return
		}
		for i, e := range arr {
			walkFields(v, fmt.Sprintf("%s[%d]", path, i), e, t.Elem())
		}
	case reflect.Map:
		obj, ok := doc.(map[string]any)
		if !ok {
			return
		}
		for k, e := range obj {
			walkFields(v, at(k), e, t.Elem())
		}
	}
}

// collectFields maps the JSON names of t's fields (encoding/json's rules:
// the tag's name, else the field's; "-" left out; untagged embedded
// structs' fields promoted) to their types.
func collectFields(dst map[string]reflect.Type, t reflect.Type) {
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		name, _, _ := strings.Cut(tag, ",")
		if name == "-" && !strings.HasPrefix(tag, "-,") {
			continue
		}
		if f.Anonymous && name == "" {
			ft := f.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				collectFields(dst, ft)
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		dst[name] = f.Type
	}
}
