package bandit

import (
	"sync/atomic"
	"time"
)

// CPUTime is the CPU time (user and system) the service's background
// work has used since it started, measured per OS thread
// (internal/cpustat.Measure: the goroutine doing the work is locked to
// its thread, whose CPU time is read before and after), so that it does
// not count the request path running beside it on other threads.
type CPUTime struct {
	// Training is every trainer's work: reading the new rows from the
	// store, refitting the standardization, the ELBO iterations, and
	// publishing (and now and then persisting) the posterior.
	Training time.Duration
	// Refinement is the refinement workers' refined samples (and making
	// them ready for the fast engine).
	Refinement time.Duration
}

// CPU accumulates a service's CPUTime; safe for concurrent use.
type CPU struct{ training, refinement atomic.Int64 }

func (c *CPU) add(f *atomic.Int64, d time.Duration) { f.Add(int64(d)) }

// CPUTime returns the CPU time of the service's training and refinement
// so far (see CPUTime); the process's CPU time less these is the request
// path's, the store's and the runtime's.
func (s *Service) CPUTime() CPUTime {
	c := &s.pool.cpu
	return CPUTime{Training: time.Duration(c.training.Load()), Refinement: time.Duration(c.refinement.Load())}
}
