package bandit

import (
	"testing"
	"time"
)

// TestLockLifeIsPerBandit: the changes of one bandit wait for each other,
// not for another bandit's (issue 31, finding 6), and the lock of a name
// is forgotten once no one holds or waits for it.
func TestLockLifeIsPerBandit(t *testing.T) {
	var s Service
	unlockA := s.lockLife("a")
	other := make(chan struct{})
	go func() { s.lockLife("b")(); close(other) }()
	select {
	case <-other:
	case <-time.After(2 * time.Second):
		t.Fatal("locking b waited for a's lock")
	}
	same := make(chan struct{})
	go func() { s.lockLife("a")(); close(same) }()
	select {
	case <-same:
		t.Fatal("a second lock of a did not wait for the first")
	case <-time.After(50 * time.Millisecond):
	}
	unlockA()
	<-same
	if n := len(s.life.m); n != 0 {
		t.Errorf("%d locks kept after every unlock, want 0", n)
	}
}
