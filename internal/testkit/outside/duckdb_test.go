package outside

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

func TestDuckDBQuery(t *testing.T) {
	duck := NewDuckDB(t)
	dir := t.TempDir()
	p := filepath.Join(dir, "it's.csv")
	if err := os.WriteFile(p, []byte("a,1\n,2\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	got := duck.Query(t,
		"SELECT 42 AS small, 9007199254740993::BIGINT AS big, NULL AS n, 'x''y' AS s",
		"SELECT * FROM read_csv("+SQLString(p)+", header=false, auto_detect=false, columns={'s': 'VARCHAR', 'i': 'BIGINT'})",
		// The network is never used: extensions can't be installed.
		"SELECT current_setting('autoinstall_known_extensions') AS install, current_setting('autoload_known_extensions') AS load",
	)
	want := [][]Row{
		{{"small": json.Number("42"), "big": "9007199254740993", "n": nil, "s": "x'y"}},
		{{"s": "a", "i": "1"}, {"s": nil, "i": "2"}},
		{{"install": false, "load": false}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got  %#v\nwant %#v", got, want)
	}
}
