// Package strictjson checks and reads JSON documents that come from
// outside more strictly than encoding/json: it refuses what decoding
// would hide (duplicate keys, invalid UTF-8, NUL characters, lone
// surrogates, deep nesting, numbers no float64 holds), names keys that
// match no field of the Go type they decode into, and reads the narrow
// shapes of the request path's bodies in one pass. It knows nothing of
// bandits: package bandit turns its errors into *bandit.ValidationError
// (bandit.CheckJSON, bandit.DecodeStrict), and api and bandit's encoder
// use its one-pass readers.
package strictjson

import (
	"bytes"
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// Limits on what any JSON body may hold, beyond the body size limits of
// the API: PostgreSQL's jsonb (where contexts and configurations are
// stored) rejects NUL characters and lone surrogates, and a decoded map
// silently keeps only the last of duplicate keys, so a body with either
// could pass validation and fail (or be stored differently) later.
const (
	// MaxDepth is the deepest nesting of objects and arrays accepted.
	MaxDepth = 32
	// MaxNumberBytes bounds the text of any JSON number. A float64 needs
	// at most 24 characters ("-2.2250738585072014e-308"); PostgreSQL's
	// jsonb stores numbers as numeric, which refuses more than 16,383
	// digits after the point ("value overflows numeric format"), so a
	// mantissa of thousands of digits reached the store as a 500 (issue
	// 31, finding 3).
	MaxNumberBytes = 64
)

// Error is one problem with one member of a JSON document.
type Error struct {
	// Field is the member's path, such as "context.color" or
	// "features[2].name"; empty for the document as a whole.
	Field  string
	Detail string
}

func (e *Error) Error() string {
	if e.Field == "" {
		return e.Detail
	}
	return e.Field + ": " + e.Detail
}

// Check checks the raw bytes of a JSON document for what decoding
// would hide: invalid UTF-8, the escapes \u0000 and lone surrogates,
// raw NUL bytes, duplicate keys in any object, nesting deeper than
// MaxDepth, and numbers that no float64 holds or the store cannot
// keep as sent (numberProblem). It returns an *Error naming the field (as a
// JSON path such as "context.color" or "features[2].name"), or nil. It
// does not check the syntax otherwise: malformed JSON it cannot follow
// is left to the decoder, which reports it.
func Check(data []byte) error { return CheckAt("", data) }

// CheckAt is Check for a document found at the path prefix, which starts
// the path of every field it names.
func CheckAt(prefix string, data []byte) error {
	c := jsonChecker{Scanner: NewScanner(data)}
	c.value(prefix, 0)
	if c.err != "" {
		return &Error{Field: c.field, Detail: c.err}
	}
	return nil
}

type jsonChecker struct {
	Scanner        // the document and the position in it
	err     string // first problem found; checking stops there
	field   string
	stop    bool // malformed: leave it to the decoder
}

func (c *jsonChecker) fail(field, msg string) {
	if c.err == "" && !c.stop {
		c.err, c.field = msg, field
	}
	c.stop = true
}

// value checks one value at path field, nested depth levels deep.
func (c *jsonChecker) value(field string, depth int) {
	c.ws()
	if c.stop || c.i >= len(c.b) {
		c.stop = true
		return
	}
	switch c.b[c.i] {
	case '{':
		if depth >= MaxDepth {
			c.fail(field, fmt.Sprintf("nested deeper than %d levels", MaxDepth))
			return
		}
		c.i++
		seen := map[string]bool{}
		c.ws()
		if c.i < len(c.b) && c.b[c.i] == '}' {
			c.i++
			return
		}
		for !c.stop {
			c.ws()
			if c.i >= len(c.b) || c.b[c.i] != '"' {
				c.stop = true
				return
			}
			key, ok := c.str(field)
			if !ok {
				return
			}
			at := key
			if field != "" {
				at = field + "." + key
			}
			if seen[key] {
				c.fail(at, "duplicate key")
				return
			}
			seen[key] = true
			c.ws()
			if c.i >= len(c.b) || c.b[c.i] != ':' {
				c.stop = true
				return
			}
			c.i++
			c.value(at, depth+1)
			if !c.next('}') {
				return
			}
		}
	case '[':
		if depth >= MaxDepth {
			c.fail(field, fmt.Sprintf("nested deeper than %d levels", MaxDepth))
			return
		}
		c.i++
		c.ws()
		if c.i < len(c.b) && c.b[c.i] == ']' {
			c.i++
			return
		}
		for i := 0; !c.stop; i++ {
			c.value(field+"["+strconv.Itoa(i)+"]", depth+1)
			if !c.next(']') {
				return
			}
		}
	case '"':
		c.str(field)
	default:
		// A number or literal: skip to the next delimiter.
		start := c.i
		for c.i < len(c.b) {
			switch b := c.b[c.i]; {
			case b == ',' || b == '}' || b == ']' || b == ' ' || b == '\t' || b == '\n' || b == '\r':
				c.number(field, c.b[start:c.i])
				return
			case b == 0:
				c.fail(field, "contains a NUL byte")
				return
			}
			c.i++
		}
		c.number(field, c.b[start:c.i])
	}
}

// number checks tok, a token that is not a string, object or array, at
// field: if it is a JSON number (anything else is left to the decoder),
// numberProblem must find nothing wrong with it.
func (c *jsonChecker) number(field string, tok []byte) {
	if len(tok) == 0 || (tok[0] != '-' && (tok[0] < '0' || tok[0] > '9')) {
		return
	}
	s := Scanner{b: tok}
	if _, ok := s.numberText(); !ok || s.i != len(tok) {
		return // malformed: the decoder reports it
	}
	if msg := numberProblem(tok); msg != "" {
		c.fail(field, msg)
	}
}

// numberProblem says what is wrong with num, a number as JSON's grammar
// has it, or returns "" if nothing is: every JSON number accepted must
// fit a float64 (what every reader of it decodes to) without overflow to
// an infinity or underflow of a non-zero mantissa to 0 (1e400, 1e-400),
// have an exponent of at most 3 digits (0e-20000), and be at most
// MaxNumberBytes long. Such a number is also one PostgreSQL's jsonb
// keeps (at most 64 + 999 digits after the point, of the 16,383 it
// allows), so that contexts, which the store keeps as sent, never fail
// there (issue 31, finding 3).
func numberProblem(num []byte) string {
	if len(num) > MaxNumberBytes {
		return fmt.Sprintf("number %s has %d characters: at most %d are accepted (a float64 needs at most 24)", Shorten(string(num), 32), len(num), MaxNumberBytes)
	}
	// Without an exponent, 17 characters or fewer can neither overflow
	// nor underflow: skip the parse on the common path.
	if len(num) <= 17 && bytes.IndexAny(num, "eE") < 0 {
		return ""
	}
	if e := bytes.IndexAny(num, "eE"); e >= 0 && exponentDigits(num[e+1:]) > 3 {
		// 0e-20000 is 0 to a float64 and more digits after the point
		// than jsonb holds.
		return fmt.Sprintf("number %s has an exponent beyond %d digits", Shorten(string(num), 32), 3)
	}
	f, err := strconv.ParseFloat(string(num), 64)
	switch {
	case math.IsInf(f, 0) || err != nil:
		return fmt.Sprintf("number %s is beyond the range of a float64: want a magnitude of at most %.4g", num, math.MaxFloat64)
	case f == 0 && nonZeroMantissa(num):
		return fmt.Sprintf("number %s underflows a float64 to 0: want 0 or a magnitude of at least %g", num, math.SmallestNonzeroFloat64)
	}
	return ""
}

// Shorten cuts s to at most n bytes, on a rune boundary, marking the
// cut with "...": for messages that quote what a client sent.
func Shorten(s string, n int) string {
	if len(s) <= n {
		return s
	}
	i := n
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return s[:i] + "..."
}

// exponentDigits counts the digits of a JSON number's exponent, without
// its sign and leading zeros.
func exponentDigits(exp []byte) int {
	exp = bytes.TrimLeft(exp, "+-")
	return len(bytes.TrimLeft(exp, "0"))
}

// nonZeroMantissa reports whether a JSON number has a non-zero digit
// before its exponent.
func nonZeroMantissa(num []byte) bool {
	for _, b := range num {
		switch {
		case b == 'e' || b == 'E':
			return false
		case b >= '1' && b <= '9':
			return true
		}
	}
	return false
}

// next reads what follows a member or element: a comma (true: another
// one follows) or the closing bracket (false; anything else stops the
// check, false).
func (c *jsonChecker) next(closing byte) bool {
	c.ws()
	if c.stop || c.i >= len(c.b) {
		c.stop = true
		return false
	}
	switch c.b[c.i] {
	case ',':
		c.i++
		return true
	case closing:
		c.i++
		return false
	}
	c.stop = true
	return false
}

// str reads the string at c.i (its opening quote) and returns it
// decoded; ok is false if checking must stop. Strings are reported at
// field.
func (c *jsonChecker) str(field string) (string, bool) {
	c.i++ // the quote
	var b strings.Builder
	for c.i < len(c.b) {
		ch := c.b[c.i]
		switch {
		case ch == '"':
			c.i++
			return b.String(), true
		case ch == '\\':
			if c.i+1 >= len(c.b) {
				c.stop = true
				return "", false
			}
			e := c.b[c.i+1]
			if e != 'u' {
				switch e {
				case 'n':
					b.WriteByte('\n')
				case 't':
					b.WriteByte('\t')
				case 'r':
					b.WriteByte('\r')
				case 'b':
					b.WriteByte('\b')
				case 'f':
					b.WriteByte('\f')
				default:
					b.WriteByte(e)
				}
				c.i += 2
				continue
			}
			r, ok := c.hex4(c.i + 2)
			if !ok {
				c.stop = true
				return "", false
			}
			c.i += 6
			switch {
			case r == 0:
				c.fail(field, `contains the NUL character \u0000`)
				return "", false
			case utf16.IsSurrogate(r):
				var r2 rune = -1
				if r < 0xdc00 && c.i+1 < len(c.b) && c.b[c.i] == '\\' && c.b[c.i+1] == 'u' {
					r2, ok = c.hex4(c.i + 2)
					if !ok {
						r2 = -1
					}
				}
				d := utf16.DecodeRune(r, r2)
				if d == utf8.RuneError {
					c.fail(field, fmt.Sprintf(`contains a lone surrogate \u%04x`, r))
					return "", false
				}
				c.i += 6
				b.WriteRune(d)
			default:
				b.WriteRune(r)
			}
		case ch == 0:
			c.fail(field, "contains a NUL byte")
			return "", false
		case ch < utf8.RuneSelf:
			b.WriteByte(ch)
			c.i++
		default:
			r, size := utf8.DecodeRune(c.b[c.i:])
			if r == utf8.RuneError && size <= 1 {
				c.fail(field, "not valid UTF-8")
				return "", false
			}
			b.WriteRune(r)
			c.i += size
		}
	}
	c.stop = true
	return "", false
}

// hex4 reads four hex digits at i.
func (c *jsonChecker) hex4(i int) (rune, bool) {
	if i+4 > len(c.b) {
		return 0, false
	}
	v, err := strconv.ParseUint(string(c.b[i:i+4]), 16, 32)
	if err != nil {
		return 0, false
	}
	return rune(v), true
}
