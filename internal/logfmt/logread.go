package logfmt

import (
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/refinery-bandits/refinery/bandit"
)

// What the readers of decision logs (ReadDSJSON, ReadOBP: refinery
// evaluate --log) accept of a file, as strictly as the API takes what it
// stores (issue 31, finding 5: evaluate --log /dev/zero grew to 23.6 GB
// before the kernel killed it, a 256 MiB line cost 1.4 GB and was echoed
// whole in the error, and duplicate keys and invalid UTF-8 passed).
const (
	// maxLogLine bounds a line of a log: a decision's context is at most
	// api.MaxDecisionBytes (64 KiB), the rest of its line a few hundred
	// bytes per arm (100 arms at most).
	maxLogLine = 1 << 20
	// MaxEcho bounds what an error message quotes of a file's text.
	MaxEcho = 64
)

// lineLimiter reads r and fails once a line (bytes between newlines) is
// longer than max, so that no reader above it buffers more.
type lineLimiter struct {
	r   io.Reader
	max int
	n   int // bytes of the current line so far
}

func (l *lineLimiter) Read(p []byte) (int, error) {
	n, err := l.r.Read(p)
	for i, b := range p[:n] {
		if b == '\n' {
			l.n = 0
			continue
		}
		if l.n++; l.n > l.max {
			return i, fmt.Errorf("a line longer than %d bytes", l.max)
		}
	}
	return n, err
}

// finite parses s as a number of magnitude at most abs (NaN and the
// infinities, which strconv takes, are not).
func finite(s string, abs float64) (float64, bool) {
	v, err := strconv.ParseFloat(s, 64)
	return v, err == nil && math.Abs(v) <= abs
}

// echo quotes at most MaxEcho bytes of s, for an error message.
func echo(s string) string { return fmt.Sprintf("%q", bandit.Shorten(s, MaxEcho)) }

// checkFields refuses a CSV record holding invalid UTF-8 or a NUL byte,
// naming the column.
func checkFields(head, rec []string) error {
	for i, f := range rec {
		col := fmt.Sprintf("column %d", i+1)
		if i < len(head) {
			col = bandit.Shorten(head[i], MaxEcho)
		}
		switch {
		case !utf8.ValidString(f):
			return fmt.Errorf("%s: not valid UTF-8", col)
		case strings.IndexByte(f, 0) >= 0:
			return fmt.Errorf("%s: contains a NUL byte", col)
		}
	}
	return nil
}

// checkEventID refuses an event ID the API would not take.
func checkEventID(id string) error {
	if !bandit.ValidEventID(id) {
		return fmt.Errorf("event ID %s: want 1 to 128 characters from [A-Za-z0-9._~:-]", echo(id))
	}
	return nil
}
