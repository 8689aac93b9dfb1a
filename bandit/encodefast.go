package bandit

import (
	"math"
	"strconv"

	"github.com/refinery-bandits/refinery/internal/strictjson"
)

// encodeFast is Encode for a context of the plain shape that
// strictjson's one-pass readers take (see strictjson.Scanner)
// that Encode accepts; ok is false for anything else, including every
// context Encode refuses (the caller then runs Encode's general path for
// its errors).
func (e *Encoder) encodeFast(raw []byte) ([]float64, bool) {
	s := strictjson.NewScanner(raw)
	if !s.Eat('{') {
		return nil, false
	}
	var seenBuf [64]bool
	seen := seenBuf[:0]
	if len(e.features) <= len(seenBuf) {
		seen = seenBuf[:len(e.features)]
	} else {
		seen = make([]bool, len(e.features))
	}
	x := make([]float64, e.dim)
	if !s.Eat('}') {
		for {
			key, ok := s.PlainString()
			if !ok || !s.Eat(':') {
				return nil, false
			}
			fi, known := e.byName[string(key)]
			if !known || seen[fi] {
				return nil, false
			}
			seen[fi] = true
			f := &e.features[fi]
			switch {
			case s.Peek() == 'n':
				// null: the feature is missing.
				if !s.Literal("null") || !f.Optional {
					return nil, false
				}
			case f.Type == Categorical:
				v, ok := s.PlainString()
				if !ok {
					return nil, false
				}
				j, ok := f.index[string(v)]
				if !ok {
					return nil, false
				}
				x[f.offset+j] = 1
			default:
				v, ok := s.Number()
				if !ok {
					return nil, false
				}
				n, err := strconv.ParseFloat(string(v), 64)
				if err != nil || !(math.Abs(n) <= MaxNumericAbs) {
					return nil, false
				}
				x[f.offset] = (n - f.center) / f.scale
				if !(math.Abs(x[f.offset]) <= MaxNumericAbs) {
					return nil, false
				}
			}
			if s.Eat('}') {
				break
			}
			if !s.Eat(',') {
				return nil, false
			}
		}
	}
	if !s.End() {
		return nil, false
	}
	for i := range e.features {
		if !seen[i] && !e.features[i].Optional {
			return nil, false
		}
	}
	return x, true
}
