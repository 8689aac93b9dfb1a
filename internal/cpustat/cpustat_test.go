package cpustat

import (
	"os"
	"runtime"
	"testing"
	"time"
)

// spin burns about d of CPU on the calling goroutine.
func spin(d time.Duration) (x float64) {
	for start := time.Now(); time.Since(start) < d; {
		for i := range 10000 {
			x += float64(i) * 1e-9
		}
	}
	return x
}

func TestMeasureCountsTheWorkNotTheSleep(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("thread CPU time is Linux's")
	}
	// The spin's wall time bounds its CPU time from above; the sleep
	// costs no CPU. On a busy machine the spin may get as little as a
	// fraction of its wall time, so the lower bound is loose.
	var wall time.Duration
	cpu := Measure(func() {
		start := time.Now()
		spin(60 * time.Millisecond)
		wall = time.Since(start)
		time.Sleep(150 * time.Millisecond)
	})
	if cpu <= 0 || cpu > wall+10*time.Millisecond {
		t.Fatalf("Measure = %v for a spin of %v wall time and a sleep of 150ms", cpu, wall)
	}
	if idle := Measure(func() { time.Sleep(100 * time.Millisecond) }); idle > 20*time.Millisecond {
		t.Fatalf("Measure of a 100ms sleep = %v, want about 0", idle)
	}
}

func TestProcessGrowsWithWork(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("/proc is Linux's")
	}
	before, err := Process(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	self0 := Self()
	own := Measure(func() { spin(100 * time.Millisecond) })
	self1 := Self()
	after, err := Process(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	// The process did at least the spin's CPU, less the rounding of
	// /proc's figures to 10ms ticks.
	if after-before < own-20*time.Millisecond {
		t.Fatalf("the process's CPU grew %v over a spin that took %v of its thread", after-before, own)
	}
	if self1-self0 < own {
		t.Fatalf("Self grew %v over a spin that took %v of its thread", self1-self0, own)
	}
	if _, err := Process(1 << 30); err == nil {
		t.Fatal("Process of a PID that cannot exist: no error")
	}
}

func TestGrowth(t *testing.T) {
	before := map[int]time.Duration{1: time.Second, 2: 2 * time.Second, 3: time.Second}
	// 1 grew 0.5s, 2 is gone, 4 is new with 0.25s.
	after := map[int]time.Duration{1: 1500 * time.Millisecond, 3: time.Second, 4: 250 * time.Millisecond}
	if got, want := Growth(before, after), 750*time.Millisecond; got != want {
		t.Fatalf("Growth = %v, want %v", got, want)
	}
	if runtime.GOOS == "linux" {
		if got := Processes([]int{os.Getpid(), 1 << 30}); len(got) != 1 {
			t.Fatalf("Processes of this process and of one that cannot exist = %v, want this one only", got)
		}
	}
}

// TestMeasureSeesShortWork: a stretch of work far shorter than a
// scheduler tick reads as positive CPU time every time (getrusage read
// zero for most of these).
func TestMeasureSeesShortWork(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("thread CPU time is Linux's")
	}
	zero := 0
	for range 20 {
		if Measure(func() { spin(200 * time.Microsecond) }) <= 0 {
			zero++
		}
	}
	if zero > 0 {
		t.Fatalf("Measure read zero for %d of 20 spins of 200µs", zero)
	}
}
