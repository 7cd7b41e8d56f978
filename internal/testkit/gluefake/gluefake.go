// Package gluefake is a stand-in AWS Glue Data Catalog for tests: an HTTP
// server that speaks Glue's wire protocol (AWS JSON 1.1: a POST whose
// X-Amz-Target header is AWSGlue.<Operation>, errors as a JSON body with
// __type and message) for exactly the operations iceberg-go's Glue
// catalog calls: GetDatabase, CreateDatabase, GetTable, CreateTable,
// UpdateTable, GetTables and DeleteTable.
//
// It is a stand-in because no Glue can run here: Glue is a hosted AWS
// service, and the emulators that copy it (moto, LocalStack) are Python
// services that are neither among Debian's packages nor reachable
// otherwise from this machine. What it keeps of Glue is what a client
// depends on: databases and tables per catalog id (the AWS account),
// UpdateTable's optimistic lock on the table's VersionId, failing a stale
// one with ConcurrentModificationException, and the request's SigV4
// scope: an unknown access key id is refused with
// UnrecognizedClientException and another region's signature with
// InvalidSignatureException. It does not recompute the signature's HMAC.
// It never exists outside tests.
package gluefake

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// DefaultAccount is the catalog id of requests that name none: the
// credentials' own account, as Glue takes it.
const DefaultAccount = "000000000000"

// Server is a running stand-in.
type Server struct {
	URL string

	region, keyID string

	mu        sync.Mutex
	dbs       map[string]map[string]*database // catalog id → name
	conflicts int
	calls     map[string]int
	before    func() // run once, before the next UpdateTable is applied
}

type database struct {
	input  map[string]any
	tables map[string]*tableEntry
}

type tableEntry struct {
	input   map[string]any
	version int
}

// Start serves a stand-in for region that accepts requests signed with
// accessKeyID, until the test ends.
func Start(t testing.TB, region, accessKeyID string) *Server {
	t.Helper()
	s := &Server{region: region, keyID: accessKeyID, dbs: map[string]map[string]*database{}, calls: map[string]int{}}
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	s.URL = srv.URL
	return s
}

// BeforeNextUpdate runs f once, when the next UpdateTable arrives and
// before it is applied: a test commits another writer's change there, in
// the window between a client's GetTable and its UpdateTable, which only
// the VersionId lock closes.
func (s *Server) BeforeNextUpdate(f func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.before = f
}

// Conflicts is how many UpdateTable calls a stale VersionId failed.
func (s *Server) Conflicts() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.conflicts
}

// Calls is how many times operation op was called (refused ones too).
func (s *Server) Calls(op string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls[op]
}

// TableParameters returns the parameters of table db.name in catalog id
// (DefaultAccount for "") and its VersionId, or nil.
func (s *Server) TableParameters(catalogID, db, name string) (map[string]string, string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	d := s.dbs[orDefault(catalogID)][db]
	if d == nil || d.tables[name] == nil {
		return nil, ""
	}
	out := map[string]string{}
	if ps, ok := d.tables[name].input["Parameters"].(map[string]any); ok {
		for k, v := range ps {
			out[k], _ = v.(string)
		}
	}
	return out, strconv.Itoa(d.tables[name].version)
}

// apiError is an error as Glue's JSON protocol sends it.
type apiError struct {
	code, msg string
}

func errorf(code, format string, args ...any) *apiError {
	return &apiError{code: code, msg: fmt.Sprintf(format, args...)}
}

func orDefault(id string) string {
	if id == "" {
		return DefaultAccount
	}
	return id
}

// request holds the fields of every operation served.
type request struct {
	CatalogId     string         `json:"CatalogId"`
	Name          string         `json:"Name"`
	DatabaseName  string         `json:"DatabaseName"`
	DatabaseInput map[string]any `json:"DatabaseInput"`
	TableInput    map[string]any `json:"TableInput"`
	VersionId     *string        `json:"VersionId"`
}

func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	op, ok := strings.CutPrefix(r.Header.Get("X-Amz-Target"), "AWSGlue.")
	s.mu.Lock()
	s.calls[op]++
	var before func()
	if op == "UpdateTable" {
		before, s.before = s.before, nil
	}
	s.mu.Unlock()
	if before != nil {
		before()
	}
	var out any
	var aerr *apiError
	var req request
	switch {
	case r.Method != http.MethodPost || !ok:
		aerr = errorf("UnknownOperationException", "expected a POST with X-Amz-Target: AWSGlue.<Operation>")
	case s.auth(r) != nil:
		aerr = s.auth(r)
	default:
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			aerr = errorf("SerializationException", "%v", err)
			break
		}
		s.mu.Lock()
		out, aerr = s.do(op, req)
		s.mu.Unlock()
	}
	w.Header().Set("Content-Type", "application/x-amz-json-1.1")
	if aerr != nil {
		w.WriteHeader(http.StatusBadRequest)
		_ = json.NewEncoder(w).Encode(map[string]string{"__type": aerr.code, "message": aerr.msg})
		return
	}
	_ = json.NewEncoder(w).Encode(out)
}

// auth checks the SigV4 Authorization header's scope:
// Credential=KEYID/DATE/REGION/glue/aws4_request.
func (s *Server) auth(r *http.Request) *apiError {
	h := r.Header.Get("Authorization")
	_, cred, ok := strings.Cut(h, "Credential=")
	if !strings.HasPrefix(h, "AWS4-HMAC-SHA256 ") || !ok {
		return errorf("MissingAuthenticationTokenException", "Missing Authentication Token")
	}
	cred, _, _ = strings.Cut(cred, ",")
	parts := strings.Split(cred, "/")
	if len(parts) != 5 {
		return errorf("IncompleteSignatureException", "Credential is malformed")
	}
	switch {
	case parts[0] != s.keyID:
		return errorf("UnrecognizedClientException", "The security token included in the request is invalid.")
	case parts[2] != s.region:
		return errorf("InvalidSignatureException", "Credential should be scoped to a valid region, not '%s'. ", parts[2])
	case parts[3] != "glue":
		return errorf("InvalidSignatureException", "Credential should be scoped to correct service: 'glue'. ")
	}
	return nil
}

func (s *Server) do(op string, req request) (any, *apiError) {
	cat := orDefault(req.CatalogId)
	if s.dbs[cat] == nil {
		s.dbs[cat] = map[string]*database{}
	}
	dbs := s.dbs[cat]
	dbName := req.DatabaseName
	switch op {
	case "GetDatabase":
		d := dbs[req.Name]
		if d == nil {
			return nil, errorf("EntityNotFoundException", "Database %s not found.", req.Name)
		}
		out := withFields(d.input, map[string]any{"CatalogId": cat})
		return map[string]any{"Database": out}, nil
	case "CreateDatabase":
		name, _ := req.DatabaseInput["Name"].(string)
		if name == "" {
			return nil, errorf("InvalidInputException", "DatabaseInput.Name is required")
		}
		if dbs[name] != nil {
			return nil, errorf("AlreadyExistsException", "Database already exists.")
		}
		dbs[name] = &database{input: req.DatabaseInput, tables: map[string]*tableEntry{}}
		return map[string]any{}, nil
	}
	d := dbs[dbName]
	if d == nil {
		return nil, errorf("EntityNotFoundException", "Database %s not found.", dbName)
	}
	name := req.Name
	if req.TableInput != nil {
		name, _ = req.TableInput["Name"].(string)
	}
	switch op {
	case "GetTable":
		t := d.tables[name]
		if t == nil {
			return nil, errorf("EntityNotFoundException", "Table %s not found.", name)
		}
		return map[string]any{"Table": tableOut(cat, dbName, t)}, nil
	case "GetTables":
		list := []any{}
		for _, t := range d.tables {
			list = append(list, tableOut(cat, dbName, t))
		}
		return map[string]any{"TableList": list}, nil
	case "CreateTable":
		if d.tables[name] != nil {
			return nil, errorf("AlreadyExistsException", "Table already exists.")
		}
		d.tables[name] = &tableEntry{input: req.TableInput}
		return map[string]any{}, nil
	case "UpdateTable":
		t := d.tables[name]
		if t == nil {
			return nil, errorf("EntityNotFoundException", "Table %s not found.", name)
		}
		// Glue's optimistic lock: an update that read another version
		// than the current one loses.
		if req.VersionId != nil && *req.VersionId != strconv.Itoa(t.version) {
			s.conflicts++
			return nil, errorf("ConcurrentModificationException", "Update table failed due to concurrent modifications.")
		}
		t.input = req.TableInput
		t.version++
		return map[string]any{}, nil
	case "DeleteTable":
		if d.tables[name] == nil {
			return nil, errorf("EntityNotFoundException", "Table %s not found.", name)
		}
		delete(d.tables, name)
		return map[string]any{}, nil
	}
	return nil, errorf("UnknownOperationException", "operation %s is not served by the stand-in", op)
}

func tableOut(cat, db string, t *tableEntry) map[string]any {
	return withFields(t.input, map[string]any{"CatalogId": cat, "DatabaseName": db, "VersionId": strconv.Itoa(t.version)})
}

func withFields(in, extra map[string]any) map[string]any {
	out := make(map[string]any, len(in)+len(extra))
	for k, v := range in {
		out[k] = v
	}
	for k, v := range extra {
		out[k] = v
	}
	return out
}
