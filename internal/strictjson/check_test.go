package strictjson

import (
	"errors"
	"strings"
	"testing"
)

// TestCheckRefusesNumbersTheStoreCannotHold: every JSON number must
// fit a float64 and be one PostgreSQL's jsonb keeps; the refusal names
// the member (issue 31, finding 3). The readers of the request path's
// fast path refuse the same numbers, so that the general path reports
// them.
func TestCheckRefusesNumbersTheStoreCannotHold(t *testing.T) {
	for _, tc := range []struct {
		name, num string
		ok        bool
	}{
		{"the largest float64 is accepted", "1.7976931348623157e308", true},
		{"the smallest subnormal float64 is accepted", "5e-324", true},
		{"a negative zero is accepted", "-0", true},
		{"a zero with a three-digit exponent is accepted", "0e-999", true},
		{"a 64-character number is accepted", "0." + strings.Repeat("1", 62), true},
		{"an integer of 17 digits is accepted", "12345678901234567", true},
		{"1e400 is refused: it overflows a float64", "1e400", false},
		{"-1e400 is refused: it overflows a float64", "-1e400", false},
		{"1e-400 is refused: it underflows a float64 to 0", "1e-400", false},
		{"2e-324 is refused: it underflows a float64 to 0", "2e-324", false},
		{"0e-20000 is refused: jsonb cannot hold its scale", "0e-20000", false},
		{"a 65-character number is refused", "0." + strings.Repeat("1", 63), false},
		{"a mantissa of 20,000 digits is refused", "1." + strings.Repeat("0", 20_000), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			doc := `{"context": {"x": [1, ` + tc.num + `]}}`
			err := Check([]byte(doc))
			var je *Error
			switch {
			case tc.ok && err != nil:
				t.Errorf("Check(%.40s) = %v, want nil", tc.num, err)
			case !tc.ok && !errors.As(err, &je):
				t.Errorf("Check(%.40s) = %v, want an *Error", tc.num, err)
			case !tc.ok && (je.Field != "context.x[1]" || len(je.Detail) > 200):
				t.Errorf("Check(%.40s) names %q with %d bytes of detail, want context.x[1] and at most 200", tc.num, je.Field, len(je.Detail))
			}
			s := NewScanner([]byte(tc.num))
			if _, ok := s.Number(); ok != tc.ok {
				t.Errorf("Scanner.Number(%.40s) ok = %v, want %v", tc.num, ok, tc.ok)
			}
		})
	}
}
