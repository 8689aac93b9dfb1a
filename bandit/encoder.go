package bandit

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/refinery-bandits/refinery/bandit/spec"
)

// Encoder turns a decision's context, a JSON object keyed by feature
// name, into the vector the model sees. Features are laid out in
// declared order:
//
//   - a categorical feature with values v_1..v_k takes k inputs, one-hot:
//     input j is 1 when the value is v_j and 0 otherwise (all zero when
//     an optional feature is missing);
//   - a numeric feature takes one input, (x - center) / scale (zero when
//     an optional feature is missing).
//
// An Encoder is immutable and safe for concurrent use.
type Encoder struct {
	features []encFeature
	byName   map[string]int
	dim      int
}

type encFeature struct {
	Feature
	offset int
	index  map[string]int // categorical value -> position
	center float64
	scale  float64
}

// NewEncoder returns the encoder of a validated configuration's schema.
func NewEncoder(features []Feature) *Encoder {
	e := &Encoder{byName: make(map[string]int, len(features))}
	for i, f := range features {
		ef := encFeature{Feature: f, offset: e.dim, center: 0, scale: 1}
		switch f.Type {
		case Categorical:
			ef.index = make(map[string]int, len(f.Values))
			for j, v := range f.Values {
				ef.index[v] = j
			}
			e.dim += len(f.Values)
		default:
			if f.Center != nil {
				ef.center = *f.Center
			}
			if f.Scale != nil {
				ef.scale = *f.Scale
			}
			e.dim++
		}
		e.features = append(e.features, ef)
		e.byName[f.Name] = i
	}
	return e
}

// Dim returns the length of an encoded context.
func (e *Encoder) Dim() int { return e.dim }

// Column describes one input of an encoded context: the feature it
// comes from and, of a categorical feature, the value it is 1 for; of a
// numeric one, the center and scale of (x - center) / scale.
type Column struct {
	Feature string   `json:"feature"`
	Value   *string  `json:"value,omitempty"`
	Center  *float64 `json:"center,omitempty"`
	Scale   *float64 `json:"scale,omitempty"`
}

// Columns returns the Dim columns of an encoded context, in order.
func (e *Encoder) Columns() []Column {
	out := make([]Column, 0, e.dim)
	for _, f := range e.features {
		if f.Type == Categorical {
			for _, v := range f.Values {
				out = append(out, Column{Feature: f.Name, Value: &v})
			}
			continue
		}
		c, s := f.center, f.scale
		out = append(out, Column{Feature: f.Name, Center: &c, Scale: &s})
	}
	return out
}

// Encode validates the context object raw against the schema and returns
// its encoding. Every problem is reported in a *ValidationError whose
// fields are "context" or "context.<feature>": a context that is not an
// object, an unknown feature, a missing required feature, a value of the
// wrong type, an undeclared category, a number out of float64 range.
func (e *Encoder) Encode(raw json.RawMessage) ([]float64, error) {
	if x, ok := e.encodeFast(raw); ok {
		return x, nil
	}
	return e.encode(raw)
}

// encode is Encode's general path: every context, every error.
func (e *Encoder) encode(raw json.RawMessage) ([]float64, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return nil, invalid("context", "required: a JSON object of feature values")
	}
	if raw[0] != '{' {
		return nil, invalid("context", "want a JSON object of feature values")
	}
	if err := checkJSON("context", raw); err != nil {
		return nil, err
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil {
		return nil, invalid("context", "malformed JSON object: "+err.Error())
	}
	var v validator
	keys := make([]string, 0, len(obj))
	for k := range obj {
		if _, ok := e.byName[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	for _, k := range keys {
		v.add("context."+k, "unknown feature")
	}
	x := make([]float64, e.dim)
	for _, f := range e.features {
		at := "context." + f.Name
		val, ok := obj[f.Name]
		if !ok || bytes.Equal(val, []byte("null")) {
			if !f.Optional {
				v.add(at, "missing required feature")
			}
			continue
		}
		switch f.Type {
		case Categorical:
			var s string
			if val[0] != '"' || json.Unmarshal(val, &s) != nil {
				v.add(at, fmt.Sprintf("want a string, one of %s; got %s", declared(f.Values), kindOf(val)))
				continue
			}
			j, ok := f.index[s]
			if !ok {
				v.add(at, fmt.Sprintf("undeclared category %q: want one of %s", s, declared(f.Values)))
				continue
			}
			x[f.offset+j] = 1
		default:
			if c := val[0]; c != '-' && (c < '0' || c > '9') {
				v.add(at, "want a number; got "+kindOf(val))
				continue
			}
			n, err := strconv.ParseFloat(string(val), 64)
			if err != nil || !(math.Abs(n) <= MaxNumericAbs) {
				v.add(at, fmt.Sprintf("number %s is out of range: want a magnitude of at most %g", Shorten(string(val), 64), MaxNumericAbs))
				continue
			}
			x[f.offset] = (n - f.center) / f.scale
			if !(math.Abs(x[f.offset]) <= MaxNumericAbs) {
				v.add(at, fmt.Sprintf("number %s is out of range after standardization, (x - %g) / %g: want a magnitude of at most %g", val, f.center, f.scale, MaxNumericAbs))
			}
		}
	}
	if err := v.err(); err != nil {
		return nil, err
	}
	return x, nil
}

// declared lists the first few declared values for an error message.
func declared(values []string) string {
	const show = 10
	q := make([]string, 0, min(len(values), show))
	for _, v := range values[:min(len(values), show)] {
		q = append(q, strconv.Quote(v))
	}
	s := "[" + strings.Join(q, ", ")
	if len(values) > show {
		s += fmt.Sprintf(", ... (%d in all)", len(values))
	}
	return s + "]"
}

// kindOf names the JSON type of a raw value (spec.JSONKind).
func kindOf(val json.RawMessage) string { return spec.JSONKind(val) }

// Decode is the inverse of Encode: it returns a context object whose
// encoding is x, for callers that hold encoded vectors (a simulation's
// environment) and drive the agent through its JSON contexts. A
// categorical feature's inputs must be one-hot (or all zero for an
// optional feature); a numeric input x_j becomes center + scale x_j, which
// Encode maps back to x_j up to rounding (exactly for center 0 and scale
// 1). The object's keys are in declared order, numbers in the shortest
// form that parses back to the same float64.
func (e *Encoder) Decode(x []float64) (json.RawMessage, error) {
	if len(x) != e.dim {
		return nil, fmt.Errorf("bandit: a vector of %d inputs for a schema of %d", len(x), e.dim)
	}
	var b bytes.Buffer
	b.WriteByte('{')
	first := true
	for _, f := range e.features {
		val := []byte(nil)
		switch f.Type {
		case Categorical:
			hot := -1
			for j := range f.Values {
				switch v := x[f.offset+j]; {
				case v == 1 && hot < 0:
					hot = j
				case v != 0:
					return nil, fmt.Errorf("bandit: inputs %d..%d of categorical feature %q are not one-hot", f.offset, f.offset+len(f.Values)-1, f.Name)
				}
			}
			if hot < 0 {
				if !f.Optional {
					return nil, fmt.Errorf("bandit: inputs %d..%d of required categorical feature %q are all zero", f.offset, f.offset+len(f.Values)-1, f.Name)
				}
				continue
			}
			val, _ = json.Marshal(f.Values[hot])
		default:
			v := f.center + f.scale*x[f.offset]
			if math.IsNaN(v) || math.IsInf(v, 0) {
				return nil, fmt.Errorf("bandit: input %d of numeric feature %q is %g", f.offset, f.Name, x[f.offset])
			}
			val = strconv.AppendFloat(nil, v, 'g', -1, 64)
		}
		if !first {
			b.WriteByte(',')
		}
		first = false
		name, _ := json.Marshal(f.Name)
		b.Write(name)
		b.WriteByte(':')
		b.Write(val)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}
