package bandit

// HoldBackgroundCore takes one of the service's background cores
// (ServiceConfig.BackgroundCores) until release is called, as a
// retraining or a refinement would.
func (s *Service) HoldBackgroundCore() (release func()) {
	release, _ = s.pool.background(nil)
	return release
}
