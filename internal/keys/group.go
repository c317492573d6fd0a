package keys

import "github.com/arkflow-rs/arkflow-go/job"

// FNV-1a 64 constants. ArkFlow v1 hashes keys with exactly these, so a key
// lands in the same key group in both runtimes.
const (
	fnvOffset64 = 0xcbf29ce484222325
	fnvPrime64  = 0x100000001b3
)

// HashKey is FNV-1a 64 over the key's bytes.
func HashKey(key []byte) uint64 {
	h := uint64(fnvOffset64)
	for _, b := range key {
		h ^= uint64(b)
		h *= fnvPrime64
	}
	return h
}

// KeyGroup returns the key group of a key: FNV-1a-64(key) mod
// maxParallelism. maxParallelism must be >= 1.
func KeyGroup(key []byte, maxParallelism int) int {
	return int(HashKey(key) % uint64(maxParallelism))
}

// RangeFor returns the key groups subtask s of p owns out of m:
// [s·m/p, (s+1)·m/p − 1] with integer division, ArkFlow v1's formula. For
// every p in 1..m the ranges of subtasks 0..p−1 tile [0, m) without gap or
// overlap.
func RangeFor(m, p, s int) job.KeyGroupRange {
	return job.KeyGroupRange{Start: s * m / p, End: (s+1)*m/p - 1}
}

// OwnerOf returns the subtask of p that owns key group g out of m: the
// inverse of RangeFor. floor(s·m/p) <= g holds exactly for s <=
// ((g+1)·p − 1) / m.
func OwnerOf(m, p, g int) int {
	return ((g+1)*p - 1) / m
}
