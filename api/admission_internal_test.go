package api

import (
	"context"
	"testing"
	"time"
)

// TestSharesHoldAKeyToItsShareOnlyBesideOthers: a key alone takes as many
// requests as it sends; once another key is active it waits beyond its
// share (while the other key's requests pass), and is let through, first
// come first served, as its own requests end; the other key's last
// request ending leaves it alone again after shareActive.
func TestSharesHoldAKeyToItsShareOnlyBesideOthers(t *testing.T) {
	s := &shares{perKey: 2, keys: map[string]*keyShare{}}
	ctx := context.Background()
	for i := range 5 {
		if !s.enter(ctx, "crowd") {
			t.Fatalf("request %d of a key alone was held", i)
		}
	}
	if !s.enter(ctx, "honest") || !s.enter(ctx, "honest") {
		t.Fatal("a key under its share was held beside a key over its own")
	}
	// Beyond its share beside the other key, the crowd waits: a request
	// whose context ends first is refused.
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if s.enter(short, "crowd") {
		t.Fatal("a key over its share beside another got through at once")
	}
	// Two waiting requests of the crowd are let through in order once
	// the crowd's requests under way fall below its share.
	order := make(chan int, 2)
	for i := range 2 {
		go func() {
			if s.enter(ctx, "crowd") {
				order <- i
			} else {
				order <- -1
			}
		}()
		for { // the first waits before the second comes
			s.mu.Lock()
			n := len(s.keys["crowd"].queue)
			s.mu.Unlock()
			if n == i+1 {
				break
			}
			time.Sleep(time.Millisecond)
		}
	}
	for range 3 {
		s.leave("crowd") // 5 under way to 2: still its share
	}
	select {
	case i := <-order:
		t.Fatalf("request %d let through at its key's share", i)
	case <-time.After(20 * time.Millisecond):
	}
	s.leave("crowd")
	if i := <-order; i != 0 {
		t.Fatalf("let through %d first, want 0", i)
	}
	s.leave("crowd")
	if i := <-order; i != 1 {
		t.Fatalf("let through %d second, want 1", i)
	}
	// The honest key leaves; within shareActive it is still active.
	s.leave("honest")
	s.leave("honest")
	if s.enter(short, "crowd") {
		t.Fatal("a key over its share got through within a second of another key's request")
	}
	s.mu.Lock()
	s.keys["honest"].ended = time.Now().Add(-shareActive)
	s.mu.Unlock()
	if !s.enter(ctx, "crowd") {
		t.Fatal("a key alone again was held")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.keys["honest"]; ok || s.waiting != 0 {
		t.Errorf("the honest key is still kept (%v) or %d requests wait, want forgotten and 0", ok, s.waiting)
	}
}

// TestSharesTakeTurnsRequestForRequest: beside another key let through
// as many requests, a key whose requests end at once (never near its
// share of requests under way) is let through at most its lead of
// perKey requests more, then waits, and each request of the other key
// lets one more of its through; a key that sends a request now and then
// (fewer than perKey in the last second or so) holds no one back.
func TestSharesTakeTurnsRequestForRequest(t *testing.T) {
	const perKey = 4
	s := &shares{perKey: perKey, keys: map[string]*keyShare{}}
	ctx := context.Background()
	short := func() context.Context {
		c, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
		t.Cleanup(cancel)
		return c
	}
	// A key sending a request now and then beside a busy one.
	s.enter(ctx, "trickle")
	s.leave("trickle")
	for i := range 100 {
		if !s.enter(short(), "crowd") {
			t.Fatalf("request %d of a key beside one that sent a single request was held", i)
		}
		s.leave("crowd")
	}
	// The honest key's requests count from the crowd's level once it is
	// let through perKey of them, so that neither is held at first.
	for i := range perKey + 1 {
		if !s.enter(short(), "honest") {
			t.Fatalf("honest request %d was held", i)
		}
		s.leave("honest")
	}
	passed := 0
	for s.enter(short(), "crowd") {
		s.leave("crowd")
		passed++
		if passed > 100 {
			t.Fatal("the crowd was let through 100 requests beyond the honest key's")
		}
	}
	// The lead of perKey, decayed a little (shareDecay) while it ran.
	if passed < perKey || passed > perKey+3 {
		t.Fatalf("the crowd was let through %d requests before waiting, want %d to %d", passed, perKey, perKey+3)
	}
	got := make(chan bool)
	go func() { got <- s.enter(ctx, "crowd") }()
	for { // the crowd's request waits
		s.mu.Lock()
		n := len(s.keys["crowd"].queue)
		s.mu.Unlock()
		if n == 1 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	s.enter(ctx, "honest")
	s.enter(ctx, "honest")
	select {
	case ok := <-got:
		if !ok {
			t.Fatal("the crowd's waiting request was refused")
		}
	case <-time.After(time.Second):
		t.Fatal("the crowd's waiting request still waits after two honest requests")
	}
}

// TestSharesLetAWaitingRequestThroughWhenTimeAllows: a request that
// waits because of another key is let through as soon as that key is no
// longer active (its last request ended shareActive ago), though no
// request passes or ends meanwhile, and the key gone is forgotten. At
// 7c4cebc it waited out shareWait and was refused: only a request
// passing or ending looked at the queues (issue 31, the honest clients
// stalled after the 2,048 clients had left in bench/overload.md).
func TestSharesLetAWaitingRequestThroughWhenTimeAllows(t *testing.T) {
	const (
		perKey = 2
		// gone: the crowd is inactive this long after the honest request
		// begins to wait, well before shareWait and before the counts'
		// decay alone would let it through (the honest key is perKey+1
		// ahead: ln((perKey+1)/perKey) shareDecay, 0.4 s).
		gone = 100 * time.Millisecond
		// slack: the recheck's period and a loaded machine's delays.
		slack = 200 * time.Millisecond
	)
	s := &shares{perKey: perKey, keys: map[string]*keyShare{}}
	ctx := context.Background()
	for range 50 { // alone, the crowd is never held
		if !s.enter(ctx, "crowd") {
			t.Fatal("a key alone was held")
		}
		s.leave("crowd")
	}
	// The honest key runs ahead of the crowd by its lead, then waits.
	held := false
	for range 100 {
		short, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
		ok := s.enter(short, "honest")
		cancel()
		if !ok {
			held = true
			break
		}
		s.leave("honest")
	}
	if !held {
		t.Fatal("the honest key was let through 100 requests beside the crowd's 50, want it held past its lead")
	}
	s.mu.Lock()
	s.keys["crowd"].ended = time.Now().Add(gone - shareActive)
	s.mu.Unlock()
	start := time.Now()
	ok := s.enter(ctx, "honest")
	waited := time.Since(start)
	if !ok {
		t.Fatalf("the honest request was refused after %v, want it let through once the crowd was gone (%v)", waited, gone)
	}
	if waited > gone+slack {
		t.Errorf("the honest request waited %v, want at most %v after the crowd was gone", waited, gone+slack)
	}
	s.leave("honest")
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.keys["crowd"]; ok || s.waiting != 0 {
		t.Errorf("the crowd's key is still kept (%v) or %d requests wait, want forgotten and 0", ok, s.waiting)
	}
}
