package bench

import (
	"fmt"
	"image"
	"image/color"
	"image/png"
	"io"
	"math"
	"unicode"
)

// Chart dimensions.
const (
	chartW, chartH = 960, 600
	padL, padR     = 90, 30
	padT, padB     = 72, 110
	// The plot's size, inside the paddings.
	plotW, plotH = chartW - padL - padR, chartH - padT - padB
)

var (
	colWhite = color.RGBA{255, 255, 255, 255}
	colAxis  = color.RGBA{40, 40, 40, 255}
	colGrid  = color.RGBA{225, 225, 225, 255}
	colText  = color.RGBA{30, 30, 30, 255}
	colGoal  = color.RGBA{200, 30, 30, 255}
	colHalf  = color.RGBA{150, 150, 150, 255}
	series   = []struct {
		name string
		col  color.RGBA
		get  func(Phase) float64
		dash bool
	}{
		{"TTFF P50", color.RGBA{31, 119, 180, 255}, func(p Phase) float64 { return p.TTFF.P50 }, false},
		{"TTFF P90", color.RGBA{44, 160, 44, 255}, func(p Phase) float64 { return p.TTFF.P90 }, false},
		{"TTFF P99", color.RGBA{255, 127, 14, 255}, func(p Phase) float64 { return p.TTFF.P99 }, false},
		{"TTFF P99.9", color.RGBA{148, 103, 189, 255}, func(p Phase) float64 { return p.TTFF.P999 }, false},
		{"E2E P50", color.RGBA{31, 119, 180, 255}, func(p Phase) float64 { return p.E2E.P50 }, true},
		{"E2E P99", color.RGBA{255, 127, 14, 255}, func(p Phase) float64 { return p.E2E.P99 }, true},
	}
)

// WriteChart draws latency percentiles (log scale, ms) against offered load
// (requests/s) for the open-loop sweep (lines), and the closed-loop full
// load at its achieved rate (separate hollow markers: a closed loop slows
// its clients down instead of queueing, so it is not a point of the same
// curve), as a PNG.
func (r *Report) WriteChart(w io.Writer) error {
	pts := sortedPhases(r.Sweep)
	var full *Phase
	if r.Full.OK > 0 {
		f := r.Full
		f.OfferedRPS = f.RPS
		full = &f
	}
	img := image.NewRGBA(image.Rect(0, 0, chartW, chartH))
	fill(img, img.Bounds(), colWhite)
	title := fmt.Sprintf("E2A PIPELINE %s: LATENCY VS OFFERED LOAD (%d FRAMES/REQUEST, %d CPUS)", r.Config.Protocol, r.Config.Frames, r.Machine.NumCPU)
	drawText(img, 8, 10, title, colText, 2)
	if len(pts) == 0 && full == nil {
		drawText(img, padL, chartH/2, "NO DATA", colText, 3)
		return png.Encode(w, img)
	}
	all := pts
	if full != nil {
		all = append(append([]Phase(nil), pts...), *full)
	}
	sc := newChartScale(all)
	sc.drawAxes(img)
	// Target: TTFF p99 ≤ 10 ms at half load.
	dashedH(img, padL, padL+plotW, sc.y(10), colGoal)
	drawText(img, padL+6, sc.y(10)-18, "TARGET TTFF P99 10 MS AT HALF LOAD", colGoal, 2)
	if r.Half != nil {
		dashedV(img, sc.x(r.Half.OfferedRPS), padT, padT+plotH, colHalf)
	}
	sc.drawSeries(img, pts, full)
	drawLegend(img)
	return png.Encode(w, img)
}

// chartScale maps an offered load (requests/s, linear from 0 to xMax) and
// a latency (ms, log from 10^lo to 10^hi) to the chart's pixels.
type chartScale struct {
	xMax, lo, hi float64
}

// newChartScale fits the scales to the phases' loads and to their series'
// latencies, 1 to 10 ms at least.
func newChartScale(phases []Phase) chartScale {
	xMax := 0.0
	yMin, yMax := math.Inf(1), 0.0
	for _, p := range phases {
		xMax = math.Max(xMax, p.OfferedRPS)
		for _, s := range series {
			if v := s.get(p); v > 0 {
				yMin, yMax = math.Min(yMin, v), math.Max(yMax, v)
			}
		}
	}
	yMax = math.Max(yMax, 10)
	yMin = math.Min(yMin, 1)
	lo := math.Floor(math.Log10(math.Max(yMin, 0.01)))
	hi := math.Ceil(math.Log10(yMax))
	if hi <= lo {
		hi = lo + 1
	}
	return chartScale{xMax: niceCeil(xMax * 1.05), lo: lo, hi: hi}
}

// x is the pixel column of offered load v.
func (sc chartScale) x(v float64) int { return padL + int(v/sc.xMax*float64(plotW)) }

// y is the pixel row of latency v (ms), clamped to the axis's bottom.
func (sc chartScale) y(v float64) int {
	l := (math.Log10(math.Max(v, math.Pow(10, sc.lo))) - sc.lo) / (sc.hi - sc.lo)
	return padT + plotH - int(l*float64(plotH))
}

// drawAxes draws the grid (1-9 of each latency decade, fifths of the load
// axis), the axes and their labels.
func (sc chartScale) drawAxes(img *image.RGBA) {
	for e := sc.lo; e <= sc.hi; e++ {
		for k := 1; k <= 9; k++ {
			v := float64(k) * math.Pow(10, e)
			if math.Log10(v) > sc.hi {
				break
			}
			y := sc.y(v)
			hline(img, padL, padL+plotW, y, colGrid)
			if k == 1 {
				drawTextRight(img, padL-8, y-7, fmtMS(v), colText, 2)
			}
		}
	}
	for i := 0; i <= 5; i++ {
		v := sc.xMax * float64(i) / 5
		x := sc.x(v)
		vline(img, x, padT, padT+plotH, colGrid)
		drawTextCenter(img, x, padT+plotH+8, fmt.Sprintf("%.0f", v), colText, 2)
	}
	drawTextCenter(img, padL+plotW/2, padT+plotH+32, "OFFERED LOAD (REQUESTS/S, OPEN LOOP); HOLLOW = FULL LOAD, CLOSED LOOP", colText, 2)
	drawText(img, 8, padT-24, "LATENCY MS (LOG)", colText, 2)
	hline(img, padL, padL+plotW, padT+plotH, colAxis)
	vline(img, padL, padT, padT+plotH, colAxis)
}

// drawSeries draws each series over the open-loop points pts (markers
// joined by lines) and at the full load, when there is one (a hollow
// marker).
func (sc chartScale) drawSeries(img *image.RGBA, pts []Phase, full *Phase) {
	for _, s := range series {
		var prevX, prevY int
		first := true
		for _, p := range pts {
			v := s.get(p)
			if v <= 0 {
				continue
			}
			x, y := sc.x(p.OfferedRPS), sc.y(v)
			if !first {
				line(img, prevX, prevY, x, y, s.col, s.dash)
			}
			fill(img, image.Rect(x-3, y-3, x+4, y+4), s.col)
			prevX, prevY, first = x, y, false
		}
		if full != nil {
			if v := s.get(*full); v > 0 {
				hollow(img, sc.x(full.OfferedRPS), sc.y(v), 5, s.col)
			}
		}
	}
}

// drawLegend names the series below the plot, three to a row.
func drawLegend(img *image.RGBA) {
	lx, ly := padL, chartH-padB+58
	for i, s := range series {
		x := lx + (i%3)*260
		y := ly + (i/3)*22
		line(img, x, y+7, x+30, y+7, s.col, s.dash)
		line(img, x, y+8, x+30, y+8, s.col, s.dash)
		drawText(img, x+38, y, s.name, colText, 2)
	}
}

// hollow draws a hollow square of half-size h centred on (x, y).
func hollow(img *image.RGBA, x, y, h int, c color.RGBA) {
	for d := -h; d <= h; d++ {
		for _, t := range []int{0, 1} {
			img.SetRGBA(x+d, y-h+t, c)
			img.SetRGBA(x+d, y+h-t, c)
			img.SetRGBA(x-h+t, y+d, c)
			img.SetRGBA(x+h-t, y+d, c)
		}
	}
}

func niceCeil(v float64) float64 {
	if v <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 2.5, 5, 10} {
		if m*p >= v {
			return m * p
		}
	}
	return 10 * p
}

func fmtMS(v float64) string {
	if v < 1 {
		return fmt.Sprintf("%.2g", v)
	}
	return fmt.Sprintf("%.0f", v)
}

func fill(img *image.RGBA, r image.Rectangle, c color.RGBA) {
	r = r.Intersect(img.Bounds())
	for y := r.Min.Y; y < r.Max.Y; y++ {
		for x := r.Min.X; x < r.Max.X; x++ {
			img.SetRGBA(x, y, c)
		}
	}
}

func hline(img *image.RGBA, x0, x1, y int, c color.RGBA) {
	for x := x0; x <= x1; x++ {
		img.SetRGBA(x, y, c)
	}
}

func vline(img *image.RGBA, x, y0, y1 int, c color.RGBA) {
	for y := y0; y <= y1; y++ {
		img.SetRGBA(x, y, c)
	}
}

func dashedH(img *image.RGBA, x0, x1, y int, c color.RGBA) {
	for x := x0; x <= x1; x++ {
		if (x/6)%2 == 0 {
			img.SetRGBA(x, y, c)
			img.SetRGBA(x, y+1, c)
		}
	}
}

func dashedV(img *image.RGBA, x, y0, y1 int, c color.RGBA) {
	for y := y0; y <= y1; y++ {
		if (y/6)%2 == 0 {
			img.SetRGBA(x, y, c)
		}
	}
}

// line draws a 2-pixel line (Bresenham), dashed or solid.
func line(img *image.RGBA, x0, y0, x1, y1 int, c color.RGBA, dashed bool) {
	dx, dy := abs(x1-x0), -abs(y1-y0)
	sx, sy := sign(x1-x0), sign(y1-y0)
	e := dx + dy
	n := 0
	for {
		if !dashed || (n/8)%2 == 0 {
			img.SetRGBA(x0, y0, c)
			img.SetRGBA(x0, y0+1, c)
			img.SetRGBA(x0+1, y0, c)
		}
		n++
		if x0 == x1 && y0 == y1 {
			return
		}
		e2 := 2 * e
		if e2 >= dy {
			e += dy
			x0 += sx
		}
		if e2 <= dx {
			e += dx
			y0 += sy
		}
	}
}

func abs(v int) int {
	if v < 0 {
		return -v
	}
	return v
}

func sign(v int) int {
	switch {
	case v < 0:
		return -1
	case v > 0:
		return 1
	}
	return 0
}

// textWidth is the width in pixels of s drawn at scale.
func textWidth(s string, scale int) int { return len([]rune(s)) * 6 * scale }

func drawTextRight(img *image.RGBA, x, y int, s string, c color.RGBA, scale int) {
	drawText(img, x-textWidth(s, scale), y, s, c, scale)
}

func drawTextCenter(img *image.RGBA, x, y int, s string, c color.RGBA, scale int) {
	drawText(img, x-textWidth(s, scale)/2, y, s, c, scale)
}

// drawText draws s with the 5×7 font, its top left corner at (x, y).
func drawText(img *image.RGBA, x, y int, s string, c color.RGBA, scale int) {
	for _, r := range s {
		g, ok := glyphs[unicode.ToUpper(r)]
		if !ok {
			g = glyphs['_']
		}
		for row, bits := range g {
			for col, b := range bits {
				if b != '#' {
					continue
				}
				fill(img, image.Rect(x+col*scale, y+row*scale, x+(col+1)*scale, y+(row+1)*scale), c)
			}
		}
		x += 6 * scale
	}
}
