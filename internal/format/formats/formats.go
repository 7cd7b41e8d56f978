// Package formats is the table of every file format Spillway writes: one
// format.Kind each, looked up by format.type or by file extension. It is
// apart from package format because the table must import the jsonfmt, avro
// and parquet packages, which import format for the types they share.
//
// The table is built by a function, not registered into a map at init:
// there is no global state, and a caller gets copies.
package formats

import (
	"fmt"
	"io"
	"strings"

	"github.com/spillway/spillway/internal/config"
	"github.com/spillway/spillway/internal/format"
	"github.com/spillway/spillway/internal/format/avro"
	"github.com/spillway/spillway/internal/format/jsonfmt"
	"github.com/spillway/spillway/internal/format/parquet"
	"github.com/spillway/spillway/internal/registry"
)

// table is every kind, in the order messages list them. An array, so a
// lookup builds it on the stack.
func table() [6]format.Kind {
	return [...]format.Kind{jsonfmt.JSONL(), jsonfmt.JSON(), format.CSV(), format.Bytes(), avro.Kind(), parquet.Kind()}
}

// All returns every kind, in the order messages list them.
func All() []format.Kind {
	t := table()
	return t[:]
}

// Names lists every format.type value, in the order messages list them.
func Names() []string {
	var names []string
	for _, k := range table() {
		names = append(names, k.Name)
	}
	return names
}

// Lookup returns the kind named name (format.type).
func Lookup(name string) (format.Kind, bool) {
	for _, k := range table() {
		if k.Name == name {
			return k, true
		}
	}
	return format.Kind{}, false
}

// Of returns the kind named name, or the zero Kind, whose memory figures
// are a text format's and which builds no encoder, for a name that is
// none (config validation refuses it before it gets here).
func Of(name string) format.Kind {
	k, _ := Lookup(name)
	return k
}

// ByExt returns the kind whose files have the extension ext (without its
// dot, and without a compression suffix): "jsonl", "bin".
func ByExt(ext string) (format.Kind, bool) {
	for _, k := range table() {
		if k.Ext == ext {
			return k, true
		}
	}
	return format.Kind{}, false
}

// unknown is the error for a format.type that is none of the table's.
func unknown(typ string) error {
	return fmt.Errorf("format.type %q is unknown; valid: %s", typ, strings.Join(Names(), ", "))
}

// NewEncoder returns an encoder for cfg.Type writing to w (see
// format.Kind.NewEncoder).
func NewEncoder(cfg config.Format, w io.Writer) (format.Encoder, error) {
	return NewBufferedEncoder(cfg, w, format.Memory{})
}

// NewBufferedEncoder is NewEncoder with m for the formats that buffer
// blocks or row groups (see format.Kind.NewBufferedEncoder).
func NewBufferedEncoder(cfg config.Format, w io.Writer, m format.Memory) (format.Encoder, error) {
	k, ok := Lookup(cfg.Type)
	if !ok {
		return nil, unknown(cfg.Type)
	}
	return k.NewBufferedEncoder(cfg, w, m)
}

// NewTyped returns the encoders' builder for cfg with reg (see
// format.Typed). A format.type that is none builds text encoders, whose
// NewEncoder reports it.
func NewTyped(cfg config.Format, reg *registry.Registry) *format.Typed {
	return format.NewTyped(Of(cfg.Type), cfg, reg)
}
