// Package migrations holds Refinery's PostgreSQL schema as numbered
// golang-migrate files (NNNN_name.up.sql / NNNN_name.down.sql), embedded
// so that the binary carries its own schema. store.Migrate runs them with
// golang-migrate's iofs source.
package migrations

import "embed"

// FS holds every migration file at its root.
//
//go:embed *.sql
var FS embed.FS
