package client_test

import (
	"net"
	"testing"
	"time"

	"github.com/refinery-bandits/refinery/api/client"
)

// The tests of the client against the service are in package api
// (api/goclient_test.go), so that this package's tests, like the
// package, import no part of the service: a module that imports the
// client does not need the service's dependencies to tidy (issue 30,
// finding 10).

func TestNewRefusesWhatIsNotAURL(t *testing.T) {
	for _, u := range []string{"", "localhost:8080", "ftp://x", "http://"} {
		if _, err := client.New(u, nil); err == nil {
			t.Errorf("New(%q) accepted it", u)
		}
	}
}

// A Conn's decision and reward allocate nothing in the steady state:
// against a server that answers every request with the same bytes from
// a buffer, 200 exchanges of each allocate 0 times per exchange
// (testing.AllocsPerRun counts the whole process, the server too).
func TestConnAllocatesNothing(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	answer := []byte("HTTP/1.1 201 Created\r\nContent-Type: application/json\r\nContent-Length: 16\r\n\r\n{\"event_id\":\"e\"}")
	go func() {
		conn, err := ln.Accept()
		if err != nil {
			return
		}
		defer conn.Close()
		buf := make([]byte, 4096)
		for {
			// Each request arrives in one write of the client, small
			// enough for one read.
			if _, err := conn.Read(buf); err != nil {
				return
			}
			if _, err := conn.Write(answer); err != nil {
				return
			}
		}
	}()
	c, err := client.NewConn("http://"+ln.Addr().String(), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	body := []byte(`{"context":{"color":"red"}}`)
	if code, out, err := c.Decide("toy", body); err != nil || code != 201 || string(out) != `{"event_id":"e"}` {
		t.Fatalf("Decide = %d %s %v", code, out, err)
	}
	if n := testing.AllocsPerRun(200, func() {
		if _, _, err := c.Decide("toy", body); err != nil {
			t.Fatal(err)
		}
		if _, _, err := c.Reward("toy", "e", -35); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Errorf("a decision and a reward allocate %g times, want 0", n)
	}
}
