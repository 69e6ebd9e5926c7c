package core

import "time"

// EventKind names what an event records.
type EventKind string

// The kinds of event in a thread's log.
const (
	MessagePosted EventKind = "message_posted" // a person posted a message
	RunStarted    EventKind = "run_started"    // a run started; consumes its prompt
	Asked         EventKind = "asked"          // a run opened a request
	Answered      EventKind = "answered"       // a reply answered a request; consumes the answer
	RunEnded      EventKind = "run_ended"      // a run ended
	RunAbandoned  EventKind = "run_abandoned"  // a later claim abandoned a run its holder left
	// RunSteered records that an active run was given a message as
	// steering (SteerRecord); it consumes the message. Not fenced: storage
	// refuses it once the run is abandoned.
	RunSteered EventKind = "run_steered"
	// RunOutput is a run's output, its answer to the person (Text),
	// written with its end in the same transaction and at the same
	// version. It is no message: nothing consumes it, so it can never
	// become a prompt.
	RunOutput EventKind = "run_output"
	// RunRefused is a notice that a run's start was refused: the claim
	// (Holder) had lost its lease when it would have started a run on
	// prompt Message (StartFenced). The refused start writes nothing of
	// the run; its transaction appends this notice instead, at the
	// thread's version as it stands (no write of the specification, so no
	// new version). It consumes nothing and changes none of the thread's
	// state.
	RunRefused EventKind = "run_refused"
)

// Event is one entry of a thread's append-only log. Which fields are set
// depends on Kind.
type Event struct {
	Version uint64    `json:"version"` // the thread's version this event's write made
	Kind    EventKind `json:"kind"`
	At      time.Time `json:"at"`                // the writer's clock
	Message Seq       `json:"message,omitempty"` // posted, prompt, or answer
	Text    string    `json:"text,omitempty"`    // a message's text, a request's question or a run's output
	Run     RunID     `json:"run,omitempty"`
	Request RequestID `json:"request,omitempty"`
	Holder  Holder    `json:"holder,omitempty"` // the claim that wrote a fenced event
}

// Consumes reports whether the event consumes a message.
func (e Event) Consumes() bool {
	return e.Kind == RunStarted || e.Kind == Answered || e.Kind == RunSteered
}
