package idgen

import (
	"math/rand/v2"
	"sort"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/e2a-pipeline/pipeline/subjects"
)

// WhiteSpace lists every Unicode White_Space code point (what unicode.IsSpace
// reports), in order.
var WhiteSpace = runesOf(unicode.White_Space)

// Controls lists every control character (category Cc: C0, DEL and C1).
var Controls = runesOf(unicode.Cc)

// Invalid lists byte strings that are not valid UTF-8: stray continuation
// bytes, bytes never used by UTF-8, truncated sequences, overlong encodings
// and UTF-8-encoded surrogates.
var Invalid = []string{"\x80", "\xbf", "\xc0\xaf", "\xc1\xbf", "\xe0\x80\xaf", "\xed\xa0\x80", "\xed\xbf\xbf",
	"\xf4\x90\x80\x80", "\xf5", "\xfe", "\xff", "\xe6\x97", "\xf0\x9f\x9a"}

// category is one source of runes: a named general category, or the
// unassigned code points (Cn), or invalid UTF-8.
type category struct {
	name  string
	table *unicode.RangeTable // nil for Cn and invalid UTF-8
}

// Categories names every source the generator draws from: the two-letter
// Unicode general categories (Cc, Cf, Co, Cs, Ll, Lm, Lo, Lt, Lu, Mc, Me, Mn,
// Nd, Nl, No, Pc, Pd, Pe, Pf, Pi, Po, Ps, Sc, Sk, Sm, So, Zl, Zp, Zs), "Cn"
// (unassigned) and "invalid" (not UTF-8).
var Categories []string

var categories []category

func init() {
	for name, t := range unicode.Categories {
		if len(name) == 2 {
			categories = append(categories, category{name: name, table: t})
		}
	}
	if unicode.Categories["Cn"] == nil { // Go releases before 1.26 have no Cn table
		categories = append(categories, category{name: "Cn"})
	}
	categories = append(categories, category{name: "invalid"})
	sort.Slice(categories, func(i, j int) bool { return categories[i].name < categories[j].name })
	for _, c := range categories {
		Categories = append(Categories, c.name)
	}
}

func runesOf(t *unicode.RangeTable) []rune {
	var out []rune
	for _, r := range t.R16 {
		for c := rune(r.Lo); c <= rune(r.Hi); c += rune(r.Stride) {
			out = append(out, c)
		}
	}
	for _, r := range t.R32 {
		for c := rune(r.Lo); c <= rune(r.Hi); c += rune(r.Stride) {
			out = append(out, c)
		}
	}
	return out
}

// pick returns a random member of t.
func pick(rng *rand.Rand, t *unicode.RangeTable) rune {
	n := len(t.R16) + len(t.R32)
	i := rng.IntN(n)
	var lo, hi, stride rune
	if i < len(t.R16) {
		r := t.R16[i]
		lo, hi, stride = rune(r.Lo), rune(r.Hi), rune(r.Stride)
	} else {
		r := t.R32[i-len(t.R16)]
		lo, hi, stride = rune(r.Lo), rune(r.Hi), rune(r.Stride)
	}
	return lo + stride*rune(rng.IntN(int((hi-lo)/stride)+1))
}

// unassigned returns a code point in no general category (not a surrogate).
func unassigned(rng *rand.Rand) rune {
	for {
		c := rune(rng.IntN(unicode.MaxRune + 1))
		if (c < 0xd800 || c > 0xdfff) && !assigned(c) {
			return c
		}
	}
}

func assigned(c rune) bool {
	for _, cat := range categories {
		if cat.table != nil && cat.name != "Cn" && unicode.Is(cat.table, c) {
			return true
		}
	}
	return false
}

// piece returns one rune of cat, encoded; surrogates (Cs) and "invalid"
// give invalid UTF-8 (a surrogate cannot be encoded).
func piece(rng *rand.Rand, cat category) string {
	switch {
	case cat.name == "invalid":
		return Invalid[rng.IntN(len(Invalid))]
	case cat.table == nil && cat.name == "Cn":
		return string(unassigned(rng))
	case cat.name == "Cs":
		c := pick(rng, cat.table)
		return string([]byte{0xed, byte(0x80 | (c>>6)&0x3f), byte(0x80 | c&0x3f)})
	}
	return string(pick(rng, cat.table))
}

// length draws a byte length in 1..MaxIDLength+8, most often short, often
// at the edges (1, 63–65, 1023–1025).
func length(rng *rand.Rand) int {
	switch rng.IntN(10) {
	case 0:
		edges := []int{1, 2, 63, 64, 65, subjects.MaxIDLength - 1, subjects.MaxIDLength, subjects.MaxIDLength + 1}
		return edges[rng.IntN(len(edges))]
	case 1, 2:
		return 1 + rng.IntN(subjects.MaxIDLength+8)
	default:
		return 1 + rng.IntN(48)
	}
}

// One returns one generated id. Its bytes are drawn from one to three
// categories mixed with ASCII letters, its length from length(); then, each
// with some probability, white space is put at its start or end, a control
// character, a white space or an invalid byte sequence inside.
func One(rng *rand.Rand) string {
	n := length(rng)
	cats := make([]category, 1+rng.IntN(3))
	for i := range cats {
		cats[i] = categories[rng.IntN(len(categories))]
	}
	var b strings.Builder
	for b.Len() < n {
		if rng.IntN(4) == 0 {
			b.WriteByte("abcXYZ019-_.:"[rng.IntN(13)])
			continue
		}
		b.WriteString(piece(rng, cats[rng.IntN(len(cats))]))
	}
	s := b.String()
	if len(s) > n { // cut back to n bytes at a piece boundary when possible
		cut := n
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		if cut == 0 {
			cut = n
		}
		s = s[:cut]
	}
	if rng.IntN(8) == 0 {
		s = string(WhiteSpace[rng.IntN(len(WhiteSpace))]) + s
	}
	if rng.IntN(8) == 0 {
		s += string(WhiteSpace[rng.IntN(len(WhiteSpace))])
	}
	if rng.IntN(10) == 0 {
		s = insert(rng, s, string(Controls[rng.IntN(len(Controls))]))
	}
	if rng.IntN(10) == 0 {
		s = insert(rng, s, string(WhiteSpace[rng.IntN(len(WhiteSpace))]))
	}
	if rng.IntN(20) == 0 {
		s = insert(rng, s, Invalid[rng.IntN(len(Invalid))])
	}
	return s
}

// insert puts x inside s at a rune boundary (at the end when s has one
// rune or none).
func insert(rng *rand.Rand, s, x string) string {
	if len(s) < 2 {
		return s + x
	}
	i := 1 + rng.IntN(len(s)-1)
	for i < len(s) && !utf8.RuneStart(s[i]) {
		i++
	}
	return s[:i] + x + s[i:]
}

// Generate returns n ids from a generator seeded with seed.
func Generate(seed uint64, n int) []string {
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	out := make([]string, n)
	for i := range out {
		out[i] = One(rng)
	}
	return out
}

// EdgeCases returns the fixed ids every grammar test runs: each white space
// alone, leading, trailing and inside; each control character alone and
// inside; one rune of every category; the ids of the issue ("\t", "\n",
// "\r\r", "dup", "dup "); the length limits; invalid UTF-8.
func EdgeCases() []string {
	out := []string{"", "\t", "\n", "\r\r", "dup", "dup ", " dup", "d u p", "a:0", "a", "=", "=YWJj", ".", "*", ">",
		"a.b", "日本", "🚀", "e\u0301", "\u00e9", "\u200b", "a\u200bb", "\ufeffa", "a\u202eb", "\u2028", "a\u2029b",
		"a\u00a0b", "\u00a0a", "a\u3000", "\ufffd", "\uffff", "\U0010ffff", "\ue000",
		strings.Repeat("x", subjects.MaxIDLength), strings.Repeat("x", subjects.MaxIDLength+1),
		strings.Repeat("日", subjects.MaxIDLength/3) + "x", strings.Repeat(" ", subjects.MaxIDLength),
		"x" + strings.Repeat(" ", subjects.MaxIDLength-2) + "x"}
	for _, w := range WhiteSpace {
		s := string(w)
		out = append(out, s, s+"a", "a"+s, "a"+s+"b")
	}
	for _, c := range Controls {
		s := string(c)
		out = append(out, s, "a"+s+"b")
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for _, cat := range categories {
		out = append(out, "id-"+piece(rng, cat), piece(rng, cat))
	}
	for _, bad := range Invalid {
		out = append(out, bad, "a"+bad+"b")
	}
	return out
}
