package naming_test

import (
	"testing"

	"github.com/spillway/spillway/internal/format/formats"
	"github.com/spillway/spillway/internal/naming"
)

// TestExtensionFollowsKinds: Extension and SplitExt say for every format
// what its format.Kind says (its Ext, and no compression suffix when it
// CompressesInside). naming can't look the table up itself: config builds
// names (Config.Names) and package formats imports config, so the table
// is the reference here, and a format added to it without its extension
// here fails this test.
func TestExtensionFollowsKinds(t *testing.T) {
	suffix := map[string]string{"none": "", "gzip": ".gz", "zstd": ".zst", "snappy": ".snappy"}
	for _, k := range formats.All() {
		for comp, s := range suffix {
			want := "." + k.Ext
			if !k.CompressesInside {
				want += s
			}
			if got := naming.Extension(k.Name, comp); got != want {
				t.Errorf("Extension(%s, %s) = %q; its Kind says %q", k.Name, comp, got, want)
			}
			if got := naming.TrimExt("t-0-5" + want); got != "t-0-5" {
				t.Errorf("TrimExt(%q) = %q, want t-0-5", "t-0-5"+want, got)
			}
		}
	}
}
