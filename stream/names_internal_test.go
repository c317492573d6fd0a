package stream

import "testing"

// DuckDB's names of unaliased calls become DataFusion's, which ArkFlow's
// configs see; other names stay.
func TestDataFusionName(t *testing.T) {
	for in, want := range map[string]string{
		`sum("value")`:        "sum(flow.value)",
		`avg(value)`:          "avg(flow.value)",
		`count_star()`:        "count(*)",
		`max("a", "b")`:       "max(flow.a, flow.b)",
		`upper(name)`:         "upper(flow.name)",
		`sum(("value" + 1))`:  `sum(("value" + 1))`,
		`("value" + 1)`:       `("value" + 1)`,
		`total`:               "total",
		`avg("weird name")`:   `avg("weird name")`,
		`sum(DISTINCT value)`: `sum(DISTINCT value)`,
	} {
		if got := dataFusionName(in, "flow"); got != want {
			t.Errorf("%s: got %s, want %s", in, got, want)
		}
	}
}
