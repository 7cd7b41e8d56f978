package iceberg

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"maps"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog"
	sqlcat "github.com/apache/iceberg-go/catalog/sql"
	"github.com/apache/iceberg-go/table"
)

// restStandIn serves the Iceberg REST catalog protocol (the endpoints
// Spillway uses: config, create namespace, create, load and commit table)
// over iceberg-go's SQL catalog on a SQLite file in dir.
//
// It is a stand-in because no REST catalog server can run here: the real
// ones (Apache Polaris, Gravitino, Nessie, Lakekeeper, the Iceberg
// project's own fixture) are JVM or Rust services, and no Go module of
// one is in the module proxy's list this machine may install from. What
// it proves is iceberg-go's REST client and Spillway over the wire
// protocol, with the conflicts a server reports as 409.
func restStandIn(t *testing.T, dir, token string) string {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, "rest.db")+"?_pragma=busy_timeout(30000)&_txlock=immediate")
	if err != nil {
		t.Fatal(err)
	}
	cat, err := sqlcat.NewCatalog("rest", db, sqlcat.SQLite, iceberg.Properties{"warehouse": "file://" + dir})
	if err != nil {
		t.Fatal(err)
	}
	fail := func(w http.ResponseWriter, code int, typ string, err error) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{"message": err.Error(), "type": typ, "code": code}})
	}
	reply := func(w http.ResponseWriter, v any) {
		w.Header().Set("Content-Type", "application/json")
		if err := json.NewEncoder(w).Encode(v); err != nil {
			t.Errorf("stand-in: encode: %v", err)
		}
	}
	tableReply := func(w http.ResponseWriter, tbl *table.Table) {
		reply(w, map[string]any{"metadata-location": tbl.MetadataLocation(), "metadata": tbl.Metadata(), "config": map[string]string{}})
	}
	ident := func(r *http.Request) table.Identifier {
		return append(strings.Split(r.PathValue("ns"), "\x1f"), r.PathValue("tbl"))
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/config", func(w http.ResponseWriter, r *http.Request) {
		reply(w, map[string]any{"defaults": map[string]string{}, "overrides": map[string]string{}})
	})
	mux.HandleFunc("POST /v1/namespaces", func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Namespace  []string          `json:"namespace"`
			Properties map[string]string `json:"properties"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			fail(w, 400, "BadRequestException", err)
			return
		}
		switch err := cat.CreateNamespace(r.Context(), req.Namespace, req.Properties); {
		case errors.Is(err, catalog.ErrNamespaceAlreadyExists):
			fail(w, 409, "AlreadyExistsException", err)
		case err != nil:
			fail(w, 500, "ServerError", err)
		default:
			reply(w, map[string]any{"namespace": req.Namespace, "properties": map[string]string{}})
		}
	})
	mux.HandleFunc("GET /v1/namespaces/{ns}/tables/{tbl}", func(w http.ResponseWriter, r *http.Request) {
		switch tbl, err := cat.LoadTable(r.Context(), ident(r)); {
		case errors.Is(err, catalog.ErrNoSuchTable), errors.Is(err, catalog.ErrNoSuchNamespace):
			fail(w, 404, "NoSuchTableException", err)
		case err != nil:
			fail(w, 500, "ServerError", err)
		default:
			tableReply(w, tbl)
		}
	})
	mux.HandleFunc("POST /v1/namespaces/{ns}/tables", func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Name     string                 `json:"name"`
			Schema   *iceberg.Schema        `json:"schema"`
			Location string                 `json:"location"`
			Spec     *iceberg.PartitionSpec `json:"partition-spec"`
			Props    iceberg.Properties     `json:"properties"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			fail(w, 400, "BadRequestException", err)
			return
		}
		id := append(strings.Split(r.PathValue("ns"), "\x1f"), req.Name)
		opts := []catalog.CreateTableOpt{catalog.WithLocation(req.Location), catalog.WithProperties(req.Props)}
		if req.Spec != nil {
			opts = append(opts, catalog.WithPartitionSpec(req.Spec))
		}
		switch tbl, err := cat.CreateTable(r.Context(), id, req.Schema, opts...); {
		case errors.Is(err, catalog.ErrTableAlreadyExists):
			fail(w, 409, "AlreadyExistsException", err)
		case errors.Is(err, catalog.ErrNoSuchNamespace):
			fail(w, 404, "NoSuchNamespaceException", err)
		case err != nil:
			fail(w, 500, "ServerError", err)
		default:
			tableReply(w, tbl)
		}
	})
	mux.HandleFunc("POST /v1/namespaces/{ns}/tables/{tbl}", func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Requirements table.Requirements `json:"requirements"`
			Updates      table.Updates      `json:"updates"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			fail(w, 400, "BadRequestException", err)
			return
		}
		meta, loc, err := cat.CommitTable(r.Context(), ident(r), req.Requirements, req.Updates)
		switch {
		// The SQL catalog reports a failed requirement as a plain error;
		// the protocol says 409 CommitFailedException.
		case errors.Is(err, table.ErrCommitFailed), err != nil && strings.Contains(err.Error(), "requirement failed"):
			fail(w, 409, "CommitFailedException", err)
		case err != nil:
			fail(w, 500, "ServerError", err)
		default:
			reply(w, map[string]any{"metadata-location": loc, "metadata": meta})
		}
	})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if got := r.Header.Get("Authorization"); got != "Bearer "+token {
			fail(w, 401, "NotAuthorizedException", errors.New("bad token"))
			return
		}
		mux.ServeHTTP(w, r)
	}))
	t.Cleanup(func() {
		srv.Close()
		_ = cat.Close()
		_ = db.Close()
	})
	return srv.URL
}

// A REST catalog: the table is created and committed to through the
// protocol, with a bearer token; two instances race, the loser gets a
// 409, reloads and skips what the winner added. iceberg-go would
// otherwise rebase the loser's append onto the winner's snapshot by
// itself, duplicating the shared file: the pinned branch head stops it.
func TestRESTCatalog(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	const token = "rest-token-value"
	o := sqlOptions("kafka.events")
	o.Catalog.Type, o.Catalog.URI, o.Catalog.Token = TypeREST, restStandIn(t, dir, token), token
	o.Catalog.Warehouse = "analytics" // a name for the catalog, not a location
	ca, cb := open(t, o, filepath.Join(dir, "wh")), open(t, o, filepath.Join(dir, "wh"))
	ta, tb := openTable(t, ca, "kafka.events"), openTable(t, cb, "kafka.events")
	loc := ta.Location()
	if want := "file://" + dir + "/wh/kafka.db/events"; loc != want {
		t.Fatalf("Location = %q, want %q", loc, want)
	}
	f0 := dataFile(t, loc, "events", 0, 0, 10, "")
	commit(t, ta, f0)
	// A table may ask its writers to retry conflicts themselves (Java's
	// default is 4): iceberg-go then replays an append onto the new head,
	// unless the head is pinned.
	tx := ta.tbl.NewTransaction()
	if err := tx.SetProperties(iceberg.Properties{table.CommitNumRetriesKey: "3"}); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Commit(testCtx(t)); err != nil {
		t.Fatal(err)
	}

	shared := dataFile(t, loc, "events", 1, 0, 10, "")
	sharedZombie := dataFile(t, loc, "events", 1, 0, 10, "-zombie")
	own := dataFile(t, loc, "events", 2, 0, 7, "")
	attempts := 0
	tb.beforeCommit = func() {
		attempts++
		if attempts == 1 {
			commit(t, ta, shared)
		}
	}
	commit(t, tb, sharedZombie, own)
	files := dataFiles(t, ta)
	slices.Sort(files)
	want := []string{f0.Location, shared.Location, own.Location}
	slices.Sort(want)
	if !slices.Equal(files, want) {
		t.Fatalf("data files = %v, want %v", files, want)
	}
	if attempts < 2 {
		t.Fatalf("attempts = %d: the commit never conflicted, the test proves nothing", attempts)
	}
	next, err := tb.Next(context.Background(), "events")
	if err != nil {
		t.Fatal(err)
	}
	if w := map[int32]int64{0: 10, 1: 10, 2: 7}; !maps.Equal(next, w) {
		t.Fatalf("Next = %v, want %v", next, w)
	}
	if recs, distinct := scanCount(t, tb); recs != 27 || distinct != 27 {
		t.Fatalf("scan: %d records, %d distinct; want 27, 27", recs, distinct)
	}

	bad := o
	bad.Catalog.Token = "wrong-token-value"
	if _, err := Open(testCtx(t), bad, dir); err == nil || strings.Contains(err.Error(), "wrong-token-value") {
		t.Fatalf("Open with a wrong token = %v, want an error that does not show it", err)
	}
}
