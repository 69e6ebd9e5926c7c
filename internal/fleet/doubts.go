package fleet

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	"github.com/threadclaim/threadclaim/core"
)

// CommitUnknown counts the writes of runner processes whose commit
// outcome their process was not told (core.ErrCommitUnknown: a killed
// backend, a partition, a restart between COMMIT and its reply), what
// storage's log says became of each, and how each round ended.
type CommitUnknown struct {
	// Events counts the writes in doubt; ByAction by the write's action.
	Events   int                 `json:"events"`
	ByAction map[core.Action]int `json:"by_action"`
	// Committed and NotCommitted: whether storage's trace log has the
	// write's line (the truth, read by the fleet itself).
	Committed    int `json:"committed"`
	NotCommitted int `json:"not_committed"`
	// How the process resolved each: its round ended with a Crash line;
	// the committed Release's own line ended it (a Release in doubt, or a
	// RunEnd whose transaction released: RunEndThenStart); there was no round (a
	// Claim that did not commit); its process was SIGKILLed before it
	// resolved it (the fleet settles it from storage's log: Committed or
	// NotCommitted); or it was still open when its process stopped
	// (storage never answered that process's Crash again).
	Crashed        int `json:"crashed"`
	EndedByRelease int `json:"ended_by_release"`
	NoRound        int `json:"no_round"`
	KilledFirst    int `json:"killed_first"`
	// EndedLater: the process never resolved it, but a later line of
	// its round ended the round (a refusal such as EndRefused, or a
	// Release): its outcome left nothing open, and storage's log says it.
	EndedLater int `json:"ended_later"`
	Unresolved int `json:"unresolved"`
	// Disagreements counts resolutions whose outcome is not what
	// storage's log says (must be 0).
	Disagreements int `json:"disagreements"`
	// CommittedAfterCrash counts the writes its Crash resolved as not
	// committed, rightly when it read storage's log, that committed after
	// that read (their COMMIT was still on its way to the server): the
	// trace has the Crash after them (tracecheck.MergeHistories).
	CommittedAfterCrash int `json:"committed_after_crash"`
}

// doubtsPath is where a worker whose history is at history writes its
// writes in doubt: the same name, ending .doubts.
func doubtsPath(history string) string {
	return strings.TrimSuffix(history, filepath.Ext(history)) + ".doubts"
}

// doubtWriter appends each core.Doubt reported to it to a file, one JSON
// object a line, unbuffered: a process killed after a report loses none.
type doubtWriter struct {
	mu  sync.Mutex
	enc *json.Encoder
	err error
}

func (d *doubtWriter) add(x core.Doubt) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.enc.Encode(x); err != nil && d.err == nil {
		d.err = err
	}
}

// readDoubts reads every worker's writes in doubt from dir.
func readDoubts(dir string) ([]core.Doubt, error) {
	paths, err := filepath.Glob(filepath.Join(dir, "*.doubts"))
	if err != nil {
		return nil, err
	}
	sort.Strings(paths)
	var out []core.Doubt
	for _, p := range paths {
		f, err := os.Open(p)
		if err != nil {
			return nil, err
		}
		ds, err := decodeDoubts(f, p)
		f.Close()
		if err != nil {
			return nil, err
		}
		out = append(out, ds...)
	}
	return out, nil
}

// decodeDoubts reads one doubts file. A last line cut short (the process
// was killed while writing it) is left out; any other bad line is an
// error naming it.
func decodeDoubts(r io.Reader, name string) ([]core.Doubt, error) {
	var out []core.Doubt
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	n := 0
	var bad error
	for sc.Scan() {
		n++
		if bad != nil {
			return nil, bad
		}
		var d core.Doubt
		if err := json.Unmarshal(sc.Bytes(), &d); err != nil {
			bad = fmt.Errorf("%s:%d: %w", name, n, err)
			continue
		}
		out = append(out, d)
	}
	return out, sc.Err()
}

// countDoubts counts the writes in doubt, each once (a worker reports it
// when the write returns and again when its Crash resolves it), against
// the writes storage committed; killed names the processes that were
// SIGKILLed, crashedAt the tick each claim's Crash read, and ended the
// claims whose round a traced line ended (one of core.ActionTable's
// EndsRound actions).
func countDoubts(ds []core.Doubt, stored []core.TraceEvent, killed map[string]bool, crashedAt map[core.Holder]uint64, ended map[core.Holder]bool) CommitUnknown {
	type key struct {
		proc   string
		thread core.ThreadID
		holder core.Holder
		tick   uint64
		action core.Action
	}
	type tickKey struct {
		thread core.ThreadID
		tick   uint64
	}
	logged := make(map[tickKey]core.TraceEvent, len(stored))
	for _, l := range stored {
		if !l.Read { // a kept read (the Plan a fused start went by) shares its write's tick
			logged[tickKey{l.Thread, l.Tick}] = l
		}
	}
	resolved := map[key]*core.Doubt{}
	var order []key
	for i := range ds {
		d := &ds[i]
		k := key{d.Proc, d.Thread, d.Holder, d.Tick, d.Action}
		r, seen := resolved[k]
		if !seen {
			order = append(order, k)
		}
		if d.Outcome != core.DoubtPending || r == nil {
			resolved[k] = d
		}
	}
	cu := CommitUnknown{ByAction: map[core.Action]int{}}
	for _, k := range order {
		d := resolved[k]
		cu.Events++
		cu.ByAction[k.action]++
		l, ok := logged[tickKey{k.thread, k.tick}]
		committed := ok && l.Holder == k.holder && l.Action == k.action
		if committed {
			cu.Committed++
		} else {
			cu.NotCommitted++
		}
		switch {
		case d.Outcome == core.DoubtPending && killed[k.proc]:
			cu.KilledFirst++
			continue
		case d.Outcome == core.DoubtPending && ended[k.holder]:
			cu.EndedLater++
			continue
		case d.Outcome == core.DoubtPending:
			cu.Unresolved++
			continue
		case d.Crashed:
			cu.Crashed++
		case (k.action == core.ActionRelease || k.action == core.ActionRunEnd) && d.Outcome == core.DoubtCommitted:
			cu.EndedByRelease++ // a Release, or a RunEnd whose transaction released (not Crashed)
		case k.action == core.ActionClaim && d.Outcome == core.DoubtNotCommitted:
			cu.NoRound++
		}
		if at, ok := crashedAt[k.holder]; ok && d.Crashed && d.Outcome == core.DoubtNotCommitted && committed && k.tick > at {
			cu.CommittedAfterCrash++ // not yet committed when the Crash read the log
			continue
		}
		if d.Outcome != core.DoubtUndecided && (d.Outcome == core.DoubtCommitted) != committed {
			cu.Disagreements++
		}
	}
	return cu
}

// Line is the report's text line for the writes in doubt.
func (cu CommitUnknown) Line() string {
	if cu.Events == 0 {
		return "none"
	}
	return fmt.Sprintf("%d writes (%s): %d committed, %d not; resolved by a Crash %d, by the Release's own line %d, no round (Claim not committed) %d, from storage's log after a SIGKILL took the process first %d, ended by a later line of their round %d, open when the process stopped %d; %d committed after their Crash read the log; %d resolutions disagree with storage's log",
		cu.Events, actionCounts(cu.ByAction), cu.Committed, cu.NotCommitted, cu.Crashed, cu.EndedByRelease, cu.NoRound, cu.KilledFirst, cu.EndedLater, cu.Unresolved, cu.CommittedAfterCrash, cu.Disagreements)
}
