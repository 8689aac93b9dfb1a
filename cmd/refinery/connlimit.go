package main

import (
	"context"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// connLimiter is a listener that keeps at most max connections open, so
// that the process never runs out of file descriptors (issue 16, finding
// 6: 1,100 slow connections made /healthz time out). At the cap a new
// connection takes the place of the one that has been waiting longest
// without a request being handled on it — idle keep-alive connections
// and connections still sending their request's header — so that slow
// or idle clients cannot lock out a health check; if every connection
// is inside a handler, the new one is closed at once.
//
// The server must report connection states through track (http.Server's
// ConnState) and mark handlers through connContext (its ConnContext) and
// busy.
type connLimiter struct {
	net.Listener
	max int

	mu    sync.Mutex
	conns map[*limitedConn]struct{}
	// evicted and refused count the connections closed at the cap.
	evicted, refused atomic.Int64
}

type limitedConn struct {
	net.Conn
	l        *connLimiter
	once     sync.Once
	since    time.Time // guarded by l.mu: when it last started to wait
	handlers int       // guarded by l.mu: requests inside a handler
}

func newConnLimiter(ln net.Listener, max int) *connLimiter {
	return &connLimiter{Listener: ln, max: max, conns: map[*limitedConn]struct{}{}}
}

// Accept waits for the next connection, making room for it if needed.
func (l *connLimiter) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		lc := &limitedConn{Conn: c, l: l, since: time.Now()}
		l.mu.Lock()
		var victim *limitedConn
		if len(l.conns) >= l.max {
			for o := range l.conns {
				if o.handlers == 0 && (victim == nil || o.since.Before(victim.since)) {
					victim = o
				}
			}
			if victim == nil {
				l.mu.Unlock()
				l.refused.Add(1)
				c.Close()
				continue
			}
			delete(l.conns, victim)
		}
		l.conns[lc] = struct{}{}
		l.mu.Unlock()
		if victim != nil {
			l.evicted.Add(1)
			victim.Close()
		}
		return lc, nil
	}
}

// open returns the number of connections open.
func (l *connLimiter) open() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.conns)
}

// Close closes the connection once and forgets it.
func (c *limitedConn) Close() error {
	err := net.ErrClosed
	c.once.Do(func() {
		c.l.mu.Lock()
		delete(c.l.conns, c)
		c.l.mu.Unlock()
		err = c.Conn.Close()
	})
	return err
}

// track is http.Server.ConnState: a connection that goes idle starts
// waiting again.
func (l *connLimiter) track(c net.Conn, st http.ConnState) {
	lc, ok := c.(*limitedConn)
	if !ok {
		return
	}
	switch st {
	case http.StateIdle:
		l.mu.Lock()
		lc.since = time.Now()
		l.mu.Unlock()
	case http.StateHijacked, http.StateClosed:
		l.mu.Lock()
		delete(l.conns, lc)
		l.mu.Unlock()
	}
}

type connKey struct{}

// connContext is http.Server.ConnContext: it lets busy find the
// connection of a request.
func (l *connLimiter) connContext(ctx context.Context, c net.Conn) context.Context {
	return context.WithValue(ctx, connKey{}, c)
}

// busy wraps a handler so that a connection inside it is never evicted.
func (l *connLimiter) busy(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		lc, ok := r.Context().Value(connKey{}).(*limitedConn)
		if ok {
			l.mu.Lock()
			lc.handlers++
			l.mu.Unlock()
			defer func() {
				l.mu.Lock()
				lc.handlers--
				lc.since = time.Now()
				l.mu.Unlock()
			}()
		}
		next.ServeHTTP(w, r)
	})
}
