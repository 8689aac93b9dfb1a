package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"strconv"
	"time"
)

// rawClient is one load-generator client's keep-alive HTTP/1.1
// connection to the server. The client writes its requests and reads the
// responses itself, on its own goroutine: net/http's client hands every
// request to per-connection reader and writer goroutines and allocates
// its requests, headers and responses, which cost the loader, on the
// cores it shares with the server and PostgreSQL, about as much CPU per
// decision as the server's own HTTP handling. It speaks plain HTTP/1.1
// (Content-Length bodies, keep-alive) and reconnects after an error or a
// "Connection: close".
type rawClient struct {
	addr, host string
	timeout    time.Duration
	conn       net.Conn
	r          *bufio.Reader
	req, body  []byte
}

func newRawClient(base string, timeout time.Duration) (*rawClient, error) {
	u, err := url.Parse(base)
	if err != nil || u.Scheme != "http" || u.Host == "" {
		return nil, fmt.Errorf("loadgen: %q is not an http:// URL", base)
	}
	addr := u.Host
	if u.Port() == "" {
		addr = net.JoinHostPort(u.Hostname(), "80")
	}
	return &rawClient{addr: addr, host: u.Host, timeout: timeout}, nil
}

func (c *rawClient) close() {
	if c.conn != nil {
		c.conn.Close()
		c.conn, c.r = nil, nil
	}
}

var errChunked = errors.New("loadgen: a response without Content-Length")

// post sends body to path as JSON and returns the response's status and
// body; the body is valid until the next call.
func (c *rawClient) post(path string, body []byte) (int, []byte, error) {
	if c.conn == nil {
		conn, err := net.DialTimeout("tcp", c.addr, c.timeout)
		if err != nil {
			return 0, nil, err
		}
		c.conn, c.r = conn, bufio.NewReaderSize(conn, 4096)
	}
	status, out, keep, err := c.exchange(path, body)
	if err != nil || !keep {
		c.close()
	}
	return status, out, err
}

func (c *rawClient) exchange(path string, body []byte) (status int, out []byte, keep bool, err error) {
	if err := c.conn.SetDeadline(time.Now().Add(c.timeout)); err != nil {
		return 0, nil, false, err
	}
	r := append(c.req[:0], "POST "...)
	r = append(r, path...)
	r = append(r, " HTTP/1.1\r\nHost: "...)
	r = append(r, c.host...)
	r = append(r, "\r\nContent-Type: application/json\r\nContent-Length: "...)
	r = strconv.AppendInt(r, int64(len(body)), 10)
	r = append(r, "\r\n\r\n"...)
	r = append(r, body...)
	c.req = r
	if _, err := c.conn.Write(r); err != nil {
		return 0, nil, false, err
	}
	line, err := c.r.ReadSlice('\n')
	if err != nil {
		return 0, nil, false, err
	}
	// HTTP/1.1 201 Created
	if len(line) < 12 || !bytes.HasPrefix(line, []byte("HTTP/1.")) {
		return 0, nil, false, fmt.Errorf("loadgen: status line %q", line)
	}
	status, err = strconv.Atoi(string(line[9:12]))
	if err != nil {
		return 0, nil, false, fmt.Errorf("loadgen: status line %q", line)
	}
	length, keep := -1, true
	for {
		line, err := c.r.ReadSlice('\n')
		if err != nil {
			return 0, nil, false, err
		}
		line = bytes.TrimRight(line, "\r\n")
		if len(line) == 0 {
			break
		}
		name, value, ok := bytes.Cut(line, []byte(":"))
		if !ok {
			return 0, nil, false, fmt.Errorf("loadgen: header line %q", line)
		}
		value = bytes.TrimSpace(value)
		switch {
		case bytes.EqualFold(name, []byte("Content-Length")):
			if length, err = strconv.Atoi(string(value)); err != nil || length < 0 {
				return 0, nil, false, fmt.Errorf("loadgen: header line %q", line)
			}
		case bytes.EqualFold(name, []byte("Connection")) && bytes.EqualFold(value, []byte("close")):
			keep = false
		case bytes.EqualFold(name, []byte("Transfer-Encoding")):
			return 0, nil, false, errChunked
		}
	}
	if status == 204 || status == 304 || status < 200 {
		length = 0
	}
	if length < 0 {
		return 0, nil, false, errChunked
	}
	if cap(c.body) < length {
		c.body = make([]byte, length)
	}
	out = c.body[:length]
	if _, err := io.ReadFull(c.r, out); err != nil {
		return 0, nil, false, err
	}
	return status, out, keep, nil
}
