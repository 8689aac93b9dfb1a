package main

import (
	"bufio"
	"encoding/csv"
	"encoding/json"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Ctrl-C of `refinery simulate` keeps the runs in progress: regret.csv
// holds their steps, summary.json and summary.md count them and say where
// they stopped, regret.png draws them, and the process says so in one line
// and exits 130 (issue 30, finding 6).
func TestSimulateInterruptKeepsPartialRuns(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := buildBinary(t)
	out := filepath.Join(t.TempDir(), "out")
	const steps = 10_000_000 // far more than the seconds before the interrupt
	cmd := exec.Command(bin, "simulate", "--env", "wheel", "--policies", "linear-ts,uniform", "--steps", strconv.Itoa(steps),
		"--workers", "2", "--every", "50", "--quiet", "--out", out)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// The first line comes before the runs start; both runs (one per
	// worker) take steps for a few seconds, then Ctrl-C.
	sc := bufio.NewScanner(stdout)
	if !sc.Scan() {
		t.Fatalf("no output from simulate: %v", sc.Err())
	}
	time.Sleep(3 * time.Second)
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	var printed strings.Builder
	for sc.Scan() {
		printed.WriteString(sc.Text() + "\n")
	}
	err = cmd.Wait()
	if code := cmd.ProcessState.ExitCode(); code != 130 {
		t.Fatalf("exit code %d (%v), want 130; stderr:\n%s", code, err, stderr.String())
	}
	re := regexp.MustCompile(`^refinery simulate: interrupted at steps? (\d+)(?: to (\d+))? of ` + strconv.Itoa(steps) + `; wrote partial results to ` + regexp.QuoteMeta(out) + "\n$")
	m := re.FindStringSubmatch(stderr.String())
	if m == nil {
		t.Fatalf("stderr = %q, want one line matching %s", stderr.String(), re)
	}
	if strings.Contains(printed.String(), "Error") || strings.Contains(printed.String(), "canceled") {
		t.Errorf("the interruption printed as an error:\n%s", printed.String())
	}

	// regret.csv: the last step of each run.
	f, err := os.Open(filepath.Join(out, "regret.csv"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rows, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	last := map[string]int{}
	value := map[string]map[int]float64{}
	for _, row := range rows[1:] {
		step, _ := strconv.Atoi(row[0])
		last[row[1]] = max(last[row[1]], step)
		if value[row[1]] == nil {
			value[row[1]] = map[int]float64{}
		}
		value[row[1]][step], _ = strconv.ParseFloat(row[3], 64)
	}

	var sum struct {
		Interrupted bool     `json:"interrupted"`
		Errors      []string `json:"errors"`
		Policies    []struct {
			Policy          string  `json:"policy"`
			Runs            int     `json:"runs"`
			AtStep          int     `json:"at_step"`
			Mean            float64 `json:"final_expected_regret_mean"`
			InterruptedRuns []struct {
				Seed, Steps int
			} `json:"interrupted_runs"`
		} `json:"policies"`
	}
	b, err := os.ReadFile(filepath.Join(out, "summary.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &sum); err != nil {
		t.Fatal(err)
	}
	if !sum.Interrupted || len(sum.Errors) > 0 || len(sum.Policies) != 2 {
		t.Fatalf("summary.json: interrupted %v, errors %q, %d policies; want interrupted, no errors, 2 policies", sum.Interrupted, sum.Errors, len(sum.Policies))
	}
	lo, _ := strconv.Atoi(m[1])
	hi := lo
	if m[2] != "" {
		hi, _ = strconv.Atoi(m[2])
	}
	for _, p := range sum.Policies {
		if p.Runs != 1 || len(p.InterruptedRuns) != 1 {
			t.Errorf("%s: %d runs, %d interrupted; want the one run, interrupted", p.Policy, p.Runs, len(p.InterruptedRuns))
			continue
		}
		done := p.InterruptedRuns[0].Steps
		if done != last[p.Policy] || done < lo || done > hi || done >= steps {
			t.Errorf("%s: interrupted at step %d; regret.csv ends at %d, the message says %s to %s", p.Policy, done, last[p.Policy], m[1], m[2])
		}
		if p.AtStep != done || p.Mean != value[p.Policy][done] || p.Mean <= 0 {
			t.Errorf("%s: the summary's regret %g at step %d, regret.csv's %g at %d", p.Policy, p.Mean, p.AtStep, value[p.Policy][done], done)
		}
	}
	md, err := os.ReadFile(filepath.Join(out, "summary.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range sum.Policies {
		want := "| " + p.Policy + " | 1, interrupted at step " + strconv.Itoa(p.AtStep) + " |"
		if !strings.Contains(string(md), want) {
			t.Errorf("summary.md has no row %q:\n%s", want, md)
		}
	}

	// regret.png draws both lines: pixels of the first two colours of
	// the palette.
	pf, err := os.Open(filepath.Join(out, "regret.png"))
	if err != nil {
		t.Fatal(err)
	}
	defer pf.Close()
	img, err := png.Decode(pf)
	if err != nil {
		t.Fatal(err)
	}
	lines := map[[3]uint32]int{}
	bounds := img.Bounds()
	for y := bounds.Min.Y; y < bounds.Max.Y; y++ {
		for x := bounds.Min.X; x < bounds.Max.X; x++ {
			r, g, b, _ := img.At(x, y).RGBA()
			lines[[3]uint32{r >> 8, g >> 8, b >> 8}]++
		}
	}
	for i, c := range [][3]uint32{{0, 114, 178}, {213, 94, 0}} {
		if lines[c] < 100 {
			t.Errorf("regret.png: %d pixels of policy %d's colour %v, want a line", lines[c], i+1, c)
		}
	}
}
