// Package spec holds the JSON shapes of a bandit that the service
// accepts and answers and that its clients spell: the configuration
// (Config, with its defaults and limits documented on each field), the
// live status (Status, Health), a decision's sample kind and
// propensity (SampleKind, Propensity), a change (Patch), a field
// problem (FieldError) and the snapshot file (SnapshotFile).
//
// It is a leaf: the standard library only. Package bandit, which
// implements bandits on the neural networks and posteriors of packages
// nn and posterior, names each of these types by an alias
// (bandit.Config is spec.Config) and adds what needs the model: the
// defaults (bandit.SetDefaults), validation (bandit.Validate) and what
// each policy kind has and does (bandit.CapabilitiesOf). The Go client
// (api/client) and api/wire use this package directly, so that a
// program that only talks to the service does not link the model.
//
// Each shape is defined once, here; the OpenAPI document
// (api/openapi.json) describes them and the contract test of package
// api checks the service's answers against it.
package spec
