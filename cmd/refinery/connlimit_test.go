package main

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"testing"
	"time"
)

// TestSlowConnectionsDoNotStarveHealthz: with more slow connections
// (sending half a request header) than --max-conns, /healthz answers at
// once once they have waited defaultEvictAfter, and the connections open
// stay at the cap (issue 16, finding 6).
func TestSlowConnectionsDoNotStarveHealthz(t *testing.T) {
	m := NewMain()
	m.Addr = "127.0.0.1:0"
	m.Logger = testLogger(t, slog.LevelWarn)
	m.MaxConns = 8
	if err := m.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	addr := m.ln.Addr().String()
	var slow []net.Conn
	defer func() {
		for _, c := range slow {
			c.Close()
		}
	}()
	for range 30 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Write([]byte("GET /healthz HTTP/1.1\r\nHost: x\r\n")); err != nil {
			t.Fatal(err)
		}
		slow = append(slow, c)
	}
	// Past defaultEvictAfter the slow connections may be evicted.
	time.Sleep(defaultEvictAfter + 100*time.Millisecond)
	client := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	for i := range 5 {
		start := time.Now()
		resp, err := client.Get(m.URL() + "/healthz")
		if err != nil {
			t.Fatalf("/healthz %d behind 30 slow connections: %v", i, err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || time.Since(start) > time.Second {
			t.Errorf("/healthz %d: %d after %v, want 200 at once", i, resp.StatusCode, time.Since(start))
		}
	}
	if n := m.limiter.open(); n > 8 {
		t.Errorf("%d connections open, want at most --max-conns 8", n)
	}
	if m.limiter.evicted.Load() == 0 {
		t.Errorf("no connection was evicted")
	}
}
