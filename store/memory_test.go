package store

import (
	"testing"

	"github.com/refinery-bandits/refinery/bandit"
	"github.com/refinery-bandits/refinery/store/storetest"
)

func TestMemoryContract(t *testing.T) {
	storetest.Run(t, func(t *testing.T) bandit.Store {
		s := NewMemory()
		t.Cleanup(func() { s.Close() })
		return s
	})
}

func TestMemoryIsEphemeral(t *testing.T) {
	if !NewMemory().Ephemeral() {
		t.Error("Memory.Ephemeral() = false, want true: the in-memory store keeps nothing across restarts")
	}
}
