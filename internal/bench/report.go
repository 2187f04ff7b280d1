package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"text/tabwriter"
)

// WriteFile creates (or truncates) the file at path, writes it with write
// (a chart: Report.WriteChart; a profile) and closes it; it returns the
// first error of the three.
func WriteFile(path string, write func(io.Writer) error) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := write(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// WriteJSON writes the report as indented JSON.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// WriteText writes the report for people.
func (r *Report) WriteText(w io.Writer) error {
	var b strings.Builder
	c := r.Config
	where := "in process (embedded JetStream, every stage, HTTP on loopback)"
	if !r.InProc {
		where = "target " + c.Target
	}
	fmt.Fprintf(&b, "e2a bench — %s\n", where)
	m := r.Machine
	fmt.Fprintf(&b, "machine: %s, %d CPUs (GOMAXPROCS %d), %s/%s, %s\n", m.CPU, m.NumCPU, m.GOMAXPROCS, m.OS, m.Arch, m.Go)
	fmt.Fprintf(&b, "protocol %s, %d requests, %d clients, %d frames/request, %d B/frame, agent delay %v", c.Protocol, c.Requests, c.Concurrency, c.Frames, c.FrameBytes, c.Delay)
	if r.InProc {
		fmt.Fprintf(&b, ", agent concurrency %d, split conns %v, tcp %v, sync always %v, console %v, archive %v", c.AgentConcurrency, c.SplitConns, c.TCP, c.SyncAlways, c.Console, c.Archive)
		if c.NoAudit {
			b.WriteString(", WITHOUT E2A_AUDIT (experiment)")
		}
	}
	b.WriteString("\n")
	if r.MemoryWarmup != nil {
		b.WriteString(r.MemoryWarmup.String() + "\n")
	}
	b.WriteString("\n")
	if bl := r.Baseline; bl != nil {
		fmt.Fprintf(&b, "raw JetStream async publish (baseline): %.0f msgs/s  (%d × %d B, %d pending max, %.2f s)\n",
			bl.MsgsPerSec, bl.Messages, bl.MsgBytes, bl.Window, bl.Seconds)
	} else {
		b.WriteString("raw JetStream async publish (baseline): not measured (give --nats with --target)\n")
	}
	f := r.Full
	fmt.Fprintf(&b, "full load: %.0f requests/s, %.0f frames/s", f.RPS, f.FramesPerSec)
	if r.Ratio > 0 {
		fmt.Fprintf(&b, " = %.3f × the raw publish rate", r.Ratio)
	}
	fmt.Fprintf(&b, "\n  %d ok, %d failed, %d sequence errors, %.2f s; %.0f allocs/request, %.1f KiB/request, %.3f ms CPU/request, %.2f cores busy (whole process)\n\n",
		f.OK, f.Failed, f.SequenceErrors, f.Seconds, f.AllocsPerRequest, f.BytesPerRequest/1024, f.CPUPerRequest, f.CPUUse)
	if s := f.Allocs; s != nil {
		s.write(&b, "allocs/request", "%.0f", 0.5)
	}
	if s := f.CPU; s != nil {
		s.write(&b, "CPU ms/request", "%.3f", 0.0005)
	}
	if f.Allocs != nil || f.CPU != nil {
		b.WriteString("\n")
	}

	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "phase\tload\treq/s\tframes/s\tok\tfailed\tseq err\tTTFF p50\tp90\tp99\tp99.9\tE2E p50\tp90\tp99\tp99.9\tallocs/req\tCPU ms/req\tGC\t")
	row := func(p Phase) {
		load := fmt.Sprintf("%d clients", p.Concurrency)
		if p.Mode == "open" {
			load = fmt.Sprintf("%.0f req/s", p.OfferedRPS)
		}
		fmt.Fprintf(tw, "%s\t%s\t%.0f\t%.0f\t%d\t%d\t%d\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f\t%.0f\t%.3f\t%d\t\n",
			p.Name, load, p.RPS, p.FramesPerSec, p.OK, p.Failed, p.SequenceErrors,
			p.TTFF.P50, p.TTFF.P90, p.TTFF.P99, p.TTFF.P999, p.E2E.P50, p.E2E.P90, p.E2E.P99, p.E2E.P999, p.AllocsPerRequest, p.CPUPerRequest, p.GCCycles)
	}
	row(f)
	for _, p := range sortedPhases(r.Sweep) {
		row(p)
	}
	if r.Replay != nil {
		row(*r.Replay)
	}
	if r.ReplayEngine != nil {
		row(*r.ReplayEngine)
	}
	tw.Flush()
	b.WriteString("(latencies in ms; open-loop latencies count from the instant each request was due; replay rows: TTFF = first frame, E2E = whole stream)\n\n")

	var errs []string
	phases := append(append([]Phase{f}, r.Sweep...), deref(r.Replay)...)
	for _, p := range append(phases, deref(r.ReplayEngine)...) {
		keys := make([]string, 0, len(p.Errors))
		for k := range p.Errors {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			errs = append(errs, fmt.Sprintf("  %s: %d × %s", p.Name, p.Errors[k], k))
		}
	}
	if len(errs) > 0 {
		b.WriteString("errors:\n" + strings.Join(errs, "\n") + "\n\n")
	}
	b.WriteString("targets (the first design brief's, docs/performance.md; 2 cores, 8 frames/request):\n")
	for _, t := range r.Targets {
		mark := "MET  "
		if !t.Met {
			mark = "SHORT"
		}
		fmt.Fprintf(&b, "  %s %-42s want %-8s got %.2f %s", mark, t.What, t.Want, t.Got, t.Unit)
		if t.Notes != "" {
			fmt.Fprintf(&b, "  (%s)", t.Notes)
		}
		b.WriteString("\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func deref(p *Phase) []Phase {
	if p == nil {
		return nil
	}
	return []Phase{*p}
}
