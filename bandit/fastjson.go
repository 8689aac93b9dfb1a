package bandit

import (
	"encoding/json"
	"math"
	"strconv"
	"unicode/utf8"
)

// The request path's bodies (a decision's context, a reward) are read
// twice over by the general path: CheckJSON, then encoding/json through
// reflection into maps and pointers, then once more per context value.
// The readers here take one pass, without reflection, over the narrow
// shape such bodies almost always have: objects of plain members (keys
// and string values without escapes, valid UTF-8 and no control
// characters; numbers; null), no duplicate keys, nothing nested. On
// anything else, or on anything the general path would refuse, they
// report !ok and the caller takes the general path, which accepts or
// refuses the body with its usual errors. So they change neither what is
// accepted nor how a refusal reads, only how long an accepted body takes
// (the fuzz tests compare them with the general path).

// scanner reads JSON from b at i.
type scanner struct {
	b []byte
	i int
}

// ws skips JSON whitespace.
func (s *scanner) ws() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// eat skips whitespace and then c, if c is next.
func (s *scanner) eat(c byte) bool {
	s.ws()
	if s.i < len(s.b) && s.b[s.i] == c {
		s.i++
		return true
	}
	return false
}

// peek skips whitespace and returns the next byte, or 0 at the end.
func (s *scanner) peek() byte {
	s.ws()
	if s.i < len(s.b) {
		return s.b[s.i]
	}
	return 0
}

// plainString reads a string without escapes whose bytes are valid UTF-8
// with no control characters, and returns its contents.
func (s *scanner) plainString() ([]byte, bool) {
	if !s.eat('"') {
		return nil, false
	}
	start, ascii := s.i, true
	for ; s.i < len(s.b); s.i++ {
		switch c := s.b[s.i]; {
		case c == '"':
			v := s.b[start:s.i]
			s.i++
			if !ascii && !utf8.Valid(v) {
				return nil, false
			}
			return v, true
		case c == '\\' || c < 0x20:
			return nil, false
		case c >= utf8.RuneSelf:
			ascii = false
		}
	}
	return nil, false
}

// number reads a number as JSON's grammar has it that CheckJSON accepts
// (numberProblem) and returns its text.
func (s *scanner) number() ([]byte, bool) {
	num, ok := s.numberText()
	if !ok || numberProblem(num) != "" {
		return nil, false
	}
	return num, true
}

// numberText reads a number as JSON's grammar has it and returns its
// text.
func (s *scanner) numberText() ([]byte, bool) {
	s.ws()
	start := s.i
	digits := func() int {
		n := 0
		for s.i < len(s.b) && s.b[s.i] >= '0' && s.b[s.i] <= '9' {
			s.i++
			n++
		}
		return n
	}
	if s.i < len(s.b) && s.b[s.i] == '-' {
		s.i++
	}
	switch {
	case s.i < len(s.b) && s.b[s.i] == '0':
		s.i++
	case digits() == 0:
		return nil, false
	}
	if s.i < len(s.b) && s.b[s.i] == '.' {
		s.i++
		if digits() == 0 {
			return nil, false
		}
	}
	if s.i < len(s.b) && (s.b[s.i] == 'e' || s.b[s.i] == 'E') {
		s.i++
		if s.i < len(s.b) && (s.b[s.i] == '+' || s.b[s.i] == '-') {
			s.i++
		}
		if digits() == 0 {
			return nil, false
		}
	}
	return s.b[start:s.i], true
}

// literal reads the literal lit (null, true, false).
func (s *scanner) literal(lit string) bool {
	s.ws()
	if len(s.b)-s.i >= len(lit) && string(s.b[s.i:s.i+len(lit)]) == lit {
		s.i += len(lit)
		return true
	}
	return false
}

// end reports whether only whitespace is left.
func (s *scanner) end() bool {
	s.ws()
	return s.i == len(s.b)
}

// flatObject reads an object of plain members whose values are plain
// strings, numbers or literals, with no key twice, and returns its
// extent; at most 64 members.
func (s *scanner) flatObject() ([]byte, bool) {
	s.ws()
	start := s.i
	if !s.eat('{') {
		return nil, false
	}
	if s.eat('}') {
		return s.b[start:s.i], true
	}
	var keys [64][]byte
	for n := 0; ; n++ {
		if n == len(keys) {
			return nil, false
		}
		k, ok := s.plainString()
		if !ok || !s.eat(':') {
			return nil, false
		}
		for _, prev := range keys[:n] {
			if string(prev) == string(k) {
				return nil, false
			}
		}
		keys[n] = k
		switch s.peek() {
		case '"':
			_, ok = s.plainString()
		case 'n':
			ok = s.literal("null")
		case 't':
			ok = s.literal("true")
		case 'f':
			ok = s.literal("false")
		default:
			_, ok = s.number()
		}
		if !ok {
			return nil, false
		}
		if s.eat('}') {
			return s.b[start:s.i], true
		}
		if !s.eat(',') {
			return nil, false
		}
	}
}

// ParseDecisionBody reads the body of a decision request,
// {"event_id": "...", "context": {...}, "excluded_arms": [...]}, when it
// has the plain shape described above (the context a flat object, the
// event ID and the arms plain strings, no member twice); ok is false
// otherwise, and the caller decodes the body in full (DecodeStrict),
// which accepts it or says why not. eventID is nil when the body has
// none. It does not validate the values: the event ID's characters, the
// context against the schema, the arms.
func ParseDecisionBody(body []byte) (eventID *string, context json.RawMessage, excluded []string, ok bool) {
	s := scanner{b: body}
	if !s.eat('{') {
		return nil, nil, nil, false
	}
	var haveContext, haveExcluded bool
	if !s.eat('}') {
		for {
			key, ok := s.plainString()
			if !ok || !s.eat(':') {
				return nil, nil, nil, false
			}
			switch string(key) {
			case "event_id":
				v, ok := s.plainString()
				if !ok || eventID != nil {
					return nil, nil, nil, false
				}
				id := string(v)
				eventID = &id
			case "context":
				v, ok := s.flatObject()
				if !ok || haveContext {
					return nil, nil, nil, false
				}
				context, haveContext = v, true
			case "excluded_arms":
				if !s.eat('[') || haveExcluded {
					return nil, nil, nil, false
				}
				haveExcluded, excluded = true, []string{}
				if !s.eat(']') {
					for {
						v, ok := s.plainString()
						if !ok {
							return nil, nil, nil, false
						}
						excluded = append(excluded, string(v))
						if s.eat(']') {
							break
						}
						if !s.eat(',') {
							return nil, nil, nil, false
						}
					}
				}
			default:
				return nil, nil, nil, false
			}
			if s.eat('}') {
				break
			}
			if !s.eat(',') {
				return nil, nil, nil, false
			}
		}
	}
	if !s.end() {
		return nil, nil, nil, false
	}
	return eventID, context, excluded, true
}

// ParseRewardBody reads the body of a reward, {"value": <number>}, when
// it is just that and the number is a finite float64; ok is false
// otherwise, and the caller decodes the body in full (DecodeStrict).
func ParseRewardBody(body []byte) (value float64, ok bool) {
	s := scanner{b: body}
	if !s.eat('{') {
		return 0, false
	}
	if k, ok := s.plainString(); !ok || string(k) != "value" || !s.eat(':') {
		return 0, false
	}
	num, ok := s.number()
	if !ok || !s.eat('}') || !s.end() {
		return 0, false
	}
	v, err := strconv.ParseFloat(string(num), 64)
	if err != nil || math.IsInf(v, 0) {
		return 0, false
	}
	return v, true
}

// encodeFast is Encode for a context of the plain shape (see above)
// that Encode accepts; ok is false for anything else, including every
// context Encode refuses (the caller then runs Encode's general path for
// its errors).
func (e *Encoder) encodeFast(raw []byte) ([]float64, bool) {
	s := scanner{b: raw}
	if !s.eat('{') {
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
	if !s.eat('}') {
		for {
			key, ok := s.plainString()
			if !ok || !s.eat(':') {
				return nil, false
			}
			fi, known := e.byName[string(key)]
			if !known || seen[fi] {
				return nil, false
			}
			seen[fi] = true
			f := &e.features[fi]
			switch {
			case s.peek() == 'n':
				// null: the feature is missing.
				if !s.literal("null") || !f.Optional {
					return nil, false
				}
			case f.Type == Categorical:
				v, ok := s.plainString()
				if !ok {
					return nil, false
				}
				j, ok := f.index[string(v)]
				if !ok {
					return nil, false
				}
				x[f.offset+j] = 1
			default:
				v, ok := s.number()
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
			if s.eat('}') {
				break
			}
			if !s.eat(',') {
				return nil, false
			}
		}
	}
	if !s.end() {
		return nil, false
	}
	for i := range e.features {
		if !seen[i] && !e.features[i].Optional {
			return nil, false
		}
	}
	return x, true
}
