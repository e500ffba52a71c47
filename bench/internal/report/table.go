// Package report turns the harness's measurements into what people read:
// one table of medians with the ratios of snodod to every other server,
// the goals marked met or not, docs/bench.md and a chart.
package report

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/snodod/snodod/bench/internal/stats"
)

// Table is rows of figures by server. The first column is the subject
// (snodod); every other column's cells also show the subject's value
// divided by that column's.
type Table struct {
	Columns []string
	Rows    []Row
}

// Row is one line of a Table.
type Row struct {
	Label string
	// Values holds one figure per column; NaN is "n/a". A row without
	// Values shows Text instead.
	Values []float64
	// Text holds one cell per column for rows of words.
	Text []string
	// Format renders a figure; nil is Number.
	Format func(float64) string
	// Goal is what the issue asks of this row, and whether it is met.
	Goal string
	// NoRatio leaves the ratios out (for figures only the subject has).
	NoRatio bool
}

// Section is a row that only names what follows.
func Section(title string) Row { return Row{Label: "**" + title + "**"} }

// Cell renders row r's cell in column j.
func (r Row) Cell(j int) string {
	if r.Values == nil {
		if j < len(r.Text) {
			return r.Text[j]
		}
		return ""
	}
	format := r.Format
	if format == nil {
		format = Number
	}
	v := r.Values[j]
	switch {
	case math.IsNaN(v) && r.NoRatio && j > 0:
		return "–" // a figure only the subject has
	case math.IsNaN(v):
		return "n/a"
	}
	s := format(v)
	if j == 0 || r.NoRatio {
		return s
	}
	ratio := stats.Ratio(r.Values[0], v)
	if math.IsNaN(ratio) {
		return s
	}
	return s + " (" + Ratio(ratio) + ")"
}

// Markdown renders the table, with a goal column when any row has a goal.
func (t *Table) Markdown() string {
	goals := false
	for _, r := range t.Rows {
		goals = goals || r.Goal != ""
	}
	var b strings.Builder
	head := append([]string{""}, t.Columns...)
	if goals {
		head = append(head, "goal")
	}
	line := func(cells []string) {
		b.WriteString("| " + strings.Join(cells, " | ") + " |\n")
	}
	line(head)
	sep := make([]string, len(head))
	for i := range sep {
		sep[i] = "---"
		if i > 0 && i <= len(t.Columns) {
			sep[i] = "---:"
		}
	}
	line(sep)
	for _, r := range t.Rows {
		cells := []string{r.Label}
		for j := range t.Columns {
			cells = append(cells, strings.ReplaceAll(r.Cell(j), "|", "\\|"))
		}
		if goals {
			cells = append(cells, r.Goal)
		}
		line(cells)
	}
	return b.String()
}

// Number renders a figure with three significant digits at most after
// the point and thousands separated by commas: 5.71, 57.1, 571, 5,710.
func Number(v float64) string {
	a := math.Abs(v)
	switch {
	case math.IsNaN(v):
		return "n/a"
	case a == 0:
		return "0"
	case a < 10:
		return strconv.FormatFloat(v, 'f', 2, 64)
	case a < 100:
		return strconv.FormatFloat(v, 'f', 1, 64)
	}
	return thousands(int64(math.Round(v)))
}

// Count renders a count with thousands separators: 10,000.
func Count(n int) string { return thousands(int64(n)) }

func thousands(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

// Ratio renders a ratio: 0.81×, 1.5×, 12×.
func Ratio(r float64) string {
	switch {
	case math.IsNaN(r):
		return "n/a"
	case r >= 10:
		return strconv.FormatFloat(r, 'f', 0, 64) + "×"
	}
	return strconv.FormatFloat(r, 'f', 2, 64) + "×"
}

// GoalRatio renders a ratio judged against a goal with one more decimal
// than Ratio, so that a figure just past the goal does not print as the
// goal itself: 1.502×.
func GoalRatio(r float64) string {
	if math.IsNaN(r) {
		return "n/a"
	}
	return strconv.FormatFloat(r, 'f', 3, 64) + "×"
}

// MiB renders bytes as MiB with two decimals.
func MiB(v float64) string { return strconv.FormatFloat(v/(1<<20), 'f', 2, 64) }

// KiB renders bytes as KiB with one decimal.
func KiB(v float64) string { return strconv.FormatFloat(v/(1<<10), 'f', 1, 64) }

// Verdict is a goal's state: met, not met, or not measured.
func Verdict(met bool, measured bool) string {
	switch {
	case !measured:
		return "not measured"
	case met:
		return "met"
	}
	return "**not met**"
}

// Goal describes one goal check: "want: verdict (figure)".
func Goal(want string, figure float64, ok func(float64) bool, render func(float64) string) string {
	if math.IsNaN(figure) {
		return fmt.Sprintf("%s: not measured", want)
	}
	return fmt.Sprintf("%s: %s (%s)", want, Verdict(ok(figure), true), render(figure))
}
