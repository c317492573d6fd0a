package job

import "fmt"

// KeyGroupRange is an inclusive range of key groups [Start, End]: the
// part of a keyed operator's state one task owns. A key's group is
// FNV-1a-64 of its key bytes modulo the job's max_parallelism, as in
// ArkFlow v1.
type KeyGroupRange struct {
	Start int `json:"start"`
	End   int `json:"end"`
}

// Contains reports whether g lies in the range.
func (r KeyGroupRange) Contains(g int) bool { return r.Start <= g && g <= r.End }

// Len is the number of key groups in the range (0 when empty).
func (r KeyGroupRange) Len() int {
	if r.End < r.Start {
		return 0
	}
	return r.End - r.Start + 1
}

// String renders the range as [start,end].
func (r KeyGroupRange) String() string { return fmt.Sprintf("[%d,%d]", r.Start, r.End) }
