// Package cpustat measures CPU time: that of the work of one goroutine
// (Measure: the goroutine is locked to its OS thread and the thread's
// CPU time read before and after), and that of whole processes of this
// machine by PID (Process), such as the PostgreSQL backends a load test
// drives. Both are Linux facilities; elsewhere Measure reports zero and
// Process ErrUnsupported.
package cpustat

import (
	"errors"
	"runtime"
	"time"
)

// ErrUnsupported is Process's error where /proc is not Linux's.
var ErrUnsupported = errors.New("cpustat: not supported on this system")

// Measure runs fn on the calling goroutine, locked to its OS thread,
// and returns the CPU time (user and system) that thread spent in fn:
// fn's own work and whatever the Go runtime did on that thread meanwhile
// (garbage-collection assists), not the work of goroutines fn starts.
// It returns zero where thread CPU time is not available.
func Measure(fn func()) time.Duration {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	t0, ok := threadCPU()
	fn()
	t1, ok1 := threadCPU()
	if !ok || !ok1 || t1 < t0 {
		return 0
	}
	return t1 - t0
}

// BackendsQuery lists the PIDs of the other PostgreSQL backends
// connected to the current database: with Processes, the CPU PostgreSQL
// spends serving that database (not its background writers, nor other
// databases), when the server runs on this machine.
const BackendsQuery = `SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()`

// Processes returns the CPU time of each of the processes that can be
// read (see Process); the others, gone or unsupported, are left out.
func Processes(pids []int) map[int]time.Duration {
	out := make(map[int]time.Duration, len(pids))
	for _, pid := range pids {
		if t, err := Process(pid); err == nil {
			out[pid] = t
		}
	}
	return out
}

// Growth returns the CPU the processes of after used since before: a
// process not in before counts from zero, one gone since is left out.
func Growth(before, after map[int]time.Duration) time.Duration {
	var d time.Duration
	for pid, t := range after {
		d += t - before[pid]
	}
	return d
}
