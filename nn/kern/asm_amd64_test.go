//go:build amd64 && !purego

package kern

import (
	"bufio"
	"os"
	"regexp"
	"strings"
	"testing"
)

// TestAVX2KernelsUseVEXRegisters checks that no AVX2 kernel names a
// register only AVX-512 has (X16-X31, Y16-Y31, Z0-Z31, K1-K7). avo's
// allocator hands out Y16 and up when sixteen vector registers do not
// suffice, and the Go assembler then encodes the instruction with EVEX,
// an AVX-512 instruction that faults on an AVX2-only CPU (Zen 3) but
// passes every test on an AVX-512 one.
func TestAVX2KernelsUseVEXRegisters(t *testing.T) {
	f, err := os.Open("kern_amd64.s")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	text := regexp.MustCompile(`^TEXT\s+·(\w+)\(SB\)`)
	evex := regexp.MustCompile(`\b([XY](1[6-9]|2\d|3[01])|Z\d+|K[1-7])\b`)
	fn, avx2, kernels := "", false, 0
	sc := bufio.NewScanner(f)
	for line := 1; sc.Scan(); line++ {
		if m := text.FindStringSubmatch(sc.Text()); m != nil {
			fn, avx2 = m[1], strings.Contains(m[1], "AVX2")
			if avx2 {
				kernels++
			}
			continue
		}
		code, _, _ := strings.Cut(sc.Text(), "//")
		if avx2 && evex.MatchString(code) {
			t.Errorf("kern_amd64.s:%d: %s uses an AVX-512 register: %s", line, fn, strings.TrimSpace(code))
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if kernels < 50 {
		t.Fatalf("found %d AVX2 kernels in kern_amd64.s; the parser missed them", kernels)
	}
}
