//go:build !linux

package cpustat

import "time"

func threadCPU() (time.Duration, bool) { return 0, false }

// Process returns ErrUnsupported outside Linux.
func Process(pid int) (time.Duration, error) { return 0, ErrUnsupported }

// Self returns zero outside Linux.
func Self() time.Duration { return 0 }
