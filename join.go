package arkflow

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/arkflow-rs/arkflow-go/job"
)

// Join adds a join of the rows of two operators, j.Left and j.Right, on
// their keys (see job.Join and "Joins" in package job), e.g.
// Join("q8", job.Join{Type: job.JoinWindow, Left: "persons", LeftKey: "id",
// Right: "auctions", RightKey: "seller", Size: 10 * time.Second}).
// It is connected from Left and Right, whatever the current operator,
// each edge partitioned by its side's key (no KeyBy before it), unless
// both sides arrive partitioned by their keys already (sources with
// KeyedBy, co-partitioned as Kafka Streams requires of joined topics) at
// the join's parallelism: then no row is shuffled. The next operator is
// connected from the join. Its output is the key, a window
// join's window_start and window_end, then the other columns of the left
// side and of the right side. Both sides need event time (a temporal
// join's left side may run on processing time); a side's late rows are
// dropped, or go to its EventTime.RouteLate sink.
func (b *Builder) Join(id string, j job.Join, opts ...OperatorOption) *Builder {
	call := componentCall("Join", id)
	if b.keyBy != "" {
		b.problem(id, "KeyBy(%q) before Join(%q): a join partitions each side by its own key (LeftKey, RightKey); drop the KeyBy", b.keyBy, id)
		b.keyBy = ""
	}
	var sides []string
	for _, s := range [2]struct{ field, side, name string }{{"Left", "left", j.Left}, {"Right", "right", j.Right}} {
		switch op, _ := b.spec.Operator(s.name); {
		case s.name == "":
			b.callProblem(id, call+": "+s.field, "is required: the operator whose rows are the %s side", s.side)
		case op == nil:
			b.callProblem(id, call+": "+s.field, "no such operator %q (add it first)", s.name)
		case !slices.Contains(sides, s.name): // the same twice: Build says so
			sides = append(sides, s.name)
		}
	}
	cfg, problems := joinConfig(j)
	for _, p := range problems {
		b.callProblem(id, call+": "+p[0], "%s", p[1])
	}
	op := job.Operator{ID: id, Kind: job.KindJoin, Config: b.config(id, cfg)}
	srcOpts := make([]SourceOption, 0, len(opts))
	for _, o := range opts {
		if o != nil {
			srcOpts = append(srcOpts, o)
		}
	}
	b.settle(call, &op, srcOpts)
	shuffle := len(sides) != 2 || !b.coPartitioned(j.Left, j.LeftKey, &op) || !b.coPartitioned(j.Right, j.RightKey, &op)
	for _, from := range sides {
		b.calls[fmt.Sprintf("edges[%d]", len(b.spec.Edges))] = call
		b.spec.Edges = append(b.spec.Edges, job.Edge{ID: from + "-" + id, From: from, To: id, Partitioned: shuffle})
	}
	b.spec.Operators = append(b.spec.Operators, op)
	b.cursor = []string{id}
	return b
}

// joinSpec is a join's spec config as Builder.Join writes it: the keys a
// spec file writes for a join of its type, and no others.
type joinSpec struct {
	Type         string      `json:"type,omitempty"`
	Left         string      `json:"left,omitempty"`
	LeftKey      string      `json:"left_key,omitempty"`
	Right        string      `json:"right,omitempty"`
	RightKey     string      `json:"right_key,omitempty"`
	How          string      `json:"how,omitempty"`
	Window       *joinWindow `json:"window,omitempty"`
	LowerMS      *int64      `json:"lower_ms,omitempty"`
	UpperMS      *int64      `json:"upper_ms,omitempty"`
	DeletedField string      `json:"deleted_field,omitempty"`
	RetentionMS  int64       `json:"retention_ms,omitempty"`
	LeftPrefix   string      `json:"left_prefix,omitempty"`
	RightPrefix  string      `json:"right_prefix,omitempty"`
}

// joinWindow is a window join's window in the spec.
type joinWindow struct {
	Type    string `json:"type"`
	SizeMS  int64  `json:"size_ms,omitempty"`
	SlideMS int64  `json:"slide_ms,omitempty"`
}

// joinConfig returns the spec config of j, and the mistakes in it that
// the config cannot show, as {field of job.Join, reason}: durations that
// are not whole milliseconds, and fields of another type of join than
// j.Type's (the spec's decoder would ignore them). The config's other
// mistakes are the deep validation's.
func joinConfig(j job.Join) (joinSpec, [][2]string) {
	c := joinSpec{Type: j.Type, Left: j.Left, LeftKey: j.LeftKey, Right: j.Right, RightKey: j.RightKey,
		DeletedField: j.DeletedField, LeftPrefix: j.LeftPrefix, RightPrefix: j.RightPrefix}
	if j.Outer {
		c.How = "left"
	}
	var problems [][2]string
	ms := func(field string, d time.Duration) int64 {
		if d%time.Millisecond != 0 {
			problems = append(problems, [2]string{field, fmt.Sprintf("must be whole milliseconds (got %s): the spec keeps milliseconds", d)})
		}
		return d.Milliseconds()
	}
	known := j.Type == job.JoinWindow || j.Type == job.JoinInterval || j.Type == job.JoinTemporal
	for _, f := range []struct {
		name, typ string
		set       bool
	}{
		{"Size", job.JoinWindow, j.Size != 0}, {"Slide", job.JoinWindow, j.Slide != 0},
		{"Lower", job.JoinInterval, j.Lower != 0}, {"Upper", job.JoinInterval, j.Upper != 0},
		{"DeletedField", job.JoinTemporal, j.DeletedField != ""},
		{"Retention", job.JoinTemporal, j.Retention != 0},
	} {
		if known && f.set && f.typ != j.Type {
			problems = append(problems, [2]string{f.name, fmt.Sprintf("belongs to joins of type %q, not %q: leave it zero", f.typ, j.Type)})
		}
	}
	if j.Type == job.JoinWindow || !known && (j.Size != 0 || j.Slide != 0) {
		c.Window = &joinWindow{Type: "tumbling", SizeMS: ms("Size", j.Size)}
		if j.Slide != 0 {
			c.Window.Type, c.Window.SlideMS = "sliding", ms("Slide", j.Slide)
		}
	}
	if j.Type == job.JoinInterval || !known && (j.Lower != 0 || j.Upper != 0) {
		// Both bounds, always: 0 is one.
		lo, hi := ms("Lower", j.Lower), ms("Upper", j.Upper)
		c.LowerMS, c.UpperMS = &lo, &hi
	}
	if j.Retention != 0 {
		c.RetentionMS = ms("Retention", j.Retention)
	}
	if known && j.Type != job.JoinTemporal {
		c.DeletedField, c.RetentionMS = "", 0
	}
	return c, problems
}

// joinFields are the fields of job.Join that write each key of a join's
// spec config, for errors that name a path inside a Join call's config.
var joinFields = map[string]string{
	"type":            "Type",
	"left":            "Left",
	"right":           "Right",
	"left_key":        "LeftKey",
	"right_key":       "RightKey",
	"how":             "Outer",
	"window":          "Size",
	"window.size_ms":  "Size",
	"window.slide_ms": "Slide",
	"lower_ms":        "Lower",
	"upper_ms":        "Upper",
	"deleted_field":   "DeletedField",
	"retention_ms":    "Retention",
	"left_prefix":     "LeftPrefix",
	"right_prefix":    "RightPrefix",
}

// joinField returns the field of job.Join that wrote the config path
// rest, or rest when none did.
func joinField(rest string) string {
	if f, ok := joinFields[rest]; ok {
		return f
	}
	if head, _, ok := strings.Cut(rest, "."); ok {
		if f, ok := joinFields[head]; ok {
			return f
		}
	}
	return rest
}
