package ckptstore

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
)

var zeroSum = "sha256:" + strings.Repeat("0", 64)

// goldenManifest has every field set.
func goldenManifest() *Manifest {
	return &Manifest{
		CheckpointID:    "00000000000000000007",
		JobID:           "orders",
		JobVersion:      3,
		Generation:      2,
		TaskAttempts:    []TaskAttempt{{TaskID: "map-0", AttemptID: "a1", NodeID: "n1"}, {TaskID: "src-0", AttemptID: "a2", NodeID: "n1"}},
		SourcePositions: []SourcePosition{{TaskID: "src-0", Topic: "t<&>", Partition: 1, Offset: 42}},
		WatermarksMS:    map[string]int64{"src-0": 1000, "map-0": 900},
		InFlightBarrier: &Barrier{CheckpointID: "00000000000000000007", Generation: 2},
		StateSnapshots:  []StateSnapshot{{TaskID: "map-0", URI: "orders/checkpoints/00000000000000000007/state/map-0.snap", Checksum: zeroSum, Bytes: 10}},
		FormatVersion:   1,
		Kind:            KindCheckpoint,
		CreatedMS:       1700000000000,
		PlannedTasks:    []string{"src-0", "map-0"},
		PlanDigest:      "sha256:abc",
	}
}

// fnv1 is FNV-1 64 written out: h = h*prime ^ byte.
func fnv1(b []byte) uint64 {
	h := uint64(0xcbf29ce484222325)
	for _, c := range b {
		h *= 0x100000001b3
		h ^= uint64(c)
	}
	return h
}

// TestManifestChecksum pins the checksum input: ArkFlow's 10-element
// array (compact JSON, no HTML escaping, sorted map keys, absent options
// omitted) plus the 11th element of extensions, hashed with FNV-1 64
// (a manifest is protected by a checksum).
func TestManifestChecksum(t *testing.T) {
	t.Parallel()
	if got := fnv1([]byte("a")); got != 0xaf63bd4c8601b7be {
		t.Fatalf("fnv1(a) = %x, the FNV-1 test vector is af63bd4c8601b7be", got)
	}
	m := goldenManifest()
	if err := m.Seal(); err != nil {
		t.Fatal(err)
	}
	want := `["00000000000000000007","orders",3,2,` +
		`[{"task_id":"map-0","attempt_id":"a1","node_id":"n1"},{"task_id":"src-0","attempt_id":"a2","node_id":"n1"}],` +
		`[{"task_id":"src-0","topic":"t<&>","partition":1,"offset":42}],` +
		`{"map-0":900,"src-0":1000},` +
		`{"checkpoint_id":"00000000000000000007","generation":2},` +
		`[{"task_id":"map-0","uri":"orders/checkpoints/00000000000000000007/state/map-0.snap","checksum":"` + zeroSum + `","bytes":10}],` +
		`1,` +
		`{"kind":"checkpoint","created_ms":1700000000000,"planned_tasks":["map-0","src-0"],"plan_digest":"sha256:abc"}]`
	in, err := m.checksumInput()
	if err != nil {
		t.Fatal(err)
	}
	if string(in) != want {
		t.Fatalf("checksum input\n got %s\nwant %s", in, want)
	}
	if wantSum := fmt.Sprintf("%016x", fnv1([]byte(want))); m.Checksum != wantSum {
		t.Fatalf("Checksum = %s, want %s", m.Checksum, wantSum)
	}

	// Absent lists, maps and barrier: [] / {} / null, as serde writes them.
	bare := &Manifest{CheckpointID: "c", JobID: "j", FormatVersion: 1, Kind: KindSavepoint, Name: "sp"}
	in, _ = bare.checksumInput()
	if want := `["c","j",0,0,[],[],{},null,[],1,{"kind":"savepoint","name":"sp","created_ms":0,"planned_tasks":[],"plan_digest":""}]`; string(in) != want {
		t.Fatalf("bare checksum input\n got %s\nwant %s", in, want)
	}
}

// TestManifestRoundTrip: Encode then DecodeManifest gives the same value,
// and every field change breaks the checksum.
func TestManifestRoundTrip(t *testing.T) {
	t.Parallel()
	m := goldenManifest()
	if err := m.Seal(); err != nil {
		t.Fatal(err)
	}
	b, err := m.Encode()
	if err != nil {
		t.Fatal(err)
	}
	got, err := DecodeManifest(b)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, m) {
		t.Fatalf("round trip:\n got %+v\nwant %+v", got, m)
	}
	for name, change := range map[string]func(*Manifest){
		"job_version":   func(m *Manifest) { m.JobVersion++ },
		"offset":        func(m *Manifest) { m.SourcePositions[0].Offset++ },
		"watermark":     func(m *Manifest) { m.WatermarksMS["map-0"]++ },
		"barrier":       func(m *Manifest) { m.InFlightBarrier = nil },
		"state bytes":   func(m *Manifest) { m.StateSnapshots[0].Bytes++ },
		"format":        func(m *Manifest) { m.FormatVersion++ },
		"kind":          func(m *Manifest) { m.Kind = KindSavepoint },
		"created_ms":    func(m *Manifest) { m.CreatedMS++ },
		"planned_tasks": func(m *Manifest) { m.PlannedTasks = m.PlannedTasks[:1] },
		"plan_digest":   func(m *Manifest) { m.PlanDigest = "x" },
		"position task": func(m *Manifest) { m.SourcePositions[0].TaskID = "" },
	} {
		c, _ := DecodeManifest(b)
		change(c)
		if err := c.Verify(); !IsCorruption(err) {
			t.Errorf("changing %s: Verify = %v, want a checksum mismatch", name, err)
		}
	}
}

// TestDecodeManifestRejects: malformed documents are *CorruptError;
// unknown fields are accepted (forward compatibility).
func TestDecodeManifestRejects(t *testing.T) {
	t.Parallel()
	m := goldenManifest()
	m.Seal()
	good, _ := m.Encode()
	replace := func(old, new string) []byte {
		if !strings.Contains(string(good), old) {
			t.Fatalf("%q is not in the manifest", old)
		}
		return []byte(strings.Replace(string(good), old, new, 1))
	}
	resealed := func(change func(*Manifest)) []byte {
		c := goldenManifest()
		change(c)
		sum, _ := c.ComputeChecksum()
		c.Checksum = sum
		b, _ := c.Encode()
		return b
	}
	for name, b := range map[string][]byte{
		"empty":          nil,
		"not json":       []byte("{"),
		"array":          []byte("[]"),
		"trailing data":  append(append([]byte{}, good...), []byte(`{}`)...),
		"checksum":       replace(`"checksum": "`+m.Checksum, `"checksum": "0000000000000000`),
		"checksum form":  replace(`"checksum": "`+m.Checksum, `"checksum": "`+strings.ToUpper(m.Checksum)),
		"flipped offset": replace(`"offset": 42`, `"offset": 43`),
		"kind":           resealed(func(m *Manifest) { m.Kind = "snapshot" }),
		"id":             resealed(func(m *Manifest) { m.CheckpointID = "7" }),
		"job":            resealed(func(m *Manifest) { m.JobID = "a/b" }),
		"format":         resealed(func(m *Manifest) { m.FormatVersion = 0 }),
		"state checksum": resealed(func(m *Manifest) { m.StateSnapshots[0].Checksum = "abc" }),
		"state uri":      resealed(func(m *Manifest) { m.StateSnapshots[0].URI = "../x" }),
		"negative bytes": resealed(func(m *Manifest) { m.StateSnapshots[0].Bytes = -1 }),
		"unsorted tasks": resealed(func(m *Manifest) { m.PlannedTasks = []string{"src-0", "map-0"} }),
		"savepoint name": resealed(func(m *Manifest) { m.Kind = KindSavepoint }),
		"checkpoint name": resealed(func(m *Manifest) {
			m.Name = "x"
		}),
	} {
		if _, err := DecodeManifest(b); !IsCorruption(err) {
			t.Errorf("%s: DecodeManifest = %v, want a *CorruptError", name, err)
		}
	}
	unknown := replace(`"checksum":`, `"future_field": {"x": [1, 2]}, "checksum":`)
	if _, err := DecodeManifest(unknown); err != nil {
		t.Errorf("an unknown field was refused: %v", err)
	}
}

// planned is a manifest that passes CheckTasks, for the rejection tests
// to break.
func planned() *Manifest {
	m := goldenManifest()
	m.PlannedTasks = []string{"map-0", "src-0"}
	return m
}

func taskSetErrors(err error) []*TaskSetError {
	var out []*TaskSetError
	var walk func(error)
	walk = func(err error) {
		if e, ok := err.(*TaskSetError); ok {
			out = append(out, e)
			return
		}
		if j, ok := err.(interface{ Unwrap() []error }); ok {
			for _, e := range j.Unwrap() {
				walk(e)
			}
		}
	}
	walk(err)
	return out
}

func TestCheckTasksAccepts(t *testing.T) {
	t.Parallel()
	if err := planned().CheckTasks(); err != nil {
		t.Fatal(err)
	}
}

// TestCheckTasksRejectsMissingTask: a planned task without an
// entry.
func TestCheckTasksRejectsMissingTask(t *testing.T) {
	t.Parallel()
	m := planned()
	m.TaskAttempts = m.TaskAttempts[:1]
	err := m.CheckTasks()
	es := taskSetErrors(err)
	if !errors.Is(err, ErrMissingTask) || len(es) != 1 || es[0].TaskID != "src-0" || es[0].Field != "task_attempts" {
		t.Fatalf("CheckTasks = %v", err)
	}
	if errors.Is(err, ErrDuplicateTask) || errors.Is(err, ErrExtraTask) {
		t.Fatalf("CheckTasks reports more than the missing task: %v", err)
	}
	if !strings.Contains(err.Error(), `"src-0"`) {
		t.Errorf("the error does not name the task: %v", err)
	}
}

// TestCheckTasksRejectsDuplicateTask: a task listed twice.
func TestCheckTasksRejectsDuplicateTask(t *testing.T) {
	t.Parallel()
	m := planned()
	m.TaskAttempts = append(m.TaskAttempts, TaskAttempt{TaskID: "map-0", AttemptID: "a3", NodeID: "n2"})
	err := m.CheckTasks()
	es := taskSetErrors(err)
	if !errors.Is(err, ErrDuplicateTask) || len(es) != 1 || es[0].TaskID != "map-0" {
		t.Fatalf("CheckTasks = %v", err)
	}
	if errors.Is(err, ErrMissingTask) || errors.Is(err, ErrExtraTask) {
		t.Fatalf("CheckTasks reports more than the duplicate: %v", err)
	}
}

// TestCheckTasksRejectsExtraTask: an entry for a task not in
// the plan.
func TestCheckTasksRejectsExtraTask(t *testing.T) {
	t.Parallel()
	m := planned()
	m.TaskAttempts = append(m.TaskAttempts, TaskAttempt{TaskID: "sink-0", AttemptID: "a3", NodeID: "n1"})
	err := m.CheckTasks()
	es := taskSetErrors(err)
	if !errors.Is(err, ErrExtraTask) || len(es) != 1 || es[0].TaskID != "sink-0" {
		t.Fatalf("CheckTasks = %v", err)
	}
	if errors.Is(err, ErrMissingTask) || errors.Is(err, ErrDuplicateTask) {
		t.Fatalf("CheckTasks reports more than the extra task: %v", err)
	}
}

// TestCheckTasksOtherFields: state snapshots, watermarks and
// source positions name planned tasks only, once.
func TestCheckTasksOtherFields(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		change func(*Manifest)
		field  string
		task   string
		err    error
	}{
		"unplanned state": {func(m *Manifest) {
			m.StateSnapshots = append(m.StateSnapshots, StateSnapshot{TaskID: "x-0", URI: "k", Checksum: zeroSum})
		}, "state_snapshots", "x-0", ErrExtraTask},
		"duplicate state": {func(m *Manifest) {
			m.StateSnapshots = append(m.StateSnapshots, m.StateSnapshots[0])
		}, "state_snapshots", "map-0", ErrDuplicateTask},
		"unplanned watermark": {func(m *Manifest) { m.WatermarksMS["x-0"] = 1 }, "watermarks_ms", "x-0", ErrExtraTask},
		"unplanned position": {func(m *Manifest) {
			m.SourcePositions = append(m.SourcePositions, SourcePosition{TaskID: "x-0"})
		}, "source_positions", "x-0", ErrExtraTask},
		"duplicate position": {func(m *Manifest) {
			m.SourcePositions = append(m.SourcePositions, SourcePosition{TaskID: "src-0", Topic: "t<&>", Partition: 1, Offset: 7})
		}, "source_positions", "src-0", ErrDuplicateTask},
		"duplicate planned": {func(m *Manifest) {
			m.PlannedTasks = []string{"map-0", "map-0", "src-0"}
		}, "planned_tasks", "map-0", ErrDuplicateTask},
	} {
		m := planned()
		tc.change(m)
		err := m.CheckTasks()
		es := taskSetErrors(err)
		if len(es) != 1 || es[0].Field != tc.field || es[0].TaskID != tc.task || !errors.Is(err, tc.err) {
			t.Errorf("%s: CheckTasks = %v", name, err)
		}
	}
	m := planned()
	m.PlannedTasks = nil
	if err := m.CheckTasks(); err == nil {
		t.Error("an empty plan passed")
	}
}

func TestParseID(t *testing.T) {
	t.Parallel()
	for _, id := range []ID{1, 7, 1 << 63, ^ID(0)} {
		got, err := ParseID(id.String())
		if err != nil || got != id {
			t.Errorf("ParseID(%s) = %d, %v", id, got, err)
		}
	}
	for _, s := range []string{"", "7", "00000000000000000000", "0000000000000000000a", "99999999999999999999", "+0000000000000000001"} {
		if _, err := ParseID(s); err == nil {
			t.Errorf("ParseID(%q) succeeded", s)
		}
	}
}
