package main

import (
	"context"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// connLimiter is a listener that keeps at most max connections open, so
// that the process never runs out of file descriptors (issue 16, finding
// 6: 1,100 slow connections made /healthz time out), and that sheds the
// connections past the cap instead of letting them push out the clients
// it serves (issue 31, finding 2: at the cap each new connection evicted
// a busy client's keep-alive connection between two of its requests, and
// goodput fell from 1,796/s at 1,024 clients to 308/s at 2,048).
//
// At the cap a new connection takes the place of the one that has waited
// longest, but only if that one has waited at least evictAfter without a
// request being handled on it: an idle keep-alive connection, or one
// still sending its request's header (a slow client). A client making
// requests never waits that long between two of them, so it keeps its
// connection. Without such a connection the new one is shed: once its
// request begins to arrive, and not before shedHold, it is answered with
// a minimal 503 (problem+json, Retry-After: 1, Connection: close) and
// closed once the client has read it (refuse), never reset.
//
// The server must report connection states through track (http.Server's
// ConnState) and mark handlers through connContext (its ConnContext) and
// busy.
type connLimiter struct {
	net.Listener
	max int
	// evictAfter is how long a connection must have waited, outside a
	// handler, to be evicted at the cap (zero: defaultEvictAfter).
	evictAfter time.Duration

	mu    sync.Mutex
	conns map[*limitedConn]struct{}
	// shedding holds a slot per refused connection being answered.
	shedding chan struct{}
	// evicted and shed count the connections closed at the cap.
	evicted, shed atomic.Int64
}

type limitedConn struct {
	net.Conn
	l        *connLimiter
	once     sync.Once
	since    time.Time // guarded by l.mu: when it last started to wait
	handlers int       // guarded by l.mu: requests inside a handler
}

// defaultEvictAfter is how long a connection must wait outside a handler
// to be evicted at the cap: far above the gap between two requests of a
// client on a keep-alive connection (a round trip: well under 100 ms on
// any network a service answers over), with room for a client stalled by
// a loaded machine (at 2 s, one of TestConnCapShedsExtraConnections's
// clients, starved during `make test`, lost its connection), and half the
// header timeout (10 s), so that slow clients holding every slot give
// theirs up after it.
const defaultEvictAfter = 5 * time.Second

// Shedding: at most maxShedding refused connections are held at once
// (Accept waits for a slot, leaving the others in the kernel's backlog,
// rather than reset them). A refused connection is answered once its
// request has begun to arrive (within shedWaitRequest; a connection that
// sends nothing is closed unanswered), and not before shedHold after it
// was accepted, then given shedLinger to read the 503.
//
// Waiting for the request: Go's client (and others) dial a connection
// ahead of need and pool it idle; a 503 written on it before a request
// is an unsolicited response, which the client drops, failing the
// request it then writes there ("readLoopPeekFailLocked"): 1.2% of the
// 2,048 clients' requests in bench/overload.md at ea85675. Holding: a
// client refused at once comes straight back, and at 512 clients over a
// cap of 256 the refusals cost as many accepts, writes and closes a
// second as the server answered requests (about 900/s on 2 loaded
// cores); held for shedHold (the 503's Retry-After), each held
// connection costs a sleeping goroutine, and the refusals at most
// maxShedding a shedHold.
const (
	shedHold        = time.Second
	shedWaitRequest = 5 * time.Second
	maxShedding     = 64
	shedLinger      = time.Second
)

// shedResponse is the answer to a connection past the cap, written before
// its request is read.
var shedResponse = []byte("HTTP/1.1 503 Service Unavailable\r\n" +
	"Content-Type: application/problem+json\r\n" +
	"Retry-After: 1\r\n" +
	"Connection: close\r\n" +
	"Content-Length: " + strconv.Itoa(len(shedBody)) + "\r\n\r\n" + shedBody)

const shedBody = `{"type":"about:blank","title":"Service Unavailable","status":503,"detail":"the server has --max-conns connections open; retry later"}` + "\n"

func newConnLimiter(ln net.Listener, max int) *connLimiter {
	return &connLimiter{Listener: ln, max: max, conns: map[*limitedConn]struct{}{}, shedding: make(chan struct{}, maxShedding)}
}

// Accept waits for the next connection, making room for it or shedding
// it at the cap.
func (l *connLimiter) Accept() (net.Conn, error) {
	evictAfter := l.evictAfter
	if evictAfter <= 0 {
		evictAfter = defaultEvictAfter
	}
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		now := time.Now()
		lc := &limitedConn{Conn: c, l: l, since: now}
		l.mu.Lock()
		var victim *limitedConn
		if len(l.conns) >= l.max {
			for o := range l.conns {
				if o.handlers == 0 && now.Sub(o.since) >= evictAfter && (victim == nil || o.since.Before(victim.since)) {
					victim = o
				}
			}
			if victim == nil {
				l.mu.Unlock()
				l.shed.Add(1)
				l.shedding <- struct{}{} // at most maxShedding at once
				go l.refuse(c)
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

// refuse answers a connection past the cap with shedResponse once its
// request has begun to arrive and shedHold has passed, then half-closes
// it and reads what the client sent until it closes (or for shedLinger)
// before closing: closing with unread bytes would reset the connection,
// and the client could lose the 503 to the reset. A connection that
// sends nothing within shedWaitRequest is closed unanswered.
func (l *connLimiter) refuse(c net.Conn) {
	defer func() { <-l.shedding }()
	defer c.Close()
	accepted := time.Now()
	_ = c.SetReadDeadline(accepted.Add(shedWaitRequest))
	var first [1]byte
	if n, _ := c.Read(first[:]); n == 0 {
		return
	}
	time.Sleep(shedHold - time.Since(accepted))
	deadline := time.Now().Add(shedLinger)
	_ = c.SetDeadline(deadline)
	if _, err := c.Write(shedResponse); err != nil {
		return
	}
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(c, 1<<20))
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
