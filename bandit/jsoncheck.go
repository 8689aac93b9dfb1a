package bandit

import (
	"fmt"
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
	// MaxJSONDepth is the deepest nesting of objects and arrays accepted.
	MaxJSONDepth = 32
	// MaxNumericAbs bounds the magnitude of a numeric context value, of a
	// numeric feature's center and of its standardized value: larger
	// finite numbers overflow the network's arithmetic (issue 16,
	// finding 2).
	MaxNumericAbs = 1e12
	// MaxRewardAbs bounds the magnitude of a reward and of a default
	// reward: the mean and variance of rewards near 1e308 overflow
	// (issue 16, finding 1).
	MaxRewardAbs = 1e12
)

// CheckJSON checks the raw bytes of a JSON document for what decoding
// would hide: invalid UTF-8, the escapes \u0000 and lone surrogates,
// raw NUL bytes, duplicate keys in any object, and nesting deeper than
// MaxJSONDepth. It returns a *ValidationError naming the field (as a
// JSON path such as "context.color" or "features[2].name"), or nil. It
// does not check the syntax otherwise: malformed JSON it cannot follow
// is left to the decoder, which reports it.
func CheckJSON(data []byte) error { return checkJSON("", data) }

// checkJSON is CheckJSON for a document found at the path prefix.
func checkJSON(prefix string, data []byte) error {
	c := jsonChecker{data: data}
	c.value(prefix, 0)
	if c.err != "" {
		return invalid(c.field, c.err)
	}
	return nil
}

type jsonChecker struct {
	data  []byte
	pos   int
	err   string // first problem found; checking stops there
	field string
	stop  bool // malformed: leave it to the decoder
}

func (c *jsonChecker) fail(field, msg string) {
	if c.err == "" && !c.stop {
		c.err, c.field = msg, field
	}
	c.stop = true
}

func (c *jsonChecker) ws() {
	for c.pos < len(c.data) {
		switch c.data[c.pos] {
		case ' ', '\t', '\n', '\r':
			c.pos++
		default:
			return
		}
	}
}

// value checks one value at path field, nested depth levels deep.
func (c *jsonChecker) value(field string, depth int) {
	c.ws()
	if c.stop || c.pos >= len(c.data) {
		c.stop = true
		return
	}
	switch c.data[c.pos] {
	case '{':
		if depth >= MaxJSONDepth {
			c.fail(field, fmt.Sprintf("nested deeper than %d levels", MaxJSONDepth))
			return
		}
		c.pos++
		seen := map[string]bool{}
		c.ws()
		if c.pos < len(c.data) && c.data[c.pos] == '}' {
			c.pos++
			return
		}
		for !c.stop {
			c.ws()
			if c.pos >= len(c.data) || c.data[c.pos] != '"' {
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
			if c.pos >= len(c.data) || c.data[c.pos] != ':' {
				c.stop = true
				return
			}
			c.pos++
			c.value(at, depth+1)
			if !c.next('}') {
				return
			}
		}
	case '[':
		if depth >= MaxJSONDepth {
			c.fail(field, fmt.Sprintf("nested deeper than %d levels", MaxJSONDepth))
			return
		}
		c.pos++
		c.ws()
		if c.pos < len(c.data) && c.data[c.pos] == ']' {
			c.pos++
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
		for c.pos < len(c.data) {
			switch b := c.data[c.pos]; {
			case b == ',' || b == '}' || b == ']' || b == ' ' || b == '\t' || b == '\n' || b == '\r':
				return
			case b == 0:
				c.fail(field, "contains a NUL byte")
				return
			}
			c.pos++
		}
	}
}

// next reads what follows a member or element: a comma (true: another
// one follows) or the closing bracket (false; anything else stops the
// check, false).
func (c *jsonChecker) next(closing byte) bool {
	c.ws()
	if c.stop || c.pos >= len(c.data) {
		c.stop = true
		return false
	}
	switch c.data[c.pos] {
	case ',':
		c.pos++
		return true
	case closing:
		c.pos++
		return false
	}
	c.stop = true
	return false
}

// str reads the string at c.pos (its opening quote) and returns it
// decoded; ok is false if checking must stop. Strings are reported at
// field.
func (c *jsonChecker) str(field string) (string, bool) {
	c.pos++ // the quote
	var b strings.Builder
	for c.pos < len(c.data) {
		ch := c.data[c.pos]
		switch {
		case ch == '"':
			c.pos++
			return b.String(), true
		case ch == '\\':
			if c.pos+1 >= len(c.data) {
				c.stop = true
				return "", false
			}
			e := c.data[c.pos+1]
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
				c.pos += 2
				continue
			}
			r, ok := c.hex4(c.pos + 2)
			if !ok {
				c.stop = true
				return "", false
			}
			c.pos += 6
			switch {
			case r == 0:
				c.fail(field, `contains the NUL character \u0000`)
				return "", false
			case utf16.IsSurrogate(r):
				var r2 rune = -1
				if r < 0xdc00 && c.pos+1 < len(c.data) && c.data[c.pos] == '\\' && c.data[c.pos+1] == 'u' {
					r2, ok = c.hex4(c.pos + 2)
					if !ok {
						r2 = -1
					}
				}
				d := utf16.DecodeRune(r, r2)
				if d == utf8.RuneError {
					c.fail(field, fmt.Sprintf(`contains a lone surrogate \u%04x`, r))
					return "", false
				}
				c.pos += 6
				b.WriteRune(d)
			default:
				b.WriteRune(r)
			}
		case ch == 0:
			c.fail(field, "contains a NUL byte")
			return "", false
		case ch < utf8.RuneSelf:
			b.WriteByte(ch)
			c.pos++
		default:
			r, size := utf8.DecodeRune(c.data[c.pos:])
			if r == utf8.RuneError && size <= 1 {
				c.fail(field, "not valid UTF-8")
				return "", false
			}
			b.WriteRune(r)
			c.pos += size
		}
	}
	c.stop = true
	return "", false
}

// hex4 reads four hex digits at i.
func (c *jsonChecker) hex4(i int) (rune, bool) {
	if i+4 > len(c.data) {
		return 0, false
	}
	v, err := strconv.ParseUint(string(c.data[i:i+4]), 16, 32)
	if err != nil {
		return 0, false
	}
	return rune(v), true
}
