package config

import (
	"fmt"

	"github.com/spillway/spillway/internal/naming"
	"github.com/spillway/spillway/internal/naming/partvalue"
)

// Names are the keys of the data files this config writes: storage.prefix,
// file.name_template rendered in file.timezone, and file.extension for
// format.type and format.compression. Its errors name the key at fault.
// run, verify and skip build them here, so that they agree on every key.
func (c *Config) Names() (naming.Names, error) {
	loc, err := partvalue.LoadLocation(c.File.Timezone)
	if err != nil {
		return naming.Names{}, fmt.Errorf("file.timezone: %w", err)
	}
	n, err := naming.NewConfiguredNames(c.Storage.Prefix, c.File.NameTemplate, c.File.Extension, c.Format.Type, c.Format.Compression, naming.Location(loc))
	if err != nil {
		return naming.Names{}, fmt.Errorf("file.name_template: %w", err)
	}
	return n, nil
}
