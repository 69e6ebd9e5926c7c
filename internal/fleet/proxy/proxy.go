// Package proxy is a TCP proxy between one client and a PostgreSQL server
// whose faults a test turns on and off while connections are open: a
// network partition, added latency, and COMMITs held back before they
// reach the server. The fleet puts one in front of each worker process, so
// that a fault cuts one worker off from the database, or slows it down,
// while the others go on.
//
// It reads the client's half of the PostgreSQL wire protocol only to find
// COMMIT; everything else is forwarded byte for byte. A connection that
// negotiates TLS is forwarded without that inspection (no COMMIT delay).
package proxy

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"
)

// Proxy accepts connections on a local TCP port and forwards each to the
// upstream address. Its methods are safe for concurrent use.
type Proxy struct {
	ln       net.Listener
	upstream func(ctx context.Context) (net.Conn, error)

	mu          sync.Mutex
	links       map[*link]struct{}
	partitioned chan struct{} // closed while healthy; open (blocking) while partitioned
	latency     time.Duration
	commitDelay time.Duration
	commits     int // COMMITs seen
	delayed     int // COMMITs held back
	accepted    int // client connections taken, each by a serve of its own
	closed      bool
	wg          sync.WaitGroup
}

// link is one client connection and its upstream connection.
type link struct {
	client, server net.Conn
	// cut is set when a partition began while the link was open: the
	// link is closed when the partition heals, as TCP would time it out.
	cut bool
}

// Listen starts a proxy on 127.0.0.1 (a free port) that forwards to
// network and address (as net.Dial takes them: "tcp" and "host:port", or
// "unix" and a socket path).
func Listen(network, address string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("proxy: listen: %w", err)
	}
	healthy := make(chan struct{})
	close(healthy)
	var d net.Dialer
	p := &Proxy{
		ln:          ln,
		upstream:    func(ctx context.Context) (net.Conn, error) { return d.DialContext(ctx, network, address) },
		links:       map[*link]struct{}{},
		partitioned: healthy,
	}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Addr returns the address clients connect to.
func (p *Proxy) Addr() *net.TCPAddr { return p.ln.Addr().(*net.TCPAddr) }

// Close stops accepting, closes every connection and waits for the
// proxy's goroutines.
func (p *Proxy) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	for l := range p.links {
		l.client.Close()
		l.server.Close()
	}
	p.heal()
	p.mu.Unlock()
	err := p.ln.Close()
	p.wg.Wait()
	return err
}

// Partition cuts the client off from the server: bytes in flight either
// way stop moving, new connections get no answer, and nobody is told. On
// heal (Partition(false)) the connections that were open during the
// partition are closed, as TCP's keepalives or a timeout would end them;
// the server then ends their sessions, and transactions, too.
func (p *Proxy) Partition(on bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return
	}
	if on {
		select {
		case <-p.partitioned:
			p.partitioned = make(chan struct{})
		default:
		}
		for l := range p.links {
			l.cut = true
		}
		return
	}
	for l := range p.links {
		if l.cut {
			l.client.Close()
			l.server.Close()
			delete(p.links, l)
		}
	}
	p.heal()
}

// heal ends a partition; p.mu is held.
func (p *Proxy) heal() {
	select {
	case <-p.partitioned:
	default:
		close(p.partitioned)
	}
}

// SetLatency delays every chunk of bytes, either way, by d (0 for none).
func (p *Proxy) SetLatency(d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.latency = d
}

// DelayCommits holds each COMMIT the client sends for d before the server
// sees it (0 for none): the transaction keeps its locks meanwhile.
func (p *Proxy) DelayCommits(d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.commitDelay = d
}

// Commits returns how many COMMITs the proxy saw, and how many of them it
// held back.
func (p *Proxy) Commits() (seen, delayed int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.commits, p.delayed
}

// InForce names the faults in force now: "partitioned", "latency D",
// "COMMITs held D"; none when the proxy forwards as a plain one would.
func (p *Proxy) InForce() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var in []string
	select {
	case <-p.partitioned:
	default:
		in = append(in, "partitioned")
	}
	if p.latency > 0 {
		in = append(in, fmt.Sprintf("latency %v", p.latency))
	}
	if p.commitDelay > 0 {
		in = append(in, fmt.Sprintf("COMMITs held %v", p.commitDelay))
	}
	return in
}

func (p *Proxy) faults() (gate chan struct{}, latency time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.partitioned, p.latency
}

// wait blocks while the proxy is partitioned, then sleeps the latency.
// It returns false once the link is closed.
func (p *Proxy) wait(done <-chan struct{}) bool {
	gate, latency := p.faults()
	select {
	case <-gate:
	case <-done:
		return false
	}
	if latency > 0 {
		t := time.NewTimer(latency)
		defer t.Stop()
		select {
		case <-t.C:
		case <-done:
			return false
		}
	}
	return true
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.wg.Add(1)
		go p.serve(c)
	}
}

func (p *Proxy) serve(client net.Conn) {
	defer p.wg.Done()
	done := make(chan struct{})
	l := &link{client: client}
	p.mu.Lock()
	p.accepted++
	p.mu.Unlock()
	// A connection made during a partition waits, unanswered, for it to
	// heal.
	gate, _ := p.faults()
	<-gate
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	server, err := p.upstream(ctx)
	cancel()
	if err != nil {
		client.Close()
		return
	}
	l.server = server
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		client.Close()
		server.Close()
		return
	}
	p.links[l] = struct{}{}
	p.mu.Unlock()

	var wg sync.WaitGroup
	wg.Add(2)
	closeBoth := sync.OnceFunc(func() {
		close(done)
		client.Close()
		server.Close()
	})
	go func() {
		defer wg.Done()
		defer closeBoth()
		p.clientToServer(l, done)
	}()
	go func() {
		defer wg.Done()
		defer closeBoth()
		p.pipe(server, client, done)
	}()
	wg.Wait()
	p.mu.Lock()
	delete(p.links, l)
	p.mu.Unlock()
}

// pipe forwards from src to dst, chunk by chunk, through the faults.
func (p *Proxy) pipe(src io.Reader, dst io.Writer, done <-chan struct{}) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if !p.wait(done) {
				return
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// Protocol codes of the untyped messages a client may send first.
const (
	sslRequest    = 80877103
	gssEncRequest = 80877104
	cancelRequest = 80877102
)

// clientToServer forwards the client's messages one at a time, holding
// back a COMMIT while DelayCommits says so. It falls back to a plain pipe
// for TLS and for anything it does not recognise.
func (p *Proxy) clientToServer(l *link, done <-chan struct{}) {
	r := bufio.NewReaderSize(l.client, 32<<10)
	raw := func() { p.pipe(r, l.server, done) }
	// Untyped messages: SSLRequest or GSSENCRequest (answered with one
	// byte), then the StartupMessage or a CancelRequest.
	for {
		msg, err := readUntyped(r)
		if err != nil {
			if msg == nil {
				return
			}
			if p.forward(l, msg, done) {
				raw()
			}
			return
		}
		if !p.forward(l, msg, done) {
			return
		}
		code := binary.BigEndian.Uint32(msg[4:8])
		if code != sslRequest && code != gssEncRequest {
			if code == cancelRequest {
				raw()
				return
			}
			break
		}
		// The server answers 'S' (TLS follows) or 'N'. A TLS ClientHello
		// starts with 0x16; a StartupMessage with its length's high byte.
		b, err := r.Peek(1)
		if err != nil {
			return
		}
		if b[0] == 0x16 {
			raw()
			return
		}
	}
	for {
		hdr, err := r.Peek(5)
		if err != nil {
			if len(hdr) > 0 {
				raw()
			}
			return
		}
		n := int(binary.BigEndian.Uint32(hdr[1:5])) + 1
		if n < 5 || n > 64<<20 {
			raw()
			return
		}
		msg := make([]byte, n)
		if _, err := io.ReadFull(r, msg); err != nil {
			return
		}
		if (msg[0] == 'Q' || msg[0] == 'P') && isCommit(msg[5:]) {
			if !p.holdCommit(done) {
				return
			}
		}
		if !p.forward(l, msg, done) {
			return
		}
	}
}

// readUntyped reads a message that has a length but no type byte. On a
// length it does not believe, it returns what it read with an error.
func readUntyped(r *bufio.Reader) ([]byte, error) {
	hdr, err := r.Peek(8)
	if err != nil {
		if len(hdr) == 0 {
			return nil, err
		}
		b := make([]byte, len(hdr))
		_, _ = io.ReadFull(r, b)
		return b, err
	}
	n := int(binary.BigEndian.Uint32(hdr[:4]))
	if n < 8 || n > 10000 {
		b := make([]byte, 8)
		_, _ = io.ReadFull(r, b)
		return b, errors.New("proxy: not a startup message")
	}
	msg := make([]byte, n)
	if _, err := io.ReadFull(r, msg); err != nil {
		return nil, err
	}
	return msg, nil
}

func (p *Proxy) forward(l *link, msg []byte, done <-chan struct{}) bool {
	if !p.wait(done) {
		return false
	}
	_, err := l.server.Write(msg)
	return err == nil
}

// holdCommit counts a COMMIT and waits out the commit delay, if any.
func (p *Proxy) holdCommit(done <-chan struct{}) bool {
	p.mu.Lock()
	p.commits++
	d := p.commitDelay
	if d > 0 {
		p.delayed++
	}
	p.mu.Unlock()
	if d <= 0 {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-done:
		return false
	}
}

// isCommit reports whether a query's text (NUL-terminated, possibly after
// a statement name) contains a COMMIT: the statement itself, or the last
// of several sent in one message.
func isCommit(body []byte) bool {
	return bytes.Contains(bytes.ToLower(body), []byte("commit"))
}

// Upstream returns the network and address to dial for a PostgreSQL host
// and port as pgx parses them: a host that starts with "/" is the
// directory of the server's unix socket.
func Upstream(host string, port uint16) (network, address string) {
	if len(host) > 0 && host[0] == '/' {
		return "unix", fmt.Sprintf("%s/.s.PGSQL.%d", host, port)
	}
	return "tcp", net.JoinHostPort(host, fmt.Sprint(port))
}
