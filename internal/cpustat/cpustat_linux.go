package cpustat

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// threadCPU returns the calling thread's CPU time, user and system, from
// CLOCK_THREAD_CPUTIME_ID: the scheduler's runtime including the running
// stretch not yet accounted. getrusage(RUSAGE_THREAD), used before, adds
// that stretch only at the next tick or switch, so a short Measure could
// read zero (a 60-step uniform run did, under load).
func threadCPU() (time.Duration, bool) {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
		return 0, false
	}
	return time.Duration(ts.Nano()), true
}

// userHZ is the unit of /proc's CPU times: USER_HZ, 100 on every Linux
// architecture Go supports.
const userHZ = 100

// Process returns the CPU time (user and system) a process has used so
// far, all its threads, from /proc/PID/stat (in clock ticks, 10ms).
func Process(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name, field 2, is in parentheses and may hold spaces:
	// the fields after it start at the last ')'.
	i := bytes.LastIndexByte(b, ')')
	var f []string
	if i >= 0 {
		f = strings.Fields(string(b[i+1:]))
	}
	if len(f) < 13 {
		return 0, fmt.Errorf("cpustat: /proc/%d/stat: unexpected format", pid)
	}
	// f[0] is field 3 (state); utime and stime are fields 14 and 15.
	var ticks int64
	for _, s := range f[11:13] {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("cpustat: /proc/%d/stat: %w", pid, err)
		}
		ticks += n
	}
	return time.Duration(ticks) * time.Second / userHZ, nil
}

// Self returns the CPU time (user and system) of this process so far,
// every thread, to the microsecond.
func Self() time.Duration {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
