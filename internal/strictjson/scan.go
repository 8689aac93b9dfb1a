package strictjson

import (
	"encoding/json"
	"math"
	"strconv"
	"unicode/utf8"
)

// The request path's bodies (a decision's context, a reward) are read
// twice over by the general path: Check, then encoding/json through
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

// Scanner reads JSON from a byte slice, one token at a time, for the
// one-pass readers: each method skips whitespace, reads what it names if
// it is next and reports whether it did.
type Scanner struct {
	b []byte
	i int
}

// NewScanner returns a Scanner at the start of b.
func NewScanner(b []byte) Scanner { return Scanner{b: b} }

// ws skips JSON whitespace.
func (s *Scanner) ws() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// Eat skips whitespace and then c, if c is next.
func (s *Scanner) Eat(c byte) bool {
	s.ws()
	if s.i < len(s.b) && s.b[s.i] == c {
		s.i++
		return true
	}
	return false
}

// Peek skips whitespace and returns the next byte, or 0 at the end.
func (s *Scanner) Peek() byte {
	s.ws()
	if s.i < len(s.b) {
		return s.b[s.i]
	}
	return 0
}

// PlainString reads a string without escapes whose bytes are valid UTF-8
// with no control characters, and returns its contents.
func (s *Scanner) PlainString() ([]byte, bool) {
	if !s.Eat('"') {
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

// Number reads a number as JSON's grammar has it that Check accepts
// (numberProblem) and returns its text.
func (s *Scanner) Number() ([]byte, bool) {
	num, ok := s.numberText()
	if !ok || numberProblem(num) != "" {
		return nil, false
	}
	return num, true
}

// numberText reads a number as JSON's grammar has it and returns its
// text.
func (s *Scanner) numberText() ([]byte, bool) {
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

// Literal reads the literal lit (null, true, false).
func (s *Scanner) Literal(lit string) bool {
	s.ws()
	if len(s.b)-s.i >= len(lit) && string(s.b[s.i:s.i+len(lit)]) == lit {
		s.i += len(lit)
		return true
	}
	return false
}

// End reports whether only whitespace is left.
func (s *Scanner) End() bool {
	s.ws()
	return s.i == len(s.b)
}

// flatObject reads an object of plain members whose values are plain
// strings, numbers or literals, with no key twice, and returns its
// extent; at most 64 members.
func (s *Scanner) flatObject() ([]byte, bool) {
	s.ws()
	start := s.i
	if !s.Eat('{') {
		return nil, false
	}
	if s.Eat('}') {
		return s.b[start:s.i], true
	}
	var keys [64][]byte
	for n := 0; ; n++ {
		if n == len(keys) {
			return nil, false
		}
		k, ok := s.PlainString()
		if !ok || !s.Eat(':') {
			return nil, false
		}
		for _, prev := range keys[:n] {
			if string(prev) == string(k) {
				return nil, false
			}
		}
		keys[n] = k
		switch s.Peek() {
		case '"':
			_, ok = s.PlainString()
		case 'n':
			ok = s.Literal("null")
		case 't':
			ok = s.Literal("true")
		case 'f':
			ok = s.Literal("false")
		default:
			_, ok = s.Number()
		}
		if !ok {
			return nil, false
		}
		if s.Eat('}') {
			return s.b[start:s.i], true
		}
		if !s.Eat(',') {
			return nil, false
		}
	}
}

// ParseDecisionBody reads the body of a decision request,
// {"event_id": "...", "context": {...}, "excluded_arms": [...]}, when it
// has the plain shape described above (the context a flat object, the
// event ID and the arms plain strings, no member twice); ok is false
// otherwise, and the caller decodes the body in full (bandit.DecodeStrict),
// which accepts it or says why not. eventID is nil when the body has
// none. It does not validate the values: the event ID's characters, the
// context against the schema, the arms.
func ParseDecisionBody(body []byte) (eventID *string, context json.RawMessage, excluded []string, ok bool) {
	s := Scanner{b: body}
	if !s.Eat('{') {
		return nil, nil, nil, false
	}
	var haveContext, haveExcluded bool
	if !s.Eat('}') {
		for {
			key, ok := s.PlainString()
			if !ok || !s.Eat(':') {
				return nil, nil, nil, false
			}
			switch string(key) {
			case "event_id":
				v, ok := s.PlainString()
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
				if !s.Eat('[') || haveExcluded {
					return nil, nil, nil, false
				}
				haveExcluded, excluded = true, []string{}
				if !s.Eat(']') {
					for {
						v, ok := s.PlainString()
						if !ok {
							return nil, nil, nil, false
						}
						excluded = append(excluded, string(v))
						if s.Eat(']') {
							break
						}
						if !s.Eat(',') {
							return nil, nil, nil, false
						}
					}
				}
			default:
				return nil, nil, nil, false
			}
			if s.Eat('}') {
				break
			}
			if !s.Eat(',') {
				return nil, nil, nil, false
			}
		}
	}
	if !s.End() {
		return nil, nil, nil, false
	}
	return eventID, context, excluded, true
}

// ParseRewardBody reads the body of a reward, {"value": <number>}, when
// it is just that and the number is a finite float64; ok is false
// otherwise, and the caller decodes the body in full (bandit.DecodeStrict).
func ParseRewardBody(body []byte) (value float64, ok bool) {
	s := Scanner{b: body}
	if !s.Eat('{') {
		return 0, false
	}
	if k, ok := s.PlainString(); !ok || string(k) != "value" || !s.Eat(':') {
		return 0, false
	}
	num, ok := s.Number()
	if !ok || !s.Eat('}') || !s.End() {
		return 0, false
	}
	v, err := strconv.ParseFloat(string(num), 64)
	if err != nil || math.IsInf(v, 0) {
		return 0, false
	}
	return v, true
}
