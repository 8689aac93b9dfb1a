package spec

import "encoding/json"

// JSONKind names the kind of the JSON value val (not empty) as error
// messages spell it: "a string", "an object", "an array", "a boolean",
// "null" or "a number".
func JSONKind(val json.RawMessage) string {
	switch val[0] {
	case '"':
		return "a string"
	case '{':
		return "an object"
	case '[':
		return "an array"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	}
	return "a number"
}
