package client

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

// Conn is one keep-alive HTTP/1.1 connection to the service for load
// generators. It writes its requests and reads the answers itself, on
// the caller's goroutine, into buffers it reuses: net/http's client
// hands every request to per-connection reader and writer goroutines and
// allocates its requests, headers and answers, which cost a loader, on
// cores it shares with the server and PostgreSQL, about as much CPU per
// decision as the server's own HTTP handling. It speaks plain HTTP/1.1
// (Content-Length bodies, keep-alive), connects on first use and again
// after an error or a "Connection: close". A Conn is not safe for
// concurrent use: give each loader goroutine its own.
type Conn struct {
	addr, host  string
	timeout     time.Duration
	conn        net.Conn
	r           *bufio.Reader
	req, body   []byte
	path, value []byte
	auth        []byte // the Authorization header line, or nil
}

// SetAPIKey makes the connection send the API key secret as
// "Authorization: Bearer <secret>" (Client.WithAPIKey); call it before
// the first request.
func (c *Conn) SetAPIKey(secret string) {
	c.auth = nil
	if secret != "" {
		c.auth = []byte("\r\nAuthorization: Bearer " + secret)
	}
}

// NewConn returns a connection to the service at baseURL (http:// only);
// timeout bounds each exchange and the dial.
func NewConn(baseURL string, timeout time.Duration) (*Conn, error) {
	u, err := url.Parse(baseURL)
	if err != nil || u.Scheme != "http" || u.Host == "" {
		return nil, fmt.Errorf("client: %q is not an http:// URL", baseURL)
	}
	addr := u.Host
	if u.Port() == "" {
		addr = net.JoinHostPort(u.Hostname(), "80")
	}
	return &Conn{addr: addr, host: u.Host, timeout: timeout}, nil
}

// Close closes the connection; the next request opens a new one.
func (c *Conn) Close() {
	if c.conn != nil {
		c.conn.Close()
		c.conn, c.r = nil, nil
	}
}

// ErrChunked: the service answered without a Content-Length.
var ErrChunked = errors.New("client: an answer without Content-Length")

// Decide posts body, a decision request's JSON (DecisionRequest), to
// bandit name and returns the status and the answer (a Decision's JSON
// on 201 and 200, a Problem's otherwise), valid until the next call.
func (c *Conn) Decide(name string, body []byte) (int, []byte, error) {
	c.path = append(append(append(c.path[:0], "/v1/bandits/"...), name...), "/decisions"...)
	return c.post(c.path, body)
}

// Reward posts the reward value of the decision eventID of bandit name
// and returns the status (204 on success) and the answer's body, valid
// until the next call.
func (c *Conn) Reward(name, eventID string, value float64) (int, []byte, error) {
	c.path = append(append(append(append(append(c.path[:0], "/v1/bandits/"...), name...), "/events/"...), eventID...), "/reward"...)
	c.value = append(strconv.AppendFloat(append(c.value[:0], `{"value":`...), value, 'g', -1, 64), '}')
	return c.post(c.path, c.value)
}

// Post posts body as JSON to path and returns the status and the
// answer's body, valid until the next call.
func (c *Conn) Post(path string, body []byte) (int, []byte, error) {
	c.path = append(c.path[:0], path...)
	return c.post(c.path, body)
}

func (c *Conn) post(path, body []byte) (int, []byte, error) {
	if c.conn == nil {
		conn, err := net.DialTimeout("tcp", c.addr, c.timeout)
		if err != nil {
			return 0, nil, err
		}
		c.conn, c.r = conn, bufio.NewReaderSize(conn, 4096)
	}
	status, out, keep, err := c.exchange(path, body)
	if err != nil || !keep {
		c.Close()
	}
	return status, out, err
}

func (c *Conn) exchange(path, body []byte) (status int, out []byte, keep bool, err error) {
	if err := c.conn.SetDeadline(time.Now().Add(c.timeout)); err != nil {
		return 0, nil, false, err
	}
	r := append(c.req[:0], "POST "...)
	r = append(r, path...)
	r = append(r, " HTTP/1.1\r\nHost: "...)
	r = append(r, c.host...)
	r = append(r, c.auth...)
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
		return 0, nil, false, fmt.Errorf("client: status line %q", line)
	}
	status, err = strconv.Atoi(string(line[9:12]))
	if err != nil {
		return 0, nil, false, fmt.Errorf("client: status line %q", line)
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
			return 0, nil, false, fmt.Errorf("client: header line %q", line)
		}
		value = bytes.TrimSpace(value)
		switch {
		case bytes.EqualFold(name, []byte("Content-Length")):
			if length, err = strconv.Atoi(string(value)); err != nil || length < 0 {
				return 0, nil, false, fmt.Errorf("client: header line %q", line)
			}
		case bytes.EqualFold(name, []byte("Connection")) && bytes.EqualFold(value, []byte("close")):
			keep = false
		case bytes.EqualFold(name, []byte("Transfer-Encoding")):
			return 0, nil, false, ErrChunked
		}
	}
	if status == 204 || status == 304 || status < 200 {
		length = 0
	}
	if length < 0 {
		return 0, nil, false, ErrChunked
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
