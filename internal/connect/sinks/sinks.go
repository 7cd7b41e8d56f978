// Package sinks is `spillway config import`'s entry point: it hands
// connect.Import the sink connectors Spillway imports, Aiven's,
// Confluent's and Apache Iceberg's, so that package connect, which the products' rules build
// on, needs neither.
package sinks

import (
	"slices"

	"github.com/spillway/spillway/internal/connect"
	"github.com/spillway/spillway/internal/connect/aiven"
	"github.com/spillway/spillway/internal/connect/confluent"
	"github.com/spillway/spillway/internal/connect/icebergsink"
)

// Import is connect.Import over every sink Spillway imports: name is the
// file's name, data its contents, from "", connect.Aiven,
// connect.Confluent or connect.Iceberg.
func Import(name string, data []byte, from string) (*connect.Result, error) {
	return connect.Import(name, data, from, slices.Concat(aiven.Sinks(), confluent.Sinks(), icebergsink.Sinks()))
}
