package api

import (
	"context"
	"math"
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
// While requests wait, their queues are looked at again every
// shareRecheck (shares.recheck).
const (
	shareActive     = time.Second
	shareWait       = time.Second
	shareDecay      = time.Second
	shareRecheck    = 10 * time.Millisecond
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
// body and of its handler, and is let through at most perKey requests
// more than the busiest other key over the last second or so (ahead):
// the keys that want more than the server gives take turns, request for
// request. The next waits, first come first served within its key, for
// one of its requests to end or the others' to catch up. A waiting
// request holds no slot of MaxInFlight and costs no CPU, and its client,
// waiting for the answer, sends nothing more: a key's clients get at
// most one key's turn of the server, however many they are.
//
// A key's turn also comes with time alone: the other keys' counts decay,
// and a key whose last request ended shareActive ago is no longer
// active. So while requests wait, a timer lets them through as soon as
// their keys' shares allow (recheck), not only when a request passes or
// ends. Without it, the 16 honest clients of bench/overload.md, left
// waiting beside the 2,048 clients' key as it went, waited out their
// second and were refused 429 once the crowd had gone, and again and
// again: each came back while the others still waited, queued behind
// them and was never looked at (1 transaction a second for 15 s in run 3
// at 7c4cebc; TestSharesLetAWaitingRequestThroughWhenTimeAllows,
// TestHonestClientsServedRightAfterAnotherKeyLeaves).
type shares struct {
	perKey  int
	mu      sync.Mutex
	waiting int
	keys    map[string]*keyShare // the keys active or recently active
	// rechecking: recheck is due (requests wait).
	rechecking bool
}

type keyShare struct {
	underWay int
	queue    []chan struct{} // first come first; closed when let through
	ended    time.Time       // when a request of the key last ended
	// admitted counts the key's requests let through, decayed with the
	// time constant shareDecay, as of at.
	admitted float64
	at       time.Time
	// heavy: admitted reached perKey since the key became active.
	heavy bool
}

// count is k's admitted as of now.
func (k *keyShare) count(now time.Time) float64 {
	return k.admitted * math.Exp(-now.Sub(k.at).Seconds()/shareDecay.Seconds())
}

// pass counts a request of key name (k) let through at now. A key
// whose count first reaches perKey is raised level with the busiest
// other key, so that it is neither owed what the others were let through
// before it came (which would hold them for seconds) nor able to hold
// them by passing the threshold of ahead; a key below it never is.
func (s *shares) pass(name string, k *keyShare, now time.Time) {
	k.admitted = k.count(now) + 1
	k.at = now
	k.underWay++
	if !k.heavy && k.admitted >= float64(s.perKey) {
		k.heavy = true
		for other, o := range s.keys {
			if other != name {
				k.admitted = max(k.admitted, o.count(now))
			}
		}
	}
}

// ahead reports whether key name (k) has been let through more than
// perKey requests (the lead) beyond the busiest other key, counted over
// the last shareDecay or so, among the other keys let through at least
// the lead in that time (a key sending a request now and then holds no
// one back). While it is, its requests wait even below its share of
// requests under way. Requests under way alone were not a share: beside
// 512 clients of another key on the in-memory store, where a request
// spends a fraction of a millisecond in its handler and most of its cost
// in being read, parsed and answered, the crowd's requests under way
// rarely reached 16, were let through 2,300 a second to the honest
// clients' 400 and left them a fifth of their rate alone.
func (s *shares) ahead(name string, k *keyShare, now time.Time) bool {
	lead := float64(s.perKey)
	busiest, busy := 0.0, false
	for other, o := range s.keys {
		if c := o.count(now); other != name && c >= lead {
			busiest, busy = max(busiest, c), true
		}
	}
	return busy && k.count(now) > busiest+lead
}

// mayPass reports whether the next request of key name (k) may go
// through at now: when no other key is active, or when k has fewer than
// perKey requests under way and is not ahead of the busy keys.
func (s *shares) mayPass(name string, k *keyShare, now time.Time) bool {
	return !s.othersActive(name, now) || k.underWay < s.perKey && !s.ahead(name, k, now)
}

// release lets the waiting requests through, first come first served
// within each key, as far as their keys' shares allow.
func (s *shares) release(now time.Time) {
	for name, o := range s.keys {
		for len(o.queue) > 0 {
			if !s.mayPass(name, o, now) {
				break
			}
			close(o.queue[0])
			o.queue = o.queue[1:]
			s.waiting--
			s.pass(name, o, now)
		}
	}
}

// othersActive reports whether a key other than key is active at now,
// forgetting the keys that no longer are.
func (s *shares) othersActive(key string, now time.Time) bool {
	others := false
	for name, k := range s.keys {
		if name != key && k.underWay == 0 && len(k.queue) == 0 && now.Sub(k.ended) >= shareActive {
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
		k = &keyShare{at: now, ended: now}
		s.keys[key] = k
	}
	if len(k.queue) == 0 && s.mayPass(key, k, now) {
		s.pass(key, k, now)
		s.release(now) // others may have waited for k's count to grow
		s.mu.Unlock()
		return true
	}
	if s.waiting >= maxShareWaiting {
		s.mu.Unlock()
		return false
	}
	ready := make(chan struct{})
	k.queue = append(k.queue, ready)
	s.waiting++
	if !s.rechecking {
		s.rechecking = true
		time.AfterFunc(shareRecheck, s.recheck)
	}
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

// recheck lets the waiting requests through as far as their keys' shares
// allow now, and is due again in shareRecheck while any still wait.
func (s *shares) recheck() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.release(time.Now())
	if s.waiting == 0 {
		s.rechecking = false
		return
	}
	time.AfterFunc(shareRecheck, s.recheck)
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
	s.release(now)
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
			s.writeProblem(w, r, withDetail(errOverloaded, "this API key has had its turn of the server while other keys use it (at most %d requests under way, and not more than %d requests ahead of the busiest other key over the last second); retry after a second", s.shares.perKey, s.shares.perKey))
			return
		}
		defer s.shares.leave(key)
		next.ServeHTTP(w, r)
	})
}
