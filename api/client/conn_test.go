package client

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"
)

// Conn reads bodies by Content-Length, a 204 without one, keeps the
// connection alive, opens a new one after "Connection: close", and
// refuses a chunked answer.
func TestConn(t *testing.T) {
	var conns atomic.Int32
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		switch r.URL.Path {
		case "/echo":
			w.WriteHeader(http.StatusCreated)
			w.Write(append([]byte("got "), body...))
		case "/empty":
			w.WriteHeader(http.StatusNoContent)
		case "/close":
			w.Header().Set("Connection", "close")
			w.Write([]byte("bye"))
		case "/chunked":
			w.Write([]byte("a"))
			w.(http.Flusher).Flush()
			w.Write([]byte("b"))
		}
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()
	c, err := NewConn(srv.URL, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	check := func(path, body string, wantStatus int, want string) {
		t.Helper()
		status, out, err := c.Post(path, []byte(body))
		if err != nil || status != wantStatus || string(out) != want {
			t.Fatalf("post %s = %d %q %v, want %d %q", path, status, out, err, wantStatus, want)
		}
	}
	check("/echo", `{"a":1}`, 201, `got {"a":1}`)
	check("/empty", `{}`, 204, "")
	check("/echo", `x`, 201, "got x")
	if n := conns.Load(); n != 1 {
		t.Fatalf("%d connections for three requests, want one kept alive", n)
	}
	check("/close", ``, 200, "bye")
	check("/echo", `y`, 201, "got y")
	if n := conns.Load(); n != 2 {
		t.Fatalf("%d connections, want a second one after Connection: close", n)
	}
	if _, _, err := c.Post("/chunked", nil); err == nil {
		t.Fatal("a chunked response was read as if it were not")
	}
	check("/echo", `z`, 201, "got z")
}
