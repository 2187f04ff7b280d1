package deploy

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"unicode"
)

// A small PromQL parser for the alerting rules' checks: it accepts the
// PromQL grammar the rules use (selectors with matchers and ranges,
// offsets, function calls, aggregations with by/without, binary
// operators with bool/on/ignoring/group_left/group_right, and/or/unless,
// parentheses, numbers, strings) and type-checks it as Prometheus does
// (a range vector only where a function takes one, set operators between
// instant vectors, comparisons between scalars only with bool), so that a
// typo, a missing range or an unbalanced expression fails the test.
// Prometheus's own parser (github.com/prometheus/prometheus/promql/parser)
// would add the prometheus/prometheus module and ~190 packages to the
// test build and upgrade x/net, grpc and prometheus/common module-wide.

// promType is the type of a PromQL expression.
type promType int

const (
	tScalar promType = iota
	tInstant
	tRange
	tString
)

func (t promType) String() string {
	return [...]string{"scalar", "instant vector", "range vector", "string"}[t]
}

// promSelector is one vector selector of an expression.
type promSelector struct {
	Metric string
	Labels []string // label names of its matchers
}

// promExpr is what the checks need from a parsed expression.
type promExpr struct {
	Type      promType
	Selectors []promSelector
	// Grouping lists, for each by/without clause, its labels and the
	// metrics of the aggregated expression.
	Grouping []promGrouping
}

type promGrouping struct {
	Labels  []string
	Metrics []string
}

// promFuncs maps the functions the parser knows to their argument types
// (a trailing -1 entry: the previous type repeats, optional) and result.
var promFuncs = map[string]struct {
	args   []promType
	minArg int
	result promType
}{
	"abs": {[]promType{tInstant}, 1, tInstant}, "absent": {[]promType{tInstant}, 1, tInstant},
	"absent_over_time": {[]promType{tRange}, 1, tInstant}, "ceil": {[]promType{tInstant}, 1, tInstant},
	"changes": {[]promType{tRange}, 1, tInstant}, "clamp": {[]promType{tInstant, tScalar, tScalar}, 3, tInstant},
	"clamp_max": {[]promType{tInstant, tScalar}, 2, tInstant}, "clamp_min": {[]promType{tInstant, tScalar}, 2, tInstant},
	"delta": {[]promType{tRange}, 1, tInstant}, "deriv": {[]promType{tRange}, 1, tInstant},
	"floor": {[]promType{tInstant}, 1, tInstant}, "histogram_quantile": {[]promType{tScalar, tInstant}, 2, tInstant},
	"idelta": {[]promType{tRange}, 1, tInstant}, "increase": {[]promType{tRange}, 1, tInstant},
	"irate": {[]promType{tRange}, 1, tInstant}, "predict_linear": {[]promType{tRange, tScalar}, 2, tInstant},
	"rate": {[]promType{tRange}, 1, tInstant}, "resets": {[]promType{tRange}, 1, tInstant},
	"round": {[]promType{tInstant, tScalar}, 1, tInstant}, "scalar": {[]promType{tInstant}, 1, tScalar},
	"time": {nil, 0, tScalar}, "timestamp": {[]promType{tInstant}, 1, tInstant},
	"vector":        {[]promType{tScalar}, 1, tInstant},
	"avg_over_time": {[]promType{tRange}, 1, tInstant}, "min_over_time": {[]promType{tRange}, 1, tInstant},
	"max_over_time": {[]promType{tRange}, 1, tInstant}, "sum_over_time": {[]promType{tRange}, 1, tInstant},
	"count_over_time": {[]promType{tRange}, 1, tInstant}, "last_over_time": {[]promType{tRange}, 1, tInstant},
	"quantile_over_time": {[]promType{tScalar, tRange}, 2, tInstant},
}

// promAggregations are the aggregation operators; those in promAggParam
// take a parameter first.
var (
	promAggregations = map[string]bool{"sum": true, "min": true, "max": true, "avg": true, "count": true, "stddev": true,
		"stdvar": true, "group": true, "topk": true, "bottomk": true, "quantile": true, "count_values": true}
	promAggParam = map[string]promType{"topk": tScalar, "bottomk": tScalar, "quantile": tScalar, "count_values": tString}
)

// Binary operators by precedence, lowest first.
var promBinOps = [][]string{{"or"}, {"and", "unless"}, {"==", "!=", "<=", "<", ">=", ">"}, {"+", "-"}, {"*", "/", "%", "atan2"}, {"^"}}

type promToken struct {
	kind string // ident, number, duration, string, op, eof
	text string
}

var (
	promNumber   = regexp.MustCompile(`^(?:0[xX][0-9a-fA-F]+|(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|[iI]nf|NaN)`)
	promDuration = regexp.MustCompile(`^(?:[0-9]+(?:ms|s|m|h|d|w|y))+`)
	promOps      = []string{"==", "!=", "<=", ">=", "=~", "!~", "+", "-", "*", "/", "%", "^", "<", ">", "=", ",", "(", ")", "{", "}", "[", "]", ":"}
)

func lexPromQL(s string) ([]promToken, error) {
	var out []promToken
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			i++
		case c == '#':
			for i < len(s) && s[i] != '\n' {
				i++
			}
		case c == '"' || c == '\'' || c == '`':
			j := i + 1
			for j < len(s) && s[j] != c {
				if s[j] == '\\' && c != '`' {
					j++
				}
				j++
			}
			if j >= len(s) {
				return nil, fmt.Errorf("unterminated string at %d", i)
			}
			text := s[i : j+1]
			if c != '`' {
				if c == '\'' {
					text = `"` + strings.ReplaceAll(s[i+1:j], `"`, `\"`) + `"`
				}
				u, err := strconv.Unquote(text)
				if err != nil {
					return nil, fmt.Errorf("string %s: %v", s[i:j+1], err)
				}
				text = u
			} else {
				text = s[i+1 : j]
			}
			out = append(out, promToken{"string", text})
			i = j + 1
		case promDuration.MatchString(s[i:]) && !(i+len(promDuration.FindString(s[i:])) < len(s) && isIdentChar(rune(s[i+len(promDuration.FindString(s[i:]))]))):
			d := promDuration.FindString(s[i:])
			out = append(out, promToken{"duration", d})
			i += len(d)
		case unicode.IsDigit(rune(c)) || c == '.' && i+1 < len(s) && unicode.IsDigit(rune(s[i+1])):
			n := promNumber.FindString(s[i:])
			out = append(out, promToken{"number", n})
			i += len(n)
		case isIdentChar(rune(c)):
			j := i
			for j < len(s) && (isIdentChar(rune(s[j])) || s[j] == ':') {
				j++
			}
			out = append(out, promToken{"ident", s[i:j]})
			i = j
		default:
			found := false
			for _, op := range promOps {
				if strings.HasPrefix(s[i:], op) {
					out = append(out, promToken{"op", op})
					i += len(op)
					found = true
					break
				}
			}
			if !found {
				return nil, fmt.Errorf("unexpected %q at %d", c, i)
			}
		}
	}
	return append(out, promToken{"eof", ""}), nil
}

func isIdentChar(r rune) bool {
	return r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9'
}

type promParser struct {
	toks []promToken
	pos  int
	out  *promExpr
}

// parsePromQL parses and type-checks a PromQL expression.
func parsePromQL(s string) (*promExpr, error) {
	toks, err := lexPromQL(s)
	if err != nil {
		return nil, err
	}
	p := &promParser{toks: toks, out: &promExpr{}}
	t, err := p.expr(0)
	if err != nil {
		return nil, err
	}
	if p.peek().kind != "eof" {
		return nil, fmt.Errorf("unexpected %q after the expression", p.peek().text)
	}
	p.out.Type = t
	return p.out, nil
}

func (p *promParser) peek() promToken { return p.toks[p.pos] }
func (p *promParser) next() promToken { t := p.toks[p.pos]; p.pos++; return t }

func (p *promParser) accept(kind, text string) bool {
	if t := p.peek(); t.kind == kind && t.text == text {
		p.pos++
		return true
	}
	return false
}

func (p *promParser) expect(kind, text string) error {
	if !p.accept(kind, text) {
		return fmt.Errorf("expected %q, got %q", text, p.peek().text)
	}
	return nil
}

// binOp returns the operator at the current position if it has
// precedence level prec.
func (p *promParser) binOp(prec int) (string, bool) {
	t := p.peek()
	if t.kind != "op" && t.kind != "ident" {
		return "", false
	}
	for _, op := range promBinOps[prec] {
		if t.text == op {
			return op, true
		}
	}
	return "", false
}

func (p *promParser) expr(prec int) (promType, error) {
	if prec == len(promBinOps) {
		return p.unary()
	}
	left, err := p.expr(prec + 1)
	if err != nil {
		return 0, err
	}
	for {
		op, ok := p.binOp(prec)
		if !ok {
			return left, nil
		}
		p.pos++
		isCmp := prec == 2
		isSet := prec <= 1
		boolMod := false
		if isCmp && p.accept("ident", "bool") {
			boolMod = true
		}
		for _, kw := range []string{"on", "ignoring"} {
			if p.accept("ident", kw) {
				if _, err := p.labelList(); err != nil {
					return 0, err
				}
			}
		}
		for _, kw := range []string{"group_left", "group_right"} {
			if p.accept("ident", kw) && p.peek().text == "(" {
				if _, err := p.labelList(); err != nil {
					return 0, err
				}
			}
		}
		var right promType
		if op == "^" { // right associative
			right, err = p.expr(prec)
		} else {
			right, err = p.expr(prec + 1)
		}
		if err != nil {
			return 0, err
		}
		if left == tRange || right == tRange || left == tString || right == tString {
			return 0, fmt.Errorf("operator %s between %v and %v", op, left, right)
		}
		switch {
		case isSet:
			if left != tInstant || right != tInstant {
				return 0, fmt.Errorf("set operator %s needs instant vectors, got %v and %v", op, left, right)
			}
		case isCmp && left == tScalar && right == tScalar && !boolMod:
			return 0, fmt.Errorf("comparison %s between scalars needs bool", op)
		}
		if left == tScalar && right == tScalar {
			left = tScalar
		} else {
			left = tInstant
		}
	}
}

func (p *promParser) unary() (promType, error) {
	if p.accept("op", "-") || p.accept("op", "+") {
		t, err := p.unary()
		if err != nil {
			return 0, err
		}
		if t != tScalar && t != tInstant {
			return 0, fmt.Errorf("unary sign on %v", t)
		}
		return t, nil
	}
	t, err := p.primary()
	if err != nil {
		return 0, err
	}
	if p.accept("ident", "offset") {
		neg := p.accept("op", "-")
		_ = neg
		if d := p.next(); d.kind != "duration" {
			return 0, fmt.Errorf("offset needs a duration, got %q", d.text)
		}
	}
	return t, nil
}

func (p *promParser) primary() (promType, error) {
	t := p.next()
	switch t.kind {
	case "number":
		return tScalar, nil
	case "string":
		return tString, nil
	case "op":
		switch t.text {
		case "(":
			inner, err := p.expr(0)
			if err != nil {
				return 0, err
			}
			if err := p.expect("op", ")"); err != nil {
				return 0, err
			}
			return inner, nil
		case "{":
			p.pos--
			return p.selector("")
		}
	case "ident":
		if promAggregations[t.text] {
			return p.aggregation(t.text)
		}
		if f, ok := promFuncs[t.text]; ok && p.peek().text == "(" {
			p.pos++
			var args []promType
			for p.peek().text != ")" {
				a, err := p.expr(0)
				if err != nil {
					return 0, err
				}
				args = append(args, a)
				if !p.accept("op", ",") {
					break
				}
			}
			if err := p.expect("op", ")"); err != nil {
				return 0, err
			}
			if len(args) < f.minArg || len(args) > len(f.args) {
				return 0, fmt.Errorf("%s takes %d..%d arguments, got %d", t.text, f.minArg, len(f.args), len(args))
			}
			for i, a := range args {
				if a != f.args[i] {
					return 0, fmt.Errorf("%s argument %d: want %v, got %v", t.text, i+1, f.args[i], a)
				}
			}
			return f.result, nil
		}
		if p.peek().text == "(" {
			return 0, fmt.Errorf("unknown function %s", t.text)
		}
		switch t.text {
		case "bool", "by", "without", "on", "ignoring", "group_left", "group_right", "offset", "and", "or", "unless":
			return 0, fmt.Errorf("keyword %s where an expression is expected", t.text)
		}
		return p.selector(t.text)
	}
	return 0, fmt.Errorf("unexpected %q", t.text)
}

// selector parses {matchers} and [range] after an optional metric name.
func (p *promParser) selector(metric string) (promType, error) {
	sel := promSelector{Metric: metric}
	if p.accept("op", "{") {
		for !p.accept("op", "}") {
			name := p.next()
			if name.kind != "ident" {
				return 0, fmt.Errorf("label name expected in %s{…}, got %q", metric, name.text)
			}
			op := p.next()
			if op.kind != "op" || (op.text != "=" && op.text != "!=" && op.text != "=~" && op.text != "!~") {
				return 0, fmt.Errorf("matcher operator expected after %s, got %q", name.text, op.text)
			}
			val := p.next()
			if val.kind != "string" {
				return 0, fmt.Errorf("matcher value of %s must be a string, got %q", name.text, val.text)
			}
			if op.text == "=~" || op.text == "!~" {
				if _, err := regexp.Compile("^(?:" + val.text + ")$"); err != nil {
					return 0, fmt.Errorf("matcher %s%s%q: %v", name.text, op.text, val.text, err)
				}
			}
			sel.Labels = append(sel.Labels, name.text)
			if !p.accept("op", ",") {
				if err := p.expect("op", "}"); err != nil {
					return 0, err
				}
				break
			}
		}
	}
	if metric == "" && len(sel.Labels) == 0 {
		return 0, fmt.Errorf("empty selector")
	}
	p.out.Selectors = append(p.out.Selectors, sel)
	if p.accept("op", "[") {
		d := p.next()
		if d.kind != "duration" {
			return 0, fmt.Errorf("range of %s: duration expected, got %q", metric, d.text)
		}
		if err := p.expect("op", "]"); err != nil {
			return 0, err
		}
		return tRange, nil
	}
	return tInstant, nil
}

func (p *promParser) labelList() ([]string, error) {
	if err := p.expect("op", "("); err != nil {
		return nil, err
	}
	var out []string
	for !p.accept("op", ")") {
		l := p.next()
		if l.kind != "ident" {
			return nil, fmt.Errorf("label name expected, got %q", l.text)
		}
		out = append(out, l.text)
		if !p.accept("op", ",") {
			if err := p.expect("op", ")"); err != nil {
				return nil, err
			}
			break
		}
	}
	return out, nil
}

func (p *promParser) aggregation(op string) (promType, error) {
	var grouping []string
	hasGrouping := false
	if p.accept("ident", "by") || p.accept("ident", "without") {
		l, err := p.labelList()
		if err != nil {
			return 0, err
		}
		grouping, hasGrouping = l, true
	}
	if err := p.expect("op", "("); err != nil {
		return 0, err
	}
	if want, ok := promAggParam[op]; ok {
		t, err := p.expr(0)
		if err != nil {
			return 0, err
		}
		if t != want {
			return 0, fmt.Errorf("%s parameter: want %v, got %v", op, want, t)
		}
		if err := p.expect("op", ","); err != nil {
			return 0, err
		}
	}
	first := len(p.out.Selectors)
	t, err := p.expr(0)
	if err != nil {
		return 0, err
	}
	if t != tInstant {
		return 0, fmt.Errorf("%s over %v", op, t)
	}
	if err := p.expect("op", ")"); err != nil {
		return 0, err
	}
	if !hasGrouping && (p.accept("ident", "by") || p.accept("ident", "without")) {
		l, err := p.labelList()
		if err != nil {
			return 0, err
		}
		grouping, hasGrouping = l, true
	}
	if hasGrouping {
		g := promGrouping{Labels: grouping}
		for _, s := range p.out.Selectors[first:] {
			g.Metrics = append(g.Metrics, s.Metric)
		}
		p.out.Grouping = append(p.out.Grouping, g)
	}
	return tInstant, nil
}
