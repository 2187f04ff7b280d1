package archive

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"sort"
	"sync"
	"time"

	"github.com/klauspost/compress/zstd"
	"github.com/nats-io/nats.go"
)

// Record is one E2A_AUDIT message as a batch keeps it: its sequence and
// store time in E2A_AUDIT, its subject there (a partition, e.g.
// e2a.audit.resp.3), its headers (Nats-Stream-Source names the original
// subject) and its payload.
type Record struct {
	Seq     uint64
	Time    time.Time
	Subject string
	Header  nats.Header
	Data    []byte
}

// size is what r adds to a batch before compression, near enough.
func (r *Record) size() int {
	n := 32 + len(r.Subject) + len(r.Data)
	for k, vs := range r.Header {
		for _, v := range vs {
			n += len(k) + len(v) + 4
		}
	}
	return n
}

// maxHeaderValues bounds the header values of a record (a NATS message's
// headers are a handful; Encode refuses more).
const maxHeaderValues = 1024

// formatV1 is the first byte of a batch's uncompressed form.
const formatV1 = 1

// MaxBatchBytes bounds a batch's uncompressed form: Decode refuses more
// (a batch is at most WithBatchBytes, ≤ 8 MiB, plus one record).
const MaxBatchBytes = 16 << 20

// MaxBatchRecords bounds the records of a batch: the archiver closes a
// batch at this many, Encode and Decode refuse more (so that a small
// corrupt batch cannot decode to millions of empty records).
const MaxBatchRecords = 10000

var (
	encOnce sync.Once
	enc     *zstd.Encoder
	dec     *zstd.Decoder
	encErr  error
)

func coders() (*zstd.Encoder, *zstd.Decoder, error) {
	encOnce.Do(func() {
		// A window as large as a default batch: the matches a batch has are
		// within it, and the encoder keeps twice its window in memory (the
		// default 8 MiB window held 16 MB of a running e2a dev's heap).
		enc, encErr = zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedDefault), zstd.WithEncoderConcurrency(1),
			zstd.WithWindowSize(DefaultBatchBytes))
		if encErr != nil {
			return
		}
		dec, encErr = zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxMemory(MaxBatchBytes),
			zstd.WithDecoderMaxWindow(MaxBatchBytes))
	})
	return enc, dec, encErr
}

// Encode returns the compressed form of recs (zstd of a versioned binary
// encoding: per record its sequence, time, subject, headers and payload).
func Encode(recs []Record) ([]byte, error) {
	var e encoder
	return e.encode(recs)
}

// encoder encodes batches, reusing its buffers from one to the next (the
// archiver's: one goroutine).
type encoder struct {
	raw     bytes.Buffer
	out     []byte
	keys    []string
	scratch [binary.MaxVarintLen64]byte
}

// encode is Encode; the result is valid until the next call.
func (c *encoder) encode(recs []Record) ([]byte, error) {
	z, _, err := coders()
	if err != nil {
		return nil, err
	}
	if len(recs) > MaxBatchRecords {
		return nil, fmt.Errorf("%w: %d records, at most %d", ErrBatchTooLarge, len(recs), MaxBatchRecords)
	}
	b := &c.raw
	b.Reset()
	b.WriteByte(formatV1)
	for i := range recs {
		if err := c.record(&recs[i]); err != nil {
			return nil, err
		}
	}
	if b.Len() > MaxBatchBytes {
		return nil, fmt.Errorf("%w: %d bytes before compression, at most %d", ErrBatchTooLarge, b.Len(), MaxBatchBytes)
	}
	c.out = z.EncodeAll(b.Bytes(), c.out[:0])
	return c.out, nil
}

func (c *encoder) put(v uint64) { c.raw.Write(binary.AppendUvarint(c.scratch[:0], v)) }

func (c *encoder) str(s string) {
	c.put(uint64(len(s)))
	c.raw.WriteString(s)
}

// record appends r's binary form.
func (c *encoder) record(r *Record) error {
	c.put(r.Seq)
	c.raw.Write(binary.AppendVarint(c.scratch[:0], r.Time.UnixNano()))
	c.str(r.Subject)
	c.keys = c.keys[:0]
	n := 0
	for k, vs := range r.Header {
		c.keys = append(c.keys, k)
		n += len(vs)
	}
	sort.Strings(c.keys)
	if n > maxHeaderValues {
		return fmt.Errorf("%w: record %d has %d header values, at most %d", ErrBatchTooLarge, r.Seq, n, maxHeaderValues)
	}
	c.put(uint64(n))
	for _, k := range c.keys {
		for _, v := range r.Header[k] {
			c.str(k)
			c.str(v)
		}
	}
	c.put(uint64(len(r.Data)))
	c.raw.Write(r.Data)
	return nil
}

// Decode returns the records of a batch Encode made. It returns
// ErrCorrupt for anything else (never a panic), and for a batch larger
// than MaxBatchBytes once decompressed.
func Decode(b []byte) ([]Record, error) {
	_, d, err := coders()
	if err != nil {
		return nil, err
	}
	raw, err := d.DecodeAll(b, nil)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	if len(raw) > MaxBatchBytes {
		return nil, fmt.Errorf("%w: %d bytes decompressed", ErrCorrupt, len(raw))
	}
	r := bytes.NewReader(raw)
	if v, err := r.ReadByte(); err != nil || v != formatV1 {
		return nil, fmt.Errorf("%w: unknown format", ErrCorrupt)
	}
	var out []Record
	for r.Len() > 0 {
		if len(out) == MaxBatchRecords {
			return nil, fmt.Errorf("%w: more than %d records", ErrCorrupt, MaxBatchRecords)
		}
		rec, err := decodeRecord(r)
		if err != nil {
			return nil, fmt.Errorf("%w: record %d: %v", ErrCorrupt, len(out), err)
		}
		out = append(out, rec)
	}
	return out, nil
}

func decodeRecord(r *bytes.Reader) (Record, error) {
	var rec Record
	var err error
	if rec.Seq, err = binary.ReadUvarint(r); err != nil {
		return rec, err
	}
	ns, err := binary.ReadVarint(r)
	if err != nil {
		return rec, err
	}
	rec.Time = time.Unix(0, ns)
	if rec.Subject, err = readString(r); err != nil {
		return rec, err
	}
	n, err := binary.ReadUvarint(r)
	if err != nil {
		return rec, err
	}
	if n > uint64(r.Len()) {
		return rec, io.ErrUnexpectedEOF
	}
	if n > maxHeaderValues {
		return rec, fmt.Errorf("%d header values, at most %d", n, maxHeaderValues)
	}
	if n > 0 {
		rec.Header = make(nats.Header, min(n, 16))
	}
	for range n {
		k, err := readString(r)
		if err != nil {
			return rec, err
		}
		v, err := readString(r)
		if err != nil {
			return rec, err
		}
		rec.Header[k] = append(rec.Header[k], v)
	}
	data, err := readBytes(r)
	rec.Data = data
	return rec, err
}

func readBytes(r *bytes.Reader) ([]byte, error) {
	n, err := binary.ReadUvarint(r)
	if err != nil {
		return nil, err
	}
	if n > uint64(r.Len()) {
		return nil, io.ErrUnexpectedEOF
	}
	b := make([]byte, n)
	_, err = io.ReadFull(r, b)
	return b, err
}

func readString(r *bytes.Reader) (string, error) {
	b, err := readBytes(r)
	return string(b), err
}
