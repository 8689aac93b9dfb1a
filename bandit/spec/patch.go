package spec

import "encoding/json"

// Patch is a change to a live bandit (PATCH /v1/bandits/{name}).
//
// Policy, Training, Refinement and Reward are JSON merge patches (RFC
// 7396) of those sections of the configuration: the members given
// replace the current ones, null restores a member's default, the rest
// stay. The result is validated as at creation. policy.kind cannot
// change (bandit.Service.Update says why).
//
// AddArms appends arms (with their ArmValues in a bandit with arm
// features); RetireArms retires arms. AddValues appends declared values
// to categorical features (feature name -> new values). The model grows without losing
// what it learned (bandit.Service.Update).
//
// Archived, when set, archives the bandit (true: no new decisions,
// bandit.ErrArchived) or makes it live again (false).
//
// Shadow replaces the bandit's candidate configuration whole (an
// object as Config.Shadow, defaults filled in) or removes it (null).
//
// PromoteShadow, true, promotes the candidate: its policy, model,
// training and refinement become the bandit's, and the bandit has no
// shadow after. It goes in a patch of its own (with Archived at most).
//
// Name, Arms, Features and Model cannot be patched; they are here to
// say so by name. Nor can ArmFeatures, or the ArmValues of an arm that
// exists (its rewards were learned on them).
type Patch struct {
	Policy     json.RawMessage     `json:"policy,omitempty"`
	Training   json.RawMessage     `json:"training,omitempty"`
	Refinement json.RawMessage     `json:"refinement,omitempty"`
	Reward     json.RawMessage     `json:"reward,omitempty"`
	AddArms    []string            `json:"add_arms,omitempty"`
	AddValues  map[string][]string `json:"add_values,omitempty"`
	Archived   *bool               `json:"archived,omitempty"`
	Shadow     json.RawMessage     `json:"shadow,omitempty"`

	// ArmValues gives the features of the arms of AddArms, keyed by arm
	// name, in a bandit with arm features (Config.ArmValues).
	ArmValues map[string]json.RawMessage `json:"arm_values,omitempty"`
	// RetireArms names arms never to be chosen again (Config.Retired).
	RetireArms []string `json:"retire_arms,omitempty"`

	PromoteShadow *bool `json:"promote_shadow,omitempty"`

	Name     json.RawMessage `json:"name,omitempty"`
	Arms     json.RawMessage `json:"arms,omitempty"`
	Features json.RawMessage `json:"features,omitempty"`
	Model    json.RawMessage `json:"model,omitempty"`
}
