package ingress_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"

	"github.com/e2a-pipeline/pipeline/agent"
	"github.com/e2a-pipeline/pipeline/agent/demo"
	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/ingress"
	"github.com/e2a-pipeline/pipeline/internal/pipetest"
)

// The stress of an input-required task's answers, CancelTask and GetTask
// (TestAnswersCancelGetStress): every run starts a task that asks for
// input, then sends it three blocking answers at once (each a new turn of
// the task: the first runs, the others queue behind it or are refused once
// the task is terminal), a CancelTask (stressModes: at once, first, after
// the first answer, or none) and a GetTask poller, and checks what every
// answer said against what ran (stressRun.check).

// stressModes are E2A_STRESS_MODE's values ("" or "all": each in turn).
var stressModes = []string{"together", "cancel-first", "cancel-late", "no-cancel"}

// stressSlow is the longest an answer or a cancel may take: the turns are
// immediate, and a wait for a publish that never comes (host.AwaitPublish,
// 6 s) is the failure looked for.
const stressSlow = 3 * time.Second

// stressLog is what the pool's handler and the clients saw in one run, each
// event with the time it happened (the handler's and the clients' clock are
// the test's).
type stressLog struct {
	mu       sync.Mutex
	starts   []time.Time // answer turns started by the handler
	returns  []time.Time // answer turns' handlers returned
	terminal []observed  // terminal states answered to a client
	refused  []time.Time // answers refused as to a terminal task
	// cancelling is the span of the CancelTask call (zero: none yet).
	cancelFrom, cancelTo time.Time
	cancelErr            error
	cancelState          a2a.TaskState
	latencies            []time.Duration // of the answers
	cancelTook           time.Duration
	problems             []string
	// underMark counts the answers refused while the cancel ran, with a
	// turn run after (the cancel's mark on the running turn, which stopped
	// nothing): failures, counted apart as well.
	underMark int
	// timeline is what happened, in order, for a failed run's report.
	timeline []stamped
}

// stamped is an event of a run's timeline.
type stamped struct {
	at   time.Time
	what string
}

// note adds what to the timeline (l's lock held).
func (l *stressLog) note(what string) {
	l.timeline = append(l.timeline, stamped{time.Now(), what})
}

// story is the timeline, each event's time from the first.
func (l *stressLog) story() string {
	slices.SortStableFunc(l.timeline, func(a, b stamped) int { return a.at.Compare(b.at) })
	var b strings.Builder
	for _, e := range l.timeline {
		fmt.Fprintf(&b, "\n\t\t%8.3fms %s", float64(e.at.Sub(l.timeline[0].at).Microseconds())/1000, e.what)
	}
	return b.String()
}

// observed is a terminal state a client was answered, and when.
type observed struct {
	what  string
	state a2a.TaskState
	at    time.Time
}

func (l *stressLog) add(f func(l *stressLog)) {
	l.mu.Lock()
	defer l.mu.Unlock()
	f(l)
}

func (l *stressLog) problem(format string, args ...any) {
	l.add(func(l *stressLog) { l.problems = append(l.problems, fmt.Sprintf(format, args...)) })
}

// stressHandler is the pool's handler of the stress: an AskInputPrefix
// message asks for input, any other (an answer) completes at once, its
// start and return logged on the run's log (logs, by task).
type stressHandler struct {
	mu   sync.Mutex
	logs map[string]*stressLog
}

func (h *stressHandler) log(taskID string) *stressLog {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.logs[taskID]
}

func (h *stressHandler) serve(ctx context.Context, env *e2a.Envelope, w agent.Writer) error {
	if strings.HasPrefix(demo.Text(env), demo.AskInputPrefix) {
		return agent.Interrupt(w, e2a.StateInputRequired, "Which city?")
	}
	l := h.log(env.TaskID)
	if l == nil {
		return ctx.Err()
	}
	l.add(func(l *stressLog) {
		l.starts = append(l.starts, time.Now())
		l.note(fmt.Sprintf("turn %s (%q) starts", env.RequestID, demo.Text(env)))
	})
	err := ctx.Err()
	// Its end, logged before the final frame is written.
	l.add(func(l *stressLog) {
		l.returns = append(l.returns, time.Now())
		l.note(fmt.Sprintf("turn %s returns %v", env.RequestID, err))
	})
	if err != nil {
		return err
	}
	return w.Complete(map[string]any{"content": "noted: " + demo.Text(env)})
}

// stressEnv reads E2A_STRESS_RUNS (default def) and E2A_STRESS_MODE.
func stressEnv(t *testing.T, def int) (runs int, modes []string) {
	runs = def
	if v := os.Getenv("E2A_STRESS_RUNS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("E2A_STRESS_RUNS=%q: want a positive count", v)
		}
		runs = n
	}
	switch m := os.Getenv("E2A_STRESS_MODE"); {
	case m == "" || m == "all":
		modes = stressModes
	case slices.Contains(stressModes, m):
		modes = []string{m}
	default:
		t.Fatalf("E2A_STRESS_MODE=%q: want one of %v or all", m, stressModes)
	}
	return runs, modes
}

// TestAnswersCancelGetStress runs E2A_STRESS_RUNS (default 100) rounds of
// three blocking answers to an input-required task sent at once, with a
// CancelTask as E2A_STRESS_MODE says (default: each mode in turn) and a
// GetTask poller, and fails on any run where: an answer or the cancel took
// longer than stressSlow; a client was told a terminal state that the task
// then left (a turn started or ran on after it, or the task ended in
// another); an answer was refused as to a terminal task and a turn then
// ran (while the CancelTask ran too: under its mark, also counted apart);
// CancelTask was refused while a turn then ran, or answered anything but
// canceled; the task did not end terminal. A failed run's report has its
// timeline.
func TestAnswersCancelGetStress(t *testing.T) {
	runs, modes := stressEnv(t, 100)
	pp := pipetest.Start(t)
	h := &stressHandler{logs: map[string]*stressLog{}}
	pp.Pool("demo", agent.HandlerFunc(h.serve))
	// The record's reads and appends, on a failed run's timeline.
	ingress.SetRecordReadHook(pp.Ingress, nil, func(id string, ids []string) {
		if l := h.log(id); l != nil {
			l.add(func(l *stressLog) { l.note(fmt.Sprintf("record read: %v", ids)) })
		}
	})
	ingress.SetAppendedHook(pp.Ingress, func(_, id, requestID string) {
		if l := h.log(id); l != nil {
			l.add(func(l *stressLog) { l.note(fmt.Sprintf("appended %s", requestID)) })
		}
	})
	// The answers that met a cancel's mark of a running turn, and awaited
	// its end (appendPastMark).
	var metMark atomic.Int64
	ingress.SetMarkMetHook(pp.Ingress, func(id, requestID, marked string) {
		metMark.Add(1)
		if l := h.log(id); l != nil {
			l.add(func(l *stressLog) { l.note(fmt.Sprintf("%s meets the mark of %s", requestID, marked)) })
		}
	})
	t.Cleanup(func() {
		ingress.SetRecordReadHook(pp.Ingress, nil, nil)
		ingress.SetAppendedHook(pp.Ingress, nil)
		ingress.SetMarkMetHook(pp.Ingress, nil)
	})
	p := &pipeline{url: pp.URL, nc: pp.NC, js: pp.JS, in: pp.Ingress}
	_, c := v1Client(t, p, a2a.TransportProtocolJSONRPC)

	failed := map[string]int{}
	underMark, answers := 0, 0
	var lat []time.Duration
	var cancelMax time.Duration
	for i := 0; i < runs; i++ {
		mode := modes[i%len(modes)]
		l := stressRun(t, c, h, mode)
		lat = append(lat, l.latencies...)
		cancelMax = max(cancelMax, l.cancelTook)
		underMark += l.underMark
		answers += len(l.latencies)
		if len(l.problems) > 0 {
			failed[mode]++
			t.Errorf("run %d (%s):\n\t%s\n\ttimeline:%s", i, mode, strings.Join(l.problems, "\n\t"), l.story())
		}
	}
	slices.Sort(lat)
	p99 := time.Duration(0)
	if len(lat) > 0 {
		p99 = lat[len(lat)*99/100]
	}
	t.Logf("%d runs, modes %v: failed %v; answers p99 %v, CancelTask max %v; %d of %d answers refused under a cancel's mark, then a turn ran; %d met a mark and awaited its turn's end",
		runs, modes, failed, p99, cancelMax, underMark, answers, metMark.Load())
}

// stressRun is one run of the stress in mode: its log, problems checked.
func stressRun(t *testing.T, c *a2aclient.Client, h *stressHandler, mode string) *stressLog {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	task := newInputTask(ctx, t, c)
	l := &stressLog{}
	h.mu.Lock()
	h.logs[string(task.ID)] = l
	h.mu.Unlock()
	defer func() {
		h.mu.Lock()
		delete(h.logs, string(task.ID))
		h.mu.Unlock()
	}()

	seen := func(what string, state a2a.TaskState) {
		if state.Terminal() {
			at := time.Now()
			l.add(func(l *stressLog) {
				l.terminal = append(l.terminal, observed{what, state, at})
				l.note(fmt.Sprintf("%s: %s", what, state))
			})
		}
	}
	cancelTask := func() {
		from := time.Now()
		l.add(func(l *stressLog) { l.cancelFrom = from })
		got, err := c.CancelTask(ctx, &a2a.CancelTaskRequest{ID: task.ID})
		to := time.Now()
		l.add(func(l *stressLog) {
			l.cancelTo, l.cancelErr, l.cancelTook = to, err, to.Sub(from)
			l.timeline = append(l.timeline, stamped{from, "CancelTask sent"}, stamped{to, fmt.Sprintf("CancelTask answered (%v)", err)})
			if got != nil {
				l.cancelState = got.Status.State
			}
		})
		if got != nil {
			seen("CancelTask", got.Status.State)
		}
	}
	var wg sync.WaitGroup
	firstAnswer := make(chan struct{})
	var once sync.Once
	answer := func(n int) {
		defer once.Do(func() { close(firstAnswer) })
		from := time.Now()
		l.add(func(l *stressLog) { l.note(fmt.Sprintf("answer %d sent", n)) })
		res, err := c.SendMessage(ctx, v1Answer(task, fmt.Sprintf("answer %d", n)))
		took := time.Since(from)
		l.add(func(l *stressLog) { l.latencies = append(l.latencies, took) })
		switch r := res.(type) {
		case nil:
			if errors.Is(err, a2a.ErrUnsupportedOperation) {
				at := time.Now()
				l.add(func(l *stressLog) {
					l.refused = append(l.refused, at)
					l.note(fmt.Sprintf("answer %d refused", n))
				})
			} else {
				l.problem("answer %d: %v", n, err)
			}
		case *a2a.Task:
			seen(fmt.Sprintf("answer %d", n), r.Status.State)
		default:
			l.problem("answer %d: %T, want the task", n, res)
		}
		if took > stressSlow {
			l.problem("answer %d took %v", n, took)
		}
	}
	stop := make(chan struct{})
	polled := make(chan struct{})
	go func() { // the GetTask poller
		defer close(polled)
		for {
			select {
			case <-stop:
				return
			default:
			}
			g, err := c.GetTask(ctx, &a2a.GetTaskRequest{ID: task.ID})
			if err != nil {
				l.problem("GetTask: %v", err)
				return
			}
			seen("GetTask", g.Status.State)
		}
	}()
	if mode == "cancel-first" {
		wg.Go(cancelTask)
	}
	for n := 1; n <= 3; n++ {
		wg.Go(func() { answer(n) })
	}
	switch mode {
	case "together":
		wg.Go(cancelTask)
	case "cancel-late":
		<-firstAnswer
		wg.Go(cancelTask)
	}
	wg.Wait()
	close(stop)
	<-polled
	final, err := c.GetTask(ctx, &a2a.GetTaskRequest{ID: task.ID})
	if err != nil {
		l.problem("GetTask at the end: %v", err)
		return l
	}
	l.add(func(l *stressLog) { l.check(mode, final.Status.State) })
	return l
}

// check judges the run (l's lock held), its task's state at the end final.
func (l *stressLog) check(mode string, final a2a.TaskState) {
	bad := func(format string, args ...any) { l.problems = append(l.problems, fmt.Sprintf(format, args...)) }
	if !final.Terminal() {
		bad("the task ended %s, not terminal", final)
	}
	last := time.Time{} // the last start or return of an answer's turn
	for _, ts := range append(slices.Clone(l.starts), l.returns...) {
		if ts.After(last) {
			last = ts
		}
	}
	for _, o := range l.terminal {
		if o.state != final {
			bad("%s answered %s; the task ended %s", o.what, o.state, final)
		}
		if last.After(o.at) {
			bad("%s answered %s %v before a turn's handler started or returned", o.what, o.state, last.Sub(o.at))
		}
	}
	for _, at := range l.refused {
		if !last.After(at) {
			continue
		}
		if !l.cancelFrom.IsZero() && !at.Before(l.cancelFrom) && !at.After(l.cancelTo) {
			// Refused while the CancelTask ran: under its mark of the
			// running turn (CancelRunning), which stopped nothing. Such an
			// answer awaits the marked turn's end now (appendPastMark).
			l.underMark++
		}
		bad("an answer was refused as to a terminal task %v before a turn's handler started or returned", last.Sub(at))
	}
	if mode == "no-cancel" {
		return
	}
	switch {
	case l.cancelTook > stressSlow:
		bad("CancelTask took %v", l.cancelTook)
	case l.cancelErr != nil && !errors.Is(l.cancelErr, a2a.ErrTaskNotCancelable):
		bad("CancelTask: %v", l.cancelErr)
	case l.cancelErr != nil && last.After(l.cancelTo):
		bad("CancelTask refused (%v) %v before a turn's handler started or returned", l.cancelErr, last.Sub(l.cancelTo))
	case l.cancelErr != nil && final != a2a.TaskStateCompleted:
		bad("CancelTask refused (%v); the task ended %s", l.cancelErr, final)
	case l.cancelErr == nil && l.cancelState != a2a.TaskStateCanceled:
		bad("CancelTask answered %s", l.cancelState)
	}
}
