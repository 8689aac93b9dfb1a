package api

import (
	"context"
	"net/http"
	"sync"
	"time"
)

// Shares: a key is active while it has a request under way and for
// shareActive after its last one ended (a client between two requests
// is still there), and a request beyond its key's share waits up to
// shareWait (the 429's Retry-After) for one of the key's requests to
// end. At most maxShareWaiting requests wait at once (each holds a
// connection and a goroutine, no body); past that they are 429 at once.
const (
	shareActive     = time.Second
	shareWait       = time.Second
	maxShareWaiting = 4096
)

// shares holds each API key to its share of the server while other keys
// use it (Config.MaxInFlightPerKey; issue 31: 2,048 clients on one key
// left 16 honest clients on another 4% of their throughput, because
// each request, whoever sent it, got an equal turn).
//
// A key alone (the only active key; on a server without keys every
// request is of the one key "") is never limited by it. While another
// key is active, a key has at most perKey requests under way, from its
// authentication to its answer, which covers the work of reading its
// body and of its handler; the next waits, first come first served
// within its key, for one of them to end. A waiting request holds no
// slot of MaxInFlight and costs no CPU, and its client, waiting for the
// answer, sends nothing more: a key's clients get at most perKey
// requests' worth of the server at a time, however many they are.
type shares struct {
	perKey  int
	mu      sync.Mutex
	waiting int
	keys    map[string]*keyShare // the keys active or recently active
}

type keyShare struct {
	underWay int
	queue    []chan struct{} // first come first; closed when let through
	ended    time.Time       // when a request of the key last ended
}

// othersActive reports whether a key other than key is active at now,
// forgetting the keys that no longer are.
func (s *shares) othersActive(key string, now time.Time) bool {
	others := false
	for name, k := range s.keys {
		if k.underWay == 0 && len(k.queue) == 0 && now.Sub(k.ended) >= shareActive {
			delete(s.keys, name)
			continue
		}
		if name != key {
			others = true
		}
	}
	return others
}

// enter lets a request of key through (true; leave must follow) or,
// past its share, waits up to shareWait for room; false if there was
// none or ctx ended first.
func (s *shares) enter(ctx context.Context, key string) bool {
	now := time.Now()
	s.mu.Lock()
	k := s.keys[key]
	if k == nil {
		k = &keyShare{}
		s.keys[key] = k
	}
	if k.underWay < s.perKey || len(k.queue) == 0 && !s.othersActive(key, now) {
		k.underWay++
		s.mu.Unlock()
		return true
	}
	if s.waiting >= maxShareWaiting {
		s.mu.Unlock()
		return false
	}
	ready := make(chan struct{})
	if debugShares {
		println("wait", key, k.underWay, len(k.queue))
	}
	k.queue = append(k.queue, ready)
	s.waiting++
	s.mu.Unlock()
	t := time.NewTimer(shareWait)
	defer t.Stop()
	select {
	case <-ready:
		return true
	case <-t.C:
	case <-ctx.Done():
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, c := range k.queue {
		if c == ready {
			k.queue = append(k.queue[:i], k.queue[i+1:]...)
			s.waiting--
			return false
		}
	}
	return true // let through meanwhile
}

// leave ends a request of key that enter let through, and lets the
// requests waiting through as far as their keys' shares allow.
func (s *shares) leave(key string) {
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	k := s.keys[key]
	k.underWay--
	k.ended = now
	for name, o := range s.keys {
		for len(o.queue) > 0 && (o.underWay < s.perKey || !s.othersActive(name, now)) {
			close(o.queue[0])
			o.queue = o.queue[1:]
			s.waiting--
			o.underWay++
		}
	}
}

// share holds a request to its key's share (shares), answering 429 with
// Retry-After when it found no room within a second.
func (s *Server) share(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var key string
		if st := state(r.Context()); st != nil {
			key = st.keyID
		}
		if !s.shares.enter(r.Context(), key) {
			if err := r.Context().Err(); err != nil {
				s.writeProblem(w, r, err)
				return
			}
			s.writeProblem(w, r, withDetail(errOverloaded, "this API key has %d requests under way, its share of the server while other keys use it; retry after a second", s.shares.perKey))
			return
		}
		defer s.shares.leave(key)
		next.ServeHTTP(w, r)
	})
}

var debugShares = false
