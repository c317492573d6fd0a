package hubwire

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
)

// goldens maps each file under testdata to the type that decodes it. Files
// named *_ext.json use our extensions; the others are ArkFlow v1 shapes
// written from the reference's field lists (arkflow-reference.md A.2-A.4,
// B.4), including the nulls v1 sends for absent options.
var goldens = map[string]func() any{
	"register_request.json":                  func() any { return new(RegisterRequest) },
	"register_request_ext.json":              func() any { return new(RegisterRequest) },
	"register_response.json":                 func() any { return new(RegisterResponse) },
	"register_response_ext.json":             func() any { return new(RegisterResponse) },
	"heartbeat_request.json":                 func() any { return new(HeartbeatRequest) },
	"heartbeat_request_ext.json":             func() any { return new(HeartbeatRequest) },
	"node_report.json":                       func() any { return new(NodeReport) },
	"node_report_ext.json":                   func() any { return new(NodeReport) },
	"agent_commands.json":                    func() any { return new([]AgentCommand) },
	"agent_commands_ext.json":                func() any { return new([]AgentCommand) },
	"job_stop_payload.json":                  func() any { return new(JobCommandPayload) },
	"job_start_payload_fresh.json":           func() any { return new(JobCommandPayload) },
	"job_start_payload_ext.json":             func() any { return new(JobCommandPayload) },
	"checkpoint_payload.json":                func() any { return new(CheckpointPayload) },
	"commit_payload.json":                    func() any { return new(CommitPayload) },
	"config_candidate.json":                  func() any { return new(ConfigCandidate) },
	"config_rollback_payload.json":           func() any { return new(ConfigRollbackPayload) },
	"command_result.json":                    func() any { return new(CommandResult) },
	"command_result_checkpoint.json":         func() any { return new(CommandResult) },
	"command_result_ext.json":                func() any { return new(CommandResult) },
	"job_observation.json":                   func() any { return new(JobObservation) },
	"job_observation_ext.json":               func() any { return new(JobObservation) },
	"hub_operation.json":                     func() any { return new(HubOperation) },
	"operations_page.json":                   func() any { return new(Page[HubOperation]) },
	"nodes_page.json":                        func() any { return new(Page[HubNode]) },
	"audit_page.json":                        func() any { return new(Page[AuditRecord]) },
	"accepted_intent.json":                   func() any { return new(AcceptedIntentResponse) },
	"stream_desired_state.json":              func() any { return new(StreamDesiredStateRequest) },
	"api_error_generation_conflict.json":     func() any { return new(ApiError) },
	"api_error_validation.json":              func() any { return new(ApiError) },
	"api_error_job_generation_conflict.json": func() any { return new(ApiError) },
	"job_validate_request.json":              func() any { return new(ValidateJobRequest) },
	"job_validate_response.json":             func() any { return new(ValidateJobResponse) },
	"job_validate_response_ext.json":         func() any { return new(ValidateJobResponse) },
	"job_submit_request.json":                func() any { return new(SubmitJobRequest) },
	"job_record.json":                        func() any { return new(JobRecord) },
	"job_list.json":                          func() any { return new([]JobRecord) },
	"job_desired_state.json":                 func() any { return new(JobDesiredStateRequest) },
	"job_plan.json":                          func() any { return new(JobPlanResponse) },
	"job_detail.json":                        func() any { return new(JobDetail) },
	"job_detail_ext.json":                    func() any { return new(JobDetail) },
	"job_versions.json":                      func() any { return new([]JobVersionRecord) },
	"job_checkpoints.json":                   func() any { return new([]JobCheckpointRecord) },
	"savepoint_request.json":                 func() any { return new(SavepointRequest) },
	"job_upgrade_request.json":               func() any { return new(UpgradeRequest) },
	"job_upgrade_response.json":              func() any { return new(UpgradeResponse) },
	"system.json":                            func() any { return new(SystemResponse) },
	"health.json":                            func() any { return new(HealthResponse) },
	"readiness.json":                         func() any { return new(ReadinessResponse) },
	"liveness.json":                          func() any { return new(LivenessResponse) },
}

// Payloads nested in commands and errors are checked through their own
// types as well, so a field the outer type carries as raw JSON is still
// known.
var nestedGoldens = []struct {
	file string
	path func(v any) any // picks the nested value from the generic golden
	new  func() any
}{
	{"agent_commands.json", func(v any) any { return v.([]any)[0].(map[string]any)["payload"] }, func() any { return new(JobCommandPayload) }},
	{"agent_commands.json", func(v any) any { return v.([]any)[2].(map[string]any)["payload"] }, func() any { return new(ConfigCandidate) }},
	{"agent_commands_ext.json", func(v any) any { return v.([]any)[0].(map[string]any)["payload"] }, func() any { return new(CheckpointPayload) }},
	{"api_error_generation_conflict.json", func(v any) any { return v.(map[string]any)["details"] }, func() any { return new(GenerationConflictDetails) }},
	{"api_error_job_generation_conflict.json", func(v any) any { return v.(map[string]any)["details"] }, func() any { return new(JobGenerationConflictDetails) }},
}

func TestGoldenFilesAllListed(t *testing.T) {
	files, err := filepath.Glob("testdata/*.json")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if _, ok := goldens[filepath.Base(f)]; !ok {
			t.Errorf("%s has no entry in goldens", f)
		}
	}
}

// TestGoldenRoundTrip decodes every golden file strictly (an unknown field
// fails), re-encodes it and requires the same JSON back, ignoring keys whose
// value is null on either side (v1 sends some absent options as null, we
// omit them, and serde reads both as None): every field name and value
// survives. TestV1KeysOnly checks which keys may be null.
func TestGoldenRoundTrip(t *testing.T) {
	for name, newV := range goldens {
		t.Run(name, func(t *testing.T) {
			raw, err := os.ReadFile(filepath.Join("testdata", name))
			if err != nil {
				t.Fatal(err)
			}
			checkRoundTrip(t, raw, newV())
		})
	}
	for _, n := range nestedGoldens {
		t.Run(n.file+"/nested", func(t *testing.T) {
			raw, err := os.ReadFile(filepath.Join("testdata", n.file))
			if err != nil {
				t.Fatal(err)
			}
			inner, err := json.Marshal(n.path(generic(t, raw)))
			if err != nil {
				t.Fatal(err)
			}
			checkRoundTrip(t, inner, n.new())
		})
	}
}

func checkRoundTrip(t *testing.T, raw []byte, v any) {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		t.Fatalf("strict decode: %v", err)
	}
	out, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("encode: %v", err)
	}
	want := stripNulls(generic(t, raw))
	got := stripNulls(generic(t, out))
	if !reflect.DeepEqual(want, got) {
		t.Errorf("round trip changed the JSON\nwant %s\ngot  %s", canon(t, want), canon(t, got))
	}
}

func generic(t *testing.T, raw []byte) any {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("decode %s: %v", raw, err)
	}
	return v
}

func canon(t *testing.T, v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// stripNulls drops object keys whose value is null: v1 sends absent options
// as null in places, and we omit them, which serde reads back as None.
func stripNulls(v any) any {
	switch x := v.(type) {
	case map[string]any:
		m := make(map[string]any, len(x))
		for k, e := range x {
			if e != nil {
				m[k] = stripNulls(e)
			}
		}
		return m
	case []any:
		for i := range x {
			x[i] = stripNulls(x[i])
		}
		return x
	}
	return v
}

// TestGoldenCoverage requires every JSON field of every wire type to occur
// in some golden file, so the goldens exercise the whole field list.
func TestGoldenCoverage(t *testing.T) {
	keys := map[string]bool{}
	for name := range goldens {
		raw, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			t.Fatal(err)
		}
		collectKeys(generic(t, raw), keys)
	}
	seen := map[reflect.Type]bool{}
	var missing []string
	for _, newV := range goldens {
		walkFields(reflect.TypeOf(newV()), seen, func(typ reflect.Type, key string) {
			if !keys[key] {
				missing = append(missing, typ.Name()+"."+key)
			}
		})
	}
	for _, extra := range []any{GenerationConflictDetails{}, JobGenerationConflictDetails{}, ResourceRef{}} {
		walkFields(reflect.TypeOf(extra), seen, func(typ reflect.Type, key string) {
			if !keys[key] {
				missing = append(missing, typ.Name()+"."+key)
			}
		})
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Errorf("fields never seen in a golden file: %v", missing)
	}
}

func collectKeys(v any, keys map[string]bool) {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			keys[k] = true
			collectKeys(e, keys)
		}
	case []any:
		for _, e := range x {
			collectKeys(e, keys)
		}
	}
}

func walkFields(t reflect.Type, seen map[reflect.Type]bool, f func(reflect.Type, string)) {
	for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice || t.Kind() == reflect.Map {
		if t == reflect.TypeOf(json.RawMessage(nil)) {
			return
		}
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct || seen[t] {
		return
	}
	seen[t] = true
	for i := 0; i < t.NumField(); i++ {
		sf := t.Field(i)
		if sf.Anonymous {
			walkFields(sf.Type, seen, f)
			continue
		}
		tag, _, _ := strings.Cut(sf.Tag.Get("json"), ",")
		if tag == "" || tag == "-" {
			continue
		}
		f(t, tag)
		walkFields(sf.Type, seen, f)
	}
}

// TestV1KeysOnly encodes values whose extension fields are unset and
// requires exactly the v1 key set: a v1 peer never sees an extension we
// did not mean to send, and every key v1 requires is present, arrays as [].
func TestV1KeysOnly(t *testing.T) {
	cases := []struct {
		v    any
		keys string
	}{
		{RegisterRequest{}, "capabilities node_id node_token protocol_version"},
		{RegisterResponse{}, "lease_ttl_ms node_id poll_interval_ms protocol_version session_token"},
		{HeartbeatRequest{}, "capabilities node_id session_token state"},
		{NodeReport{}, "capabilities events metrics node_id operations report_seq session_token state streams version"},
		{StreamStatus{}, "convergence desired_generation id metrics retry_count state"},
		{AgentCommand{}, "expires_at_ms generation id node_id operation operation_id required_capabilities resource_id"},
		{CommandResult{}, "command_id generation operation_id progress state"},
		{JobObservation{}, "generation job_id node_id session_token state"},
		{JobCommandPayload{}, "job_id"},
		{CheckpointPayload{}, "assignments checkpoint_id job_id"},
		{CommitPayload{}, "checkpoint_id manifest_nodes"},
		{HubNode{}, "capabilities id last_seen_at_ms lease_expires_at_ms maintenance_state protocol_version state streams_failed streams_running streams_total version"},
		{HubOperation{}, "command_id created_at_ms generation id node_id operation progress resource_id retry_count state"},
		{ApiError{}, "code message"},
		{Page[HubNode]{}, "items page page_size total"},
		{JobRecord{}, "convergence desired_state generation job_id node_ids observed_state spec_json updated_at_ms version"},
		{JobCheckpointRecord{}, "checkpoint_id created_at_ms format_version job_id job_version kind status updated_at_ms"},
		{JobVersionRecord{}, "created_at_ms job_id plan_json spec_json version"},
		{ValidateJobResponse{}, "nodes plan required_capabilities valid warnings"},
		{NodeCompatibility{}, "capabilities compatible missing_capabilities node_id state"},
		{JobDetail{}, "checkpoints job metrics nodes operations plan tasks"},
	}
	for _, c := range cases {
		out, err := json.Marshal(c.v)
		if err != nil {
			t.Fatalf("%T: %v", c.v, err)
		}
		var m map[string]any
		if err := json.Unmarshal(out, &m); err != nil {
			t.Fatalf("%T: %v", c.v, err)
		}
		var got []string
		for k, v := range m {
			got = append(got, k)
			if v == nil && k != "plan" {
				t.Errorf("%T: %s encodes as null", c.v, k)
			}
		}
		sort.Strings(got)
		if strings.Join(got, " ") != c.keys {
			t.Errorf("%T keys\n got %s\nwant %s", c.v, strings.Join(got, " "), c.keys)
		}
	}
}
