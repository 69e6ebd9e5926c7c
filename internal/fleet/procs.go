package fleet

import (
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/threadclaim/threadclaim/internal/fleet/proxy"
)

// slot is one place in the fleet: a proxy in front of the database and the
// worker process using it, replaced by a new process when killed.
type slot struct {
	proxy *proxy.Proxy
	url   string        // the database through the proxy
	skew  time.Duration // the lease clock's offset its processes start with

	mu   sync.Mutex
	proc *proc
	busy bool // a fault holds the slot
}

func (s *slot) current() *proc {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.proc
}

// proc is one worker OS process.
type proc struct {
	name      string
	cmd       *exec.Cmd
	log       string
	clockFile string
	started   time.Time

	done chan struct{} // closed once it exited
	mu   sync.Mutex
	err  error // its exit
	// meant is set when the fleet ends the process itself (SIGKILL, or the
	// SIGTERM at the end): its exit is no failure.
	meant bool
	fate  []string
	// offsets are the lease clock's offsets over time, the first at start.
	offsets []offsetAt
}

type offsetAt struct {
	at     time.Time
	offset time.Duration
}

func (p *proc) note(format string, args ...any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.fate = append(p.fate, fmt.Sprintf(format, args...))
}

func (p *proc) setMeant() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.meant = true
}

// offset returns the lease clock's offset at t.
func (p *proc) offset(t time.Time) time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	var o time.Duration
	for _, c := range p.offsets {
		if c.at.After(t) {
			break
		}
		o = c.offset
	}
	return o
}

// setOffset writes the clock file, which the process reads within
// ClockPoll.
func (p *proc) setOffset(d time.Duration) error {
	tmp := p.clockFile + ".tmp"
	if err := os.WriteFile(tmp, []byte(d.String()+"\n"), 0o644); err != nil {
		return err
	}
	if err := os.Rename(tmp, p.clockFile); err != nil {
		return err
	}
	p.mu.Lock()
	p.offsets = append(p.offsets, offsetAt{time.Now(), d})
	p.mu.Unlock()
	return nil
}

// workerCommand returns the command that starts a worker. The database
// URL (which may hold a password) goes in the environment, where ps does
// not show it, and the application name in PGAPPNAME, by which the
// nemesis finds the worker's sessions.
func workerCommand(bin, dbURL, appName string, args []string) *exec.Cmd {
	cmd := exec.Command(bin, append([]string{"worker"}, args...)...)
	env := slicesWithout(os.Environ(), "DATABASE_URL=", "PGAPPNAME=")
	cmd.Env = append(env, "DATABASE_URL="+dbURL, "PGAPPNAME="+appName)
	cmd.SysProcAttr = workerProcAttr()
	return cmd
}

func slicesWithout(env []string, prefixes ...string) []string {
	out := env[:0:0]
next:
	for _, kv := range env {
		for _, p := range prefixes {
			if strings.HasPrefix(kv, p) {
				continue next
			}
		}
		out = append(out, kv)
	}
	return out
}

// appName is the application_name of a worker's sessions.
func appName(schema, name string) string { return schema + "/" + name }

// proxiedURL returns the database URL with its host and port replaced by
// 127.0.0.1 and port, and the network and address the proxy dials.
func proxiedURL(dbURL string, port int) (proxied, network, address string, err error) {
	cfg, err := pgx.ParseConfig(dbURL)
	if err != nil {
		return "", "", "", fmt.Errorf("%w: the database URL: %v", ErrConfig, err)
	}
	network, address = proxy.Upstream(cfg.Host, cfg.Port)
	if strings.HasPrefix(dbURL, "postgres://") || strings.HasPrefix(dbURL, "postgresql://") {
		u, err := url.Parse(dbURL)
		if err != nil {
			return "", "", "", fmt.Errorf("%w: the database URL: %v", ErrConfig, err)
		}
		q := u.Query()
		q.Del("host")
		q.Del("port")
		u.RawQuery = q.Encode()
		u.Host = fmt.Sprintf("127.0.0.1:%d", port)
		return u.String(), network, address, nil
	}
	// keyword=value: a later keyword overrides an earlier one.
	return fmt.Sprintf("%s host=127.0.0.1 port=%d", dbURL, port), network, address, nil
}

// startWorker starts a new process in the slot.
func (r *run) startWorker(s *slot) (*proc, error) {
	r.mu.Lock()
	r.nextName++
	name := fmt.Sprintf("p%d", r.nextName)
	seed := r.workerRNG.Uint64()
	r.mu.Unlock()
	p := &proc{
		name:      name,
		log:       filepath.Join(r.dir, name+".log"),
		clockFile: filepath.Join(r.dir, name+".clock"),
		done:      make(chan struct{}),
		offsets:   []offsetAt{{time.Now(), s.skew}},
	}
	if err := os.WriteFile(p.clockFile, []byte(s.skew.String()+"\n"), 0o644); err != nil {
		return nil, err
	}
	logf, err := os.Create(p.log)
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	args := []string{"-schema", r.schema, "-name", name,
		"-history", filepath.Join(r.dir, name+".history"), "-skew", s.skew.String(),
		"-clock-file", p.clockFile, "-ttl", r.cfg.TTL.String(), "-poll", r.cfg.Poll.String(),
		"-agent", r.cfg.Agent, "-agent-max", r.cfg.AgentMax.String(), "-ask", fmt.Sprint(r.cfg.Ask), "-seed", fmt.Sprint(seed)}
	if r.cfg.Turns > 0 {
		args = append(args, "-turns", fmt.Sprint(r.cfg.Turns))
	}
	if r.cfg.mutant() {
		args = append(args, "-unfenced="+r.cfg.Unfenced.String())
	}
	p.cmd = workerCommand(r.cfg.Bin, s.url, appName(r.schema, name), args)
	p.cmd.Stdout, p.cmd.Stderr = logf, logf
	if err := p.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start worker %s: %w", name, err)
	}
	p.started = time.Now()
	fmt.Fprintf(r.out, "started %s, pid %d, lease clock %+v\n", name, p.cmd.Process.Pid, s.skew)
	s.mu.Lock()
	s.proc = p
	s.mu.Unlock()
	r.mu.Lock()
	r.procs = append(r.procs, p)
	r.mu.Unlock()
	go func() {
		err := p.cmd.Wait()
		p.mu.Lock()
		p.err = err
		meant := p.meant
		p.mu.Unlock()
		close(p.done)
		if !meant {
			select {
			case r.died <- p:
			default:
			}
		}
	}()
	return p, nil
}

// stopWorkers continues every stopped process and ends each with SIGTERM,
// or SIGKILL when it has not exited within r.stopGrace of it (stopKilled).
func (r *run) stopWorkers() {
	r.mu.Lock()
	procs := append([]*proc(nil), r.procs...)
	r.mu.Unlock()
	at := time.Now()
	for _, p := range procs {
		select {
		case <-p.done:
			continue
		default:
		}
		p.setMeant()
		_ = p.cmd.Process.Signal(syscall.SIGCONT)
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
	}
	end := at.Add(r.stopGrace)
	for _, p := range procs {
		select {
		case <-p.done:
			continue
		case <-time.After(time.Until(end)):
		}
		select {
		case <-p.done: // it exited as the grace ran out
		default:
			r.stopKilled(p, at)
		}
	}
	for _, p := range procs {
		p.mu.Lock()
		if p.err != nil && !strings.Contains(strings.Join(p.fate, " "), "SIGKILL") {
			p.fate = append(p.fate, fmt.Sprintf("exit: %v (see %s)", p.err, filepath.Base(p.log)))
		}
		p.mu.Unlock()
	}
}
