// Package specpath orders the field paths of a job spec ("operators[2].config",
// "edges[0].to") as they sit in a spec, so that validation reports its
// problems in the order a reader meets them in the file.
package specpath

import (
	"strconv"
	"strings"
)

// sections are a spec's list and block fields in their order; the job's own
// scalar fields (id, version, parallelism, …) come before all of them.
var sections = []string{"operators", "edges", "sources", "sinks", "state", "checkpoint", "recovery", "builder"}

// Less reports whether the field at path a comes before the one at path b:
// the job's fields first, then by section (operators, edges, sources,
// sinks, state, checkpoint, recovery, and the Builder's calls), then by
// index within a section. Paths in the same place are not less either way.
func Less(a, b string) bool {
	sa, ia := position(a)
	sb, ib := position(b)
	if sa != sb {
		return sa < sb
	}
	return ia < ib
}

// position ranks a field path by where it sits in a spec.
func position(field string) (section, index int) {
	for i, s := range sections {
		if field == s || strings.HasPrefix(field, s+"[") || strings.HasPrefix(field, s+".") {
			index = -1
			if rest, ok := strings.CutPrefix(field, s+"["); ok {
				if n, err := strconv.Atoi(rest[:max(strings.IndexByte(rest, ']'), 0)]); err == nil {
					index = n
				}
			}
			return i + 1, index
		}
	}
	return 0, 0
}
