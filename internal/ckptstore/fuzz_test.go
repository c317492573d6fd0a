package ckptstore

import (
	"reflect"
	"testing"
)

// FuzzDecodeManifest feeds arbitrary bytes to DecodeManifest (manifests
// come from shared storage): it must not panic, and a manifest it accepts
// must encode and decode back to an equal value, and still pass Verify.
func FuzzDecodeManifest(f *testing.F) {
	m := goldenManifest()
	m.Seal()
	good, _ := m.Encode()
	f.Add(good)
	sp := &Manifest{CheckpointID: "sp-1", JobID: "j", FormatVersion: 2, Kind: KindSavepoint, Name: "before-upgrade", PlannedTasks: []string{"a-0"},
		TaskAttempts: []TaskAttempt{{TaskID: "a-0"}}}
	sp.Seal()
	spb, _ := sp.Encode()
	f.Add(spb)
	f.Add([]byte(`{"checkpoint_id":"00000000000000000001","job_id":"j","format_version":1,"kind":"checkpoint","checksum":"0000000000000000"}`))
	f.Add([]byte(`{"task_attempts":null,"watermarks_ms":{"a":1e3}}`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := DecodeManifest(b)
		if err != nil {
			if !IsCorruption(err) {
				t.Fatalf("DecodeManifest returned a non-corruption error: %v", err)
			}
			return
		}
		if err := m.Verify(); err != nil {
			t.Fatalf("an accepted manifest fails Verify: %v", err)
		}
		m.CheckTasks() // must not panic
		enc, err := m.Encode()
		if err != nil {
			t.Fatalf("an accepted manifest does not encode: %v", err)
		}
		again, err := DecodeManifest(enc)
		if err != nil {
			t.Fatalf("the re-encoded manifest is refused: %v\n%s", err, enc)
		}
		if !reflect.DeepEqual(again, m) {
			t.Fatalf("re-encoding changed the manifest:\n got %+v\nwant %+v", again, m)
		}
	})
}

// FuzzManifestRoundTrip builds manifests from fuzzed fields: one Commit
// would accept (validate passes) must seal, encode and decode back to an
// equal value.
func FuzzManifestRoundTrip(f *testing.F) {
	f.Add("00000000000000000007", "orders", "map-0", "topic<&>", "node\u2028", int32(3), int64(42), int64(-5), uint64(9), "sp")
	f.Fuzz(func(t *testing.T, id, job, task, topic, node string, partition int32, offset, wm int64, version uint64, name string) {
		m := &Manifest{
			CheckpointID: id, JobID: job, JobVersion: version, Generation: version / 2,
			TaskAttempts:    []TaskAttempt{{TaskID: task, AttemptID: node + "/1", NodeID: node}},
			SourcePositions: []SourcePosition{{TaskID: task, Topic: topic, Partition: partition, Offset: offset}},
			WatermarksMS:    map[string]int64{task: wm},
			InFlightBarrier: &Barrier{CheckpointID: id, Generation: version},
			StateSnapshots:  []StateSnapshot{{TaskID: task, NodeID: node, URI: job + "/state/" + task, Checksum: zeroSum, Bytes: offset & 0xffff}},
			FormatVersion:   1, Kind: KindCheckpoint, CreatedMS: wm & 0x7fffffff, PlannedTasks: []string{task}, PlanDigest: topic,
		}
		if name != "" && partition%2 == 0 {
			m.Kind, m.Name = KindSavepoint, name
		}
		if err := m.Seal(); err != nil {
			t.Fatal(err)
		}
		if m.validate() != nil {
			return
		}
		b, err := m.Encode()
		if err != nil {
			t.Fatal(err)
		}
		got, err := DecodeManifest(b)
		if err != nil {
			t.Fatalf("a valid sealed manifest is refused: %v\n%s", err, b)
		}
		if !reflect.DeepEqual(got, m) {
			t.Fatalf("round trip:\n got %+v\nwant %+v", got, m)
		}
		if err := got.CheckTasks(); err != nil {
			t.Fatalf("CheckTasks: %v", err)
		}
	})
}
