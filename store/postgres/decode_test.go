package postgres

import (
	"encoding/binary"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/stretchr/testify/require"
)

// TestBinRowAgreesWithPgx decodes values the server sends in binary form
// by hand (binRow) and through pgx's scan, and requires the same: the
// one-trip Claim reads its row and its events by hand, everything else
// through pgx, and fold compares what the two read.
func TestBinRowAgreesWithPgx(t *testing.T) {
	ctx := testCtx(t)
	conn := admin(t)
	times := []time.Time{
		{}, // the zero time: a cache with no event sends it
		time.Date(1970, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(1999, 12, 31, 23, 59, 59, 999999000, time.UTC), // before 2000: negative microseconds
		time.Date(2000, 1, 1, 0, 0, 0, 1000, time.UTC),
		time.Date(2026, 12, 5, 21, 48, 39, 123456000, time.UTC),
		time.Date(2026, 12, 5, 21, 48, 39, 123456000, time.FixedZone("", 5*3600)),
	}
	const q = `SELECT $1::bigint, $2::timestamptz, $3::text, $4::bool, NULL::bigint, NULL::timestamptz`
	for _, at := range times {
		for _, v := range []struct {
			i    int64
			text string
			b    bool
		}{{0, "", false}, {-1, "run_started", true}, {1 << 62, "héllo\x01", false}} {
			var (
				i      int64
				got    time.Time
				text   string
				b      bool
				nullI  *int64
				nullAt *time.Time
				args   = []any{v.i, at, v.text, v.b}
			)
			require.NoError(t, conn.QueryRow(ctx, q, args...).Scan(&i, &got, &text, &b, &nullI, &nullAt))

			sd, err := conn.Prepare(ctx, "", q)
			require.NoError(t, err)
			params := [][]byte{
				binary.BigEndian.AppendUint64(nil, uint64(v.i)),
				binary.BigEndian.AppendUint64(nil, uint64(pgMicros(at))),
				[]byte(v.text),
				{boolByte(v.b)},
			}
			fmts := []int16{pgx.BinaryFormatCode, pgx.BinaryFormatCode, pgx.BinaryFormatCode, pgx.BinaryFormatCode}
			rr := conn.PgConn().ExecPrepared(ctx, sd.Name, params, fmts, binaryResults)
			row := binRow{fds: rr.FieldDescriptions()}
			require.True(t, rr.NextRow())
			row.vals = rr.Values()
			require.Equal(t, i, row.mustInt8(0), "bigint %d", v.i)
			require.True(t, got.UTC().Equal(row.mustTime(1)), "timestamptz %v: pgx %v, by hand %v", at, got, row.mustTime(1))
			require.Equal(t, time.UTC, row.mustTime(1).Location())
			require.Equal(t, text, row.text(2))
			require.Equal(t, b, row.boolean(3))
			_, null := row.int8(4)
			require.True(t, null)
			_, null = row.timestamptz(5)
			require.True(t, null)
			require.NoError(t, row.err)
			require.Nil(t, nullI)
			require.Nil(t, nullAt)
			_, err = rr.Close()
			require.NoError(t, err)
		}
	}
}

func boolByte(b bool) byte {
	if b {
		return 1
	}
	return 0
}

// TestBinRowRefuses: a column of another type or format, of the wrong
// size, NULL where it cannot be, an infinite time, or missing, is the
// row's failure, and the first failure sticks. The one-trip Claim takes
// such a row's claim as of unknown outcome (sendClaim).
func TestBinRowRefuses(t *testing.T) {
	field := func(name string, oid uint32, format int16) pgconn.FieldDescription {
		return pgconn.FieldDescription{Name: name, DataTypeOID: oid, Format: format}
	}
	eight := make([]byte, 8)
	for _, c := range []struct {
		name string
		fd   pgconn.FieldDescription
		val  []byte
		read func(b *binRow)
		want string
	}{
		{"another type", field("seq", pgtype.Int4OID, pgx.BinaryFormatCode), eight, func(b *binRow) { b.mustInt8(0) }, "of type 23"},
		{"text format", field("seq", pgtype.Int8OID, pgx.TextFormatCode), []byte("12"), func(b *binRow) { b.mustInt8(0) }, "in format 0"},
		{"short bigint", field("seq", pgtype.Int8OID, pgx.BinaryFormatCode), eight[:4], func(b *binRow) { b.mustInt8(0) }, "has 4 bytes, not 8"},
		{"long bool", field("sound", pgtype.BoolOID, pgx.BinaryFormatCode), []byte{1, 0}, func(b *binRow) { b.boolean(0) }, "has 2 bytes, not 1"},
		{"NULL bigint", field("seq", pgtype.Int8OID, pgx.BinaryFormatCode), nil, func(b *binRow) { b.mustInt8(0) }, "(seq) is NULL"},
		{"NULL time", field("at", pgtype.TimestamptzOID, pgx.BinaryFormatCode), nil, func(b *binRow) { b.mustTime(0) }, "(at) is NULL"},
		{"NULL text", field("holder", pgtype.TextOID, pgx.BinaryFormatCode), nil, func(b *binRow) { b.text(0) }, "(holder) is NULL"},
		{"NULL kind", field("kind", pgtype.TextOID, pgx.BinaryFormatCode), nil, func(b *binRow) { b.kind(0) }, "(kind) is NULL"},
		{"NULL bool", field("sound", pgtype.BoolOID, pgx.BinaryFormatCode), nil, func(b *binRow) { b.boolean(0) }, "(sound) is NULL"},
		{"infinity", field("at", pgtype.TimestamptzOID, pgx.BinaryFormatCode), binary.BigEndian.AppendUint64(nil, 1<<63-1), func(b *binRow) { b.timestamptz(0) }, "infinite"},
		{"-infinity", field("at", pgtype.TimestamptzOID, pgx.BinaryFormatCode), binary.BigEndian.AppendUint64(nil, 1<<63), func(b *binRow) { b.mustTime(0) }, "infinite"},
		{"missing column", field("seq", pgtype.Int8OID, pgx.BinaryFormatCode), eight, func(b *binRow) { b.mustInt8(0); b.mustInt8(1) }, "no column 1"},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := binRow{fds: []pgconn.FieldDescription{c.fd}, vals: [][]byte{c.val}}
			c.read(&b)
			require.ErrorContains(t, b.err, c.want)
			first := b.err
			b.mustInt8(5)
			require.Equal(t, first, b.err, "the first failure sticks")
		})
	}
	// An event's kind other than core's is read as it is (fold refuses
	// it); core's are read without a copy.
	b := binRow{fds: []pgconn.FieldDescription{field("kind", pgtype.TextOID, pgx.BinaryFormatCode)}, vals: [][]byte{[]byte("run_exploded")}}
	require.Equal(t, "run_exploded", b.kind(0))
	for _, k := range eventKinds {
		b.vals[0] = []byte(k)
		require.Equal(t, string(k), b.kind(0))
		require.Zero(t, testing.AllocsPerRun(10, func() { b.kind(0) }), "kind %s", k)
	}
	require.NoError(t, b.err)
}
