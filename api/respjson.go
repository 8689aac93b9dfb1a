package api

import (
	"encoding/json"
	"math"
	"strconv"
	"time"

	"github.com/refinery-bandits/refinery/api/wire"
	"github.com/refinery-bandits/refinery/bandit"
)

// newDecisionResponse is the API's view of a decision: the arms by name.
func newDecisionResponse(arms []string, d *bandit.Decision, prop *bandit.Propensity) decisionResponse {
	return decisionResponse{Decision: newWireDecision(arms, d), Propensity: prop}
}

// newWireDecision is the members every answer holding a decision has.
func newWireDecision(arms []string, d *bandit.Decision) wire.Decision {
	resp := wire.Decision{
		EventID:       d.EventID,
		Arm:           arms[d.Arm],
		Probabilities: make(map[string]float64, len(arms)),
		Scores:        make(map[string]float64, len(arms)),
		ModelVersion:  d.ModelVersion,
		Sample:        d.Sample,
		Policy:        d.Policy,
		CreatedAt:     d.CreatedAt,
	}
	for i, name := range arms {
		if i < len(d.Propensities) {
			resp.Probabilities[name] = d.Propensities[i]
		}
		if i < len(d.Scores) {
			resp.Scores[name] = d.Scores[i]
		}
	}
	if sp := d.ShadowPropensities; sp != nil && d.ShadowArm < len(arms) {
		sh := &wire.ShadowChoice{Arm: arms[d.ShadowArm], Probabilities: make(map[string]float64, len(sp))}
		for i, p := range sp[:min(len(sp), len(arms))] {
			sh.Probabilities[arms[i]] = p
		}
		resp.Shadow = sh
	}
	return resp
}

// maxFastArms bounds the arms appendDecision sorts on the stack.
const maxFastArms = 16

// appendDecision appends the JSON of newDecisionResponse(arms, d, prop),
// byte for byte what json.Marshal makes of it (maps in key order, floats
// and strings as encoding/json writes them; TestAppendDecisionIsMarshal),
// without reflection or maps. ok is false where it would differ or
// json.Marshal fails (a float that is not finite, a time outside years 0
// to 9999, more than maxFastArms arms): the caller then marshals the
// struct; so it is for a decision with a candidate's choice
// (Decision.ShadowPropensities).
func appendDecision(b []byte, arms []string, d *bandit.Decision, prop *bandit.Propensity) ([]byte, bool) {
	if len(arms) > maxFastArms || d.Arm < 0 || d.Arm >= len(arms) || d.ShadowPropensities != nil {
		return b, false // a shadow's choice is marshalled
	}
	if y := d.CreatedAt.Year(); y < 0 || y > 9999 {
		return b, false
	}
	// The arms in the order of their names, as json.Marshal sorts map keys.
	var orderBuf [maxFastArms]int
	order := orderBuf[:len(arms)]
	for i := range order {
		order[i] = i
		for j := i; j > 0 && arms[order[j]] < arms[order[j-1]]; j-- {
			order[j], order[j-1] = order[j-1], order[j]
		}
	}
	ok := true
	vector := func(b []byte, v []float64) []byte {
		b = append(b, '{')
		first := true
		for _, i := range order {
			if i >= len(v) {
				continue
			}
			if !first {
				b = append(b, ',')
			}
			first = false
			b = appendString(b, arms[i])
			b = append(b, ':')
			var fine bool
			b, fine = appendFloat(b, v[i])
			ok = ok && fine
		}
		return append(b, '}')
	}
	b = append(b, `{"event_id":`...)
	b = appendString(b, d.EventID)
	b = append(b, `,"arm":`...)
	b = appendString(b, arms[d.Arm])
	b = append(b, `,"probabilities":`...)
	b = vector(b, d.Propensities)
	b = append(b, `,"scores":`...)
	b = vector(b, d.Scores)
	b = append(b, `,"model_version":`...)
	b = strconv.AppendInt(b, d.ModelVersion, 10)
	b = append(b, `,"sample":`...)
	b = appendString(b, string(d.Sample))
	b = append(b, `,"policy":`...)
	b = appendString(b, d.Policy)
	b = append(b, `,"created_at":"`...)
	b = d.CreatedAt.AppendFormat(b, time.RFC3339Nano)
	b = append(b, '"')
	if p := prop; p != nil {
		b = append(b, `,"propensity":{"estimator":`...)
		b = appendString(b, p.Estimator)
		b = append(b, `,"samples":`...)
		b = strconv.AppendInt(b, int64(p.Samples), 10)
		b = append(b, `,"groups":`...)
		b = strconv.AppendInt(b, int64(p.Groups), 10)
		if p.Exact {
			b = append(b, `,"exact":true`...)
		}
		if p.OutputDraws != 0 {
			b = append(b, `,"output_draws":`...)
			b = strconv.AppendInt(b, int64(p.OutputDraws), 10)
		}
		var fine bool
		if p.StdError != 0 {
			b = append(b, `,"std_error":`...)
			b, fine = appendFloat(b, p.StdError)
			ok = ok && fine
		}
		if p.Floor != 0 {
			b = append(b, `,"floor":`...)
			b, fine = appendFloat(b, p.Floor)
			ok = ok && fine
		}
		if p.SampleUses != 0 {
			b = append(b, `,"sample_uses":`...)
			b, fine = appendFloat(b, p.SampleUses)
			ok = ok && fine
		}
		if p.SampleAgeSeconds != 0 {
			b = append(b, `,"sample_age_seconds":`...)
			b, fine = appendFloat(b, p.SampleAgeSeconds)
			ok = ok && fine
		}
		if p.VersionsBehind != 0 {
			b = append(b, `,"versions_behind":`...)
			b = strconv.AppendInt(b, p.VersionsBehind, 10)
		}
		if p.BeyondBounds {
			b = append(b, `,"beyond_bounds":true`...)
		}
		b = append(b, '}')
	}
	return append(b, '}'), ok
}

// appendFloat appends f as encoding/json writes a float64; false if f is
// not finite (which json.Marshal refuses).
func appendFloat(b []byte, f float64) ([]byte, bool) {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return b, false
	}
	format := byte('f')
	if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if format == 'e' {
		// e-09 to e-9, as encoding/json does.
		if n := len(b); n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b, true
}

// appendString appends s as a JSON string as encoding/json writes it:
// quoted as is when it is printable ASCII that needs no escape (the
// HTML-sensitive <, > and & included), through json.Marshal otherwise.
func appendString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			q, _ := json.Marshal(s)
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}
