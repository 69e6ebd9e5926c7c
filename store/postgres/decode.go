package postgres

import (
	"encoding/binary"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/threadclaim/threadclaim/core"
)

// binaryResults asks the server for every column of a result in
// PostgreSQL's binary form, which binRow decodes.
var binaryResults = []int16{pgx.BinaryFormatCode}

// binRow decodes one row of a result sent in binary form by hand, column
// by column, each checked against the type the statement gives it: no
// scan plans, no boxed destinations, and a string allocated only for a
// text that is not empty. The first failure sticks (err), and every
// later column reads as zero.
type binRow struct {
	fds  []pgconn.FieldDescription
	vals [][]byte
	err  error
}

// col returns column i's bytes (nil: NULL), once it is of type oid and
// size bytes long (0: any length), in binary form.
func (b *binRow) col(i int, oid uint32, size int) []byte {
	if b.err != nil {
		return nil
	}
	switch {
	case i >= len(b.vals) || i >= len(b.fds):
		b.err = fmt.Errorf("postgres: a row of %d columns has no column %d", len(b.vals), i)
	case b.fds[i].DataTypeOID != oid || b.fds[i].Format != pgx.BinaryFormatCode:
		b.err = fmt.Errorf("postgres: column %d (%s) is of type %d in format %d, not %d in binary",
			i, b.fds[i].Name, b.fds[i].DataTypeOID, b.fds[i].Format, oid)
	case b.vals[i] != nil && size > 0 && len(b.vals[i]) != size:
		b.err = fmt.Errorf("postgres: column %d (%s) has %d bytes, not %d", i, b.fds[i].Name, len(b.vals[i]), size)
	default:
		return b.vals[i]
	}
	return nil
}

// null records column i's NULL as the row's failure, as a pgx scan into
// a value that cannot be NULL does.
func (b *binRow) null(i int) {
	if b.err == nil {
		b.err = fmt.Errorf("postgres: column %d (%s) is NULL", i, b.fds[i].Name)
	}
}

// int8 is column i, a bigint; null reports a NULL.
func (b *binRow) int8(i int) (v int64, null bool) {
	c := b.col(i, pgtype.Int8OID, 8)
	if c == nil {
		return 0, true
	}
	return int64(binary.BigEndian.Uint64(c)), false
}

// timestamptz is column i, a timestamptz, in UTC; null reports a NULL. The
// infinities, which the Store never writes, are failures.
func (b *binRow) timestamptz(i int) (v time.Time, null bool) {
	c := b.col(i, pgtype.TimestamptzOID, 8)
	if c == nil {
		return time.Time{}, true
	}
	const unixToY2K = 946684800 * 1000000 // pgMicros' inverse
	us := int64(binary.BigEndian.Uint64(c))
	if us == 1<<63-1 || us == -1<<63 {
		b.err = fmt.Errorf("postgres: column %d (%s) is an infinite time", i, b.fds[i].Name)
		return time.Time{}, true
	}
	return time.UnixMicro(us + unixToY2K).UTC(), false
}

// mustInt8, mustTime, boolean and text are columns that cannot be NULL.
func (b *binRow) mustInt8(i int) int64 {
	v, null := b.int8(i)
	if null {
		b.null(i)
	}
	return v
}

func (b *binRow) mustTime(i int) time.Time {
	v, null := b.timestamptz(i)
	if null {
		b.null(i)
	}
	return v
}

func (b *binRow) boolean(i int) bool {
	c := b.col(i, pgtype.BoolOID, 1)
	if c == nil {
		b.null(i)
		return false
	}
	return c[0] != 0
}

func (b *binRow) text(i int) string { return string(b.textBytes(i)) }

// textBytes is column i, a text that cannot be NULL, as its bytes.
func (b *binRow) textBytes(i int) []byte {
	c := b.col(i, pgtype.TextOID, 0)
	if c == nil {
		b.null(i)
	}
	return c
}

// kind is column i, an event's kind: one of core's, without allocating
// (any other is copied as it is, and fold refuses it).
func (b *binRow) kind(i int) string {
	c := b.textBytes(i)
	for _, k := range eventKinds {
		if string(c) == string(k) {
			return string(k)
		}
	}
	return string(c)
}

// eventKinds are the kinds of event a thread's log holds.
var eventKinds = [...]core.EventKind{
	core.MessagePosted, core.RunStarted, core.RunEnded, core.Asked, core.Answered,
	core.RunAbandoned, core.RunSteered, core.RunOutput, core.RunRefused,
}

// holderOr is column i, a holder: known itself when the column holds it
// (the claimant's, whose run the claim started), read without a copy.
func (b *binRow) holderOr(i int, known string) string {
	c := b.textBytes(i)
	if string(c) == known {
		return known
	}
	return string(c)
}

// readEvents appends to evs the rows of an event query (eventCols, in
// binary form), as scanEvents does with pgx's; a holder that is holder
// is not copied.
func readEvents(r *pgconn.ResultReader, evs []eventRow, holder string) ([]eventRow, error) {
	b := binRow{fds: r.FieldDescriptions()}
	for r.NextRow() {
		b.vals = r.Values()
		evs = append(evs, eventRow{
			seq: b.mustInt8(0), version: b.mustInt8(1), kind: b.kind(2), at: b.mustTime(3), message: b.mustInt8(4),
			text: b.text(5), run: b.mustInt8(6), request: b.mustInt8(7), holder: b.holderOr(8, holder),
		})
		if b.err != nil {
			return nil, b.err
		}
	}
	return evs, nil
}
