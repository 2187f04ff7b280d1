package streams

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/e2a-pipeline/pipeline/subjects"
)

// msgGetResponse is the answer of $JS.API.STREAM.MSG.GET.<stream>.
type msgGetResponse struct {
	Message *struct {
		Subject string    `json:"subject"`
		Seq     uint64    `json:"seq"`
		Header  []byte    `json:"hdrs,omitempty"`
		Data    []byte    `json:"data,omitempty"`
		Time    time.Time `json:"time"`
	} `json:"message,omitempty"`
	Error *struct {
		Code        int    `json:"code"`
		ErrCode     int    `json:"err_code"`
		Description string `json:"description"`
	} `json:"error,omitempty"`
}

// errCodeNoMessage is JetStream's err_code for "no message found".
const errCodeNoMessage = 10037

// LeaderLastBySubject reads the last message stored under subject
// (wildcards allowed) in stream from the stream's leader
// ($JS.API.STREAM.MSG.GET), as [LastBySubject] reads it with a direct get.
// Unlike a direct get, which any replica may answer, its answer cannot
// lag: use it to confirm an absence a direct get reported (a follower may
// not hold yet a message the leader acknowledged). It costs a round trip
// through the JetStream API, so it is not the read path.
//
// ctx bounds the call (DefaultDirectGetTimeout when it has no deadline).
// It returns ErrNoMessages when no message is stored under subject,
// ErrDirectGet when the stream does not answer or answers with another
// error (an unknown stream; with nats.ErrNoResponders too when it has no
// leader, an election in progress),
// ErrInvalidOptions for an empty stream or subject, and the context's or
// the connection's error otherwise.
func LeaderLastBySubject(ctx context.Context, nc *nats.Conn, stream, subject string) (RawMsg, error) {
	body, _ := json.Marshal(struct {
		LastFor string `json:"last_by_subj"`
	}{subject})
	return leaderGet(ctx, nc, stream, subject, body, "msg get last")
}

// LeaderNextBySubject reads the first message stored under subject
// (wildcards allowed) in stream at or after stream sequence fromSeq (0
// means the start) from the stream's leader ($JS.API.STREAM.MSG.GET), as
// [DirectGetBatch] reads it with a direct get (batch 1). Like
// [LeaderLastBySubject] its answer cannot lag: use it to confirm that no
// message of subject lies between two sequences when a direct get
// answered by a replica behind may have left one out. It costs a round
// trip through the JetStream API.
//
// It returns the errors of [LeaderLastBySubject]; ErrNoMessages when no
// message of subject is stored at or after fromSeq.
func LeaderNextBySubject(ctx context.Context, nc *nats.Conn, stream, subject string, fromSeq uint64) (RawMsg, error) {
	body, _ := json.Marshal(struct {
		Seq     uint64 `json:"seq"`
		NextFor string `json:"next_by_subj"`
	}{max(fromSeq, 1), subject})
	return leaderGet(ctx, nc, stream, subject, body, "msg get next")
}

// LeaderFirstSince reads the first message stored in stream at or after
// time t from the stream's leader ($JS.API.STREAM.MSG.GET with a start
// time), whatever its subject. Like [LeaderLastBySubject] its answer
// cannot lag. It returns the errors of [LeaderLastBySubject];
// ErrNoMessages when no message was stored at or after t.
func LeaderFirstSince(ctx context.Context, nc *nats.Conn, stream string, t time.Time) (RawMsg, error) {
	body, _ := json.Marshal(struct {
		StartTime time.Time `json:"start_time"`
	}{t})
	return leaderGet(ctx, nc, stream, ">", body, "msg get since "+t.UTC().Format(time.RFC3339Nano))
}

// leaderGet sends one $JS.API.STREAM.MSG.GET request (body) for subject
// of stream and decodes its answer; what names the call in errors.
func leaderGet(ctx context.Context, nc *nats.Conn, stream, subject string, body []byte, what string) (RawMsg, error) {
	if err := checkStreamSubject(stream, subject); err != nil {
		return RawMsg{}, err
	}
	ctx, cancel := boundContext(ctx)
	defer cancel()
	m, err := nc.RequestWithContext(ctx, subjects.MsgGet(stream), body)
	if errors.Is(err, nats.ErrNoResponders) {
		return RawMsg{}, fmt.Errorf("%w: stream %s has no leader answering: %w", ErrDirectGet, stream, err)
	}
	if err != nil {
		return RawMsg{}, fmt.Errorf("%s %s %s: %w", what, stream, subject, err)
	}
	var resp msgGetResponse
	if err := json.Unmarshal(m.Data, &resp); err != nil {
		return RawMsg{}, fmt.Errorf("%w: %s %s %s: %v", ErrDirectGet, what, stream, subject, err)
	}
	switch {
	case resp.Error != nil && resp.Error.ErrCode == errCodeNoMessage:
		return RawMsg{}, fmt.Errorf("%w: %s %s", ErrNoMessages, stream, subject)
	case resp.Error != nil && resp.Error.Code == 503:
		// No leader (an election in progress): unavailable, retryable.
		return RawMsg{}, fmt.Errorf("%w: %s %s: %s: %w", ErrDirectGet, stream, subject, resp.Error.Description, nats.ErrNoResponders)
	case resp.Error != nil:
		return RawMsg{}, fmt.Errorf("%w: %s %s: %d %s", ErrDirectGet, stream, subject, resp.Error.Code, resp.Error.Description)
	case resp.Message == nil:
		return RawMsg{}, fmt.Errorf("%w: %s %s %s: an answer without a message", ErrDirectGet, what, stream, subject)
	}
	out := RawMsg{Subject: resp.Message.Subject, Seq: resp.Message.Seq, Time: resp.Message.Time, Data: resp.Message.Data}
	if len(resp.Message.Header) > 0 {
		if out.Header, err = nats.DecodeHeadersMsg(resp.Message.Header); err != nil {
			return RawMsg{}, fmt.Errorf("%w: %s %s %s: headers: %v", ErrDirectGet, what, stream, subject, err)
		}
	}
	return out, nil
}
