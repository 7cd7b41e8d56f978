package format

import "github.com/spillway/spillway/internal/format/formatopts"

// Options is the format section of the config, defined with its checks in
// package formatopts.
type Options = formatopts.Options

// DefaultBytesSeparator is format.bytes_separator's default.
const DefaultBytesSeparator = formatopts.DefaultBytesSeparator
